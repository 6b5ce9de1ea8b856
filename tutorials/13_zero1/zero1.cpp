// Tutorial 13: ZeRO-1, the optimizer state sharded. Trains one MLP with Adam four ways on the same
// ranks and batches — DDP, ZeRO-1 (engine/zero), FSDP SHARD_GRAD_OP (ZeRO-2) and FULL_SHARD
// (ZeRO-3) — and checks ZeRO's memory formulas and its bytes on the wire against the traces.
#include <torch/optim/adam.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/models.h"
#include "engine/train/parallel_model.h"
#include "engine/zero/zero_redundancy_optimizer.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-13-zero1";

struct Settings {
  int64_t hidden = 1024;
  int64_t layers = 6;
  int64_t wrap_min_params = 50000;  // every Linear an FSDP unit (tutorial 12)
  int64_t batch_size = 32;
  double lr = 1e-3;
};

enum class Stage { Ddp, Zero1, Zero2, Zero3 };

struct Result {
  Stage stage;
  std::string label;
  std::string run_file;
  analysis::RunStats stats;             // of run_file, on rank 0
  std::vector<float> final;          // the parameters after the last step (DDP and ZeRO-1)
  double last_loss = 0;
  int64_t shard_numel = 0;           // ZeRO-1: elements per rank's shard
  int64_t parameters = 0;            // the model's parameter elements (psi)
};

const char* label_of(Stage stage) {
  switch (stage) {
    case Stage::Ddp: return "DDP";
    case Stage::Zero1: return "ZeRO-1";
    case Stage::Zero2: return "ZeRO-2";
    case Stage::Zero3: return "ZeRO-3";
  }
  return "?";
}

const char* part_of(Stage stage) {
  switch (stage) {
    case Stage::Ddp: return "ddp";
    case Stage::Zero1: return "zero1";
    case Stage::Zero2: return "grad-op";
    case Stage::Zero3: return "full-shard";
  }
  return "?";
}

torch::optim::AdamOptions adam(const Settings& settings) { return torch::optim::AdamOptions(settings.lr); }

// The training loop every stage shares; `forward` runs the model through its wrapper, `after_backward`
// ends FSDP's backward, `optimizer` steps.
template <typename Forward, typename AfterBackward>
double train_steps(tutorials::Session& session, tutorials::TracedRun& run, const Settings& settings,
                   models::Model& model, torch::optim::Optimizer& optimizer, Forward&& forward,
                   AfterBackward&& after_backward) {
  const tutorials::CommonOptions& options = session.options();
  tutorials::ShardedBatches batches(data::make_synthetic_classification(2048, 64, 10, options.seed), session,
                                    settings.batch_size, options.seed);
  // The peak of the steps, not of construction (Note [Memory at the peak]).
  memory::TrackingAllocator::installed()->reset_peak();
  double loss_value = 0;
  for (int32_t i = 0; i < options.steps; ++i) {
    const data::Dataset batch = batches.next();
    tutorials::Step step(run, i);
    tutorials::zero_grad(optimizer);
    const at::Tensor loss = step.forward([&] { return model.loss(forward(batch.x), batch.y); });
    step.backward(loss);
    after_backward();
    step.optimizer_step(optimizer);
    loss_value = step.loss();
  }
  return loss_value;
}

