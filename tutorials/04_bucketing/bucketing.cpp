// Tutorial 04: bucketing. Trains one MLP under DDP with several bucket caps and reads each run's
// trace back: how the cap splits the gradients into buckets, one all-reduce per bucket, how much
// of that communication hides behind backward, and why the buckets go in reverse order.
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "engine/ddp/distributed_data_parallel.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"
#include "tutorials/common/workload.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-04-bucketing";

struct Settings {
  std::string model = "mlp";  // mlp, or gpt: a model shaped like the ones people train
  std::vector<double> caps_mb = {25, 4, 1};
  double first_bucket_mb = 1;
  tutorials::WorkloadSizes sizes;  // unset: the MLP's 512 x 8 layers, 256 rows; the GPT's own
};

// The MLP's sizes here: wide and deep enough that its gradients take the link a while.
const tutorials::WorkloadSizes kMlp{512, 8, 256};

std::string cap_text(double mb) {
  char text[32];
  std::snprintf(text, sizeof(text), "cap-%gmb", mb);
  return text;
}

// One cap's numbers, read from its trace (rank 0's view).
struct CapResult {
  double cap_mb = 0;
  std::string run_file;
  size_t initial_buckets = 0;
  size_t rebuilt_buckets = 0;
  std::vector<int64_t> all_reduces;  // per iteration
  double backward_ms = 0;            // DDP's logging data, averaged over iterations
  double comm_ms = 0;
  double overlap_ms = 0;
  double exposed_ms = 0;  // exposed communication per step (analysis::overlap_per_step)
  analysis::RunStats stats;  // on the lesson's clock (tutorials::read_stats)
};

// Trains the MLP for `steps` under DDP with this cap; returns the run file (on rank 0).
std::string train_with_cap(tutorials::Session& session, const Settings& settings, const tutorials::Workload& work,
                           double cap_mb) {
  const tutorials::CommonOptions& options = session.options();
  // The same seed for every cap, so every run trains the same model on the same data.
  session.seed_per_rank(options.seed);
  std::shared_ptr<models::Model> model = models::make_model(work.config);
  model->to(session.device());

  tutorials::TracedRun run(session, cap_text(cap_mb));
  run.describe(trace::Strategy::Ddp, work.config.name, *model,
               {{"bucket_cap_mb", cap_mb}, {"first_bucket_mb", settings.first_bucket_mb}});
  {
    ddp::DdpOptions ddp_options;
    ddp_options.bucket_cap_bytes = static_cast<int64_t>(cap_mb * 1024 * 1024);
    // PyTorch closes the first bucket early (1 MiB) so that communication can start soon.
    ddp_options.first_bucket_bytes = static_cast<int64_t>(settings.first_bucket_mb * 1024 * 1024);
    ddp_options.recorder = &run.recorder();
    ddp::DistributedDataParallel ddp(model, run.group(), ddp_options);

    tutorials::ShardedBatches batches(work.data, session, work.batch_size, options.seed);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
    tutorials::train_steps(run, ddp, *model, optimizer, batches, options.steps);
  }
  return run.finish();
}

CapResult read_cap(double cap_mb, const std::string& path) {
  CapResult result;
  result.cap_mb = cap_mb;
  result.run_file = path;
  result.stats = tutorials::read_stats(path);
  const analysis::RunStats& stats = result.stats;
  result.initial_buckets = tutorials::bucket_plan(stats, 0).size();
  result.rebuilt_buckets = tutorials::bucket_plan(stats, 1).size();
  const analysis::RankStats& rank0 = tutorials::rank_stats(stats, 0);
  for (const analysis::IterationStats& it : rank0.iterations) {
    result.all_reduces.push_back(tutorials::collectives_in(rank0, it.iteration, trace::CollectiveOp::AllReduce));
  }
  if (rank0.ddp) {
    result.backward_ms = rank0.ddp->backward_compute_ms;
    result.comm_ms = rank0.ddp->backward_comm_ms;
    result.overlap_ms = rank0.ddp->backward_compute_comm_overlap_ms;
  }
  result.exposed_ms = analysis::overlap_per_step(rank0).exposed_comm_ms;
  std::printf("\n%s: %s\n  iteration 0 (built at construction; one bucket in PyTorch >= 1.12, "
              "tutorial 05):\n", cap_text(cap_mb).c_str(), path.c_str());
  tutorials::print_bucket_plan(stats, tutorials::bucket_plan(stats, 0), "    ");
  if (result.rebuilt_buckets > 0) {
    std::printf("  rebuilt after iteration 0, by size in the order the gradients arrived:\n");
    tutorials::print_bucket_plan(stats, tutorials::bucket_plan(stats, 1), "    ");
  }
  return result;
}

