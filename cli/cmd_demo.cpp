// dpscope demo: the main job. Trains the MLP on the digits on 4 ranks with DDP, then with FSDP
// (FULL_SHARD, each layer a unit), over an emulated cluster link unless told --no-link, prints a
// summary of each run from its trace and the two lessons in numbers, and opens both in the
// viewer's compare mode — or, without a display, writes the viewer's screenshots beside them.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/clock_choice.h"
#include "analysis/stats.h"
#include "cli/commands.h"
#include "core/link_options.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"
#ifdef DPSCOPE_HAVE_ENGINE
#include <torch/cuda.h>
#endif

namespace dpscope::cli {
namespace {

// Note [The demo's lessons]
// The demo's model, plan and link are chosen so that its two runs teach one lesson each, in
// numbers its summary prints and tests/cli/test_demo.cpp checks on the defaults:
//   - DDP overlaps: 4 buckets of about 1 MiB (fc3+fc4, fc2, fc1, fc0), the first launched while
//     backward still computes the rest; on the cluster clock about three quarters of the
//     all-reduce time is hidden (at least half is asked, on any machine, idle or loaded).
//   - FSDP shards memory: 3 of the 5 layers hold 1 MiB each and no layer holds most of the
//     model, so FULL_SHARD's peak in the steps is about 0.58 of DDP's (at most 0.6 is asked),
//     for a step about 1.2 times as long.
//   - held-out accuracy about 0.93 (at least 0.9 is asked), in about 25 s of training on 2 cores.
// Measured over hidden 384-512, 4-6 layers, batches 32-128, 60-200 steps: deeper MLPs shard
// better but do not reach 0.9 in a minute (plain ReLU layers, default init); larger batches hide
// more but lose accuracy in 150 steps (batch 128: 0.86).
// The link: the cluster clock's compute is this machine's CPU time (Note [Steady compute]), so a
// faster CPU shortens each layer's backward while the link's times stay, and hides less. A CPU k
// times as fast reads as this one on a link of G/k Gb/s and k L µs, so the link is chosen for a
// CPU twice as fast. Replayed from one idle run of 2026-12-06 (bench/README.md, "The demo's
// lessons"), hidden here / on a CPU twice as fast: 25 Gb/s, 50 µs 44 / 22 %; 50 Gb/s, 50 µs
// 62 / 31 %; 100 Gb/s, 50 µs 68 / 39 % (the latency, 6 messages of each ring all-reduce, is most
// of it); 100 Gb/s, 25 µs 77 / 62 %; 100 Gb/s, 10 µs 89 / 76 %. 100 Gb/s and 25 µs (a 100 GbE
// cluster's link) keeps a 1 MiB all-reduce about as long as a layer's backward, which the
// viewer shows, and over half hidden on a CPU twice as fast.
constexpr const char* kDemoModel = "--model mlp --hidden 512 --layers 4 --batch-size 48";
constexpr const char* kDemoOptimizer = "--lr 0.1 --momentum 0.9";

struct DemoOptions {
  std::string out_dir = "traces/demo";
  int ranks = 4;
  int64_t steps = 150;
  bool no_view = false;
  // The interconnect both trainings run over (See Note [Link emulation] in
  // engine/comm/link_emulation.h): a cluster's link, so that the communication costs what it
  // would there and not what two processes on one machine's cores pay. Off with --no-link.
  core::LinkFlags link{100, 25};
  bool no_link = false;
};

// One of the two trainings the demo runs.
struct DemoRun {
  std::string title;        // "DDP"
  trace::Strategy strategy;  // `dpscope train --strategy`; its spelling names the folder:
                             // <out>/ddp/run.sqlite
  std::string options;      // the strategy's own flags of `dpscope train`, after --strategy
  std::string folder() const { return std::string(trace::to_string(strategy)); }
};

// What the summary shows of one run besides its trace's analysis.
struct RunSummary {
  std::string trace;
  std::string accuracy;  // rank 0's "accuracy ..." line, without the prefix
};

std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (const char ch : text) {
    if (ch == '\'') out += "'\\''";
    else out += ch;
  }
  return out + "'";
}

// Runs `command` through /bin/sh, writes all of its output to `log`, and shows rank 0's lines and
// the launcher's own (the other ranks say the same). Returns the exit status.
int run_logged(const std::string& command, const std::string& log, RunSummary& summary) {
  std::ofstream log_file(log);
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw CliFailure("cannot start `" + command + "`: out of processes or memory");
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe)) {
    const std::string line(buffer);
    log_file << line;
    if (line.rfind("[0] ", 0) == 0 || line.rfind("dpscope launch", 0) == 0) {
      std::cout << "   " << line << std::flush;
    }
    const size_t end = line.find_last_not_of("\r\n") + 1;
    if (line.rfind("[0] accuracy ", 0) == 0) summary.accuracy = line.substr(4, end - 4);
  }
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

