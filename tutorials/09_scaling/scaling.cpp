// Tutorial 09: the global batch and scaling. One launch per rank count trains the same global batch
// under DDP on an emulated link; each run adds its row to a table that holds what this 2-core
// machine measured and what a cluster with a core per rank would see, beside the ring model.
#include <torch/optim/sgd.h>

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/link_model.h"
#include "engine/ddp/distributed_data_parallel.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-09-scaling";

struct Settings {
  int64_t global_batch = 8192;  // rows per optimizer step, all ranks together (strong scaling)
  int accumulate = 1;          // micro-batches per optimizer step and rank
  bool weak = false;           // weak scaling: the micro-batch stays global_batch / accumulate
  int64_t hidden = 512;
  std::string table;  // the rows of every rank count run so far; "": next to the trace directory
};

// The three factors of the global batch for a run of `ranks` ranks.
struct Batch {
  int64_t micro = 0;
  int64_t accumulate = 0;
  int64_t ranks = 0;
  int64_t global() const { return micro * accumulate * ranks; }
};

Batch batch_for(const Settings& settings, int ranks) {
  const int64_t split = settings.weak ? settings.accumulate : int64_t{settings.accumulate} * ranks;
  if (settings.global_batch % split != 0) {
    throw std::invalid_argument("--global-batch " + std::to_string(settings.global_batch) +
                                " does not split into " + std::to_string(settings.weak ? 1 : ranks) +
                                " rank(s) x " + std::to_string(settings.accumulate) +
                                " micro-batches (--accumulate): give a multiple of " + std::to_string(split));
  }
  return {settings.global_batch / split, settings.accumulate, ranks};
}

double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

// The median over the steady steps, as `dpscope stats` takes the step time's (core::summarize_steps).
double median_of_steady_steps(const std::vector<double>& per_step) {
  return core::summarize_steps(per_step).median_ms;
}

// Trains the MLP for --steps optimizer steps under DDP with one gradient bucket, so that the
// all-reduce starts when backward ends and no compute hides it: the step is compute, then
// communication. Returns the run file (rank 0) and this rank's compute per step as the training
// thread's CPU time, which waiting for a core does not inflate (one LibTorch thread per rank, so
// all of the compute runs on this thread).
std::pair<std::string, std::vector<double>> train(tutorials::Session& session, const Settings& settings,
                                                  const Batch& batch) {
  const tutorials::CommonOptions& options = session.options();
  models::ModelConfig config;
  config.name = "mlp";
  config.hidden = settings.hidden;
  std::shared_ptr<models::Model> model = session.build_model(config);
  session.say("model: %s\n", models::summarize("mlp", *model).c_str());

  tutorials::TracedRun run(session);
  run.describe(trace::Strategy::Ddp, "mlp", *model,
               {{"micro_batch", batch.micro}, {"grad_accum", batch.accumulate}, {"global_batch", batch.global()}});
  std::vector<double> compute_cpu_ms;
  {
    ddp::DdpOptions ddp_options;
    ddp_options.bucket_cap_bytes = int64_t{1} << 30;
    ddp_options.first_bucket_bytes = int64_t{1} << 30;
    ddp_options.recorder = &run.recorder();
    ddp::DistributedDataParallel ddp(model, run.group(), ddp_options);
    // Two global batches of rows: each rank's share holds two steps' micro-batches.
    tutorials::ShardedBatches batches(
        data::make_synthetic_classification(2 * batch.global(), 64, 10, options.seed), session, batch.micro,
        options.seed);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
    for (int32_t iteration = 0; iteration < options.steps; ++iteration) {
      tutorials::Step step(run, iteration);
      double cpu_ms = 0;
      // The thread's CPU time in the phases the trace counts as compute: forward, backward and the
      // optimizer step. Backward's wait for the all-reduce sleeps and adds nothing, except Gloo's
      // own work when this thread runs the all-reduce itself (Note [Run on wait]): within the noise.
      auto on_cpu = [&](const auto& work) {
        const double begin_ms = thread_cpu_ms();
        work();
        cpu_ms += thread_cpu_ms() - begin_ms;
      };
      tutorials::zero_grad(optimizer);
      for (int64_t micro = 0; micro < batch.accumulate; ++micro) {
        const data::Dataset rows = batches.next();
        auto micro_step = [&] {
          const at::Tensor loss = step.forward([&] {
            return model->loss(ddp.forward([&] { return model->forward(rows.x); }), rows.y) /
                   static_cast<double>(batch.accumulate);
          });
          step.backward(loss);
        };
        // Only the last micro-batch's backward all-reduces the accumulated gradients (tutorial 07).
        if (micro + 1 < batch.accumulate) {
          auto no_sync = ddp.no_sync();
          on_cpu(micro_step);
        } else {
          on_cpu(micro_step);
        }
      }
      on_cpu([&] { step.optimizer_step(optimizer); });
      compute_cpu_ms.push_back(cpu_ms);
    }
  }
  return {run.finish(), compute_cpu_ms};
}