Result train_stage(tutorials::Session& session, const Settings& settings, Stage stage) {
  models::ModelConfig model_config;
  model_config.name = "mlp";
  model_config.hidden = settings.hidden;
  model_config.layers = settings.layers;
  const std::shared_ptr<models::Model> model = session.build_model(model_config);

  Result result;
  result.stage = stage;
  result.label = label_of(stage);
  for (const at::Tensor& p : model->parameters()) result.parameters += p.numel();
  tutorials::TracedRun run(session, part_of(stage));
  if (stage == Stage::Zero1) {
    run.describe(trace::Strategy::Zero1, "mlp", *model, "{\"optimizer\":\"adam\"}");
    zero::ZeroRedundancyOptimizer optimizer(model->parameters(), run.group(), [&](std::vector<at::Tensor> shard) {
      return std::make_unique<torch::optim::Adam>(shard, adam(settings));
    });
    result.shard_numel = optimizer.shard_numel();
    result.last_loss = train_steps(
        session, run, settings, *model, optimizer, [&](const at::Tensor& x) { return model->forward(x); }, [] {});
    result.final = tutorials::untracked_copy(model->parameters());
  } else {
    train::TrainConfig config;
    config.strategy = stage == Stage::Ddp ? train::Strategy::Ddp : train::Strategy::Fsdp;
    config.sharding = stage == Stage::Zero2 ? fsdp::ShardingStrategy::ShardGradOp : fsdp::ShardingStrategy::FullShard;
    config.wrap_min_params = settings.wrap_min_params;
    config.reduce_bucket_mb = 0;  // each unit's gradient goes out when ready (tutorial 12)
    run.describe(config.strategy, "mlp", *model,
                 stage == Stage::Ddp ? "{\"optimizer\":\"adam\"}"
                                     : (std::string("{\"optimizer\":\"adam\",\"sharding\":\"") + std::string(fsdp::to_string(config.sharding)) +
                                        "\",\"reduce_bucket_mb\":0}").c_str());
    const std::unique_ptr<train::ParallelModel> parallel =
        train::make_parallel_model(config, model, run.group(), &run.recorder(), &run.memory_sampler());
    torch::optim::Adam optimizer(parallel->optimizer_parameters(), adam(settings));
    result.last_loss = train_steps(
        session, run, settings, *model, optimizer, [&](const at::Tensor& x) { return parallel->forward(x); },
        [&] { parallel->finish_backward(); });
    if (stage == Stage::Ddp) result.final = tutorials::untracked_copy(model->parameters());
  }
  result.run_file = run.finish();
  if (session.leader()) result.stats = tutorials::read_stats(result.run_file);
  return result;
}

double mib(double bytes) { return bytes / (1 << 20); }

// What rank 0 held after the steps (RankStats::memory_after_steps), summed over `categories`.
int64_t after_steps(const Result& r, std::initializer_list<trace::MemoryCategory> categories) {
  const analysis::MemoryAtPeak& memory = tutorials::rank_stats(r.stats, 0).memory_after_steps;
  int64_t bytes = 0;
  for (const trace::MemoryCategory c : categories) bytes += memory.bytes(c);
  return bytes;
}

// ZeRO's formula for the model states per rank (the paper's Figure 1) beside what rank 0 held
// after the steps, when only what persists between steps is left: parameters, gradients,
// optimizer state, and the communication buffers the formula leaves out (DDP's buckets,
// ZeRO-1's reduce-scatter output). The peak, inside a step, adds activations, FSDP's full
// parameters and gradients of the units in use, and the optimizer's temporaries.
void print_formulas(const std::vector<Result>& results, int64_t psi, int ranks) {
  const double n = ranks, p = static_cast<double>(psi);
  std::printf("\nZeRO's model states per rank, formula against the trace (p = %lld parameters, n = %d;\n"
              "fp32 Adam: 4 bytes per parameter, 4 per gradient, K = 8 of optimizer state; MiB after the\n"
              "last step, as `dpscope stats` prints \"memory after the steps\"):\n",
              static_cast<long long>(psi), ranks);
  std::printf("  %-7s %-18s %8s %9s | %8s %8s %8s %8s | %9s\n", "stage", "formula", "formula", "measured",
              "params", "grads", "optim", "buffers", "peak");
  for (const Result& r : results) {
    const char* formula = "";
    double predicted = 0;
    switch (r.stage) {
      case Stage::Ddp: formula = "4p + 4p + 8p"; predicted = 16 * p; break;
      case Stage::Zero1: formula = "4p + 4p + 8p/n"; predicted = 8 * p + 8 * p / n; break;
      case Stage::Zero2: formula = "4p + (4p + 8p)/n"; predicted = 4 * p + 12 * p / n; break;
      case Stage::Zero3: formula = "(4p + 4p + 8p)/n"; predicted = 16 * p / n; break;
    }
    using C = trace::MemoryCategory;
    const int64_t params = after_steps(r, {C::Parameters, C::Shards, C::FullParameters});
    // FSDP's gradient shards are the sharded gradients themselves; ZeRO-1's is the reduce-scatter's
    // output beside the whole gradients, a communication buffer as DDP's buckets are.
    const bool shard_is_buffer = r.stage == Stage::Zero1;
    const int64_t grads = after_steps(r, {C::Gradients, C::FullGradients}) +
                          (shard_is_buffer ? 0 : after_steps(r, {C::GradientShards}));
    const int64_t optim = after_steps(r, {C::OptimizerState});
    const int64_t buffers = after_steps(r, {C::Buckets}) + (shard_is_buffer ? after_steps(r, {C::GradientShards}) : 0);
    const int64_t peak = tutorials::rank_stats(r.stats, 0).step_memory_peak.total_bytes;
    std::printf("  %-7s %-18s %8.2f %9.2f | %8.2f %8.2f %8.2f %8.2f | %9.2f\n", r.label.c_str(), formula,
                mib(predicted), mib(static_cast<double>(params + grads + optim)), mib(static_cast<double>(params)),
                mib(static_cast<double>(grads)), mib(static_cast<double>(optim)), mib(static_cast<double>(buffers)),
                mib(static_cast<double>(peak)));
  }
  std::printf("  ZeRO-2 is FSDP's SHARD_GRAD_OP: between steps it keeps only the shards, as ZeRO-3 does; the\n"
              "  paper's stage 2 keeps the parameters whole. SHARD_GRAD_OP holds them whole from forward to\n"
              "  backward instead: see the peak, and tutorial 12.\n");
  std::printf("  With mixed precision (the paper's case: 2 bytes of fp16 parameters, 2 of gradients, K = 12\n"
              "  of fp32 master weights and moments) the same model would need per rank: DDP %.2f,\n"
              "  ZeRO-1 %.2f, ZeRO-2 %.2f, ZeRO-3 %.2f MiB.\n",
              mib(16 * p), mib(4 * p + 12 * p / n), mib(2 * p + 14 * p / n), mib(16 * p / n));
}