struct Figures {
  double step_ms = 0;   // rank 0's median over the steady steps (Note [Steady steps])
  double peak_mib = 0;  // the largest rank's peak in the steps (Note [Memory at the peak])
  analysis::Clock clock = analysis::Clock::Measured;  // the lesson's clock the figures are on
  // Per step, the mean of the ranks: communication, and the part of it the rank computed
  // nothing during.
  double comm_ms = 0, exposed_ms = 0;
  size_t buckets = 0;  // DDP: the buckets of the plan in force after the first iteration
};

double mib(int64_t bytes) { return double(bytes) / double(1 << 20); }

// 826378 as "826,378".
std::string with_thousands(int64_t value) {
  std::string digits = std::to_string(value);
  for (int at = int(digits.size()) - 3; at > (value < 0 ? 1 : 0); at -= 3) digits.insert(size_t(at), ",");
  return digits;
}

// The share of the communication that ran while the rank computed, in per cent: the summary's
// and Lesson 1's one figure.
double hidden_percent(const Figures& figures) {
  return figures.comm_ms > 0 ? 100 * (1 - figures.exposed_ms / figures.comm_ms) : 0.0;
}

// The summary's memory lines: every rank's peak in the steps, and rank 0's categories at its
// peak. Returns the largest rank's peak in MiB.
double print_peaks(const analysis::RunStats& stats) {
  double largest = 0;
  // The peak in the steps: the held-out rows' evaluation after them forwards all its rows at
  // once and is no step's (Note [Work outside iterations]). On GPUs the categories split
  // cuda_allocated by ownership (the default there; Note [Ownership accounting]), so the peak and
  // its categories read as on the CPU; a GPU run by tracking has host memory in its categories,
  // and its peak is the CUDA caching allocator's (cuda_allocated), without categories.
  const bool gpu = stats.ranks.front().sampled_gpu_memory();
  const bool gpu_without_categories = gpu && stats.memory_accounting == trace::MemoryAccounting::Tracking;
  std::string peaks;
  for (const analysis::RankStats& rank : stats.ranks) {
    const int64_t peak = gpu_without_categories ? rank.largest_in_steps(trace::MemoryCategory::CudaAllocated)
                                                : rank.step_memory_peak.total_bytes;
    char part[32];
    std::snprintf(part, sizeof(part), "%.2f", mib(peak));
    peaks += (peaks.empty() ? "" : " / ") + std::string(part);
    largest = std::max(largest, mib(peak));
  }
  const analysis::MemoryAtPeak& first = stats.ranks.front().step_memory_peak;
  if (gpu_without_categories) {
    std::printf("  peak memory     %s MiB of GPU memory in the steps (cuda_allocated; ranks %d..%d; its "
                "categories are the host's: tracking accounting, docs/gpu.md)\n",
                peaks.c_str(), stats.ranks.front().rank, stats.ranks.back().rank);
  } else if (first.found()) {
    std::printf("  peak memory     %s MiB %sin the steps (ranks %d..%d)\n", peaks.c_str(),
                gpu ? "of GPU memory (cuda_allocated by ownership) " : "", stats.ranks.front().rank,
                stats.ranks.back().rank);
    std::string parts;
    for (const analysis::CategoryBytes& c : first.categories) {
      if (c.bytes == 0) continue;
      char part[64];
      std::snprintf(part, sizeof(part), "%s%s %.2f", parts.empty() ? "" : ", ",
                    std::string(trace::to_string(c.category)).c_str(), mib(c.bytes));
      parts += part;
    }
    std::printf("  at the peak     %s (MiB, rank %d; they add up to its peak)\n", parts.c_str(),
                stats.ranks.front().rank);
  }
  return largest;
}

