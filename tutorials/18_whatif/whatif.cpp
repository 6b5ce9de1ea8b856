// Tutorial 18: what-if. Record one DDP run, ask its trace what other bucket caps would have cost
// (the replay behind `dpscope whatif`: the recorded gradient ready times, PyTorch's bucket plan
// for each cap, an all-reduce cost fitted to the trace's own), then train the most different
// cap for real and hold the prediction to the measurement. --model gpt records a model shaped like
// the ones people train, whose 54 tensors of many sizes make a different plan for every cap.
#include <torch/optim/sgd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/clock_choice.h"
#include "analysis/cluster_clock.h"
#include "analysis/whatif.h"
#include "engine/ddp/distributed_data_parallel.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"
#include "tutorials/common/workload.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-18-whatif";
constexpr double kMiB = 1024.0 * 1024.0;

struct Settings {
  std::string model = "mlp";  // mlp, or gpt: a model shaped like the ones people train
  tutorials::WorkloadSizes sizes;  // unset: the MLP's 1024 x 3 layers, 32 rows; the GPT's own
  double recorded_cap_mb = 1;
  std::vector<double> caps_mb = {0.25, 1, 4, 25, 100};
};

// The MLP's sizes here: tensors of about 4 MiB, far apart in size from the caps below them.
const tutorials::WorkloadSizes kMlp{1024, 3, 32};

std::string cap_text(double cap_mb) {
  char text[32];
  std::snprintf(text, sizeof(text), "cap-%gmb", cap_mb);
  return text;
}

// Trains the model under DDP with buckets of `cap_mb` (the first one too); the run file on rank 0.
std::string train_with_cap(tutorials::Session& session, const tutorials::Workload& work, double cap_mb) {
  std::shared_ptr<models::Model> model = session.build_model(work.config);
  tutorials::TracedRun run(session, cap_text(cap_mb));
  run.describe(trace::Strategy::Ddp, work.config.name, *model, {{"bucket_cap_mb", cap_mb}, {"first_bucket_mb", cap_mb}});
  {
    ddp::DdpOptions ddp_options;
    ddp_options.bucket_cap_bytes = static_cast<int64_t>(cap_mb * kMiB);
    ddp_options.first_bucket_bytes = static_cast<int64_t>(cap_mb * kMiB);
    ddp_options.recorder = &run.recorder();
    ddp::DistributedDataParallel ddp(model, run.group(), ddp_options);
    tutorials::ShardedBatches batches(work.data, session, work.batch_size, session.options().seed);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
    tutorials::train_steps(run, ddp, *model, optimizer, batches, session.options().steps);
  }
  return run.finish();
}

struct Forecast {
  double cap_mb = 0;
  size_t buckets = 0;
  double step_ms = 0, exposed_ms = 0;
};

// What the recorded run's trace predicts for every cap (first bucket = cap), on rank 0, on the
// lesson's clock (Note [The lesson's clock]). On the cluster clock the what-if is that clock
// with another cap: the recorded run replayed there, its all-reduces costed by the link's ring
// model (the cluster clock's network); on the measured clock, by a line fitted to the trace.
std::vector<Forecast> forecast(const std::string& recorded, const Settings& settings) {
  trace::Reader reader(recorded);
  const tutorials::LessonEvents lesson(reader);
  const analysis::ClusterClockRun* cluster = lesson.cluster();
  const analysis::RunStats stats = cluster ? analysis::compute_stats(reader, *cluster) : analysis::compute_stats(reader);
  const analysis::ReplayTrace replay = analysis::load_replay_trace(reader, stats, 0, cluster);
  const analysis::AllReduceModel cost =
      cluster ? analysis::link_collective_model(trace::CollectiveOp::AllReduce, cluster->link, stats.world_size)
              : analysis::fit_allreduce_model(replay);
  if (cluster) {
    std::printf("\nFrom the recorded trace alone (cap %g MiB, %zu steady steps), on the %s:\n"
                "an all-reduce costs %.0f us + bytes at %.2f Gb/s, the link's ring model.\n",
                settings.recorded_cap_mb, replay.iterations.size(), analysis::clock_text(stats.clock).c_str(),
                cost.latency_us(), cost.gbps());
  } else {
    std::printf("\nFrom the recorded trace alone (cap %g MiB, %zu steady steps): an all-reduce costs\n"
                "%.0f us + bytes at %.2f Gb/s, fitted to its %lld all-reduces (error %.0f %% of their time).\n",
                settings.recorded_cap_mb, replay.iterations.size(), cost.latency_us(), cost.gbps(),
                static_cast<long long>(cost.samples), cost.fit_error_pct);
  }
  std::printf("  %8s %8s %18s %22s\n", "cap MiB", "buckets", "predicted step ms", "predicted exposed ms");
  std::vector<Forecast> out;
  for (const double cap : settings.caps_mb) {
    analysis::BucketLimits limits;
    limits.bucket_cap_bytes = static_cast<int64_t>(cap * kMiB);
    limits.first_bucket_bytes = static_cast<int64_t>(cap * kMiB);
    const analysis::Prediction p = analysis::predict(replay, analysis::plan_for(replay, limits), cost);
    out.push_back({cap, p.bucket_bytes.size(), p.predicted_step_ms, p.predicted_exposed_comm_ms});
    std::printf("  %8g %8zu %18.2f %22.2f%s\n", cap, p.bucket_bytes.size(), p.predicted_step_ms,
                p.predicted_exposed_comm_ms, cap == settings.recorded_cap_mb ? "   (recorded)" : "");
  }
  return out;
}

