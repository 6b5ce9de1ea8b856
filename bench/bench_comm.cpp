// bench_comm: one rank of the communication benchmark, run as
// `build/bin/dpscope launch -n 2 -- build/bin/bench_comm`. It times float32 sum all-reduces of
// 1 KiB to 64 MiB through our ProcessGroup (Gloo backend) against a raw Gloo all-reduce of the same
// bytes (GlooReference), and that raw all-reduce handed to a bare helper thread: a communication
// thread as PyTorch's ProcessGroupGloo has, which ours saves when the caller waits at once (Note
// [Run on wait]). A second raw all-reduce is timed like the others: raw against raw shows how far
// two identical code paths differ on the machine (an A/A test), the resolution of the overhead
// column. Every variant runs on the group's own connections (gloo_context_of), so only the code
// around the Gloo call differs. For ours it also splits each iteration into the Gloo call
// (Work::duration_ns) and the rest, our layer. Rank 0 prints the table bench/README.md quotes,
// `overhead_from_1MiB_max_pct <x>`, `raw_vs_raw_from_1MiB_max_abs_pct <y>` and
// `layer_from_1MiB_max_pct <z>`.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/comm/gloo_backend.h"
#include "engine/comm/gloo_reference.h"
#include "engine/comm/rendezvous.h"

using namespace dpscope;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kMinBytes = int64_t{1} << 10;
constexpr int64_t kMaxBytes = 64 * kMiB;
// The bar (our overhead <= 5%) applies from this size up.
constexpr int64_t kBarBytes = kMiB;
// Timed seconds per variant and size. Sizes below the bar get a glance; the sizes the bar applies
// to get most of the run (about a minute in all), because there a median of few runs moves by
// more than the 5% being checked (bench/README.md, Communication).
constexpr double kSecondsBelowBar = 0.4;
constexpr double kSecondsFromBar = 2.5;
// A run (of one variant) lasts at least this long, so that its first iteration, which may wake
// threads that fell asleep while the other variants ran, weighs little.
constexpr double kMinRunSeconds = 0.025;
// Timed runs per variant, odd for a clean median.
constexpr int kMinRuns = 9;
constexpr int kMaxRuns = 61;

enum Variant { Raw, RawAgain, Handoff, Ours };
constexpr int kVariants = 4;

double seconds_since(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

// The q-quantile of `values` (0.5: the median), the nearest sample below it.
double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1))];
}

std::string size_label(int64_t bytes) {
  if (bytes >= kMiB) return std::to_string(bytes / kMiB) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

// Runs raw all-reduces on a thread of its own: the caller hands each call over and sleeps until it
// is done, two thread wake-ups per all-reduce. That is what a communication thread alone adds to
// a raw call when the caller waits at once, and what ours cost before Note [Run on wait].
class HandoffThread {
 public:
  explicit HandoffThread(std::unique_ptr<comm::GlooReference> raw)
      : raw_(std::move(raw)), thread_([this] { loop(); }) {}
  ~HandoffThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void all_reduce_sum(float* data, size_t count) {
    std::unique_lock<std::mutex> lock(mutex_);
    data_ = data;
    count_ = count;
    pending_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !pending_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || pending_; });
      if (stop_) return;
      lock.unlock();
      std::exception_ptr error;
      try {
        raw_->all_reduce_sum(data_, count_);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      error_ = error;
      pending_ = false;
      cv_.notify_all();
    }
  }

  const std::unique_ptr<comm::GlooReference> raw_;
  std::mutex mutex_;
  std::condition_variable cv_;  // both ways: two threads, so notify_all wakes only the other
  float* data_ = nullptr;
  size_t count_ = 0;
  bool pending_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once the members above exist
};

struct Row {
  int64_t bytes = 0;
  int runs = 0;            // per variant
  int64_t iterations = 0;  // per run
  // The median over runs of a run's time per iteration: what an all-reduce costs, the
  // iterations that waited for a core included.
  std::array<double, kVariants> median{};
  // The 10th percentile of single iterations: an all-reduce that did not wait for a core.
  std::array<double, kVariants> p10{};

  // Ours, iteration by iteration: the Gloo call it makes (Work::duration_ns) and everything
  // around that call (issue, queue, wake-ups, the wait), as means over all of ours' iterations.
  double ours_gloo_mean = 0;
  double ours_layer_mean = 0;

