// Tutorial 12: ZeRO's stages side by side. Trains one MLP with DDP (with and without
// gradient_as_bucket_view), FSDP SHARD_GRAD_OP (ZeRO-2) and FSDP FULL_SHARD (ZeRO-3) on the same
// ranks and data, and prints each rank's peak memory in
// the training steps with what it held at that moment by category, read from the runs' traces as
// `dpscope stats` reads them (RankStats::step_memory_peak). --model gpt does the same with a model
// shaped like the ones people train, a unit per block.
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "engine/models/models.h"
#include "engine/train/parallel_model.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"
#include "tutorials/common/workload.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-12-zero-stages";

struct Settings {
  std::string model = "mlp";  // mlp, or gpt: a model shaped like the ones people train
  // Unset: the MLP's 6 hidden layers of 1024, 32 rows; the GPT's own. The MLP is deep enough that
  // SHARD_GRAD_OP, which keeps every unit's full parameters until its backward, visibly holds more
  // than FULL_SHARD's one or two units at a time.
  tutorials::WorkloadSizes sizes;
  // A submodule with at least this many elements is a unit. Unset: 50,000 for the MLP (every
  // hidden Linear, 66,560 elements and up; the output layer, 10,250, stays in the root), 100,000
  // for the GPT (every block, about 198,000; the embeddings, last LayerNorm and head stay in the
  // root).
  std::optional<int64_t> wrap_min_params;
  // No reduce-scatter bucket: a bucket holds full-size gradients until it is flushed, and one big
  // enough to collect every unit would hold the whole model's gradients — DDP's cost — at the end
  // of backward, hiding what the sharding saves. 0 sends each unit's gradient as it is ready.
  double reduce_bucket_mb = 0;
};

const tutorials::WorkloadSizes kMlp{1024, 6, 32};

int64_t wrap_min_params(const Settings& settings) {
  return settings.wrap_min_params.value_or(settings.model == "gpt" ? 100000 : 50000);
}

struct Stage {
  std::string part;   // trace folder
  std::string label;  // what the table says
  train::Strategy strategy;
  fsdp::ShardingStrategy sharding;
  bool gradient_as_bucket_view = false;  // DDP: the gradients are views of the buckets
};

struct Result {
  Stage stage;
  std::string run_file;
  analysis::RunStats stats;  // of run_file, on rank 0
};