// Prints the summary of one run from its trace: every figure is the trace's analysis
// (analysis/stats.h), as `dpscope stats` prints it, its times on the lesson's clock (Note [The
// lesson's clock]): on the emulated link, the cluster clock, with the measured step beside.
Figures print_summary(const DemoRun& run, const RunSummary& summary) {
  trace::Reader reader(summary.trace);
  const analysis::RunStats stats = analysis::compute_lesson_stats(reader);
  Figures figures;
  figures.clock = stats.clock.clock;
  if (stats.ranks.empty()) throw CliFailure(summary.trace + " has no ranks: the training failed");

  const core::StepSummary steps = analysis::step_summary(stats.ranks.front());
  figures.step_ms = steps.median_ms;

  // The loss each rank recorded at the last step is its own batch's; their mean is the step's.
  double loss = 0;
  int losses = 0;
  double comm_ms = 0, exposed_ms = 0;
  for (const auto& rank : stats.ranks) {
    if (!rank.iterations.empty() && rank.iterations.back().loss) {
      loss += *rank.iterations.back().loss;
      ++losses;
    }
    const analysis::OverlapStats per_step = analysis::overlap_per_step(rank);
    comm_ms += per_step.comm_ms;
    exposed_ms += per_step.exposed_comm_ms;
  }
  const double ranks = static_cast<double>(stats.ranks.size());
  figures.comm_ms = comm_ms / ranks;
  figures.exposed_ms = exposed_ms / ranks;
  const int32_t plan = std::any_of(stats.buckets.begin(), stats.buckets.end(),
                                   [](const trace::BucketInfo& b) { return b.generation == 1; });
  figures.buckets = size_t(std::count_if(stats.buckets.begin(), stats.buckets.end(),
                                         [&](const trace::BucketInfo& b) { return b.generation == plan; }));

  int64_t parameters = 0;
  for (const trace::ParamInfo& param : stats.params) parameters += param.numel;
  std::printf("%s — %s (%s parameters in %zu tensors), %d ranks over %s, %d steps\n", run.title.c_str(),
              stats.model.c_str(), with_thousands(parameters).c_str(), stats.params.size(), stats.world_size,
              stats.backend.c_str(), stats.iterations);
  const std::string link = analysis::link_text(stats);
  if (!link.empty()) {
    std::printf("  link            %s (a model of a cluster's network, not this machine's)\n",
                link.c_str());
  } else {
    std::printf("  link            this machine's own (--no-link): the ranks' communication shares "
                "its cores with their compute\n");
  }
  if (losses > 0) std::printf("  final loss      %.4f (mean of the ranks' last batches)\n", loss / losses);
  if (!summary.accuracy.empty()) std::printf("  %s\n", summary.accuracy.c_str());
  std::printf("  clock           %s\n", analysis::clock_text(stats.clock).c_str());
  std::printf("  step time       %.2f ms (median, rank %d, steps %d..%d)", figures.step_ms,
              stats.ranks.front().rank, steps.from_iteration + 1, stats.iterations);
  if (stats.clock.clock == analysis::Clock::Cluster) {
    const analysis::RunStats measured = analysis::compute_stats(reader);
    std::printf("; measured on this machine %.2f ms (its cores shared by the ranks and the real "
                "transfers: docs/cluster-clock.md)",
                analysis::step_summary(measured.ranks.front()).median_ms);
  }
  std::printf("\n");
  // One percentage, the hidden share, as Lesson 1 gives it: a second one (the exposed share) a
  // line above the lesson's would read as a contradiction.
  std::printf("  communication   %.2f ms per step, %.0f %% of it hidden behind compute; %.2f ms exposed (the "
              "rank computed nothing meanwhile; mean of the ranks, steps %d..)\n",
              figures.comm_ms, hidden_percent(figures), figures.exposed_ms, steps.from_iteration + 1);
  figures.peak_mib = print_peaks(stats);
  std::printf("  trace           %s\n\n", summary.trace.c_str());
  std::fflush(stdout);
  return figures;
}