void run(tutorials::Session& session, const Settings& settings) {
  const tutorials::Workload work =
      tutorials::make_workload(settings.model, settings.sizes, kMlp, session.options().seed);
  const bool gpt = work.config.name == "gpt";
  session.say("== %s: DDP on %d rank(s), %s hidden %lld x %lld %s, %lld steps ==\n", kProgram,
              session.world_size(), work.config.name.c_str(), static_cast<long long>(*work.config.hidden),
              static_cast<long long>(*work.config.layers), gpt ? "blocks" : "layers",
              static_cast<long long>(session.options().steps));
  const std::string recorded = train_with_cap(session, work, settings.recorded_cap_mb);
  // Rank 0 reads the trace and picks the cap whose prediction differs most from the recording;
  // every rank learns it (the check run is collective).
  double check_cap = 0;
  std::vector<Forecast> forecasts;
  double recorded_step = 0;
  if (session.leader()) {
    recorded_step = analysis::step_summary(tutorials::rank_stats(tutorials::read_stats(recorded), 0)).median_ms;
    forecasts = forecast(recorded, settings);
    double farthest = -1;
    for (const Forecast& f : forecasts) {
      if (f.cap_mb != settings.recorded_cap_mb && std::fabs(f.step_ms - recorded_step) > farthest) farthest = std::fabs(f.step_ms - recorded_step), check_cap = f.cap_mb;
    }
  }
  check_cap = session.gather(check_cap)[0];
  session.say("\nChecking the prediction that differs most from the recorded %.2f ms: cap %g MiB, trained for real.\n",
              recorded_step, check_cap);
  const std::string checked = train_with_cap(session, work, check_cap);
  if (!session.leader()) return;
  const analysis::RunStats recorded_stats = tutorials::read_stats(recorded);
  const analysis::RunStats checked_stats = tutorials::read_stats(checked);
  const double measured = analysis::step_summary(tutorials::rank_stats(checked_stats, 0)).median_ms;
  const bool cluster = checked_stats.clock.clock == analysis::Clock::Cluster;
  for (const Forecast& f : forecasts) {
    if (f.cap_mb != check_cap) continue;
    std::printf("  cap %g MiB: predicted %.2f ms, %s %.2f ms (%+.1f %%)\n", check_cap, f.step_ms,
                cluster ? "the real run on the cluster clock" : "measured", measured,
                100.0 * (f.step_ms - measured) / measured);
  }
  tutorials::print_clocks({{cap_text(settings.recorded_cap_mb) + " (recorded)", &recorded_stats},
                           {cap_text(check_cap) + " (checked)", &checked_stats}});
  std::printf("\ntraces:\n  %s\n  %s\n", recorded.c_str(), checked.c_str());
  std::printf("look: dpscope-view %s --whatif-cap-mb %g --whatif-first-bucket-mb %g\n"
              "      (the predicted all-reduces under the recorded ones)\n",
              recorded.c_str(), check_cap, check_cap);
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 20;
  Settings settings;
  CLI::App app{"Tutorial 18: what-if: predict other bucket caps from one trace, then check one"};
  tutorials::add_common_options(app, options);
  app.add_option("--recorded-cap-mb", settings.recorded_cap_mb, "The recorded run's bucket cap (and first bucket), MiB")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--caps", settings.caps_mb, "The caps to predict, MiB")->check(CLI::PositiveNumber)->capture_default_str();
  tutorials::add_workload_options(app, settings.model, settings.sizes, kMlp, "tensors from 512 B to 256 KiB");
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
