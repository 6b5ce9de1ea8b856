// Tutorial 17: stragglers. The same DDP training three times: every rank as fast as it can, then
// one rank working 20 ms longer each step, then 40 ms. Data parallelism runs at the pace of its
// slowest rank: the others wait for it at their first all-reduce, and the analysis names it.
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "analysis/collective_match.h"
#include "engine/ddp/distributed_data_parallel.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-17-stragglers";

struct Settings {
  int slow_rank = -1;  // -1: the last rank
  std::vector<double> delays_ms = {0, 20, 40};
  int64_t hidden = 256;
  int64_t batch_size = 32;
};

std::string part_name(double delay_ms) {
  return delay_ms > 0 ? "slow-" + std::to_string(static_cast<int>(delay_ms)) + "ms" : "even";
}

// One traced DDP run in which `slow_rank` works `delay_ms` more each step, at the end of its
// forward: a sleep inside a phase "straggler_delay" (what `dpscope train --straggler` does).
std::string train(tutorials::Session& session, const Settings& settings, int slow_rank, double delay_ms) {
  const tutorials::CommonOptions& options = session.options();
  models::ModelConfig config;
  config.name = "mlp";
  config.hidden = settings.hidden;
  std::shared_ptr<models::Model> model = session.build_model(config);

  tutorials::TracedRun run(session, part_name(delay_ms));
  run.describe(trace::Strategy::Ddp, "mlp", *model, {{"straggler", {{"rank", slow_rank}, {"ms", delay_ms}}}});
  const trace::NameId delay_name = run.recorder().name(trace::kPhaseStragglerDelay);
  {
    ddp::DdpOptions ddp_options;
    ddp_options.recorder = &run.recorder();
    ddp::DistributedDataParallel ddp(model, run.group(), ddp_options);
    tutorials::ShardedBatches batches(data::make_synthetic_classification(2048, 64, 10, options.seed),
                                      session, settings.batch_size, options.seed);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
    for (int32_t iteration = 0; iteration < options.steps; ++iteration) {
      tutorials::Step step(run, iteration);
      tutorials::zero_grad(optimizer);
      const data::Dataset batch = batches.next();
      const at::Tensor loss = step.forward([&] {
        const at::Tensor out = model->loss(ddp.forward([&] { return model->forward(batch.x); }), batch.y);
        if (session.rank() == slow_rank && delay_ms > 0) {
          // Work the other ranks cannot see: a slower GPU, a noisy neighbour, a data loader that
          // fell behind. They find out at the first all-reduce of the backward.
          trace::ScopedPhase delay(run.recorder(), 0, delay_name, iteration);
          std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
        }
        return out;
      });
      step.backward(loss);
      step.optimizer_step(optimizer);
    }
  }
  return run.finish();
}

// The first all-reduce of one steady iteration on every rank: when each began it, how long it
// waited for the last one to arrive (Note [Waiting and transfer]) and how long it transferred.
void print_first_all_reduce(const analysis::RunStats& stats, int32_t iteration) {
  const analysis::CollectiveMatch* first = nullptr;
  for (const analysis::CollectiveMatch& m : stats.matches) {
    if (m.iteration == iteration && m.op == trace::CollectiveOp::AllReduce && !m.mismatch) {
      first = &m;
      break;
    }
  }
  if (!first) return;
  std::printf("\nIteration %d's first all-reduce (seq %lld), rank by rank:\n", iteration,
              static_cast<long long>(first->seq));
  std::printf("  %-6s %12s %12s %14s\n", "rank", "began ms", "waited ms", "transferred ms");
  int64_t earliest = INT64_MAX;
  std::vector<const analysis::CollectiveStats*> parts;
  for (const analysis::RankStats& r : stats.ranks) {
    for (const analysis::CollectiveStats& c : r.collectives) {
      if (c.grp == first->grp && c.seq == first->seq) {
        parts.push_back(&c);
        earliest = std::min(earliest, c.begin_ns);
      }
    }
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const analysis::ArrivalSplit split = analysis::split_at_arrival(*parts[i], first->last_begin_ns);
    std::printf("  %-6d %12.2f %12.2f %14.2f%s\n", stats.ranks[i].rank,
                double(parts[i]->begin_ns - earliest) / 1e6, double(split.wait_ns) / 1e6,
                double(split.transfer_ns) / 1e6, stats.ranks[i].rank == first->last_rank ? "  <- last" : "");
  }
}

void run(tutorials::Session& session, const Settings& settings) {
  const int slow_rank = settings.slow_rank >= 0 ? settings.slow_rank : session.world_size() - 1;
  if (slow_rank >= session.world_size()) {
    throw std::invalid_argument("--slow-rank " + std::to_string(slow_rank) + " is not in this run of " +
                                std::to_string(session.world_size()) + " ranks");
  }
  session.say("== %s: %lld steps of DDP, %d rank(s); rank %d slowed by %s ms ==\n", kProgram,
              static_cast<long long>(session.options().steps), session.world_size(), slow_rank, [&] {
                std::string list;
                for (const double d : settings.delays_ms) list += (list.empty() ? "" : " / ") + std::to_string(int(d));
                return list;
              }().c_str());
  std::vector<std::string> files;
  for (const double delay : settings.delays_ms) files.push_back(train(session, settings, slow_rank, delay));
  if (!session.leader()) return;

  std::printf("\nPer step (median step time; mean of the steady steps for the rest; from each run's\n"
              "trace, as `dpscope stats` computes it):\n");
  std::printf("  %-10s %9s   %-22s   %s\n", "run", "step ms", "waiting ms, by rank", "straggler (dpscope stats)");
  std::vector<analysis::RunStats> all;
  for (size_t i = 0; i < files.size(); ++i) {
    all.push_back(tutorials::read_stats(files[i]));
    const analysis::RunStats& stats = all.back();
    std::string waits;
    for (const analysis::RankStats& r : stats.ranks) {
      char cell[24];
      std::snprintf(cell, sizeof(cell), "%s%.1f", waits.empty() ? "" : " ", analysis::wait_per_step(r).first);
      waits += cell;
    }
    std::printf("  %-10s %9.2f   %-22s   %s\n", part_name(settings.delays_ms[i]).c_str(),
                analysis::step_summary(tutorials::rank_stats(stats, 0)).median_ms, waits.c_str(),
                analysis::stragglers_text(stats.stragglers).c_str());
  }
  std::printf("  Every rank's step grows by about the delay, not only the slow rank's: DDP's all-reduce\n"
              "  cannot finish before every rank has handed in its gradients. The others spend the\n"
              "  delay waiting, and the slow rank waits for nobody.\n");
  const analysis::RunStats& slowest = all.back();
  if (slowest.iterations >= 3) print_first_all_reduce(slowest, 2);

  std::vector<tutorials::LabelledRun> labelled;
  for (size_t i = 0; i < files.size(); ++i) labelled.push_back({part_name(settings.delays_ms[i]), &all[i]});
  tutorials::print_clocks(labelled);

  std::printf("\ntraces:\n");
  for (const std::string& f : files) std::printf("  %s\n", f.c_str());
  std::printf("look: dpscope-view %s   (rank %d's straggler_delay, the others' long all-reduces)\n",
              files.back().c_str(), slow_rank);
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 10;
  Settings settings;
  CLI::App app{"Tutorial 17: stragglers: one slow rank and what it costs the others"};
  tutorials::add_common_options(app, options);
  app.add_option("--slow-rank", settings.slow_rank, "The rank that works longer (default: the last)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--delays-ms", settings.delays_ms, "Its extra milliseconds per step, one run each")
      ->check(CLI::Range(0.0, 10000.0))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