bool has_display() {
  for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY"}) {
    const char* value = std::getenv(name);
    if (value && *value) return true;
  }
  return false;
}

bool has_xvfb_run() { return std::system("command -v xvfb-run > /dev/null 2>&1") == 0; }

// Draws `traces` (one, or two with --compare, and the --clock flag) into `png` with the viewer's
// --screenshot: on the display when there is one, else under xvfb-run as tutorials/screenshot.sh
// does. False (with the command to see why printed) when it cannot.
bool screenshot(const std::string& viewer, const std::string& traces, const std::string& png) {
  const std::string draw = std::string(has_display() ? "" : "xvfb-run -a -s '-screen 0 1600x1000x24' ") +
                           shell_quoted(viewer) + " " + traces + " --screenshot " + shell_quoted(png) + " --frames 30";
  if (std::system((draw + " > /dev/null 2>&1").c_str()) != 0) {
    std::printf("   the viewer could not draw %s; run `%s` to see why\n", png.c_str(), draw.c_str());
    return false;
  }
  return true;
}

// Where the demo trains: `dpscope train`'s device flags, and the line that tells the user.
struct DeviceChoice {
  std::string train_args;
  std::string line;
};

// NCCL on the GPUs when this build has CUDA and the host has a GPU for every rank (NCCL cannot
// put two ranks on one GPU), else Gloo on the CPU. Both named, so that nothing is left to a
// default.
DeviceChoice choose_device(int ranks) {
  const std::string cpu = "--backend gloo --device cpu";
#ifdef DPSCOPE_HAVE_CUDA
  const int gpus = static_cast<int>(torch::cuda::device_count());
  if (gpus >= ranks) {
    return {"--backend nccl --device cuda",
            "on " + std::to_string(ranks) + " of this host's " + std::to_string(gpus) +
                " GPUs, one per rank, with NCCL"};
  }
  return {cpu, "on the CPU with Gloo: this host has " + std::to_string(gpus) + " GPU(s) for " +
                   std::to_string(ranks) + " ranks, and NCCL needs one per rank (--ranks " +
                   std::to_string(std::max(1, gpus)) + " would use them)"};
#else
  return {cpu, "on the CPU with Gloo (this build has no CUDA; docs/gpu.md builds one)"};
#endif
}

// `dpscope launch`'s link flags, empty with --no-link.
std::string link_args(const DemoOptions& options) {
  if (options.no_link) return "";
  return std::string(" ") + core::kLinkGbpsFlag + " " + core::link_value_text(*options.link.gbps) +
         " " + core::kLinkLatencyFlag + " " + core::link_value_text(*options.link.latency_us);
}

// The demo's folder, made if need be, as an absolute path (the commands it prints run anywhere).
std::string make_out_dir(const DemoOptions& options) {
  std::error_code error;
  std::filesystem::create_directories(options.out_dir, error);
  if (error) {
    throw CliFailure("cannot create " + options.out_dir + ": " + error.message() +
                     " (pass --out DIR)");
  }
  return std::filesystem::absolute(options.out_dir).lexically_normal().string();
}

