// Tutorial 14: FSDP mixed precision and CPU offload. Trains one MLP under FULL_SHARD four times on
// the same ranks and batches — float32, bf16, bf16 reducing in float32, float32 with CPU offload —
// and prints, read back from each run's trace, the bytes per step of each collective kind, the
// memory at the peak by category and the loss; then what offload would move on a GPU.
#include <torch/optim/sgd.h>

#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/models/models.h"
#include "engine/train/parallel_model.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-14-mixed-precision-offload";

struct Settings {
  int64_t hidden = 1024;
  int64_t layers = 6;
  // Every hidden Linear (66,560 elements and up) is a unit; the output layer stays in the root.
  int64_t wrap_min_params = 50000;
  int64_t batch_size = 32;
  double lr = 0.01;
  int32_t iteration = 2;  // the step whose collectives are counted (the first steady one)
};

struct Setting {
  std::string part;   // trace folder
  std::string label;  // what the tables say
  fsdp::ComputePrecision mixed_precision;
  bool reduce_fp32 = false;
  bool cpu_offload = false;
};

struct Result {
  Setting setting;
  std::string run_file;
  analysis::RunStats stats;  // of run_file, on rank 0
};

Result train_setting(tutorials::Session& session, const Settings& settings, const Setting& setting) {
  const tutorials::CommonOptions& options = session.options();
  models::ModelConfig model_config;
  model_config.name = "mlp";
  model_config.hidden = settings.hidden;
  model_config.layers = settings.layers;
  const std::shared_ptr<models::Model> model = session.build_model(model_config);

  train::TrainConfig config;
  config.strategy = train::Strategy::Fsdp;
  config.sharding = fsdp::ShardingStrategy::FullShard;
  config.wrap_min_params = settings.wrap_min_params;
  config.mixed_precision = setting.mixed_precision;
  config.reduce_fp32 = setting.reduce_fp32;
  config.cpu_offload = setting.cpu_offload;
  // No reduce-scatter bucket: every unit's gradient goes out on its own, so each reduce-scatter
  // is one unit's full gradient in the reduce dtype.
  config.reduce_bucket_mb = 0;

  Result result;
  result.setting = setting;
  tutorials::TracedRun run(session, setting.part);
  run.describe(trace::Strategy::Fsdp, "mlp", *model,
               {{"sharding", "full"},
                {"wrap_min_params", settings.wrap_min_params},
                {"mixed_precision", fsdp::to_string(setting.mixed_precision)},
                {"reduce_fp32", setting.reduce_fp32},
                {"cpu_offload", setting.cpu_offload},
                {"reduce_bucket_mb", 0}});
  {
    const std::unique_ptr<train::ParallelModel> parallel = train::make_parallel_model(
        config, model, run.group(), &run.recorder(), &run.memory_sampler());
    tutorials::ShardedBatches batches(data::make_synthetic_classification(2048, 64, 10, options.seed),
                                      session, settings.batch_size, options.seed);
    // The optimizer steps the float32 shards whatever the compute dtype: the master weights.
    torch::optim::SGD optimizer(parallel->optimizer_parameters(), torch::optim::SGDOptions(settings.lr).momentum(0.9));
    // The steps' own peak, not construction's (Note [Memory at the peak]).
    memory::TrackingAllocator::installed()->reset_peak();
    tutorials::train_steps(run, *parallel, *model, optimizer, batches, options.steps);
  }
  result.run_file = run.finish();
  if (session.leader()) result.stats = tutorials::read_stats(result.run_file);
  return result;
}

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", static_cast<double>(bytes) / (1 << 20));
  return text;
}

const analysis::RankStats& rank0(const Result& r) { return tutorials::rank_stats(r.stats, 0); }

// The dtype rank 0's collectives of kind `op` carried in `iteration`, as the trace names it.
std::string dtype_of(const Result& r, int32_t iteration, trace::CollectiveOp op) {
  for (const analysis::CollectiveStats& c : rank0(r).collectives) {
    if (c.iteration == iteration && c.op == op && c.dtype != 0xff) {
      return std::string(trace::to_string(static_cast<trace::DType>(c.dtype)));
    }
  }
  return "-";
}

