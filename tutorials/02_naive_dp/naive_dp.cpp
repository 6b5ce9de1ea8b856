// Tutorial 02: naive data parallelism, the road to DDP. One MLP trained three times on the same
// batches, synchronising the gradients three ways: every gradient all-reduced after backward, each
// all-reduced by a hook as soon as backward makes it, and DDP's buckets. Same gradients, bit for bit.
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm/dtype.h"
#include "engine/ddp/distributed_data_parallel.h"
#include "analysis/whatif.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-02-naive-dp";

enum class Variant { AfterBackward, Hooks, Buckets };
constexpr Variant kVariants[] = {Variant::AfterBackward, Variant::Hooks, Variant::Buckets};

// What the variants without DDP record as their strategy: no strategy of the vocabulary
// (trace::Strategy), so the analysis treats them as Unknown and shows the word as recorded.
constexpr const char* kNaiveStrategy = "naive-dp";

const char* part_name(Variant variant) {
  switch (variant) {
    case Variant::AfterBackward: return "after-backward";
    case Variant::Hooks: return "hooks";
    case Variant::Buckets: return "buckets";
  }
  return "";
}

struct Settings {
  int64_t hidden = 256;
  int64_t layers = 24;
  int64_t batch_size = 256;
  double bucket_cap_mb = 1;
};

// Every gradient of one step, concatenated, outside LibTorch's allocator.
std::vector<float> flatten_gradients(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params) grads.push_back(p.grad());
  return tutorials::untracked_copy(grads);
}

// Checks this rank's gradients, step by step, against those of the first variant it trained:
// the largest difference of any element in any step.
class GradientCheck {
 public:
  void next_variant() {
    step_ = 0;
    largest_ = 0;
  }
  void check(const std::vector<at::Tensor>& params) {
    std::vector<float> now = flatten_gradients(params);
    if (step_ == reference_.size()) {
      reference_.push_back(std::move(now));
    } else {
      const std::vector<float>& first = reference_[step_];
      for (size_t i = 0; i < now.size(); ++i) {
        largest_ = std::max(largest_, std::fabs(double(now[i]) - double(first[i])));
      }
    }
    ++step_;
  }
  double largest_difference() const { return largest_; }

 private:
  std::vector<std::vector<float>> reference_;
  size_t step_ = 0;
  double largest_ = 0;
};

// The parameters by name in the trace, so that the viewer names each hook's gradient.
void record_parameters(trace::Recorder& recorder, torch::nn::Module& model) {
  int32_t index = 0;
  for (const auto& item : model.named_parameters()) {
    trace::ParamInfo info;
    info.index = index++;
    info.name = item.key();
    info.shape.assign(item.value().sizes().begin(), item.value().sizes().end());
    info.numel = item.value().numel();
    info.dtype = comm::to_trace_dtype(item.value().scalar_type());
    recorder.add_param(info);
  }
}

// Data parallelism needs one model on every rank: each rank drew its own, so rank 0's goes to all
// (DDP's construction does the same). One broadcast per parameter.
void broadcast_from_rank0(tutorials::TracedRun& run, const std::vector<at::Tensor>& params) {
  trace::ScopedPhase phase(&run.recorder(), 0, "broadcast_parameters", trace::kNone);
  c10::NoGradGuard no_grad;
  for (const at::Tensor& p : params) run.group()->broadcast(p, 0)->wait();
}

// The gradients' storage was made by backward (counted as activations); from now on it holds
// gradients, as DDP retags it.
void count_as_gradients(const std::vector<at::Tensor>& params) {
  if (memory::TrackingAllocator* allocator = memory::TrackingAllocator::installed()) {
    for (const at::Tensor& p : params) allocator->retag(p.grad(), memory::MemoryCategory::Gradients);
  }
}

// Variant "after-backward": every gradient is ready only once backward returns. One all-reduce per
// parameter, all in flight at once, then wait for all.
void all_reduce_every_gradient(comm::ProcessGroup& group, const std::vector<at::Tensor>& params,
                               int32_t iteration) {
  std::vector<comm::WorkHandle> works;
  for (const at::Tensor& p : params) {
    works.push_back(group.all_reduce(p.grad(), comm::ReduceOp::Average, {iteration}));
  }
  for (const comm::WorkHandle& work : works) work->wait();
}