// Section `number`: `run` under `dpscope launch`, its trace in <out>/<folder>; returns where
// its trace and output went.
RunSummary launch_training(const DemoOptions& options, const DemoRun& run, const std::string& out,
                           const DeviceChoice& device, int number) {
  const std::string dpscope = binary_dir() + "/dpscope";
  const std::string dir = out + "/" + run.folder();
  std::error_code error;
  // Rank files of an earlier demo would be merged with this one's.
  std::filesystem::remove_all(dir, error);
  std::filesystem::create_directories(dir, error);
  const std::string command =
      shell_quoted(dpscope) + " launch -n " + std::to_string(options.ranks) + " --trace-dir " +
      shell_quoted(dir) + link_args(options) + " -- " + shell_quoted(dpscope) +
      " train " + kDemoModel + " --data digits --eval-fraction 0.2 " + kDemoOptimizer + " --steps " +
      std::to_string(options.steps) + " --progress-every " +
      std::to_string(std::max<int64_t>(1, options.steps / 3)) + " " + device.train_args +
      " --strategy " + run.folder() + run.options;
  std::cout << "== " << number << ". " << run.title << ": the MLP on the digits, "
            << options.ranks << " ranks\n   " << command << "\n" << std::flush;
  RunSummary summary;
  summary.trace = dir + "/run.sqlite";
  const std::string log = dir + "/train.log";
  if (run_logged(command, log, summary) != 0) {
    throw CliFailure("the " + run.title + " training failed; its output is in " + log +
                     " (run scripts/setup to rebuild, then try again)");
  }
  std::cout << "\n";
  return summary;
}

// Section `number`: each run's summary, then FSDP's step time and peak against DDP's. Returns
// the clock the summaries are on (the lesson's), which the viewer then shows too.
analysis::Clock print_summaries(const std::vector<DemoRun>& runs, const std::vector<RunSummary>& summaries,
                                int number) {
  std::cout << "== " << number << ". Summary (from the traces, as `dpscope stats --json` has them, and the trainings' output)\n\n";
  std::vector<Figures> figures;
  for (size_t i = 0; i < runs.size(); ++i) figures.push_back(print_summary(runs[i], summaries[i]));
  // The two lessons, one line each with its number (Note [The demo's lessons]).
  const Figures& ddp = figures[0];
  const Figures& fsdp = figures[1];
  if (ddp.comm_ms > 0) {
    std::printf("Lesson 1, DDP overlaps: %zu buckets, each all-reduced as soon as its gradients are in, so\n"
                "  %.0f %% of the %.2f ms of communication a step is hidden: it ran while backward computed\n"
                "  (the other %.2f ms are exposed).\n",
                ddp.buckets, hidden_percent(ddp), ddp.comm_ms, ddp.exposed_ms);
  }
  if (ddp.step_ms > 0 && ddp.peak_mib > 0) {
    std::printf("Lesson 2, FSDP shards memory: its peak in the steps is %.2f MiB against DDP's %.2f (x%.2f):\n"
                "  each rank keeps a quarter of the parameters, gradients and momentum and gathers one\n"
                "  layer at a time, for a step x%.2f as long (every layer's all-gathers and reduce-scatters).\n\n",
                fsdp.peak_mib, ddp.peak_mib, fsdp.peak_mib / ddp.peak_mib, fsdp.step_ms / ddp.step_ms);
  }
  return figures[0].clock == figures[1].clock ? figures[0].clock : analysis::Clock::Measured;
}

