// Tutorial 08: communication hooks. The same training with DDP's built-in all-reduce, with the
// fp16 compression hook and with PowerSGD, and the bytes each puts on the wire per iteration, read
// from the traces; also what the compression costs in accuracy of the averaged gradient.
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/ddp/distributed_data_parallel.h"
#include "engine/ddp/powersgd.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-08-comm-hooks";

struct Settings {
  int64_t hidden = 512;
  int64_t layers = 3;
  int powersgd_rank = 1;
  int powersgd_start = 2;
};

struct Outcome {
  std::string hook;
  std::string run_file;
  std::vector<at::Tensor> final_parameters;
  double compression_rate = 0;  // PowerSGD's own count: elements before / after compression
};

std::unique_ptr<ddp::CommHook> make_hook(const std::string& name, const Settings& settings) {
  if (name == "fp16") return ddp::make_fp16_compress_hook();
  if (name == "powersgd") {
    ddp::PowerSGDOptions options;
    // Rank-r approximations M ~ P Q^T of every gradient matrix: (rows + cols) * r numbers sent
    // instead of rows * cols.
    options.matrix_approximation_rank = settings.powersgd_rank;
    // Plain all-reduce for the first iterations; then compression, with error feedback (what
    // the approximation lost is added to the next iteration's gradient, so nothing is lost for
    // good) and warm start (last iteration's Q starts the next power iteration).
    options.start_powersgd_iter = settings.powersgd_start;
    return std::make_unique<ddp::PowerSGDHook>(options);
  }
  return nullptr;  // "allreduce": no hook, the Reducer's own all-reduce of float32 buckets
}

Outcome train(tutorials::Session& session, const Settings& settings, const std::string& hook_name) {
  const tutorials::CommonOptions& options = session.options();
  session.seed_per_rank(options.seed);
  models::ModelConfig config;
  config.name = "mlp";
  config.hidden = settings.hidden;
  config.layers = settings.layers;
  std::shared_ptr<models::Model> model = models::make_model(config);
  model->to(session.device());

  tutorials::TracedRun run(session, hook_name);
  run.describe(trace::Strategy::Ddp, "mlp", *model, "{\"comm_hook\":\"" + hook_name + "\"}");
  Outcome outcome;
  outcome.hook = hook_name;
  {
    ddp::DdpOptions ddp_options;
    ddp_options.recorder = &run.recorder();
    ddp::DistributedDataParallel ddp(model, run.group(), ddp_options);
    std::unique_ptr<ddp::CommHook> hook = make_hook(hook_name, settings);
    const auto* powersgd = dynamic_cast<const ddp::PowerSGDHook*>(hook.get());
    // Before the first backward: from now on the Reducer hands every full bucket to the hook.
    if (hook) ddp.register_comm_hook(std::move(hook));

    tutorials::ShardedBatches batches(data::make_synthetic_classification(2048, 64, 10, options.seed),
                                      session, 32, options.seed);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
    tutorials::train_steps(run, ddp, *model, optimizer, batches, options.steps);
    if (powersgd) outcome.compression_rate = powersgd->compression_rate();
  }
  for (const at::Tensor& p : model->parameters()) outcome.final_parameters.push_back(p.detach().clone().cpu());
  outcome.run_file = run.finish();
  return outcome;
}

// Relative difference of two parameter sets: |a - b| / |b| over all of them.
double relative_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]).to(at::kDouble).pow(2).sum().item<double>();
    norm += b[i].to(at::kDouble).pow(2).sum().item<double>();
  }
  return std::sqrt(diff / norm);
}

// "2.13 MiB in 1": one iteration's all-reduce payload on rank 0 and how many all-reduces.
std::string wire_text(const analysis::RankStats& rank, int32_t iteration, int64_t* bytes_out) {
  int64_t bytes = 0, count = 0;
  for (const analysis::CollectiveStats& c : rank.collectives) {
    if (c.iteration != iteration || c.op != trace::CollectiveOp::AllReduce) continue;
    bytes += c.bytes;
    ++count;
  }
  *bytes_out = bytes;
  return tutorials::bytes_text(bytes) + " in " + std::to_string(count);
}

