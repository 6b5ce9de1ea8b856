// Tutorial 16: on GPUs. The training of tutorial 15 (the CNN on the digits, DDP then FSDP) with
// NCCL on one CUDA device per rank, where this build has CUDA and devices are visible; elsewhere
// it says what it would do and why it cannot here, and exits 0.
#include <torch/cuda.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/models/models.h"
#include "engine/train/parallel_model.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-16-gpus";

// Trains the CNN with `strategy` on this rank's GPU; returns the run file (rank 0).
std::string train_on_gpu(tutorials::Session& session, train::Strategy strategy, const data::Dataset& train_set) {
  const tutorials::CommonOptions& options = session.options();
  const bool fsdp = strategy == train::Strategy::Fsdp;
  session.seed_per_rank(options.seed);
  models::ModelConfig model_config;
  model_config.name = "cnn";
  std::shared_ptr<models::Model> model = models::make_model(model_config);
  model->to(session.device());

  train::TrainConfig config;
  config.strategy = strategy;
  config.backend = "nccl";
  config.device = "cuda";
  config.sharding = fsdp::ShardingStrategy::FullShard;
  config.wrap_min_params = 100;  // every layer of the CNN a unit, as in tutorial 15

  tutorials::TracedRun run(session, std::string(trace::to_string(strategy)));
  run.describe(strategy, "cnn", *model, fsdp ? "{\"sharding\":\"full\"}" : "{}");
  {
    const std::unique_ptr<train::ParallelModel> parallel = train::make_parallel_model(
        config, model, run.group(), &run.recorder(), &run.memory_sampler());
    session.say("%s: %s\n", fsdp ? "FSDP" : "DDP", parallel->describe().c_str());
    tutorials::ShardedBatches batches(train_set, session, 32, options.seed);
    torch::optim::SGD optimizer(parallel->optimizer_parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    tutorials::train_steps(run, *parallel, *model, optimizer, batches, options.steps);
  }
  return run.finish();
}

// Rank 0's last loss, median step time and peak CUDA memory, from the trace.
void print_run(const char* name, const std::string& path) {
  const analysis::RunStats stats = tutorials::read_stats(path);
  const analysis::RankStats& rank0 = tutorials::rank_stats(stats, 0);
  double last_loss = 0;
  for (const analysis::IterationStats& it : rank0.iterations) {
    if (it.loss) last_loss = *it.loss;
  }
  const int64_t cuda_peak = rank0.largest(trace::MemoryCategory::CudaAllocated);
  std::printf("%-5s last loss %.4f, median step %.2f ms, peak CUDA memory %s -> %s\n", name, last_loss,
              analysis::step_summary(rank0).median_ms, tutorials::bytes_text(cuda_peak).c_str(), path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 100;
  CLI::App app{"Tutorial 16: on GPUs — tutorial 15's training with NCCL"};
  tutorials::add_common_options(app, options);
  CLI11_PARSE(app, argc, argv);
  // Checked before the session: without CUDA the session cannot pick NCCL or a device.
  if (!torch::cuda::is_available()) {
#ifdef DPSCOPE_HAVE_CUDA
    const char* why = "this build has CUDA, but no CUDA device is visible";
#else
    const char* why = "this build is CPU-only: its LibTorch has no CUDA";
#endif
    // Every rank would say the same; rank 0 (or a run without a launcher) says it once.
    const char* rank = std::getenv("RANK");
    if (rank != nullptr && std::string(rank) != "0") return 0;
    std::printf(
        "%s: no GPU to run on (%s), so it trains nothing and exits.\n"
        "  On a machine with CUDA it would train tutorial 15's CNN with DDP and then FSDP, one GPU per\n"
        "  rank (cuda:LOCAL_RANK), over NCCL instead of Gloo, and print each run's step time and peak\n"
        "  CUDA memory from the traces (the viewer then shows NCCL stream lanes with GPU-timed\n"
        "  collectives). To run it: build dpscope against a CUDA LibTorch (DPSCOPE_WITH_CUDA, see\n"
        "  tutorials/16_gpus/README.md) on a machine with NVIDIA GPUs and NCCL, then\n"
        "    build/bin/dpscope launch -n <GPUs> -- build/bin/%s\n"
        "  Tutorial 15 runs the same training on the CPU with Gloo.\n",
        kProgram, why, kProgram);
    return 0;
  }
  return tutorials::guarded_main(kProgram, [&] {
    if (options.backend.empty()) options.backend = "nccl";
    tutorials::Session session(kProgram, options, argc, argv);
    session.say("== %s: the CNN on the digits on %d GPU(s) over %s, %lld steps ==\n", kProgram,
                session.world_size(), options.backend.c_str(), static_cast<long long>(options.steps));
    const data::Dataset train_set = data::load_digits(data::find_digits_file());
    const std::string ddp = train_on_gpu(session, train::Strategy::Ddp, train_set);
    const std::string fsdp = train_on_gpu(session, train::Strategy::Fsdp, train_set);
    if (!session.leader()) return;
    print_run("DDP", ddp);
    print_run("FSDP", fsdp);
    std::printf("\nOpen both: dpscope-view %s --compare %s\n", ddp.c_str(), fsdp.c_str());
  });
}