// One rank count's numbers per optimizer step, over the steady steps (core::steady_from).
struct Row {
  Batch batch;
  double step_ms = 0;          // measured clock here: rank 0's median step_ms
  double compute_wall_ms = 0;  // the trace's compute, measured clock: its mean per step, mean over ranks
  double compute_cpu_ms = 0;   // thread CPU time in the compute phases: median per rank, mean over ranks
  double wait_ms = 0;          // in the all-reduce, waiting for the last rank (measured): mean per step and over ranks
  double link_ms = 0;          // the all-reduce once the last rank arrived, on the lesson's clock: median, longest rank
  double measured_link_ms = 0; // the same on the measured clock
  double ring_ms = 0;          // the ring model's time for the step's all-reduces on the link
  int64_t gradient_bytes = 0;  // all-reduced per step

  double cluster_step_ms() const { return compute_cpu_ms + link_ms; }
};

// On a cluster every rank arrives at once; here the ranks take turns on the cores, and those that
// arrive early wait. The last to arrive transfers for the whole all-reduce: on the cluster clock
// exactly the link model's time (on the measured clock, longer when the real one was slower).
// Per step the longest transfer of any rank; the median over the steady steps.
double last_arrival_link_ms(const analysis::RunStats& stats) {
  std::vector<double> link_by_step;
  for (int32_t it = 0; it < stats.iterations; ++it) {
    double longest = 0;
    for (const analysis::RankStats& rank : stats.ranks) {
      longest = std::max(longest, rank.iterations.at(size_t(it)).transfer_ms);
    }
    link_by_step.push_back(longest);
  }
  return median_of_steady_steps(link_by_step);
}

// `measured`: the run on this machine's clock, for the "measured here" columns; `stats`: on the
// lesson's clock (Note [The lesson's clock]), for the link's time the cluster table adds.
Row measure(const analysis::RunStats& measured, const analysis::RunStats& stats, const Batch& batch,
            const std::vector<double>& cpu_by_rank) {
  Row row;
  row.batch = batch;
  row.step_ms = analysis::step_summary(tutorials::rank_stats(measured, 0)).median_ms;
  for (const analysis::RankStats& rank : measured.ranks) {
    row.compute_wall_ms += analysis::overlap_per_step(rank).compute_ms / double(measured.ranks.size());
    row.wait_ms += analysis::wait_per_step(rank).first / double(measured.ranks.size());
  }
  for (const double cpu : cpu_by_rank) row.compute_cpu_ms += cpu / double(cpu_by_rank.size());
  row.link_ms = last_arrival_link_ms(stats);
  row.measured_link_ms = last_arrival_link_ms(measured);
  const analysis::RankStats& rank0 = tutorials::rank_stats(stats, 0);
  const int32_t from = core::steady_from(rank0.iterations.size());
  row.gradient_bytes = tutorials::collective_bytes_in(rank0, from, trace::CollectiveOp::AllReduce);
  if (stats.link_gbps > 0) {
    const core::LinkSpec link{stats.link_gbps, stats.link_latency_us};
    for (const analysis::CollectiveStats& c : rank0.collectives) {
      if (c.iteration == from && c.op == trace::CollectiveOp::AllReduce) {
        row.ring_ms += double(core::link_model_ns(c.op, c.bytes, stats.world_size, link)) / 1e6;
      }
    }
  }
  return row;
}

// ---- The table of every rank count run so far -----------------------------------------------