// Section `number`: the two traces in the viewer's compare mode on the display, else its
// screenshots in `out`, else the command to open them where there is a display; on `clock`, the
// clock the summaries were on.
void show_in_viewer(const DemoOptions& options, const std::string& out,
                    const std::vector<RunSummary>& summaries, analysis::Clock clock, int number) {
  const std::string viewer = binary_dir() + "/dpscope-view";
  const std::string on_clock = " --clock " + std::string(analysis::to_string(clock));
  const std::string a = shell_quoted(summaries[0].trace) + on_clock, b = shell_quoted(summaries[1].trace);
  const std::string open_command =
      "dpscope-view " + summaries[0].trace + " --compare " + summaries[1].trace + on_clock;
  std::cout << "== " << number << ". The viewer\n";
  if (!std::filesystem::exists(viewer)) {
    std::cout << "   dpscope-view was not built (the viewer needs libglfw3-dev and libimgui-dev: run "
                 "scripts/setup). The traces are ready for it:\n   " << open_command << "\n";
    return;
  }
  if (has_display() && !options.no_view) {
    std::cout << "   " << viewer << " " << summaries[0].trace << " --compare " << summaries[1].trace
              << on_clock << "\n" << std::flush;
    if (std::system((shell_quoted(viewer) + " " + a + " --compare " + b).c_str()) != 0) {
      throw CliFailure("the viewer failed; run it yourself to see why: " + open_command);
    }
    return;
  }
  if (!has_display() && !has_xvfb_run()) {
    std::cout << "   No display and no xvfb-run, so no screenshots (apt-get install xvfb for "
                 "them). Open the traces where there is a display:\n   " << open_command << "\n";
    return;
  }
  std::cout << (options.no_view ? "   --no-view" : "   No display")
            << ": screenshots of the viewer instead:\n";
  // Each run's screenshot beside its trace.
  const auto beside = [](const RunSummary& summary) {
    return std::filesystem::path(summary.trace).replace_filename("screenshot.png").string();
  };
  // The comparison shows both lessons (Note [The demo's lessons]): one steady iteration, both runs
  // aligned on it, rank 0 of each with its main and comm lanes and memory graph (the other ranks
  // and the unit lanes folded), the playhead on step 6, where DDP's first bucket goes on the link
  // while backward computes the rest.
  const std::string iteration = std::to_string(std::min<int64_t>(options.steps - 1, options.steps * 2 / 3));
  std::string others;
  for (int r = 1; r < options.ranks; ++r) others += (others.empty() ? "" : ",") + std::to_string(r);
  const std::string moment = " --iteration " + iteration + " --step 6 --fold-lanes" + (others.empty() ? "" : " --fold " + others);
  const std::vector<std::pair<std::string, std::string>> shots = {
      {a + " --compare " + b + moment, out + "/compare.png"},
      {a, beside(summaries[0])},
      {b + on_clock, beside(summaries[1])},
  };
  for (const auto& [traces, png] : shots) {
    if (screenshot(viewer, traces, png)) std::cout << "   " << png << "\n";
  }
  std::cout << "   Open the comparison where there is a display:\n   " << open_command << "\n";
}

void run_demo(const DemoOptions& options) {
  const std::string out = make_out_dir(options);
  // The MLP's layers hold 33,280, 3 x 262,656 and 5,130 parameters: a unit each from 2,000 up.
  // See Note [The demo's lessons].
  const std::vector<DemoRun> runs = {
      {"DDP", trace::Strategy::Ddp, " --bucket-cap-mb 1"},
      {"FSDP FULL_SHARD", trace::Strategy::Fsdp, " --sharding full --wrap-min-params 2000"},
  };
  const DeviceChoice device = choose_device(options.ranks);
  std::cout << "dpscope demo: " << options.ranks << " ranks " << device.line << "\n\n" << std::flush;
  std::vector<RunSummary> summaries;
  int number = 1;
  for (const DemoRun& run : runs) summaries.push_back(launch_training(options, run, out, device, number++));
  const analysis::Clock clock = print_summaries(runs, summaries, number++);
  show_in_viewer(options, out, summaries, clock, number);
}

}  // namespace

void add_demo_command(CLI::App& app, CommandMode mode) {
  auto* command = app.add_subcommand(
      "demo", "The main job: train the digits with DDP and FSDP on 4 ranks, summarise, compare");
  auto options = std::make_shared<DemoOptions>();
  command->add_option("--out", options->out_dir, "Directory for the traces")
      ->capture_default_str();
  command->add_option("--ranks", options->ranks, "Ranks of each training")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command->add_option("--steps", options->steps, "Optimizer steps of each training")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->capture_default_str();
  command->add_flag("--no-view", options->no_view,
                    "Write screenshots instead of opening the viewer, even with a display");
  core::add_link_options(*command, options->link, core::LinkUse::Emulate);
  command->add_flag("--no-link", options->no_link,
                    "Run on this machine's own transport, without the emulated link: measures "
                    "the machine itself, where the ranks' communication competes with their "
                    "compute for the same cores");
  command->callback([options, mode] {
    try {
      options->link.checked();
    } catch (const std::invalid_argument& error) {
      throw CliFailure(std::string("demo: ") + error.what());
    }
    if (mode == CommandMode::Validate) return;
    run_demo(*options);
  });
}

}  // namespace dpscope::cli