void run(tutorials::Session& session, const Settings& settings) {
  const int64_t steps = session.options().steps;
  session.say("== %s: an MLP (%lld layers of %lld) with three communication hooks, %d rank(s) ==\n",
              kProgram, static_cast<long long>(settings.layers), static_cast<long long>(settings.hidden),
              session.world_size());
  std::vector<Outcome> outcomes;
  for (const std::string hook : {"allreduce", "fp16", "powersgd"}) {
    outcomes.push_back(train(session, settings, hook));
  }
  if (!session.leader()) return;

  std::vector<analysis::RunStats> stats;
  for (const Outcome& o : outcomes) stats.push_back(tutorials::read_stats(o.run_file));
  std::printf("\nAll-reduce payload per iteration on rank 0 (bytes in N all-reduces), from the traces:\n");
  const std::string powersgd_title = "powersgd (rank " + std::to_string(settings.powersgd_rank) + ")";
  std::printf("  %-10s %-24s %-24s %-24s\n", "iteration", "allreduce (float32)", "fp16 (float16)",
              powersgd_title.c_str());
  std::vector<int64_t> totals(outcomes.size(), 0);
  for (int32_t it = 0; it < steps; ++it) {
    std::printf("  %-10d", it);
    for (size_t o = 0; o < outcomes.size(); ++o) {
      int64_t bytes = 0;
      std::printf(" %-24s", wire_text(tutorials::rank_stats(stats[o], 0), it, &bytes).c_str());
      totals[o] += bytes;
    }
    std::printf("%s\n", it == settings.powersgd_start ? "  <- PowerSGD starts compressing" : "");
  }
  // Communication per step over the steady steps (Note [Steady steps]), as `dpscope stats` has
  // it: on an emulated link it is the link's time for the bytes, so it follows them.
  const core::StepSummary steady = core::summarize_steps(std::vector<double>(steps, 1.0));
  std::printf("\n  %-10s %-18s %-14s %-14s %-20s %s\n", "hook", "bytes, all steps", "vs allreduce",
              "comm ms/step", "final loss (rank 0)", "parameters vs allreduce");
  for (size_t o = 0; o < outcomes.size(); ++o) {
    const analysis::RankStats& rank0 = tutorials::rank_stats(stats[o], 0);
    const double loss = rank0.iterations.empty() || !rank0.iterations.back().loss ? 0 : *rank0.iterations.back().loss;
    std::printf("  %-10s %-18s %13.3fx %14.2f %-20.4f %.2e relative\n", outcomes[o].hook.c_str(),
                tutorials::bytes_text(totals[o]).c_str(),
                static_cast<double>(totals[o]) / static_cast<double>(std::max<int64_t>(1, totals[0])),
                analysis::overlap_per_step(rank0).comm_ms, loss,
                relative_difference(outcomes[o].final_parameters, outcomes[0].final_parameters));
  }
  std::printf("  fp16 halves every bucket (and rounds each gradient to 11 bits); PowerSGD sends the\n"
              "  small factors P and Q of each matrix (ratio %.1f once started, by its own count) and\n"
              "  its vectors (biases) uncompressed. The payload is what each rank hands the all-reduce;\n"
              "  a ring all-reduce, for one, sends 2 (n-1)/n times it from every rank. comm ms/step is\n"
              "  the mean over iterations %d..%lld.\n",
              outcomes[2].compression_rate, steady.from_iteration, static_cast<long long>(steps - 1));
  std::printf("\ntraces:\n");
  for (const Outcome& o : outcomes) std::printf("  %s\n", o.run_file.c_str());
  std::printf("compare: dpscope-view %s --compare %s\n", outcomes[0].run_file.c_str(),
              outcomes[2].run_file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 6;
  Settings settings;
  CLI::App app{"Tutorial 08: communication hooks: fp16 compression and PowerSGD, bytes on the wire"};
  tutorials::add_common_options(app, options);
  app.add_option("--powersgd-rank", settings.powersgd_rank, "PowerSGD's matrix approximation rank")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--powersgd-start", settings.powersgd_start, "The iteration PowerSGD starts compressing at")
      ->check(CLI::Range(2, 1000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
