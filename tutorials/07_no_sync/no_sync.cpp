// Tutorial 07: gradient accumulation with no_sync. One optimizer step over K micro-batches, three
// ways: one big batch, K micro-batches each synchronised, and K micro-batches of which only the
// last is synchronised (DDP's no_sync). Same parameters at the end; different traffic and memory.
#include <torch/optim/sgd.h>

#include <algorithm>
#include <vector>
#include <cstdint>
#include <cstdio>

#include "engine/ddp/distributed_data_parallel.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-07-no-sync";

enum class Mode { BigBatch, SyncEveryMicroStep, NoSync };

const char* part_name(Mode mode) {
  switch (mode) {
    case Mode::BigBatch: return "big-batch";
    case Mode::SyncEveryMicroStep: return "sync-every-micro-step";
    case Mode::NoSync: return "no-sync";
  }
  return "";
}

struct Settings {
  int accumulate = 4;       // micro-batches per optimizer step
  int64_t micro_batch = 8;  // rows per micro-batch and rank
  int64_t hidden = 256;
};

struct Outcome {
  std::string run_file;
  std::vector<at::Tensor> final_parameters;
};

Outcome train(tutorials::Session& session, const Settings& settings, Mode mode) {
  const tutorials::CommonOptions& options = session.options();
  session.seed_per_rank(options.seed);
  models::ModelConfig config;
  config.name = "mlp";
  config.hidden = settings.hidden;
  std::shared_ptr<models::Model> model = models::make_model(config);
  model->to(session.device());
  const int micro_steps = mode == Mode::BigBatch ? 1 : settings.accumulate;
  const int64_t batch_size = mode == Mode::BigBatch ? settings.micro_batch * settings.accumulate
                                                    : settings.micro_batch;

  tutorials::TracedRun run(session, part_name(mode));
  run.describe(trace::Strategy::Ddp, "mlp", *model,
               {{"grad_accum", micro_steps}, {"batch_size", batch_size}, {"no_sync", mode == Mode::NoSync}});
  Outcome outcome;
  {
    ddp::DdpOptions ddp_options;
    ddp_options.recorder = &run.recorder();
    ddp::DistributedDataParallel ddp(model, run.group(), ddp_options);
    // The same rows in the same order in every mode: micro-batches of 8 are the big batch of 32
    // cut in four.
    tutorials::ShardedBatches batches(data::make_synthetic_classification(2048, 64, 10, options.seed),
                                      session, batch_size, options.seed);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));

    // Dividing each micro-batch's mean loss by the count makes the accumulated gradient the
    // gradient of the big batch's mean loss.
    auto micro_step = [&](tutorials::Step& step) {
      const data::Dataset batch = batches.next();
      const at::Tensor loss = step.forward([&] {
        return model->loss(ddp.forward([&] { return model->forward(batch.x); }), batch.y) / micro_steps;
      });
      step.backward(loss);
    };

    for (int32_t optimizer_step = 0; optimizer_step < options.steps; ++optimizer_step) {
      if (mode == Mode::SyncEveryMicroStep) {
        // Every backward all-reduces: DDP counts each synced forward as an iteration, so the
        // trace has K iterations per optimizer step, each with its all-reduces.
        tutorials::zero_grad(optimizer);
        for (int micro = 0; micro < micro_steps; ++micro) {
          tutorials::Step step(run, optimizer_step * micro_steps + micro);
          micro_step(step);
          if (micro + 1 == micro_steps) step.optimizer_step(optimizer);
        }
        continue;
      }
      tutorials::Step step(run, optimizer_step);
      tutorials::zero_grad(optimizer);
      for (int micro = 0; micro < micro_steps; ++micro) {
        if (micro + 1 < micro_steps) {
          // Under no_sync the hooks do nothing: .grad accumulates locally, nothing is sent.
          auto no_sync = ddp.no_sync();
          micro_step(step);
        } else {
          // The last backward is synchronised: it all-reduces the accumulated gradients.
          micro_step(step);
        }
      }
      step.optimizer_step(optimizer);
    }
  }
  for (const at::Tensor& p : model->parameters()) outcome.final_parameters.push_back(p.detach().clone().cpu());
  outcome.run_file = run.finish();
  return outcome;
}

double max_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i) most = std::max(most, (a[i] - b[i]).abs().max().item<double>());
  return most;
}

