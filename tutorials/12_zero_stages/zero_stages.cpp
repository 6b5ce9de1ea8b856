// Tutorial 12: ZeRO's stages side by side. Trains one MLP with DDP (with and without
// gradient_as_bucket_view), FSDP SHARD_GRAD_OP (ZeRO-2) and FSDP FULL_SHARD (ZeRO-3) on the same
// ranks and data, and prints each rank's peak memory in
// the training steps with what it held at that moment by category, read from the runs' traces as
// `dpscope stats` reads them (RankStats::step_memory_peak).
#include <torch/optim/sgd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/models/models.h"
#include "engine/train/parallel_model.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-12-zero-stages";

struct Settings {
  int64_t hidden = 1024;
  // Deep enough that SHARD_GRAD_OP, which keeps every unit's full parameters until its backward,
  // visibly holds more than FULL_SHARD's one or two units at a time.
  int64_t layers = 6;
  // Every hidden Linear of the MLP (66,560 elements and up) is a unit; the output layer (10,250)
  // stays in the root.
  int64_t wrap_min_params = 50000;
  // No reduce-scatter bucket: a bucket holds full-size gradients until it is flushed, and one big
  // enough to collect every unit would hold the whole model's gradients — DDP's cost — at the end
  // of backward, hiding what the sharding saves. 0 sends each unit's gradient as it is ready.
  double reduce_bucket_mb = 0;
  int64_t batch_size = 32;
};

struct Stage {
  std::string part;   // trace folder
  std::string label;  // what the table says
  train::Strategy strategy;
  std::string sharding;
  bool gradient_as_bucket_view = false;  // DDP: the gradients are views of the buckets
};

struct Result {
  Stage stage;
  std::string run_file;
  trace::RunStats stats;  // of run_file, on rank 0
};

Result train_stage(tutorials::Session& session, const Settings& settings, const Stage& stage) {
  const tutorials::CommonOptions& options = session.options();
  models::ModelConfig model_config;
  model_config.name = "mlp";
  model_config.hidden = settings.hidden;
  model_config.layers = settings.layers;
  const std::shared_ptr<models::Model> model = session.build_model(model_config);

  train::TrainConfig config;
  config.strategy = stage.strategy;
  config.sharding = stage.sharding;
  config.wrap_min_params = settings.wrap_min_params;
  config.reduce_bucket_mb = settings.reduce_bucket_mb;
  config.gradient_as_bucket_view = stage.gradient_as_bucket_view;

  Result result;
  result.stage = stage;
  tutorials::TracedRun run(session, stage.part);
  char json[160];
  std::snprintf(json, sizeof(json), "{\"sharding\":\"%s\",\"wrap_min_params\":%lld,\"reduce_bucket_mb\":%g}",
                stage.sharding.c_str(), static_cast<long long>(settings.wrap_min_params),
                settings.reduce_bucket_mb);
  const char* ddp_json = stage.gradient_as_bucket_view ? "{\"gradient_as_bucket_view\":true}" : "{}";
  run.describe(stage.strategy == train::Strategy::Fsdp ? "fsdp" : "ddp", "mlp", *model,
               stage.strategy == train::Strategy::Fsdp ? json : ddp_json);
  {
    const std::unique_ptr<train::ParallelModel> parallel = train::make_parallel_model(
        config, model, run.group(), &run.recorder(), &run.memory_sampler());
    tutorials::ShardedBatches batches(data::make_synthetic_classification(2048, 64, 10, options.seed),
                                      session, settings.batch_size, options.seed);
    // Momentum: optimizer state as large as the parameters it steps (DDP: all of them; FSDP: the
    // shards).
    torch::optim::SGD optimizer(parallel->optimizer_parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    // The peak of the training steps, not of construction (where the model exists twice while
    // FSDP flattens it): a fresh allocator peak, so the memory sampler records the steps' own
    // peak at the moment it happens (Note [Memory at the peak]).
    memory::TrackingAllocator::installed()->reset_peak();
    for (int32_t i = 0; i < options.steps; ++i) {
      const data::Dataset batch = batches.next();
      tutorials::Step step(run, i);
      tutorials::zero_grad(optimizer);
      const at::Tensor loss = step.forward([&] { return model->loss(parallel->forward(batch.x), batch.y); });
      step.backward(loss);
      parallel->finish_backward();
      step.optimizer_step(optimizer);
    }
  }
  result.run_file = run.finish();
  if (session.leader()) result.stats = tutorials::read_stats(result.run_file);
  return result;
}

void run(tutorials::Session& session, const Settings& settings) {
  session.say("== %s: an MLP (%lld layers of %lld) with DDP, ZeRO-2 and ZeRO-3 on %d rank(s), %lld steps, "
              "SGD with momentum ==\n", kProgram, static_cast<long long>(settings.layers),
              static_cast<long long>(settings.hidden), session.world_size(),
              static_cast<long long>(session.options().steps));
  const std::vector<Stage> stages = {
      {"ddp", "DDP", train::Strategy::Ddp, "full"},
      {"ddp-bucket-view", "DDP (view)", train::Strategy::Ddp, "full", true},
      {"grad-op", "SHARD_GRAD_OP", train::Strategy::Fsdp, "grad_op"},
      {"full-shard", "FULL_SHARD", train::Strategy::Fsdp, "full"},
  };
  std::vector<Result> results;
  for (const Stage& stage : stages) results.push_back(train_stage(session, settings, stage));
  if (!session.leader()) return;

  std::vector<tutorials::LabelledRun> runs;
  for (const Result& r : results) runs.push_back({r.stage.label, &r.stats});
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
  std::printf("  DDP all-reduces the gradients once: 2(n-1)/n N. FULL_SHARD gathers each unit's\n"
              "  parameters twice (forward, and again for backward) and reduce-scatters its gradients:\n"
              "  3(n-1)/n N, 1.5 times DDP's. SHARD_GRAD_OP keeps the parameters gathered in forward\n"
              "  for backward: 2(n-1)/n N, as DDP.\n");
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
  options.steps = 4;
  Settings settings;
  CLI::App app{"Tutorial 12: ZeRO side by side — DDP, SHARD_GRAD_OP and FULL_SHARD memory by category"};
  tutorials::add_common_options(app, options);
  app.add_option("--hidden", settings.hidden, "MLP width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--layers", settings.layers, "MLP hidden layers")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--wrap-min-params", settings.wrap_min_params,
                 "A submodule with at least this many parameter elements becomes a unit")
      ->capture_default_str();
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