void print_bytes(const std::vector<Result>& results, int32_t iteration) {
  std::printf("\nBytes per step by collective kind (rank 0, iteration %d; AG: all-gathers, RS: reduce-scatters;\n"
              "bytes: the payload a rank hands them, as the trace records it: an all-gather its shard,\n"
              "a reduce-scatter the unit's full gradient):\n", iteration);
  std::printf("  %-18s %4s %12s %9s %7s   %4s %12s %9s %7s\n", "run", "AG", "bytes", "dtype", "of fp32",
              "RS", "bytes", "dtype", "of fp32");
  const analysis::RankStats& base = rank0(results.front());
  const double base_ag = static_cast<double>(tutorials::collective_bytes_in(base, iteration, trace::CollectiveOp::AllGather));
  const double base_rs = static_cast<double>(tutorials::collective_bytes_in(base, iteration, trace::CollectiveOp::ReduceScatter));
  for (const Result& r : results) {
    const int64_t ag = tutorials::collective_bytes_in(rank0(r), iteration, trace::CollectiveOp::AllGather);
    const int64_t rs = tutorials::collective_bytes_in(rank0(r), iteration, trace::CollectiveOp::ReduceScatter);
    std::printf("  %-18s %4lld %12lld %9s %7.2f   %4lld %12lld %9s %7.2f\n", r.setting.label.c_str(),
                static_cast<long long>(tutorials::collectives_in(rank0(r), iteration, trace::CollectiveOp::AllGather)),
                static_cast<long long>(ag), dtype_of(r, iteration, trace::CollectiveOp::AllGather).c_str(),
                static_cast<double>(ag) / base_ag,
                static_cast<long long>(tutorials::collectives_in(rank0(r), iteration, trace::CollectiveOp::ReduceScatter)),
                static_cast<long long>(rs), dtype_of(r, iteration, trace::CollectiveOp::ReduceScatter).c_str(),
                static_cast<double>(rs) / base_rs);
  }
}

void print_memory(const std::vector<Result>& results) {
  std::vector<tutorials::LabelledRun> runs;
  for (const Result& r : results) runs.push_back({r.setting.label, &r.stats});
  tutorials::print_step_memory_peaks(runs);
  std::printf("  other (bf16 only): Gloo has no bfloat16 sum, so dpscope's Gloo backend reduce-scatters a\n"
              "  float32 copy, made on its communication thread, which names no category. NCCL sums bf16.\n");
}

std::optional<double> loss_at(const Result& r, int32_t iteration) {
  const std::vector<analysis::IterationStats>& iterations = rank0(r).iterations;
  if (iteration < 0 || iteration >= static_cast<int32_t>(iterations.size())) return std::nullopt;
  return iterations[iteration].loss;
}

void print_losses(const std::vector<Result>& results, int32_t last) {
  std::printf("\nLoss of rank 0's batch (metric \"loss\" in each trace), and its difference from fp32's:\n");
  std::printf("  %-18s %10s %10s %10s %10s\n", "run", "step 0", "vs fp32", "last step", "vs fp32");
  const double base_first = loss_at(results.front(), 0).value_or(0);
  const double base_last = loss_at(results.front(), last).value_or(0);
  for (const Result& r : results) {
    const double first = loss_at(r, 0).value_or(0), final = loss_at(r, last).value_or(0);
    std::printf("  %-18s %10.6f %+10.1e %10.6f %+10.1e\n", r.setting.label.c_str(), first,
                first - base_first, final, final - base_last);
  }
}