// Variant "hooks": a post-hook on each parameter's gradient accumulator, which autograd runs right
// after it wrote the parameter's .grad, launches that gradient's all-reduce at once; backward goes
// on with the layers before it while the gradient travels. DDP's Reducer hooks the same place
// (engine/ddp/reducer.cpp), as does picotron's DataParallelBucket in Python
// (param.expand_as(param).grad_fn.next_functions[0][0].register_hook).
class AllReduceHooks {
 public:
  AllReduceHooks(std::vector<at::Tensor> params, tutorials::TracedRun& run)
      : params_(std::move(params)), run_(run) {
    for (size_t index = 0; index < params_.size(); ++index) {
      // Kept here: a parameter holds its accumulator only weakly, and a new one, without the
      // hook, would be made for the next backward.
      accumulators_.push_back(torch::autograd::impl::grad_accumulator(params_[index]));
      keys_.push_back(accumulators_.back()->add_post_hook(
          std::make_unique<torch::autograd::utils::LambdaPostHook>(
              [this, index](const torch::autograd::variable_list& outputs,
                            const torch::autograd::variable_list&) {
                all_reduce_gradient(index);
                return outputs;
              })));
    }
  }
  ~AllReduceHooks() {
    for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(keys_[i]);
  }
  AllReduceHooks(const AllReduceHooks&) = delete;
  AllReduceHooks& operator=(const AllReduceHooks&) = delete;

  void start_iteration(int32_t iteration) { iteration_ = iteration; }
  // After backward: the all-reduces still on the link.
  void wait_all() {
    for (const comm::WorkHandle& work : pending_) work->wait();
    pending_.clear();
  }

 private:
  void all_reduce_gradient(size_t index) {
    // Autograd may run hooks on its own threads; every rank still issues in the same order,
    // since backward walks the same graph on each.
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t begin_ns = trace::now_ns();
    at::Tensor& grad = params_[index].mutable_grad();
    pending_.push_back(run_.group()->all_reduce(grad, comm::ReduceOp::Average, {iteration_}));
    // Each gradient travels alone: no bucket, and the fill is the gradient's own bytes.
    run_.recorder().hook(0, begin_ns, trace::stamp_now(), iteration_, static_cast<int32_t>(index),
                         trace::kNone, grad.numel() * grad.element_size());
  }

  std::vector<at::Tensor> params_;
  tutorials::TracedRun& run_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> keys_;
  std::mutex mutex_;
  int32_t iteration_ = 0;
  std::vector<comm::WorkHandle> pending_;
};

struct Outcome {
  std::string run_file;
  double gradient_difference = 0;  // the largest on any rank, against the first variant
};