// "fc7 fc8": the modules whose parameters a bucket holds.
std::string layers_of(const analysis::RunStats& stats, const trace::BucketInfo& bucket) {
  std::vector<std::string> layers;
  for (const int32_t p : bucket.params) {
    const std::string& name = stats.params.at(p).name;
    const std::string layer = name.substr(0, name.rfind('.'));
    if (std::find(layers.begin(), layers.end(), layer) == layers.end()) layers.push_back(layer);
  }
  std::sort(layers.begin(), layers.end());
  std::string text;
  for (const std::string& layer : layers) text += (text.empty() ? "" : " ") + layer;
  return text;
}

// Why reverse order. Backward produces gradients from the last layer to the first, and DDP
// launches buckets strictly in index order (every rank must issue the same all-reduces in the
// same order). So bucket 0 should be the one whose gradients are ready first: the rebuilt plan
// is, since it follows the order they arrived in. From the hook times of the last iteration
// (under the rebuilt plan), this computes when each bucket could launch with the plan DDP used
// and with the same buckets in registration order.
void explain_reverse_order(const CapResult& cap) {
  trace::Reader reader(cap.run_file);
  const tutorials::LessonEvents events(reader);
  const analysis::RunStats& stats = cap.stats;
  const std::vector<trace::BucketInfo> plan = tutorials::bucket_plan(stats, 1);
  const int32_t iteration = stats.iterations - 1;
  if (plan.size() < 2 || iteration < 1) return;
  std::map<int32_t, int64_t> ready_ns;  // parameter -> when its hook fired
  for (const trace::Event& hook : events.of_kind(trace::EventKind::Hook, 0)) {
    // The hook begins when autograd hands it the gradient (it may end later: the hook that
    // completes a bucket also launches it).
    if (hook.iteration == iteration) ready_ns[hook.param] = hook.begin_ns;
  }
  const std::vector<std::string> names = reader.names();
  int64_t backward_begin = 0;
  for (const trace::Event& phase : events.of_kind(trace::EventKind::Phase, 0)) {
    if (phase.iteration == iteration && names.at(phase.name) == trace::kPhaseBackward) {
      backward_begin = phase.begin_ns;
    }
  }
  // A bucket launches when its last gradient is in and every bucket before it has launched.
  auto launch_times = [&](const std::vector<trace::BucketInfo>& order) {
    std::vector<double> launch_ms;
    int64_t previous = backward_begin;
    for (const trace::BucketInfo& bucket : order) {
      int64_t ready = backward_begin;
      for (const int32_t p : bucket.params) ready = std::max(ready, ready_ns[p]);
      previous = std::max(previous, ready);
      launch_ms.push_back(static_cast<double>(previous - backward_begin) / 1e6);
    }
    return launch_ms;
  };
  std::vector<trace::BucketInfo> registration_order(plan.rbegin(), plan.rend());
  const std::vector<double> reversed = launch_times(plan);
  const std::vector<double> unreversed = launch_times(registration_order);
  int64_t last_gradient = backward_begin;
  for (const auto& [param, ns] : ready_ns) last_gradient = std::max(last_gradient, ns);
  std::printf("\nWhy reverse order (%s, iteration %d on rank 0; the last gradient came %.2f ms "
              "into backward):\n  when each bucket could be sent, the same buckets in two orders:\n"
              "  %-7s %-30s %-30s\n", cap_text(cap.cap_mb).c_str(), iteration,
              static_cast<double>(last_gradient - backward_begin) / 1e6, "bucket",
              "arrival order (what DDP does)", "registration order");
  for (size_t i = 0; i < plan.size(); ++i) {
    std::printf("  %-7zu %7.2f ms  %-19s %7.2f ms  %s\n", i, reversed[i],
                layers_of(stats, plan[i]).c_str(), unreversed[i],
                layers_of(stats, registration_order[i]).c_str());
  }
  std::printf("  In registration order the first bucket holds the first layer, whose gradient "
              "comes last:\n  nothing can be sent until backward is over. In arrival order the last "
              "layers' bucket goes first\n  and the all-reduces overlap the rest of backward.\n");
}

