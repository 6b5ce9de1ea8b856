// Tutorial 11: FSDP nesting, reshard_after_forward and backward prefetch, read from the memory
// graph. Trains one MLP under five FSDP settings, each its own traced run, and prints for each the
// peak of full parameters (from the trace's memory samples) and the all-gathers per iteration.
#include <torch/optim/sgd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "engine/models/models.h"
#include "engine/train/parallel_model.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"
#include "tutorials/common/workload.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-11-fsdp-nesting-prefetch";

struct Settings {
  std::string model = "mlp";  // mlp, or gpt: a model shaped like the ones people train
  tutorials::WorkloadSizes sizes;  // unset: the MLP's 1024 x 4 layers, 32 rows; the GPT's own
  // Nested runs: a submodule with at least this many elements is a unit. Unset: 50,000 for the
  // MLP (every Linear, 66,560 elements and up), 100,000 for the GPT (every block, about 198,000;
  // its Linears, 66,048 at most, stay in their block).
  std::optional<int64_t> wrap_min_params;
};

const tutorials::WorkloadSizes kMlp{1024, 4, 32};

int64_t wrap_min_params(const Settings& settings) {
  return settings.wrap_min_params.value_or(settings.model == "gpt" ? 100000 : 50000);
}

struct Setting {
  std::string part;       // the trace folder
  bool nested = true;     // every Linear a unit, or the root only
  fsdp::ShardingStrategy sharding;
  fsdp::BackwardPrefetch prefetch;
  std::string what;
};

struct Outcome {
  Setting setting;
  std::string run_file;
  int64_t peak_full_parameters = 0;
  int64_t peak_total = 0;
  int64_t gathers = 0;   // in the last iteration
  int64_t backward_gathers = 0;
  size_t units = 0;
  // Per step over the steady steps (Note [Steady steps]): the step time and the communication
  // during which rank 0 computed nothing (Note [Compute and exposed communication]).
  double step_ms = 0;
  double exposed_ms = 0;
  analysis::RunStats stats;  // on the lesson's clock (tutorials::read_stats)
};

std::string train(tutorials::Session& session, const Settings& settings, const tutorials::Workload& work,
                  const Setting& setting) {
  const tutorials::CommonOptions& options = session.options();
  const std::shared_ptr<models::Model> model = session.build_model(work.config);

  train::TrainConfig config;
  config.strategy = train::Strategy::Fsdp;
  config.sharding = setting.sharding;
  config.wrap_min_params = setting.nested ? wrap_min_params(settings) : 0;
  config.backward_prefetch = setting.prefetch;
  // No reduce-scatter bucket: it would hold full gradients until the end of backward (tutorial 12).
  config.reduce_bucket_mb = 0;

  tutorials::TracedRun run(session, setting.part);
  run.describe(trace::Strategy::Fsdp, work.config.name, *model,
               {{"sharding", fsdp::to_string(setting.sharding)},
                {"wrap_min_params", config.wrap_min_params},
                {"backward_prefetch", fsdp::to_string(setting.prefetch)}});
  {
    const std::unique_ptr<train::ParallelModel> parallel = train::make_parallel_model(
        config, model, run.group(), &run.recorder(), &run.memory_sampler());
    tutorials::ShardedBatches batches(work.data, session, work.batch_size, options.seed);
    torch::optim::SGD optimizer(parallel->optimizer_parameters(), torch::optim::SGDOptions(0.05));
    tutorials::train_steps(run, *parallel, *model, optimizer, batches, options.steps);
  }
  return run.finish();
}

Outcome read_outcome(const Setting& setting, const std::string& path, int32_t last_iteration) {
  Outcome outcome;
  outcome.setting = setting;
  outcome.run_file = path;
  trace::Reader reader(path);
  outcome.units = reader.units().size();
  // Rank 0 as `dpscope stats` has it: the full_parameters band's largest value (a category
  // maximum) and the peak in the steps (Note [Memory at the peak]).
  outcome.stats = tutorials::read_stats(path);
  const analysis::RankStats& rank0 = tutorials::rank_stats(outcome.stats, 0);
  for (const analysis::CategoryBytes& largest : rank0.category_max) {
    if (largest.category == trace::MemoryCategory::FullParameters) outcome.peak_full_parameters = largest.bytes;
  }
  outcome.peak_total = rank0.step_memory_peak.total_bytes;
  outcome.step_ms = analysis::step_summary(rank0).median_ms;
  outcome.exposed_ms = analysis::overlap_per_step(rank0).exposed_comm_ms;
  for (const trace::Event& c : reader.events_of_kind(trace::EventKind::Collective, 0)) {
    if (c.iteration != last_iteration || c.op != static_cast<uint8_t>(trace::CollectiveOp::AllGather)) continue;
    ++outcome.gathers;
    outcome.backward_gathers += (c.flags & trace::kFlagBackward) != 0;
  }
  return outcome;
}