  double overhead_pct() const { return (median[Ours] / median[Raw] - 1) * 100; }
  // What our layer adds to the raw Gloo call it makes, measured on the same iterations: the
  // machine's spread in Gloo's own time does not enter it (bench/README.md, Communication).
  double layer_pct() const { return ours_layer_mean / ours_gloo_mean * 100; }
  // The same ratio for two identical raw all-reduces: what the machine alone makes of a ratio.
  double raw_vs_raw_pct() const { return (median[RawAgain] / median[Raw] - 1) * 100; }
};

class Bench {
 public:
  Bench(comm::ProcessGroup& ours, comm::GlooReference& raw, comm::GlooReference& raw_again,
        HandoffThread& handoff)
      : ours_(ours), raw_(raw), raw_again_(raw_again), handoff_(handoff) {}

  Row measure(int64_t bytes) {
    // Zeros stay zeros under summing: no overflow to inf and no denormals, whose arithmetic
    // could be slower than that of normal numbers, however many iterations run.
    at::Tensor tensor = at::zeros({bytes / static_cast<int64_t>(sizeof(float))});
    Row row;
    row.bytes = bytes;

    // Warm-up, a count fixed by the size so every rank runs the same; its time sets the plan.
    const int64_t warm = std::clamp<int64_t>(4 * kMiB / bytes, 2, 50);
    double warm_seconds = 0;
    for (int v = 0; v < kVariants; ++v) {
      const auto begin = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < warm; ++i) run_once(static_cast<Variant>(v), tensor);
      warm_seconds = std::max(warm_seconds, seconds_since(begin));
    }
    // Ranks must agree on the plan to stay in lockstep, so it is made from the slowest rank's
    // warm-up time, which every rank learns through a max all-reduce.
    at::Tensor estimate = at::empty({1}, at::kDouble);
    estimate.data_ptr<double>()[0] = warm_seconds / static_cast<double>(warm);
    ours_.all_reduce(estimate, comm::ReduceOp::Max)->wait();
    const double per_iteration = estimate.data_ptr<double>()[0];
    const double seconds = bytes >= kBarBytes ? kSecondsFromBar : kSecondsBelowBar;
    row.iterations = std::max<int64_t>(1, std::lround(kMinRunSeconds / per_iteration));
    const double run_seconds = static_cast<double>(row.iterations) * per_iteration;
    row.runs = std::clamp(static_cast<int>(seconds / run_seconds), kMinRuns, kMaxRuns);
    if (row.runs % 2 == 0) --row.runs;

    // The variants take turns run by run, so drift (other load, frequency) spreads evenly over
    // them, in an order shuffled afresh each round: a fixed order (even one reversed every other
    // round) gives some variant a steady place, and the place alone moved a variant's median by
    // over 100 % at 1 MiB on the machine of bench/README.md. Every rank draws the same orders
    // from the same seed.
    std::array<std::vector<double>, kVariants> per_run;
    std::array<std::vector<double>, kVariants> single;
    double ours_gloo_seconds = 0;
    double ours_total_seconds = 0;
    std::mt19937 shuffler(static_cast<uint32_t>(bytes));
    std::array<Variant, kVariants> order{};
    for (int i = 0; i < kVariants; ++i) order[i] = static_cast<Variant>(i);
    for (int r = 0; r < row.runs; ++r) {
      std::shuffle(order.begin(), order.end(), shuffler);
      for (const Variant v : order) {
        const auto run_begin = std::chrono::steady_clock::now();
        for (int64_t k = 0; k < row.iterations; ++k) {
          const auto begin = std::chrono::steady_clock::now();
          const double gloo_seconds = run_once(v, tensor);
          single[v].push_back(seconds_since(begin));
          if (v == Ours) {
            ours_gloo_seconds += gloo_seconds;
            ours_total_seconds += single[v].back();
          }
        }
        per_run[v].push_back(seconds_since(run_begin) / static_cast<double>(row.iterations));
      }
    }
    for (int v = 0; v < kVariants; ++v) {
      row.median[v] = quantile(per_run[v], 0.5);
      row.p10[v] = quantile(single[v], 0.1);
    }
    const auto ours_iterations = static_cast<double>(single[Ours].size());
    row.ours_gloo_mean = ours_gloo_seconds / ours_iterations;
    row.ours_layer_mean = (ours_total_seconds - ours_gloo_seconds) / ours_iterations;
    return row;
  }

 private:
  // One all-reduce of `variant`; for ours, returns the seconds its Gloo call took (else 0).
  double run_once(Variant variant, at::Tensor& tensor) {
    float* data = tensor.data_ptr<float>();
    const auto count = static_cast<size_t>(tensor.numel());
    switch (variant) {
      case Raw: raw_.all_reduce_sum(data, count); break;
      case RawAgain: raw_again_.all_reduce_sum(data, count); break;
      case Handoff: handoff_.all_reduce_sum(data, count); break;
      case Ours: {
        const comm::WorkHandle work = ours_.all_reduce(tensor, comm::ReduceOp::Sum);
        work->wait();
        return static_cast<double>(work->duration_ns()) * 1e-9;
      }
    }
    return 0;
  }

  comm::ProcessGroup& ours_;
  comm::GlooReference& raw_;
  comm::GlooReference& raw_again_;
  HandoffThread& handoff_;
};