void run(tutorials::Session& session, const Settings& settings) {
  const tutorials::Workload work =
      tutorials::make_workload(settings.model, settings.sizes, kMlp, session.options().seed);
  session.say("== %s: one %s (%lld %s of %lld), %zu bucket caps, %d rank(s) ==\n", kProgram,
              work.config.name == "gpt" ? "GPT" : "MLP", static_cast<long long>(*work.config.layers),
              work.config.name == "gpt" ? "blocks" : "layers", static_cast<long long>(*work.config.hidden),
              settings.caps_mb.size(), session.world_size());
  std::vector<CapResult> results;
  for (const double cap_mb : settings.caps_mb) {
    const std::string path = train_with_cap(session, settings, work, cap_mb);
    if (session.leader()) results.push_back(read_cap(cap_mb, path));
  }
  if (!session.leader()) return;

  std::printf("\nPer cap (rank 0; backward, comm and overlap are PyTorch DDP's logging data averaged over "
              "%lld\niterations; exposed is `dpscope stats`' exposed communication per step, steps 3..):\n",
              static_cast<long long>(session.options().steps));
  // backward: from its start to the last gradient; comm: first launch to the last bucket written
  // back; overlap: the part of comm during backward; exposed: communication during which the rank
  // computes nothing (analysis/stats.h), which the step waits for.
  std::printf("  %-8s %-17s %-18s %11s %8s %11s %11s\n", "cap", "buckets", "all-reduces/iter",
              "backward ms", "comm ms", "overlap ms", "exposed ms");
  for (const CapResult& r : results) {
    std::string per_iteration;
    for (const int64_t n : r.all_reduces) per_iteration += (per_iteration.empty() ? "" : " ") + std::to_string(n);
    char buckets[32];
    std::snprintf(buckets, sizeof(buckets), "%zu -> %zu rebuilt", r.initial_buckets, r.rebuilt_buckets);
    std::printf("  %-8s %-17s %-18s %11.2f %8.2f %11.2f %11.2f\n", cap_text(r.cap_mb).c_str() + 4,
                buckets, per_iteration.c_str(), r.backward_ms, r.comm_ms, r.overlap_ms, r.exposed_ms);
  }
  std::printf("  One all-reduce per bucket: a small cap starts sending sooner (more overlap) but "
              "pays each\n  all-reduce's fixed cost more often; PyTorch's default is 25 MiB.\n");
  std::vector<tutorials::LabelledRun> labelled;
  for (const CapResult& r : results) labelled.push_back({cap_text(r.cap_mb), &r.stats});
  tutorials::print_clocks(labelled);

  // The run with the most buckets shows the order best.
  const CapResult& most = *std::max_element(results.begin(), results.end(), [](const CapResult& a, const CapResult& b) {
    return a.rebuilt_buckets < b.rebuilt_buckets;
  });
  explain_reverse_order(most);

  std::printf("\ntraces (one per cap):\n");
  for (const CapResult& r : results) std::printf("  %s\n", r.run_file.c_str());
  if (results.size() > 1) {
    std::printf("compare two: dpscope-view %s --compare %s\n", results.back().run_file.c_str(),
                results.front().run_file.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 8;
  Settings settings;
  CLI::App app{"Tutorial 04: bucketing: one MLP under DDP with several bucket caps"};
  tutorials::add_common_options(app, options);
  app.add_option("--caps", settings.caps_mb, "Bucket caps to compare, in MiB (bucket_cap_mb)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--first-bucket-mb", settings.first_bucket_mb, "The first bucket's limit, in MiB")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  tutorials::add_workload_options(app, settings.model, settings.sizes, kMlp, "tensors from 512 B to 256 KiB");
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