void run(tutorials::Session& session, const Settings& settings) {
  const tutorials::Workload work =
      tutorials::make_workload(settings.model, settings.sizes, kMlp, session.options().seed);
  const bool gpt = work.config.name == "gpt";
  session.say("== %s: %s (%lld %s of %lld) under FSDP on %d rank(s), five settings, %lld steps "
              "each ==\n", kProgram, gpt ? "a GPT" : "an MLP", static_cast<long long>(*work.config.layers),
              gpt ? "blocks" : "layers", static_cast<long long>(*work.config.hidden), session.world_size(),
              static_cast<long long>(session.options().steps));
  const std::vector<Setting> settings_list = {
      {"root-only", false, fsdp::ShardingStrategy::FullShard, fsdp::BackwardPrefetch::Pre,
       "one unit: the whole model"},
      {"nested", true, fsdp::ShardingStrategy::FullShard, fsdp::BackwardPrefetch::Pre,
       gpt ? "every block a unit (FULL_SHARD, BACKWARD_PRE)" : "every Linear a unit (FULL_SHARD, BACKWARD_PRE)"},
      {"grad-op", true, fsdp::ShardingStrategy::ShardGradOp, fsdp::BackwardPrefetch::Pre,
       "nested, SHARD_GRAD_OP: no reshard after forward"},
      {"prefetch-post", true, fsdp::ShardingStrategy::FullShard, fsdp::BackwardPrefetch::Post,
       "nested, BACKWARD_POST"},
      {"prefetch-none", true, fsdp::ShardingStrategy::FullShard, fsdp::BackwardPrefetch::None,
       "nested, no backward prefetch"},
  };
  std::vector<Outcome> outcomes;
  const int32_t last = static_cast<int32_t>(session.options().steps - 1);
  for (const Setting& setting : settings_list) {
    const std::string path = train(session, settings, work, setting);
    if (session.leader()) outcomes.push_back(read_outcome(setting, path, last));
  }
  if (!session.leader()) return;

  const core::StepSummary steady = core::summarize_steps(std::vector<double>(last + 1, 1.0));
  std::printf("\nRank 0, from each trace (as `dpscope stats` has it): the largest full_parameters of the\n"
              "memory graph, the peak in the steps, the all-gathers of the last iteration (iteration %d),\n"
              "and the median step and the mean exposed communication per step over iterations %d..%d:\n",
              last, steady.from_iteration, last);
  std::printf("  %-14s %5s %17s %12s %12s %9s %8s %11s  %s\n", "run", "units", "full params max",
              "step peak", "all-gathers", "backward", "step ms", "exposed ms", "setting");
  for (const Outcome& o : outcomes) {
    std::printf("  %-14s %5zu %17s %12s %12lld %9lld %8.2f %11.2f  %s\n", o.setting.part.c_str(),
                o.units, tutorials::bytes_text(o.peak_full_parameters).c_str(),
                tutorials::bytes_text(o.peak_total).c_str(), static_cast<long long>(o.gathers),
                static_cast<long long>(o.backward_gathers), o.step_ms, o.exposed_ms,
                o.setting.what.c_str());
  }
  std::vector<tutorials::LabelledRun> labelled;
  for (const Outcome& o : outcomes) labelled.push_back({o.setting.part, &o.stats});
  tutorials::print_clocks(labelled);
  std::printf(
      "\nReading it:\n"
      "  root-only vs nested: one unit must be gathered whole, so the whole model is full from\n"
      "    forward to the end of backward; nested units are full one (or two) at a time.\n"
      "  nested vs grad-op: FULL_SHARD reshards each unit after its forward and gathers it again\n"
      "    for backward (2 gathers per nested unit); SHARD_GRAD_OP keeps the full parameters from\n"
      "    forward to backward: one gather per unit, but every unit full at the end of forward.\n"
      "  pre / post / none: BACKWARD_PRE gathers the next unit when a unit's backward begins (two\n"
      "    units full at once, most overlap); BACKWARD_POST once its gradient is computed; none\n"
      "    only when the next unit's backward needs it (least memory, the gather is exposed).\n"
      "\nCompare two: dpscope-view %s --compare %s\n",
      outcomes[0].run_file.c_str(), outcomes[1].run_file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 6;
  Settings settings;
  CLI::App app{"Tutorial 11: FSDP nesting, reshard_after_forward and backward prefetch, from the memory graph"};
  tutorials::add_common_options(app, options);
  tutorials::add_workload_options(app, settings.model, settings.sizes, kMlp, "a unit per block");
  app.add_option("--wrap-min-params", settings.wrap_min_params,
                 "In the nested runs, a submodule with at least this many parameter elements becomes a unit "
                 "(mlp 50000: every Linear; gpt 100000: every block)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