Outcome train(tutorials::Session& session, const Settings& settings, Variant variant,
              GradientCheck& gradients) {
  const tutorials::CommonOptions& options = session.options();
  models::ModelConfig config;
  config.name = "mlp";
  config.hidden = settings.hidden;
  config.layers = settings.layers;
  // Every variant draws the same model on each rank and trains it on the same batches.
  std::shared_ptr<models::Model> model = session.build_model(config);
  const std::vector<at::Tensor> params = model->parameters();

  tutorials::TracedRun run(session, part_name(variant));
  nlohmann::json described = {{"sync", part_name(variant)}};
  if (variant == Variant::Buckets) described["bucket_cap_mb"] = settings.bucket_cap_mb;
  if (variant == Variant::Buckets) {
    run.describe(trace::Strategy::Ddp, "mlp", *model, described);
  } else {
    run.recorder().set_meta(trace::meta_key::kStrategy, kNaiveStrategy);
    run.describe(trace::Strategy::Unknown, "mlp", *model, described);
  }
  const trace::NameId sync_name = run.recorder().name("sync_gradients");
  Outcome outcome;
  {
    std::unique_ptr<ddp::DistributedDataParallel> ddp;
    std::unique_ptr<AllReduceHooks> hooks;
    if (variant == Variant::Buckets) {
      ddp::DdpOptions ddp_options;
      ddp_options.bucket_cap_bytes = static_cast<int64_t>(settings.bucket_cap_mb * 1024 * 1024);
      ddp_options.recorder = &run.recorder();
      ddp = std::make_unique<ddp::DistributedDataParallel>(model, run.group(), ddp_options);
    } else {
      record_parameters(run.recorder(), *model);
      broadcast_from_rank0(run, params);
      if (variant == Variant::Hooks) hooks = std::make_unique<AllReduceHooks>(params, run);
    }
    tutorials::ShardedBatches batches(data::make_synthetic_classification(4096, 64, 10, options.seed),
                                      session, settings.batch_size, options.seed);
    torch::optim::SGD optimizer(params, torch::optim::SGDOptions(0.05));
    // One traced step; the phase "sync_gradients" is the naive variants' wait after backward.
    auto train_step = [&](int32_t iteration) {
      const data::Dataset batch = batches.next();
      tutorials::Step step(run, iteration);
      tutorials::zero_grad(optimizer);
      if (hooks) hooks->start_iteration(iteration);
      const at::Tensor loss = step.forward([&] {
        // DDP's forward also readies its Reducer for this backward; the naive runs need nothing.
        const at::Tensor logits =
            ddp ? ddp->forward([&] { return model->forward(batch.x); }) : model->forward(batch.x);
        return model->loss(logits, batch.y);
      });
      step.backward(loss);
      if (variant != Variant::Buckets) {
        trace::ScopedPhase sync(run.recorder(), 0, sync_name, iteration);
        if (hooks) {
          hooks->wait_all();
        } else {
          all_reduce_every_gradient(*run.group(), params, iteration);
        }
        if (iteration == 0) count_as_gradients(params);
      }
      step.optimizer_step(optimizer);
    };
    gradients.next_variant();
    for (int32_t iteration = 0; iteration < options.steps; ++iteration) {
      train_step(iteration);
      // The optimizer leaves .grad as it is: checked after the step, on every rank alike.
      gradients.check(params);
    }
  }
  for (const double difference : session.gather(gradients.largest_difference())) {
    outcome.gradient_difference = std::max(outcome.gradient_difference, difference);
  }
  outcome.run_file = run.finish();
  return outcome;
}

// The median over the steady steps (Note [Steady steps]) of one per-iteration figure.
template <typename Figure>
double steady_median(const analysis::RankStats& rank, Figure figure) {
  std::vector<double> values;
  for (const analysis::IterationStats& it : rank.iterations) {
    if (it.iteration >= core::steady_from(rank.iterations.size())) values.push_back(figure(it));
  }
  return analysis::median_of(std::move(values));  // as `dpscope stats` takes a median
}

// When one iteration's all-reduces ran against its backward, on rank 0: from the trace's slices,
// on the lesson's clock.
void print_when(const std::string& path, Variant variant, int32_t iteration) {
  trace::Reader reader(path);
  const tutorials::LessonEvents events(reader);
  const std::vector<std::string> names = reader.names();
  int64_t backward_begin = 0, backward_end = 0;
  for (const trace::Event& e : events.of_kind(trace::EventKind::Phase, 0)) {
    if (e.iteration == iteration && names.at(e.name) == trace::kPhaseBackward) {
      backward_begin = e.begin_ns;
      backward_end = e.end_ns;
    }
  }
  int64_t first = INT64_MAX, last = 0;
  for (const trace::Event& c : events.of_kind(trace::EventKind::Collective, 0)) {
    if (c.iteration != iteration || c.op != static_cast<uint8_t>(trace::CollectiveOp::AllReduce)) continue;
    first = std::min(first, c.begin_ns);
    last = std::max(last, c.end_ns);
  }
  if (backward_end == 0 || last == 0) return;
  auto ms = [&](int64_t ns) { return double(ns - backward_begin) / 1e6; };
  std::printf("  %-15s backward 0 .. %6.2f ms   all-reduces %6.2f .. %6.2f ms\n", part_name(variant),
              ms(backward_end), ms(first), ms(last));
}