Result train_stage(tutorials::Session& session, const Settings& settings, const tutorials::Workload& work,
                   const Stage& stage) {
  const tutorials::CommonOptions& options = session.options();
  const std::shared_ptr<models::Model> model = session.build_model(work.config);

  train::TrainConfig config;
  config.strategy = stage.strategy;
  config.sharding = stage.sharding;
  config.wrap_min_params = wrap_min_params(settings);
  config.reduce_bucket_mb = settings.reduce_bucket_mb;
  config.gradient_as_bucket_view = stage.gradient_as_bucket_view;

  Result result;
  result.stage = stage;
  tutorials::TracedRun run(session, stage.part);
  const bool fsdp = stage.strategy == train::Strategy::Fsdp;
  nlohmann::json described = nlohmann::json::object();
  if (fsdp) {
    described = {{"sharding", fsdp::to_string(stage.sharding)},
                 {"wrap_min_params", config.wrap_min_params},
                 {"reduce_bucket_mb", settings.reduce_bucket_mb}};
  } else if (stage.gradient_as_bucket_view) {
    described = {{"gradient_as_bucket_view", true}};
  }
  run.describe(stage.strategy, work.config.name, *model, described);
  {
    const std::unique_ptr<train::ParallelModel> parallel = train::make_parallel_model(
        config, model, run.group(), &run.recorder(), &run.memory_sampler());
    tutorials::ShardedBatches batches(work.data, session, work.batch_size, options.seed);
    // Momentum: optimizer state as large as the parameters it steps (DDP: all of them; FSDP: the
    // shards).
    torch::optim::SGD optimizer(parallel->optimizer_parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    // The peak of the training steps, not of construction (where the model exists twice while
    // FSDP flattens it): a fresh allocator peak, so the memory sampler records the steps' own
    // peak at the moment it happens (Note [Memory at the peak]).
    memory::TrackingAllocator::installed()->reset_peak();
    tutorials::train_steps(run, *parallel, *model, optimizer, batches, options.steps);
  }
  result.run_file = run.finish();
  if (session.leader()) result.stats = tutorials::read_stats(result.run_file);
  return result;
}

// "wte wpe ln_f lm_head": the model's top-level modules whose parameters a unit holds.
std::string unit_modules(const analysis::RunStats& stats, const analysis::UnitStats& unit) {
  std::vector<std::string> modules;
  for (const int32_t p : unit.params) {
    const std::string& name = stats.params.at(p).name;
    const std::string module = name.substr(0, name.find('.'));
    if (std::find(modules.begin(), modules.end(), module) == modules.end()) modules.push_back(module);
  }
  std::string text;
  for (const std::string& module : modules) text += (text.empty() ? "" : " ") + module;
  return text;
}

// The GPT's units are unlike each other, as a real model's are: four equal blocks and a small
// root. Each is flattened on its own and padded to a multiple of the ranks, so each rank's shards
// are the sum of per-unit shards (the layout the memory table's `shards` row holds).
void print_units(const analysis::RunStats& fsdp, int ranks) {
  std::printf("\nFSDP's units (both FSDP runs), each flattened into one vector, padded to a multiple of\n"
              "the %d ranks and cut into equal shards; full: one unit's full_parameters when gathered:\n", ranks);
  std::printf("  %-5s %-24s %9s %9s %9s %8s %11s\n", "unit", "modules", "elements", "padding", "per rank",
              "tensors", "full");
  int64_t shard_elements = 0;
  int64_t padding = 0;
  for (const analysis::UnitStats& u : fsdp.units) {
    const trace::UnitInfo& unit = u.unit;
    std::printf("  %-5d %-24s %9lld %9lld %9lld %8zu %11s\n", unit.index, unit_modules(fsdp, u).c_str(),
                static_cast<long long>(unit.numel), static_cast<long long>(unit.padded_numel - unit.numel),
                static_cast<long long>(unit.shard_numel), u.params.size(),
                tutorials::bytes_text(4 * unit.padded_numel).c_str());
    shard_elements += unit.shard_numel;
    padding += unit.padded_numel - unit.numel;
  }
  std::printf("  Each rank's shards: %lld elements, %s (%lld of them padding, on the last rank).\n",
              static_cast<long long>(shard_elements), tutorials::bytes_text(4 * shard_elements).c_str(),
              static_cast<long long>(padding));
}

void run(tutorials::Session& session, const Settings& settings) {
  const tutorials::Workload work =
      tutorials::make_workload(settings.model, settings.sizes, kMlp, session.options().seed);
  const bool gpt = work.config.name == "gpt";
  session.say("== %s: %s (%lld %s of %lld) with DDP, ZeRO-2 and ZeRO-3 on %d rank(s), %lld steps, "
              "SGD with momentum ==\n", kProgram, gpt ? "a GPT" : "an MLP",
              static_cast<long long>(*work.config.layers), gpt ? "blocks" : "layers",
              static_cast<long long>(*work.config.hidden), session.world_size(),
              static_cast<long long>(session.options().steps));
  const std::vector<Stage> stages = {
      {"ddp", "DDP", train::Strategy::Ddp, fsdp::ShardingStrategy::FullShard},
      {"ddp-bucket-view", "DDP (view)", train::Strategy::Ddp, fsdp::ShardingStrategy::FullShard, true},
      {"grad-op", "SHARD_GRAD_OP", train::Strategy::Fsdp, fsdp::ShardingStrategy::ShardGradOp},
      {"full-shard", "FULL_SHARD", train::Strategy::Fsdp, fsdp::ShardingStrategy::FullShard},
  };
  std::vector<Result> results;
  for (const Stage& stage : stages) results.push_back(train_stage(session, settings, work, stage));
  if (!session.leader()) return;

  std::vector<tutorials::LabelledRun> runs;
  for (const Result& r : results) runs.push_back({r.stage.label, &r.stats});
  if (gpt) print_units(results.back().stats, session.world_size());
  tutorials::print_step_memory_peaks(runs);
  // What stays between steps shows DDP's bucket copy without the moments a step adds to it.
  std::printf("\nAfter the steps (what rank 0 keeps between steps, as `dpscope stats` prints \"memory after\n"
              "the steps\"), MiB:");
  for (const Result& r : results) {
    std::printf("  %s %.2f", r.stage.label.c_str(),
                static_cast<double>(tutorials::rank_stats(r.stats, 0).memory_after_steps.total_bytes) / (1 << 20));
  }
  std::printf("\n");
  tutorials::print_ring_traffic(runs, session.world_size());
  tutorials::print_clocks(runs);
  std::printf("  DDP all-reduces the gradients once: 2(n-1)/n N. FULL_SHARD gathers each unit's\n"
              "  parameters twice (forward, and again for backward) and reduce-scatters its gradients:\n"
              "  3(n-1)/n N, 1.5 times DDP's. SHARD_GRAD_OP keeps the parameters gathered in forward\n"
              "  for backward: 2(n-1)/n N, as DDP.\n");
  if (gpt) {
    std::printf("  The exception is the root unit (wte wpe ln_f lm_head): FSDP does not free it after\n"
                "  forward, whose end its backward follows at once, so it is gathered once, and\n"
                "  FULL_SHARD sends a little under 1.5 times DDP's bytes.\n");
  }
  std::printf(
      "\nWhat each keeps per rank (N = the model's parameter bytes, W = %d ranks):\n"
      "  DDP            parameters N, gradients N, buckets N (the all-reduce buffers; a gradient\n"
      "                 copy), momentum N.\n"
      "  DDP (view)     the same with gradient_as_bucket_view (tutorial 05): the gradients are views\n"
      "                 of the buckets, one copy less.\n"
      "  SHARD_GRAD_OP  shards N/W, gradient shards N/W, momentum N/W; full parameters of every\n"
      "                 unit from forward to backward (N at the end of forward), full gradients of\n"
      "                 the unit being reduced (ZeRO-2: gradients and optimizer state sharded).\n"
      "                 Its parameters, shards and full ones together, are more than DDP's N\n"
      "                 early in backward: it saves on gradients and momentum, not parameters.\n"
      "  FULL_SHARD     the same shards, but each unit's full parameters only while it runs: one or\n"
      "                 two units' worth at a time (ZeRO-3: parameters sharded too).\n"
      "  ZeRO-1 (optimizer state sharded, gradients whole) is not a mode of FSDP, which\n"
      "  reduce-scatters gradients by construction (ZeRO-2 already): it is an optimizer,\n"
      "  zero::ZeroRedundancyOptimizer, in tutorial 13 beside these three.\n"
      "\nOpen two: dpscope-view %s --compare %s\n",
      session.world_size(), results.front().run_file.c_str(), results.back().run_file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 12;
  Settings settings;
  CLI::App app{"Tutorial 12: ZeRO side by side — DDP, SHARD_GRAD_OP and FULL_SHARD memory by category"};
  tutorials::add_common_options(app, options);
  tutorials::add_workload_options(app, settings.model, settings.sizes, kMlp, "a unit per block");
  app.add_option("--wrap-min-params", settings.wrap_min_params,
                 "A submodule with at least this many parameter elements becomes a unit "
                 "(mlp 50000: every hidden Linear; gpt 100000: every block)")
      ->check(CLI::PositiveNumber);
  app.add_option("--reduce-bucket-mb", settings.reduce_bucket_mb,
                 "FSDP's reduce-scatter bucket over all ranks (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