// The no_sync run's micro-steps, from its trace: each backward phase of an optimizer step, and
// the all-reduces that began during it.
void print_micro_steps(const std::string& path, int accumulate) {
  trace::Reader reader(path);
  const tutorials::LessonEvents events(reader);
  const std::vector<std::string> names = reader.names();
  std::vector<trace::Event> backwards;
  for (const trace::Event& e : events.of_kind(trace::EventKind::Phase, 0)) {
    if (e.iteration == 0 && names.at(e.name) == trace::kPhaseBackward) backwards.push_back(e);
  }
  const std::vector<trace::Event> collectives = events.of_kind(trace::EventKind::Collective, 0);
  std::printf("\nOptimizer step 0 of the no_sync run on rank 0, micro-step by micro-step:\n");
  for (size_t i = 0; i < backwards.size(); ++i) {
    // A micro-step's all-reduces may still run after its backward returns: count those that
    // began before the next micro-step's backward.
    const int64_t until = i + 1 < backwards.size() ? backwards[i + 1].begin_ns : INT64_MAX;
    int64_t count = 0;
    for (const trace::Event& c : collectives) {
      if (c.iteration == 0 && c.op == static_cast<uint8_t>(trace::CollectiveOp::AllReduce) &&
          c.begin_ns >= backwards[i].begin_ns && c.begin_ns < until) {
        ++count;
      }
    }
    std::printf("  micro-step %zu%s: backward %.2f ms, all-reduces %lld\n", i,
                static_cast<int>(i) + 1 < accumulate ? " (no_sync)" : " (synced) ",
                static_cast<double>(backwards[i].end_ns - backwards[i].begin_ns) / 1e6,
                static_cast<long long>(count));
  }
}

void run(tutorials::Session& session, const Settings& settings) {
  const int64_t steps = session.options().steps;
  session.say("== %s: %lld optimizer steps of %d x %lld rows per rank, %d rank(s) ==\n", kProgram,
              static_cast<long long>(steps), settings.accumulate,
              static_cast<long long>(settings.micro_batch), session.world_size());
  std::vector<Outcome> outcomes;
  for (const Mode mode : {Mode::BigBatch, Mode::SyncEveryMicroStep, Mode::NoSync}) {
    outcomes.push_back(train(session, settings, mode));
  }
  // Every rank holds the same parameters (DDP keeps the replicas equal); rank 0 compares.
  if (!session.leader()) return;

  std::printf("\nPer optimizer step (rank 0, from each run's trace; comm ms: time with a collective\n"
              "running, `dpscope stats`' communication, median of optimizer steps 2..):\n");
  std::printf("  %-23s %12s %14s %9s %24s\n", "run", "all-reduces", "bytes sent", "comm ms",
              "max |param - big-batch|");
  const Mode modes[] = {Mode::BigBatch, Mode::SyncEveryMicroStep, Mode::NoSync};
  std::vector<analysis::RunStats> all_stats;
  for (size_t m = 0; m < outcomes.size(); ++m) {
    all_stats.push_back(tutorials::read_stats(outcomes[m].run_file));
    const analysis::RunStats& stats = all_stats.back();
    const analysis::RankStats& rank0 = tutorials::rank_stats(stats, 0);
    int64_t all_reduces = 0, bytes = 0;
    for (const analysis::CollectiveStats& c : rank0.collectives) {
      if (c.op == trace::CollectiveOp::AllReduce && c.iteration != trace::kNone) {
        ++all_reduces;
        bytes += c.bytes;
      }
    }
    // The median over optimizer steps from the second on (the first also warms the connections
    // up); DDP counts K iterations per optimizer step when every micro-step synchronises.
    const int32_t per_step = modes[m] == Mode::SyncEveryMicroStep ? settings.accumulate : 1;
    std::vector<double> step_comm_ms(static_cast<size_t>(steps), 0.0);
    for (const analysis::IterationStats& it : rank0.iterations) {
      const size_t step = static_cast<size_t>(it.iteration / per_step);
      if (step < step_comm_ms.size()) step_comm_ms[step] += it.overlap.comm_ms;
    }
    if (step_comm_ms.size() > 1) step_comm_ms.erase(step_comm_ms.begin());
    std::sort(step_comm_ms.begin(), step_comm_ms.end());
    const double comm_ms = step_comm_ms[step_comm_ms.size() / 2];
    std::printf("  %-23s %12.1f %14s %9.2f %24.2e\n", part_name(modes[m]),
                static_cast<double>(all_reduces) / static_cast<double>(steps),
                tutorials::bytes_text(bytes / steps).c_str(), comm_ms,
                max_difference(outcomes[m].final_parameters, outcomes[0].final_parameters));
  }
  std::printf("  The three end with the same parameters (to float rounding): the accumulated\n"
              "  gradient is the big batch's. no_sync sends once per optimizer step, not once per\n"
              "  micro-batch, while computing on micro-batches as small as memory requires.\n");
  std::vector<tutorials::LabelledRun> labelled;
  for (size_t m = 0; m < outcomes.size(); ++m) labelled.push_back({part_name(modes[m]), &all_stats[m]});
  tutorials::print_clocks(labelled);
  std::printf("  (sync-every-micro-step's steps are its micro-steps: DDP counts one iteration per backward)\n");
  print_micro_steps(outcomes[2].run_file, settings.accumulate);

  std::printf("\ntraces:\n");
  for (const Outcome& o : outcomes) std::printf("  %s\n", o.run_file.c_str());
  std::printf("compare: dpscope-view %s --compare %s\n", outcomes[2].run_file.c_str(),
              outcomes[1].run_file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 8;
  Settings settings;
  CLI::App app{"Tutorial 07: gradient accumulation with no_sync"};
  tutorials::add_common_options(app, options);
  app.add_option("--accumulate", settings.accumulate, "Micro-batches per optimizer step")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  app.add_option("--micro-batch", settings.micro_batch, "Rows per micro-batch and rank")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