void run(tutorials::Session& session, const Settings& settings) {
  const int64_t steps = session.options().steps;
  session.say("== %s: one MLP (%lld layers of %lld), %lld steps, gradients synchronised 3 ways, "
              "%d rank(s) ==\n", kProgram, static_cast<long long>(settings.layers), static_cast<long long>(settings.hidden),
              static_cast<long long>(steps), session.world_size());
  std::vector<Outcome> outcomes;
  GradientCheck gradients;
  for (const Variant variant : kVariants) outcomes.push_back(train(session, settings, variant, gradients));
  if (!session.leader()) return;

  const analysis::RunStats first = tutorials::read_stats(outcomes[0].run_file);
  const int32_t steady = core::steady_from(static_cast<size_t>(first.iterations));
  const int32_t last = first.iterations - 1;
  int64_t gradient_bytes = 0;
  for (const trace::ParamInfo& p : first.params) gradient_bytes += p.numel * 4;
  std::printf("\n%zu parameters, %s of gradients. Per step (rank 0, from each run's trace;\n"
              "all-reduces and bytes of step %d, times the median of steps %d..%d; latency ms: what the\n"
              "link's latency costs those all-reduces, each 2(n-1) x %g us; grad diff: the largest\n"
              "difference of any gradient element, in any step on any rank, from after-backward's):\n",
              first.params.size(), tutorials::bytes_text(gradient_bytes).c_str(), last, steady, last,
              first.link_latency_us);
  std::printf("  %-15s %11s %10s %10s %8s %8s %11s %10s\n", "run", "all-reduces", "bytes", "latency ms",
              "comm ms", "step ms", "exposed ms", "grad diff");
  double largest_difference = 0;
  std::vector<analysis::RunStats> all_stats;
  for (size_t v = 0; v < outcomes.size(); ++v) {
    all_stats.push_back(tutorials::read_stats(outcomes[v].run_file));
    const analysis::RunStats& stats = all_stats.back();
    const analysis::RankStats& rank0 = tutorials::rank_stats(stats, 0);
    const int64_t all_reduces = tutorials::collectives_in(rank0, last, trace::CollectiveOp::AllReduce);
    const int64_t all_reduce_bytes =
        tutorials::collective_bytes_in(rank0, last, trace::CollectiveOp::AllReduce);
    const double latency_ms = double(all_reduces) * 2 * (stats.world_size - 1) * stats.link_latency_us / 1e3;
    const double difference = outcomes[v].gradient_difference;
    largest_difference = std::max(largest_difference, difference);
    std::printf("  %-15s %11lld %10s %10.2f %8.2f %8.2f %11.2f %10.1e\n", part_name(kVariants[v]),
                static_cast<long long>(all_reduces),
                tutorials::bytes_text(all_reduce_bytes).c_str(),
                latency_ms, steady_median(rank0, [](const auto& it) { return it.overlap.comm_ms; }),
                analysis::step_summary(rank0).median_ms,
                steady_median(rank0, [](const auto& it) { return it.overlap.exposed_comm_ms; }), difference);
  }
  if (largest_difference == 0) {
    std::printf("  Every gradient of every step is the same in the three runs, bit for bit: they change\n"
                "  when the gradients travel, not what they add up to.\n");
  } else {
    std::printf("  The gradients agree to float rounding (%.2e at most): the runs change when they\n"
                "  travel, and with more than 2 ranks the order in which Gloo sums them.\n",
                largest_difference);
  }

  std::vector<tutorials::LabelledRun> labelled;
  for (size_t v = 0; v < outcomes.size(); ++v) labelled.push_back({part_name(kVariants[v]), &all_stats[v]});
  tutorials::print_clocks(labelled);

  std::printf("\nWhen the all-reduces ran in step %d (rank 0, ms from the start of its backward, on the clock above):\n", last);
  for (size_t v = 0; v < outcomes.size(); ++v) print_when(outcomes[v].run_file, kVariants[v], last);

  std::printf("\ntraces:\n");
  for (const Outcome& o : outcomes) std::printf("  %s\n", o.run_file.c_str());
  std::printf("compare: dpscope-view %s --compare %s\n", outcomes[0].run_file.c_str(),
              outcomes[1].run_file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 10;
  Settings settings;
  CLI::App app{"Tutorial 02: naive data parallelism: all-reduce after backward, in hooks, in buckets"};
  tutorials::add_common_options(app, options);
  app.add_option("--hidden", settings.hidden, "Width of the MLP's layers")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--layers", settings.layers, "Hidden layers of the MLP")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch-size", settings.batch_size, "Samples per rank and step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--bucket-cap-mb", settings.bucket_cap_mb, "DDP's bucket cap in the buckets run, in MiB")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