// The settings a table's rows share; a run with other settings starts a new table.
std::string table_key(const Settings& settings, const tutorials::Session& session,
                      const analysis::RunStats& stats) {
  std::ostringstream key;
  key << (settings.weak ? "weak micro-batch " + std::to_string(settings.global_batch / settings.accumulate)
                        : "strong global-batch " + std::to_string(settings.global_batch))
      << " accumulate " << settings.accumulate << " hidden " << settings.hidden << " steps "
      << session.options().steps << " seed " << session.options().seed;
  key << " " << (stats.link_gbps > 0 ? analysis::link_text(stats) : "loopback");
  return key.str();
}

std::vector<Row> load_rows(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line != "# " + key) return {};
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Row r;
    if (fields >> r.batch.ranks >> r.batch.micro >> r.batch.accumulate >> r.step_ms >> r.compute_wall_ms >>
        r.compute_cpu_ms >> r.wait_ms >> r.link_ms >> r.measured_link_ms >> r.ring_ms >> r.gradient_bytes) {
      rows.push_back(r);
    }
  }
  return rows;
}

void save_rows(const std::string& path, const std::string& key, const std::vector<Row>& rows) {
  std::ofstream out(path);
  out << "# " << key << "\n";
  for (const Row& r : rows) {
    out << r.batch.ranks << ' ' << r.batch.micro << ' ' << r.batch.accumulate << ' ' << r.step_ms << ' '
        << r.compute_wall_ms << ' ' << r.compute_cpu_ms << ' ' << r.wait_ms << ' ' << r.link_ms << ' '
        << r.measured_link_ms << ' ' << r.ring_ms << ' ' << r.gradient_bytes << "\n";
  }
  if (!out) throw std::runtime_error("cannot write the scaling table " + path + "; pass a writable --table");
}

// The all-reduce outlasted its time on the emulated link: the real one on this machine was slower.
bool outlasted_link(const Row& r) { return r.ring_ms > 0 && r.link_ms > 1.1 * r.ring_ms; }

double throughput(const Row& r) { return double(r.batch.global()) / r.cluster_step_ms() * 1e3; }

void print_measured_here(const std::vector<Row>& rows) {
  std::printf("\nMeasured here, on this machine's clock, the ranks sharing %u cores (per step: step, CPU\n"
              "and link medians; compute wall and waiting, dpscope stats' means):\n",
              std::thread::hardware_concurrency());
  std::printf("  %5s  %-26s %9s %10s %12s %9s %11s %9s\n", "ranks", "global = micro x accum x n", "step ms",
              "samples/s", "compute wall", "CPU ms", "waiting ms", "link ms");
  for (const Row& r : rows) {
    char batch[48];
    std::snprintf(batch, sizeof(batch), "%lld = %lld x %lld x %lld", static_cast<long long>(r.batch.global()),
                  static_cast<long long>(r.batch.micro), static_cast<long long>(r.batch.accumulate),
                  static_cast<long long>(r.batch.ranks));
    std::printf("  %5lld  %-26s %9.1f %10.0f %12.1f %9.1f %11.1f %9.1f\n", static_cast<long long>(r.batch.ranks),
                batch, r.step_ms, double(r.batch.global()) / r.step_ms * 1e3, r.compute_wall_ms, r.compute_cpu_ms,
                r.wait_ms, r.measured_link_ms);
  }
}