void run(tutorials::Session& session, const Settings& settings) {
  session.say("== %s: an MLP (%lld layers of %lld) with Adam: DDP, ZeRO-1, ZeRO-2 and ZeRO-3 on %d rank(s), "
              "%lld steps ==\n", kProgram, static_cast<long long>(settings.layers),
              static_cast<long long>(settings.hidden), session.world_size(),
              static_cast<long long>(session.options().steps));
  std::vector<Result> results;
  for (const Stage stage : {Stage::Ddp, Stage::Zero1, Stage::Zero2, Stage::Zero3}) {
    results.push_back(train_stage(session, settings, stage));
  }
  // ZeRO-1 computes what DDP computes: its gradients are averaged by the reduce-scatter instead
  // of the all-reduce, and Adam steps each element the same way on a shard as on the whole.
  double difference = 0;
  for (size_t i = 0; i < results[0].final.size(); ++i) {
    difference = std::max(difference, std::abs(double(results[0].final[i]) - double(results[1].final[i])));
  }
  const std::vector<double> differences = session.gather(difference);
  if (!session.leader()) return;

  const Result& zero1 = results[1];
  const int64_t psi = zero1.parameters;
  std::printf("\nZeRO-1 against DDP after %lld steps: loss %.6f against %.6f; largest parameter difference\n"
              "on any rank %g%s.\n",
              static_cast<long long>(session.options().steps), zero1.last_loss, results[0].last_loss,
              *std::max_element(differences.begin(), differences.end()),
              *std::max_element(differences.begin(), differences.end()) == 0 ? " (bit for bit)" : "");
  std::printf("Each rank's Adam steps a shard of %lld of the %lld parameters (%d ranks, padded to a multiple):\n"
              "its exp_avg and exp_avg_sq are %s together, DDP's %s.\n",
              static_cast<long long>(zero1.shard_numel), static_cast<long long>(psi), session.world_size(),
              tutorials::bytes_text(8 * zero1.shard_numel).c_str(), tutorials::bytes_text(8 * psi).c_str());

  std::vector<tutorials::LabelledRun> runs;
  for (const Result& r : results) runs.push_back({r.label, &r.stats});
  tutorials::print_step_memory_peaks(runs);
  print_formulas(results, psi, session.world_size());
  tutorials::print_ring_traffic(runs, session.world_size());
  tutorials::print_clocks(runs);
  std::printf("  ZeRO-1 reduce-scatters the gradients and all-gathers the parameters: the two halves of\n"
              "  DDP's all-reduce, 2(n-1)/n N. ZeRO-2 the same; ZeRO-3 gathers twice, 3(n-1)/n N.\n"
              "\nOpen two: dpscope-view %s --compare %s\n",
              results[0].run_file.c_str(), zero1.run_file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 12;
  Settings settings;
  CLI::App app{"Tutorial 13: ZeRO-1 — the optimizer state sharded, beside DDP, ZeRO-2 and ZeRO-3"};
  tutorials::add_common_options(app, options);
  app.add_option("--hidden", settings.hidden, "MLP width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--layers", settings.layers, "MLP hidden layers")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--lr", settings.lr, "Adam's learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
