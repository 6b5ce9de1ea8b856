// Tutorial 05: the first iteration's buckets, the rebuild, and gradient_as_bucket_view. A model
// whose forward uses its layers in the reverse of their registration order defeats the bucket
// plan PyTorch <= 1.11 guessed for iteration 0; PyTorch >= 1.12 does not guess (one bucket), and
// after iteration 0 both rebuild the buckets from the order gradients really arrived. Then the
// same training with gradient_as_bucket_view, where .grad is a view of the bucket: one copy less.
// --model gpt does the same with a model shaped like the ones people train, whose plans go by block.
#include <ATen/ops/relu.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "engine/ddp/distributed_data_parallel.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"
#include "tutorials/common/workload.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-05-bucket-rebuild";
constexpr int64_t kFeatures = 64;
constexpr int64_t kClasses = 10;

// layer0 .. layer{n-1} registered in that order, but forward runs layer{n-1} first and layer0
// last — as a decoder walking an encoder's layer list backwards does, or any module whose
// members are declared in another order than they are used. DDP only sees registration order.
class ReversedStack final : public models::Model {
 public:
  ReversedStack(int64_t layers, int64_t width) {
    for (int64_t i = 0; i < layers; ++i) {
      const int64_t in = i == layers - 1 ? kFeatures : width;
      const int64_t out = i == 0 ? kClasses : width;
      layers_.push_back(register_module("layer" + std::to_string(i), torch::nn::Linear(in, out)));
    }
  }
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor h = x;
    for (size_t i = layers_.size(); i-- > 1;) h = at::relu(layers_[i](h));
    return layers_[0](h);
  }

 private:
  std::vector<torch::nn::Linear> layers_;
};

// The three trainings, each its own traced run.
enum class Variant {
  BySizeGuess,   // PyTorch <= 1.11's first iteration (--initial-buckets by-size)
  GradientCopy,  // PyTorch >= 1.12, DDP's defaults
  GradientView,  // the same with gradient_as_bucket_view
};

const char* run_name(Variant variant) {
  switch (variant) {
    case Variant::BySizeGuess: return "by-size-guess";
    case Variant::GradientCopy: return "gradient-copy";
    case Variant::GradientView: return "gradient-view";
  }
  return "";
}

struct Settings {
  // reversed-stack, or gpt: a model shaped like the ones people train, run in registration order
  std::string model = "reversed-stack";
  tutorials::WorkloadSizes sizes;  // unset: the stack's 8 layers of 512, 256 rows; the GPT's own
  double cap_mb = 1;
};

// The stack's sizes: enough work per step that backward lasts about as long as the all-reduces on
// the link the README runs on, so what hides behind backward shows.
const tutorials::WorkloadSizes kStack{512, 8, 256};

bool is_gpt(const tutorials::Workload& work) { return work.config.name == "gpt"; }

tutorials::Workload make_workload(const Settings& settings, uint64_t seed) {
  if (settings.model == "gpt") return tutorials::make_workload("gpt", settings.sizes, {}, seed);
  tutorials::Workload work;
  work.config.name = "reversed-stack";
  work.config.hidden = settings.sizes.hidden.value_or(*kStack.hidden);
  work.config.layers = settings.sizes.layers.value_or(*kStack.layers);
  work.data = data::make_synthetic_classification(2048, kFeatures, kClasses, seed);
  work.batch_size = settings.sizes.batch_size.value_or(*kStack.batch_size);
  return work;
}

std::shared_ptr<models::Model> make_model(const tutorials::Workload& work) {
  if (is_gpt(work)) return models::make_model(work.config);
  return std::make_shared<ReversedStack>(*work.config.layers, *work.config.hidden);
}

// When, in one iteration's backward, gradients were ready and buckets were sent (rank 0).
struct BackwardTiming {
  double last_gradient_ms = 0;  // after backward began
  double first_launch_ms = 0;
  int64_t launched_after_last_gradient = 0;  // buckets whose all-reduce began only then
  double waited_ms = 0;  // finalize_backward: waiting for the all-reduces after the last gradient
};