// The cluster's table; `single` is the one-rank row (null when not run yet). The ring model needs
// the emulated link's bandwidth and latency.
void print_on_a_cluster(const std::vector<Row>& rows, const Row* single, bool emulated) {
  std::printf("\nOn a cluster with a core per rank (compute = CPU time, link = the all-reduce once all arrived):\n");
  std::printf("  %5s %11s %10s %10s %10s %8s %11s   %s\n", "ranks", "compute ms", "+ link ms", "= step ms",
              "samples/s", "speedup", "efficiency",
              emulated ? "ring model: compute + all-reduce = step ms" : "(no ring model: no emulated link)");
  for (const Row& r : rows) {
    std::printf("  %5lld %11.1f %10.1f %10.1f %10.0f", static_cast<long long>(r.batch.ranks), r.compute_cpu_ms,
                r.link_ms, r.cluster_step_ms(), throughput(r));
    if (!single) {
      std::printf(" %8s %11s\n", "-", "-");
      continue;
    }
    const double speedup = throughput(r) / throughput(*single);
    std::printf(" %8.2f %9.0f %%", speedup, 100 * speedup / double(r.batch.ranks));
    if (emulated) {
      // Compute follows the rows each rank works on per step: 1/n of one rank's under strong scaling.
      const double model_compute = single->compute_cpu_ms * double(r.batch.micro) / double(single->batch.micro);
      std::printf("   %10.1f + %5.1f = %5.1f%s", model_compute, r.ring_ms, model_compute + r.ring_ms,
                  outlasted_link(r) ? "  *" : "");
    }
    std::printf("\n");
  }
  if (!single) std::printf("  Run it on 1 rank too (dpscope launch -n 1 ...) for the speedup, efficiency and model.\n");
  if (emulated && std::any_of(rows.begin(), rows.end(), outlasted_link)) {
    std::printf("  * this machine's own all-reduce, its ranks sharing the cores, took longer than the link's\n"
                "    model; on a cluster it would not, and that step would be shorter.\n");
  }
}

// Where adding ranks stops paying, measured and from the ring model: the all-reduce of S bytes on a
// link of B bytes/s and latency L takes 2(n-1)/n S/B + 2(n-1) L, while the compute C1/n falls.
void print_verdict(const std::vector<Row>& rows, const Row& single, bool weak, const core::LinkSpec& link) {
  const double c1 = single.compute_cpu_ms;
  const double bandwidth_ms = double(rows.back().gradient_bytes) * 8 / (link.gbps * 1e9) * 1e3;  // S/B
  const double latency_ms = link.latency_us / 1e3;
  std::printf("\nThe ring model, S = %s of gradients, B = %s Gb/s, L = %s us: S/B = %.1f ms, C1 = %.1f ms\n"
              "(one rank's compute). The all-reduce 2(n-1)/n S/B + 2(n-1) L grows towards 2 S/B = %.1f ms.\n",
              tutorials::bytes_text(rows.back().gradient_bytes).c_str(), core::link_value_text(link.gbps).c_str(),
              core::link_value_text(link.latency_us).c_str(), bandwidth_ms, c1, 2 * bandwidth_ms);
  if (weak) {
    std::printf("Weak scaling: every rank computes the same rows at any n, so its compute stays C1 while the\n"
                "all-reduce grows; the efficiency falls towards C1 / (C1 + 2 S/B) = %.0f %% and no further\n"
                "(latency aside), and from 2 ranks on every added rank adds throughput.\n",
                100 * c1 / (c1 + 2 * bandwidth_ms));
    return;
  }
  // C1/n = 2(n-1)(S/B/n + L)  <=>  2L n^2 + 2(S/B - L) n - (2 S/B + C1) = 0: efficiency 50 %. Its
  // positive root, in the form that stays exact as L goes to 0 (n = 1 + C1 / (2 S/B) then).
  const double a = 2 * latency_ms, b = 2 * (bandwidth_ms - latency_ms), c = 2 * bandwidth_ms + c1;
  const double crossing = 2 * c / (b + std::sqrt(b * b + 4 * a * c));
  std::printf("Compute C1/n falls below it at n = %.1f: from there more than half of every step is on the\n"
              "link (efficiency under 50 %%), and the speedup can never pass C1 / (2 S/B) = %.2f.\n",
              crossing, c1 / (2 * bandwidth_ms));
  for (size_t i = 1; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (r.link_ms <= r.compute_cpu_ms) continue;
    const bool as_modelled = double(rows[i - 1].batch.ranks) < crossing && crossing <= double(r.batch.ranks);
    std::printf("Measured: adding ranks stops paying at %lld ranks, %s n = %.1f:\n",
                static_cast<long long>(r.batch.ranks),
                as_modelled ? "the first rank count run past the model's" : "though the model crosses at", crossing);
    const double shorter = 1 - r.cluster_step_ms() / rows[i - 1].cluster_step_ms();
    std::printf("every rank spends longer on the link (%.1f ms) than computing (%.1f ms), efficiency %.0f %%,\n"
                "and going from %lld to %lld ranks made the step %s%.0f %% %s.\n",
                r.link_ms, r.compute_cpu_ms, 100 * throughput(r) / throughput(single) / double(r.batch.ranks),
                static_cast<long long>(rows[i - 1].batch.ranks), static_cast<long long>(r.batch.ranks),
                shorter > 0 ? "only " : "", 100 * std::fabs(shorter), shorter > 0 ? "shorter" : "longer");
    if (outlasted_link(r)) {
      std::printf("(*: that link time is this machine's own all-reduce; the model's crossing is the better guide.)\n");
    }
    return;
  }
  std::printf("Measured: compute still outweighs the link at %lld ranks; run more ranks to pass n = %.1f.\n",
              static_cast<long long>(rows.back().batch.ranks), crossing);
}