void print_header(int world) {
  std::printf("bench_comm: float32 all-reduce (sum), %d ranks, gloo; us per iteration\n", world);
  std::printf("%8s %10s %10s %10s %11s %10s %10s %8s %10s %10s %7s\n", "size", "runs x it",
              "raw us", "ours us", "overhead %", "p10 ovh %", "raw/raw %", "layer %",
              "handoff us", "handoff %", "GB/s");
  std::fflush(stdout);
}

void print_row(const Row& row) {
  const std::string plan = std::to_string(row.runs) + " x " + std::to_string(row.iterations);
  // Algorithm bandwidth: bytes reduced per second. For 2 ranks it equals the bus bandwidth
  // (2(n-1)/n times it) that nccl-tests reports.
  std::printf("%8s %10s %10.1f %10.1f %11.1f %10.1f %10.1f %8.1f %10.1f %10.1f %7.2f\n",
              size_label(row.bytes).c_str(), plan.c_str(), row.median[Raw] * 1e6,
              row.median[Ours] * 1e6, row.overhead_pct(),
              (row.p10[Ours] / row.p10[Raw] - 1) * 100, row.raw_vs_raw_pct(), row.layer_pct(),
              row.median[Handoff] * 1e6, (row.median[Handoff] / row.median[Raw] - 1) * 100,
              static_cast<double>(row.bytes) / row.median[Ours] / 1e9);
  std::fflush(stdout);
}

int run_bench() {
  const comm::LaunchEnv env = comm::read_launch_env();
  const auto timeout = std::chrono::seconds(60);
  std::shared_ptr<c10d::Store> store = comm::rendezvous(env, timeout);
  comm::ProcessGroupOptions options;  // no recorder: tracing off
  options.timeout = timeout;
  std::shared_ptr<comm::ProcessGroup> ours =
      comm::make_gloo_group(store, env.rank, env.world_size, options);
  const auto connections = comm::gloo_context_of(*ours);
  auto raw = std::make_unique<comm::GlooReference>(connections, timeout);
  auto raw_again = std::make_unique<comm::GlooReference>(connections, timeout);
  auto handoff =
      std::make_unique<HandoffThread>(std::make_unique<comm::GlooReference>(connections, timeout));

  Bench bench(*ours, *raw, *raw_again, *handoff);
  if (env.rank == 0) print_header(env.world_size);
  double worst_from_bar = -std::numeric_limits<double>::infinity();
  double noise_from_bar = 0;
  double layer_from_bar = -std::numeric_limits<double>::infinity();
  for (int64_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= 2) {
    const Row row = bench.measure(bytes);
    if (bytes >= kBarBytes) {
      worst_from_bar = std::max(worst_from_bar, row.overhead_pct());
      noise_from_bar = std::max(noise_from_bar, std::abs(row.raw_vs_raw_pct()));
      layer_from_bar = std::max(layer_from_bar, row.layer_pct());
    }
    if (env.rank == 0) print_row(row);
  }
  if (env.rank == 0) {
    std::printf("overhead_from_1MiB_max_pct %.1f\n", worst_from_bar);
    std::printf("raw_vs_raw_from_1MiB_max_abs_pct %.1f\n", noise_from_bar);
    std::printf("layer_from_1MiB_max_pct %.1f\n", layer_from_bar);
  }

  // Every rank is past its last raw all-reduce once this barrier completes, so no rank tears
  // down the group's connections under a peer's raw all-reduce.
  ours->barrier()->wait();
  handoff.reset();
  raw_again.reset();
  raw.reset();
  return 0;
}

}  // namespace

int main() {
  try {
    return run_bench();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_comm: %s\n", error.what());
    return 1;
  }
}