std::vector<BackwardTiming> backward_timings(trace::Reader& reader, int32_t iterations) {
  std::vector<BackwardTiming> timings(iterations);
  std::vector<int64_t> begin(iterations, 0);
  const std::vector<std::string> names = reader.names();
  const tutorials::LessonEvents events(reader);
  for (const trace::Event& e : events.of_kind(trace::EventKind::Phase, 0)) {
    if (e.iteration < 0 || e.iteration >= iterations) continue;
    if (names.at(e.name) == trace::kPhaseBackward) begin[e.iteration] = e.begin_ns;
    if (names.at(e.name) == trace::kPhaseFinalizeBackward) timings[e.iteration].waited_ms = (e.end_ns - e.begin_ns) / 1e6;
  }
  for (const trace::Event& e : events.of_kind(trace::EventKind::Hook, 0)) {
    if (e.iteration < 0 || e.iteration >= iterations) continue;
    BackwardTiming& t = timings[e.iteration];
    // A hook begins when autograd hands it the gradient; it may end later, after launching buckets.
    t.last_gradient_ms = std::max(t.last_gradient_ms, (e.begin_ns - begin[e.iteration]) / 1e6);
  }
  for (const trace::Event& e : events.of_kind(trace::EventKind::BucketLaunch, 0)) {
    if (e.iteration < 0 || e.iteration >= iterations) continue;
    BackwardTiming& t = timings[e.iteration];
    const double launch_ms = (e.begin_ns - begin[e.iteration]) / 1e6;
    if (e.bucket == 0) t.first_launch_ms = launch_ms;
    t.launched_after_last_gradient += launch_ms >= t.last_gradient_ms;
  }
  return timings;
}

// With views, the gradients of one bucket share one storage (the bucket's flat buffer), each
// starting at its bucket offset: the all-reduce's result is the gradient, nothing is copied back.
// Without, every .grad has a storage of its own.
void report_gradient_storages(tutorials::Session& session, ddp::DistributedDataParallel& ddp,
                              bool gradient_as_bucket_view) {
  std::set<const void*> storages;
  bool all_at_offset = true;
  const auto& params = ddp.parameters();
  for (const ddp::Reducer::BucketView& bucket : ddp.reducer().buckets()) {
    const at::Tensor first = params[bucket.params[0]].grad();
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
      const at::Tensor grad = params[bucket.params[slot]].grad();
      storages.insert(grad.storage().data());
      const int64_t expected = first.storage_offset() + bucket.offsets[slot] - bucket.offsets[0];
      all_at_offset = all_at_offset && grad.is_alias_of(first) && grad.storage_offset() == expected;
    }
  }
  session.say("%-25s %zu gradients in %zu storages (%zu buckets)%s\n",
              gradient_as_bucket_view ? "gradient_as_bucket_view:" : "default (copy):",
              params.size(), storages.size(), ddp.reducer().buckets().size(),
              all_at_offset ? ", each a view of its bucket at the bucket's offset" : "");
}

// Trains the model; returns the run file (rank 0). Except for the guess, it then says where each
// rank's gradients live (report_gradient_storages).
std::string train(tutorials::Session& session, const Settings& settings, const tutorials::Workload& work,
                  Variant variant) {
  const bool gradient_as_bucket_view = variant == Variant::GradientView;
  const tutorials::CommonOptions& options = session.options();
  session.seed_per_rank(options.seed);
  std::shared_ptr<models::Model> model = make_model(work);
  model->to(session.device());

  tutorials::TracedRun run(session, run_name(variant));
  run.describe(trace::Strategy::Ddp, work.config.name, *model,
               variant == Variant::GradientView  ? "{\"gradient_as_bucket_view\":true}"
               : variant == Variant::BySizeGuess ? "{\"initial_buckets\":\"by-size\"}"
                                                  : "{}");
  {
    ddp::DdpOptions ddp_options;
    ddp_options.bucket_cap_bytes = static_cast<int64_t>(settings.cap_mb * 1024 * 1024);
    if (variant == Variant::BySizeGuess) ddp_options.initial_buckets = trace::InitialBuckets::BySize;
    ddp_options.gradient_as_bucket_view = gradient_as_bucket_view;
    ddp_options.recorder = &run.recorder();
    ddp::DistributedDataParallel ddp(model, run.group(), ddp_options);

    tutorials::ShardedBatches batches(work.data, session, work.batch_size, options.seed);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
    // The rebuild happens in ddp.forward at the start of iteration 1: rank 0 broadcasts the order
    // its gradients arrived in during iteration 0, and every rank re-buckets by it.
    tutorials::train_steps(run, ddp, *model, optimizer, batches, options.steps);

    if (variant != Variant::BySizeGuess) report_gradient_storages(session, ddp, gradient_as_bucket_view);
  }
  return run.finish();
}

void print_backward_row(const char* iteration, const char* plan, const BackwardTiming& t) {
  std::printf("   %-10s %-27s %13.2f %13.2f %12lld %12.2f\n", iteration, plan, t.last_gradient_ms,
              t.first_launch_ms, static_cast<long long>(t.launched_after_last_gradient),
              t.waited_ms);
}

// The model's top-level module of a parameter ("block2" of "block2.mlp_fc.weight") and the module
// holding it ("block2.mlp_fc").
std::string top_module(const std::string& param) { return param.substr(0, param.find('.')); }
std::string module_of(const std::string& param) { return param.substr(0, param.rfind('.')); }