void run(tutorials::Session& session, const Settings& settings) {
  if (session.options().threads != 1) {
    throw std::invalid_argument("--threads " + std::to_string(session.options().threads) +
                                ": this tutorial measures compute as the training thread's CPU time, "
                                "which misses the work of other LibTorch threads; leave --threads at 1");
  }
  const Batch batch = batch_for(settings, session.world_size());
  session.say("== %s: %s scaling, %d rank(s), %lld steps of DDP, one thread per rank ==\n", kProgram,
              settings.weak ? "weak" : "strong", session.world_size(),
              static_cast<long long>(session.options().steps));
  session.say("global batch %lld = micro-batch %lld x accumulation steps %lld x ranks %lld\n",
              static_cast<long long>(batch.global()), static_cast<long long>(batch.micro),
              static_cast<long long>(batch.accumulate), static_cast<long long>(batch.ranks));

  const auto [run_file, compute_cpu_ms] = train(session, settings, batch);
  const std::vector<double> cpu_by_rank = session.gather(median_of_steady_steps(compute_cpu_ms));
  if (!session.leader()) return;

  const analysis::RunStats stats = tutorials::read_stats(run_file);
  const Row row = measure(tutorials::read_measured_stats(run_file), stats, batch, cpu_by_rank);
  std::printf("gradients all-reduced per step: %s in one bucket\n", tutorials::bytes_text(row.gradient_bytes).c_str());

  const std::string table = !settings.table.empty()
                                ? settings.table
                                : (std::filesystem::path(session.trace_dir()).parent_path() / "scaling.tsv").string();
  const std::string key = table_key(settings, session, stats);
  std::vector<Row> rows = load_rows(table, key);
  rows.erase(std::remove_if(rows.begin(), rows.end(), [&](const Row& r) { return r.batch.ranks == batch.ranks; }),
             rows.end());
  rows.push_back(row);
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.batch.ranks < b.batch.ranks; });
  save_rows(table, key, rows);
  std::printf("\nThe table so far (%s: one row per rank count, this run's replacing an older one):\n",
              table.c_str());
  print_measured_here(rows);
  const Row* single = rows.front().batch.ranks == 1 ? &rows.front() : nullptr;
  print_on_a_cluster(rows, single, stats.link_gbps > 0);
  if (stats.link_gbps > 0 && single && rows.size() > 1) {
    print_verdict(rows, *single, settings.weak, core::LinkSpec{stats.link_gbps, stats.link_latency_us});
  }

  tutorials::print_clocks({{std::to_string(batch.ranks) + " rank(s)", &stats}});

  std::printf("\ntrace: %s\n", run_file.c_str());
  std::printf("look: dpscope-view %s --iteration 4\n", run_file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 8;
  options.threads = 1;
  Settings settings;
  CLI::App app{"Tutorial 09: the global batch and scaling: one row per rank count, on a cluster's link"};
  tutorials::add_common_options(app, options);
  app.add_option("--global-batch", settings.global_batch,
                 "Rows per optimizer step, all ranks together (with --weak: on one rank)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--accumulate", settings.accumulate, "Micro-batches per optimizer step and rank")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_flag("--weak", settings.weak, "Weak scaling: keep each rank's micro-batch, let the global batch grow");
  app.add_option("--hidden", settings.hidden, "The MLP's width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--table", settings.table, "The table file (default: scaling.tsv next to the trace directory)");
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