// What CPU offload would move between a GPU and its host each step, read from the offload run's
// trace: every all-gather's input is the shard copied host-to-device in the compute dtype, every
// reduce-scatter's output (its input / ranks) comes back device-to-host in the reduce dtype; and
// what it keeps off the GPU: the categories that live with the shards.
void print_offload(const Result& plain, const Result& offload, int32_t iteration, int ranks) {
  const analysis::RankStats& on = rank0(plain);
  const analysis::RankStats& off = rank0(offload);
  const int64_t to_device = tutorials::collective_bytes_in(off, iteration, trace::CollectiveOp::AllGather);
  const int64_t scattered = tutorials::collective_bytes_in(off, iteration, trace::CollectiveOp::ReduceScatter);
  const bool same_bytes =
      to_device == tutorials::collective_bytes_in(on, iteration, trace::CollectiveOp::AllGather) &&
      scattered == tutorials::collective_bytes_in(on, iteration, trace::CollectiveOp::ReduceScatter);
  bool same_loss = on.iterations.size() == off.iterations.size();
  for (int32_t i = 0; same_loss && i < static_cast<int32_t>(off.iterations.size()); ++i) {
    same_loss = loss_at(plain, i) == loss_at(offload, i);
  }
  const analysis::MemoryAtPeak& peak = off.step_memory_peak;
  const int64_t host_side = peak.bytes(trace::MemoryCategory::Shards) +
                            peak.bytes(trace::MemoryCategory::GradientShards) +
                            peak.bytes(trace::MemoryCategory::OptimizerState);
  std::printf("\nCPU offload here: the compute device is the CPU, so the shards are on the host already and\n"
              "nothing is copied. Against the fp32 run: peak %s MiB against %s, %s bytes per step,\n"
              "%s loss at every step.\n",
              mib(peak.total_bytes).c_str(), mib(on.step_memory_peak.total_bytes).c_str(),
              same_bytes ? "the same" : "DIFFERENT", same_loss ? "the same" : "a DIFFERENT");
  std::printf("On a GPU the same step would copy, per rank (this trace's collectives):\n"
              "  host to device %12lld B  each all-gather's input: the shard, in the compute dtype\n"
              "  device to host %12lld B  each reduce-scatter's output: this rank's reduced gradient\n"
              "and keep off the GPU what sits with the shards, at this run's peak: shards +\n"
              "gradient_shards + optimizer_state = %s of its %s MiB; the optimizer steps on the CPU.\n",
              static_cast<long long>(to_device), static_cast<long long>(scattered / ranks),
              mib(host_side).c_str(), mib(peak.total_bytes).c_str());
}

void run(tutorials::Session& session, const Settings& settings) {
  const int64_t steps = session.options().steps;
  if (steps <= settings.iteration) {
    throw std::invalid_argument("--steps " + std::to_string(steps) + " is too few: the bytes per step are "
                                "counted in iteration " + std::to_string(settings.iteration) +
                                "; give --steps " + std::to_string(settings.iteration + 1) + " or more");
  }
  session.say("== %s: FSDP FULL_SHARD of an MLP (%lld layers of %lld) on %d rank(s), %lld steps: "
              "fp32, bf16, bf16 + reduce_fp32, fp32 + CPU offload ==\n", kProgram,
              static_cast<long long>(settings.layers), static_cast<long long>(settings.hidden),
              session.world_size(), static_cast<long long>(steps));
  const std::vector<Setting> all = {
      {"fp32", "fp32", fsdp::ComputePrecision::Fp32, false, false},
      {"bf16", "bf16", fsdp::ComputePrecision::Bf16, false, false},
      {"bf16-reduce-fp32", "bf16 reduce_fp32", fsdp::ComputePrecision::Bf16, true, false},
      {"fp32-offload", "fp32 cpu_offload", fsdp::ComputePrecision::Fp32, false, true},
  };
  std::vector<Result> results;
  for (const Setting& setting : all) results.push_back(train_setting(session, settings, setting));
  if (!session.leader()) return;

  print_bytes(results, settings.iteration);
  print_memory(results);
  print_losses(results, static_cast<int32_t>(steps) - 1);
  print_offload(results.front(), results.back(), settings.iteration, session.world_size());
  std::printf("\nfp16 is not run: LibTorch 1.13 has no float16 matrix multiply on the CPU, so the engine\n"
              "refuses it there; on a GPU its bytes and memory are bf16's (2 bytes an element).\n");
  std::printf("\nOpen two: dpscope-view %s --compare %s\n", results[0].run_file.c_str(),
              results[1].run_file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 8;
  Settings settings;
  CLI::App app{"Tutorial 14: FSDP mixed precision (bf16, reduce_fp32) and CPU offload: bytes, memory, loss"};
  tutorials::add_common_options(app, options);
  app.add_option("--hidden", settings.hidden, "MLP width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--layers", settings.layers, "MLP hidden layers")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--lr", settings.lr, "SGD learning rate (momentum 0.9)")->check(CLI::PositiveNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