// The bytes of the parameters of top-level module `top` (float32).
int64_t module_bytes(const analysis::RunStats& stats, const std::string& top) {
  int64_t bytes = 0;
  for (const trace::ParamInfo& param : stats.params) {
    if (top_module(param.name) == top) bytes += 4 * param.numel;
  }
  return bytes;
}

// "lm_head ln_f block3 block2.mlp_proj": the modules whose tensors a bucket holds, in slot order;
// a top-level module (a block, an embedding, the head) by its name when the bucket holds all its
// tensors, else each of its modules in the bucket.
std::string modules_text(const analysis::RunStats& stats, const trace::BucketInfo& bucket) {
  std::map<std::string, size_t> in_model, in_bucket;
  for (const trace::ParamInfo& param : stats.params) ++in_model[top_module(param.name)];
  for (const int32_t p : bucket.params) ++in_bucket[top_module(stats.params.at(p).name)];
  std::vector<std::string> parts;
  for (const int32_t p : bucket.params) {
    const std::string& name = stats.params.at(p).name;
    const std::string top = top_module(name);
    const std::string part = in_bucket[top] == in_model[top] ? top : module_of(name);
    if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
  }
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : " ") + part;
  return text;
}

// The stack's plans name every tensor; the GPT's 54 would not fit a line, so its plans name the
// blocks (and the parts of blocks) each bucket holds.
void print_plan(const tutorials::Workload& work, const analysis::RunStats& stats, int generation) {
  const std::vector<trace::BucketInfo> plan = tutorials::bucket_plan(stats, generation);
  if (!is_gpt(work)) {
    tutorials::print_bucket_plan(stats, plan);
    return;
  }
  for (const trace::BucketInfo& bucket : plan) {
    std::printf("  bucket %d  %10s  %2zu tensors  %s\n", bucket.index, tutorials::bytes_text(bucket.bytes).c_str(),
                bucket.params.size(), modules_text(stats, bucket).c_str());
  }
}

void print_plans(const tutorials::Workload& work, const analysis::RunStats& stats, const analysis::RunStats& guess_stats) {
  std::printf("\n1. Iteration 0's plan (PyTorch >= 1.12): one bucket, since nobody knows yet in what "
              "order\n   the gradients will arrive:\n");
  print_plan(work, stats, 0);
  std::printf("\n   PyTorch <= 1.11 guessed instead (--initial-buckets by-size): registration order, "
              "reversed:\n");
  print_plan(work, guess_stats, 0);
  if (is_gpt(work)) {
    std::printf("   The GPT runs its modules in the order it registers them, so the guess has backward's\n"
                "   order, head first, embeddings last. Only its 1 MiB first-bucket limit falls at the\n"
                "   wrong end, on the embeddings and block0, whose gradients come last: bucket 0 is the\n"
                "   remainder.\n");
  } else {
    std::printf("   Bucket 0 holds layer%lld, whose gradients come last (it ran first in forward), and\n"
                "   buckets are sent strictly in order: the guess sends nothing before the end.\n",
                static_cast<long long>(*work.config.layers - 1));
  }
  std::printf("\n2. The plan rebuilt after iteration 0, in the order gradients arrived on rank 0:\n");
  print_plan(work, stats, 1);
  std::printf("   (The 1 MiB first-bucket limit now applies to the gradients that come first.)\n");
  if (is_gpt(work)) {
    std::printf("   A block is %s: the buckets cut blocks wherever their bytes fall, each block's\n"
                "   modules in backward's order (mlp_proj first, ln_1 last), and the embeddings, whose\n"
                "   gradients come last, close the last bucket.\n",
                tutorials::bytes_text(module_bytes(stats, "block0")).c_str());
  }
}

void print_backward(trace::Reader& reader, const analysis::RunStats& stats, trace::Reader& guess_reader,
                    const tutorials::Workload& work) {
  std::printf("\n3. Backward on rank 0 (ms after backward began; all-reduces begun after the last "
              "gradient;\n   the wait for them at the end of backward):\n");
  std::printf("   %-10s %-27s %13s %13s %12s %12s\n", "iteration", "plan", "last gradient",
              "bucket 0 sent", "sent after", "waited ms");
  const std::vector<BackwardTiming> guess = backward_timings(guess_reader, 1);
  print_backward_row("0", "by-size guess (<= 1.11)", guess.at(0));
  const std::vector<BackwardTiming> timings = backward_timings(reader, stats.iterations);
  for (size_t i = 0; i < timings.size(); ++i) {
    print_backward_row(std::to_string(i).c_str(), i == 0 ? "one bucket (>= 1.12)" : "rebuilt",
                       timings[i]);
  }
  if (is_gpt(work)) {
    std::printf("   In iteration 0 the guess, right for the GPT, sends during backward, and one bucket\n"
                "   waits for the whole model's all-reduce: what PyTorch >= 1.12 gives up, for one\n"
                "   iteration, to be safe. Rebuilt, bucket 0 goes out early and the wait shrinks.\n");
  } else {
    std::printf("   In iteration 0 both send everything after backward: the guess's wrong order costs "
                "as\n   much as not guessing. Rebuilt, bucket 0 goes out early and the wait shrinks.\n");
  }
}

void print_memory(const analysis::RunStats& copy_stats, const analysis::RunStats& view_stats) {
  const analysis::RankStats& copy0 = tutorials::rank_stats(copy_stats, 0);
  const analysis::RankStats& view0 = tutorials::rank_stats(view_stats, 0);
  std::printf("\n4. Rank 0's memory at its peak in the steps (dpscope stats: \"peak in the steps\"):\n");
  std::printf("   %-26s %12s %12s %12s\n", "", "gradients", "buckets", "total");
  for (const auto& [title, rank] : {std::pair{"default (copy into bucket)", &copy0},
                                    std::pair{"gradient_as_bucket_view", &view0}}) {
    const analysis::MemoryAtPeak& peak = rank->step_memory_peak;
    std::printf("   %-26s %12s %12s %12s\n", title,
                tutorials::bytes_text(peak.bytes(trace::MemoryCategory::Gradients)).c_str(),
                tutorials::bytes_text(peak.bytes(trace::MemoryCategory::Buckets)).c_str(),
                tutorials::bytes_text(peak.total_bytes).c_str());
  }
  std::printf("   With views the gradients live in the buckets: one model's worth of memory and one "
              "copy\n   per gradient per step less.\n");
}

void run(tutorials::Session& session, const Settings& settings) {
  const tutorials::Workload work = make_workload(settings, session.options().seed);
  if (is_gpt(work)) {
    session.say("== %s: a GPT (%lld blocks of %lld), %d rank(s) ==\n\n", kProgram,
                static_cast<long long>(*work.config.layers), static_cast<long long>(*work.config.hidden),
                session.world_size());
  } else {
    const long long layers = *work.config.layers;
    session.say("== %s: %lld layers registered layer0..layer%lld, run layer%lld first, %d rank(s) ==\n\n",
                kProgram, layers, layers - 1, layers - 1, session.world_size());
  }
  const std::string guess_run = train(session, settings, work, Variant::BySizeGuess);
  const std::string copy_run = train(session, settings, work, Variant::GradientCopy);
  const std::string view_run = train(session, settings, work, Variant::GradientView);
  if (!session.leader()) return;

  trace::Reader reader(copy_run);
  const analysis::RunStats stats = tutorials::read_stats(copy_run);
  trace::Reader guess_reader(guess_run);
  const analysis::RunStats guess_stats = tutorials::read_stats(guess_run);
  const analysis::RunStats view_stats = tutorials::read_stats(view_run);
  print_plans(work, stats, guess_stats);
  print_backward(reader, stats, guess_reader, work);
  print_memory(stats, view_stats);
  tutorials::print_clocks({{"by-size-guess", &guess_stats}, {"gradient-copy", &stats}, {"gradient-view", &view_stats}});
  std::printf("\ntraces:\n  %s\n  %s\n  %s\ncompare: dpscope-view %s --compare %s\n",
              guess_run.c_str(), copy_run.c_str(), view_run.c_str(), guess_run.c_str(),
              copy_run.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 6;
  Settings settings;
  CLI::App app{"Tutorial 05: the first iteration's buckets, the rebuild after it, and "
               "gradient_as_bucket_view"};
  tutorials::add_common_options(app, options);
  app.add_option("--model", settings.model,
                 "reversed-stack, or gpt: a GPT-shaped character model on data/opticks.txt.gz, 54 tensors")
      ->check(CLI::IsMember({"reversed-stack", "gpt"}))
      ->capture_default_str();
  app.add_option("--layers", settings.sizes.layers, "The stack's layers (8), the GPT's blocks (4)")
      ->check(CLI::Range(2, 64));
  app.add_option("--width", settings.sizes.hidden, "Width: the stack's layers (512), the GPT's residual stream (128)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch-size", settings.sizes.batch_size, "Samples per rank and step (stack 256 rows, gpt 16 sequences)")
      ->check(CLI::PositiveNumber);
  app.add_option("--bucket-cap-mb", settings.cap_mb, "DDP's bucket cap in MiB")->check(CLI::PositiveNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
