// synth: a synthetic DDP run simulated rank by rank with a simple cost model and written
// straight into one run file through Writer (see synth.h). Every sync point of a real run (each
// collective) is simulated across all ranks at once, so collectives end together everywhere.
#include "formats/synth.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/link_model.h"
#include "trace/error.h"
#include "trace/vocabulary.h"
#include "trace/writer.h"

namespace dpscope::formats {
namespace {

constexpr int kMaxRanks = 1024;
// Iteration numbers are int32 in the format; this keeps every plan far below that.
constexpr int64_t kMaxEvents = 2'000'000'000;

// ---- The cost model: one CPU rank, gloo on an emulated link (SynthOptions::link_gbps,
// link_latency_us; each collective lasts core::link_model_ns, the ring model the cluster
// clock replays with). Only proportions matter to the viewer; for the default model on 8 ranks
// and the default 4 Gb/s link forward:backward compute:all-reduce come out about 1:2:2.7, so
// the all-reduces overlap backward and queue behind it, and a part of them is exposed in the
// waits at its end, as on gloo runs.
constexpr int64_t kInputs = 64;  // digits-like input features
constexpr int64_t kClasses = 10;
constexpr int64_t kBatch = 32;
constexpr double kFlopsPerNs = 12.5;   // matmul throughput of one rank
constexpr double kCopyBytesPerNs = 5;  // memcpy into and out of buckets
constexpr int64_t kDispatchNs = 8'000;  // enqueue on the caller -> start on the comm thread
constexpr int64_t kHookOverheadNs = 2'000;
constexpr int64_t kDataLoadNs = 800'000;                      // between iterations
constexpr int64_t kMaxSkewNs = 5'000;                         // fixed per-rank offset of the start
constexpr double kSpread = 0.02;                              // relative jitter of every duration
constexpr int64_t kBroadcastChunkBytes = int64_t{250} << 20;  // DDP's coalesced broadcast cap
constexpr int64_t kStartNs = 1'000'000'000;  // the steady clock at the start of rank 0
constexpr int64_t kSynthRowsPerTransaction = 100'000;

// splitmix64: small, fast, and the same stream on every platform and standard library (the
// std distributions are not), so a seed gives the same rows everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // `ns` varied by up to ±kSpread; at least 1 ns, so slices never have zero length.
  int64_t vary(double ns) {
    return std::max<int64_t>(1, std::llround(ns * (1 + kSpread * (2 * uniform() - 1))));
  }
  int64_t upto(int64_t ns) { return static_cast<int64_t>(uniform() * static_cast<double>(ns)); }

 private:
  uint64_t state_;
};

// The names of the phases and metrics, interned as ids 1.. in this order.
inline constexpr trace::NameId kDdpInit = 1, kVerifyModel = 2, kBroadcastState = 3,
    kBuildBuckets = 4, kRebuildBuckets = 5, kIteration = 6, kForward = 7, kBackward = 8,
    kOptimizerStep = 9, kLoss = 10, kStepMs = 11;
constexpr std::string_view kNames[] = {
    "ddp_init",      "verify_model",      "broadcast_state",    "build_buckets",
    "rebuild_buckets", trace::kPhaseIteration,   trace::kPhaseForward,        trace::kPhaseBackward,
    trace::kPhaseOptimizerStep, trace::kMetricLoss,     trace::kMetricStepMs};

struct Model {
  std::vector<trace::ParamInfo> params;
  std::vector<int64_t> layer_flops;        // forward; backward costs twice as much
  std::vector<int64_t> layer_activations;  // bytes kept from forward until backward
  int64_t param_bytes = 0;
};

Model make_model(const SynthOptions& options) {
  Model model;
  const int layers = options.layers;
  for (int l = 0; l < layers; ++l) {
    const int64_t in = l == 0 ? kInputs : options.hidden;
    const int64_t out = l == layers - 1 ? kClasses : options.hidden;
    const std::string prefix = "fc" + std::to_string(l);
    for (int part = 0; part < 2; ++part) {
      trace::ParamInfo p;
      p.index = static_cast<int32_t>(model.params.size());
      p.name = prefix + (part == 0 ? ".weight" : ".bias");
      p.shape = part == 0 ? std::vector<int64_t>{out, in} : std::vector<int64_t>{out};
      p.numel = part == 0 ? out * in : out;
      model.param_bytes += p.numel * 4;
      model.params.push_back(std::move(p));
    }
    model.layer_flops.push_back(2 * kBatch * in * out);
    // The Linear's output and, but for the last layer, the ReLU's.
    model.layer_activations.push_back(kBatch * out * 4 * (l == layers - 1 ? 1 : 2));
  }
  return model;
}

// DDP's compute_bucket_assignment_by_size for one dtype and device: walk `order`, closing a
// bucket once it holds at least the current limit: first_bucket_bytes, then the cap.
std::vector<std::vector<int32_t>> assign_buckets(const Model& model,
                                                 const std::vector<int32_t>& order,
                                                 const SynthOptions& options) {
  std::vector<std::vector<int32_t>> buckets;
  std::vector<int32_t> current;
  int64_t bytes = 0;
  for (int32_t p : order) {
    current.push_back(p);
    bytes += model.params[static_cast<size_t>(p)].numel * 4;
    if (bytes >= (buckets.empty() ? options.first_bucket_bytes : options.bucket_cap_bytes)) {
      buckets.push_back(std::move(current));
      current.clear();
      bytes = 0;
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

struct Plan {
  std::vector<trace::BucketInfo> buckets;
  std::vector<int32_t> bucket_of;  // by parameter
};

Plan make_plan(const Model& model, int32_t generation,
               const std::vector<std::vector<int32_t>>& groups) {
  Plan plan;
  plan.bucket_of.assign(model.params.size(), trace::kNone);
  for (const auto& group : groups) {
    trace::BucketInfo b;
    b.generation = generation;
    b.index = static_cast<int32_t>(plan.buckets.size());
    for (int32_t p : group) {
      b.params.push_back(p);
      b.offsets.push_back(b.numel);
      b.numel += model.params[static_cast<size_t>(p)].numel;
      plan.bucket_of[static_cast<size_t>(p)] = b.index;
    }
    b.bytes = b.numel * 4;
    plan.buckets.push_back(std::move(b));
  }
  return plan;
}

// Initial plan, as DDP builds it by default (PyTorch >= 1.12; the engine's Note [The first
// iteration's buckets]): one bucket of every parameter in registration order. Rebuilt plan: the
// order gradients actually arrived in iteration 0 (reverse registration order here), bucketed by
// size and kept as it is.
std::pair<Plan, Plan> make_plans(const Model& model, const SynthOptions& options) {
  const auto count = static_cast<int32_t>(model.params.size());
  std::vector<int32_t> order(static_cast<size_t>(count));
  for (int32_t p = 0; p < count; ++p) order[static_cast<size_t>(p)] = p;
  const std::vector<std::vector<int32_t>> initial = {order};
  std::reverse(order.begin(), order.end());
  return {make_plan(model, 0, initial), make_plan(model, 1, assign_buckets(model, order, options))};
}

int64_t state_chunks(const Model& model) {
  return std::max<int64_t>(1,
                           (model.param_bytes + kBroadcastChunkBytes - 1) / kBroadcastChunkBytes);
}

struct Rows {
  int64_t events = 0, memory = 0, metrics = 0;
  int64_t total() const { return events + memory + metrics; }
};

// The rows one rank gets, as the simulation below writes them.
struct RowPlan {
  Rows construction;  // phases ddp_init, verify_model, broadcast_state, build_buckets, each
                      // broadcast with its wait; parameters and buckets memory
  Rows first;         // iteration 0
  Rows rebuild;       // extra in iteration 1: the rebuild_buckets phase, broadcast and wait
  Rows later;         // every iteration after 0

  Rows per_rank(int64_t iterations) const {
    Rows rows = construction;
    auto add = [&](const Rows& more, int64_t times) {
      rows.events += more.events * times;
      rows.memory += more.memory * times;
      rows.metrics += more.metrics * times;
    };
    add(first, 1);
    if (iterations > 1) {
      add(rebuild, 1);
      add(later, iterations - 1);
    }
    return rows;
  }
};

RowPlan row_plan(const Model& model, const Plan& initial, const Plan& rebuilt) {
  const auto params = static_cast<int64_t>(model.params.size());
  const auto layers = static_cast<int64_t>(model.layer_flops.size());
  // Events: 4 phases, a hook per parameter, and per bucket ready, launch, all-reduce, wait and
  // done. Memory (each sample followed by the allocator total): activations after each layer of
  // forward, gradients and activations at each bucket ready, optimizer state and gradients
  // after the step. Metrics: loss and step_ms.
  auto iteration = [&](const Plan& plan) {
    const auto buckets = static_cast<int64_t>(plan.buckets.size());
    return Rows{4 + params + 5 * buckets, 2 * layers + 3 * buckets + 3, 2};
  };
  return RowPlan{Rows{4 + 2 * (1 + state_chunks(model)), 4, 0}, iteration(initial), Rows{3, 0, 0},
                 iteration(rebuilt)};
}

// Whole iterations whose event count over all ranks is closest to `events` (at least one).
int64_t choose_iterations(const RowPlan& plan, int64_t events, int ranks) {
  const double per_rank = static_cast<double>(events) / ranks;
  const double estimate =
      1 + (per_rank - static_cast<double>(plan.per_rank(1).events + plan.rebuild.events)) /
              static_cast<double>(plan.later.events);
  const auto low = std::max<int64_t>(1, static_cast<int64_t>(std::floor(estimate)));
  auto error = [&](int64_t n) { return std::llabs(plan.per_rank(n).events * ranks - events); };
  return error(low + 1) < error(low) ? low + 1 : low;
}

// Progress over the whole job in work units: a row written is one, and building an index
// costs about as much as writing the events once more (measured with 10 M events and 9 M
// memory samples: 8.6 s for the rows, 4 to 5 s for each of the three indexes).
class Progress {
 public:
  Progress(int64_t total_units, const std::function<void(double)>& report)
      : total_(std::max<int64_t>(1, total_units)),
        step_(std::max<int64_t>(1, total_ / 100)),
        next_(step_),
        report_(report) {}
  void advance(int64_t units) {
    done_ += units;
    if (report_ && done_ >= next_) {
      next_ = done_ + step_;
      report_(std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_)));
    }
  }

 private:
  int64_t total_, step_, next_, done_ = 0;
  const std::function<void(double)>& report_;
};

void validate(const SynthOptions& options) {
  if (options.events < 1 || options.events > kMaxEvents) {
    throw trace::TraceError("synth: --events must be between 1 and " + std::to_string(kMaxEvents) +
                     " (got " + std::to_string(options.events) + ")");
  }
  if (options.ranks < 1 || options.ranks > kMaxRanks) {
    throw trace::TraceError("synth: --ranks must be between 1 and " + std::to_string(kMaxRanks) +
                     " (got " + std::to_string(options.ranks) + ")");
  }
  if (options.layers < 1 || options.hidden < 1) {
    throw trace::TraceError("synth: the model needs at least 1 layer of width at least 1 (got " +
                     std::to_string(options.layers) + " layers of width " +
                     std::to_string(options.hidden) + ")");
  }
  if (options.first_bucket_bytes < 1 || options.bucket_cap_bytes < 1) {
    throw trace::TraceError("synth: bucket limits must be at least 1 byte");
  }
  try {
    core::check_link(options.link_gbps, options.link_latency_us, core::kLinkGbpsFlag, core::kLinkLatencyFlag);
  } catch (const std::invalid_argument& error) {
    throw trace::TraceError(std::string("synth: ") + error.what());
  }
  if (options.out.empty()) throw trace::TraceError("synth: no output path; pass --out PATH");
  const std::filesystem::path out(options.out);
  const std::filesystem::path parent =
      out.has_parent_path() ? out.parent_path() : std::filesystem::path(".");
  std::error_code error;
  if (!std::filesystem::is_directory(parent, error)) {
    throw trace::TraceError("synth: cannot write " + options.out + ": directory " + parent.string() +
                     " does not exist; create it or choose another --out");
  }
  if (std::filesystem::is_directory(out, error)) {
    throw trace::TraceError("synth: cannot write " + options.out +
                     ": it is a directory; give a file name with --out");
  }
}

// Rows go to the writer through here: counted (events per rank), committed every
// kSynthRowsPerTransaction rows, and reported to `progress`.
class Sink {
 public:
  Sink(trace::Writer& writer, int ranks, Progress& progress)
      : writer_(writer), events_per_rank_(static_cast<size_t>(ranks)), progress_(progress) {
    writer_.begin();
  }

  void event(const trace::Event& e) {
    writer_.add_event(e);
    ++events_per_rank_[static_cast<size_t>(e.rank)];
    ++rows_.events;
    row();
  }
  void memory(int32_t rank, int64_t ts_ns, trace::MemoryCategory category, int64_t bytes) {
    writer_.add_memory(trace::MemorySample{rank, ts_ns, category, bytes});
    ++rows_.memory;
    row();
  }
  void metric(int32_t rank, int32_t iteration, trace::NameId name, double value) {
    writer_.add_metric(rank, iteration, name, value);
    ++rows_.metrics;
    row();
  }
  void commit() { writer_.commit(); }

  int64_t rank_events(int rank) const { return events_per_rank_[static_cast<size_t>(rank)]; }
  const Rows& rows() const { return rows_; }

 private:
  void row() {
    progress_.advance(1);
    if (++in_transaction_ == kSynthRowsPerTransaction) {
      writer_.commit();
      writer_.begin();
      in_transaction_ = 0;
    }
  }

  trace::Writer& writer_;
  std::vector<int64_t> events_per_rank_;
  Progress& progress_;
  Rows rows_;
  int64_t in_transaction_ = 0;
};

// A time per rank.
using Times = std::vector<int64_t>;

// Note [Synthetic CPU time]
// The computing thread of a rank (lane 0) at full speed, alone on its core: its CPU clock
// (CLOCK_THREAD_CPUTIME_ID, Note [Thread CPU time]) advances with the wall clock while it
// computes and stands still while it waits inside a collective_wait. So phases and waits get
// cpu_begin_ns and cpu_end_ns, each collective cpu_begin_ns at its issue (enqueue_ns), each
// gradient hook cpu_end_ns, and the
// cluster clock (analysis/cluster_clock.h) can replay the run. A rank's clock reads 0 at its
// start.
class CpuClock {
 public:
  explicit CpuClock(int64_t start = 0) : start_(start) {}
  // The thread waited from `begin` to `end` (after every wait recorded before).
  void wait(int64_t begin, int64_t end) {
    waits_.push_back({begin, end, waited_});
    waited_ += std::max<int64_t>(0, end - begin);
  }
  // The CPU clock at wall time `t`, which is no earlier than the last forget(): the wall time
  // since the start less the waits before `t`.
  int64_t at(int64_t t) const {
    const auto after = std::upper_bound(waits_.begin(), waits_.end(), t,
                                        [](int64_t v, const Wait& w) { return v < w.begin; });
    if (after == waits_.begin()) return t - start_ - forgotten_;
    const Wait& w = *std::prev(after);
    return t - start_ - w.waited_before - (std::min(t, w.end) - w.begin);
  }
  // Drops the waits that end before `t`: later questions are about `t` or after (an iteration's
  // phases begin at its start), so the list stays a few buckets long.
  void forget(int64_t t) {
    size_t n = 0;
    while (n < waits_.size() && waits_[n].end <= t) ++n;
    forgotten_ = n < waits_.size() ? waits_[n].waited_before : waited_;
    waits_.erase(waits_.begin(), waits_.begin() + static_cast<std::ptrdiff_t>(n));
  }

 private:
  struct Wait {
    int64_t begin, end, waited_before;
  };
  int64_t start_;
  std::vector<Wait> waits_;
  int64_t waited_ = 0;     // every wait so far
  int64_t forgotten_ = 0;  // the waits forget() dropped
};

// The simulated run: every rank's clocks and memory, advanced stage by stage. Ranks are indexed
// by size_t here and narrowed where they go into rows.
class Simulation {
 public:
  Simulation(const SynthOptions& options, int64_t iterations, const Model& model,
             const Plan& initial, const Plan& rebuilt, Sink& sink)
      : link_{options.link_gbps, options.link_latency_us},
        iterations_(iterations),
        model_(model),
        initial_(initial),
        rebuilt_(rebuilt),
        sink_(sink),
        rng_(options.seed),
        ranks_(static_cast<size_t>(options.ranks)) {
    for (RankState& s : ranks_) {
      s.host = s.comm_free = s.start = kStartNs + rng_.upto(kMaxSkewNs);
      s.cpu = CpuClock(s.start);
    }
  }

  // DDP's constructor: verify_model, broadcast_state, build_buckets, inside ddp_init.
  void construction() {
    Times init_begin = hosts(), step_begin = init_begin, enqueue(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r].held(trace::MemoryCategory::Parameters) = model_.param_bytes;
      sample(r, {trace::MemoryCategory::Parameters});
    }
    // verify_model: rank 0 broadcasts every parameter's sizes and strides (int64).
    int64_t shape_bytes = 0;
    for (const auto& p : model_.params) shape_bytes += 2 * 8 * static_cast<int64_t>(p.shape.size());
    for (size_t r = 0; r < ranks_.size(); ++r) enqueue[r] = ranks_[r].host + rng_.vary(20'000);
    const int64_t seq = next_seq_;
    const Times ends =
        collective(trace::CollectiveOp::Broadcast, shape_bytes, trace::DType::Int64, trace::kNone, trace::kNone, enqueue);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      RankState& s = ranks_[r];
      s.host = wait(r, trace::CollectiveOp::Broadcast, seq, trace::kNone, trace::kNone, enqueue[r], ends[r]);
      sink_.event(phase(r, kVerifyModel, step_begin[r], s.host, trace::kNone));
    }
    step_begin = hosts();
    broadcast_state();
    for (size_t r = 0; r < ranks_.size(); ++r) {
      sink_.event(phase(r, kBroadcastState, step_begin[r], ranks_[r].host, trace::kNone));
    }
    // build_buckets: the assignment and the flat bucket buffers.
    for (size_t r = 0; r < ranks_.size(); ++r) {
      RankState& s = ranks_[r];
      const int64_t begin = s.host;
      s.host += rng_.vary(50'000 + 200.0 * static_cast<double>(model_.params.size()));
      s.held(trace::MemoryCategory::Buckets) = model_.param_bytes;
      sample(r, {trace::MemoryCategory::Buckets});
      sink_.event(phase(r, kBuildBuckets, begin, s.host, trace::kNone));
      sink_.event(phase(r, kDdpInit, init_begin[r], s.host, trace::kNone));
    }
  }

  void iteration(int32_t it) {
    const Times begin = hosts();
    for (size_t r = 0; r < ranks_.size(); ++r) ranks_[r].cpu.forget(begin[r]);
    if (it == 1) rebuild_buckets();
    for (size_t r = 0; r < ranks_.size(); ++r) forward(r, it);
    backward(it, it == 0 ? initial_ : rebuilt_);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      RankState& s = ranks_[r];
      // optimizer_step: SGD with momentum reads parameters, gradients and momentum, writes two.
      const int64_t step_begin = s.host;
      s.host += rng_.vary(5.0 * static_cast<double>(model_.param_bytes) / kCopyBytesPerNs);
      sink_.event(phase(r, kOptimizerStep, step_begin, s.host, it));
      s.held(trace::MemoryCategory::OptimizerState) = model_.param_bytes;  // momentum
      s.held(trace::MemoryCategory::Gradients) = 0;                        // zero_grad(set_to_none)
      sample(r, {trace::MemoryCategory::OptimizerState, trace::MemoryCategory::Gradients});
      sink_.event(phase(r, kIteration, begin[r], s.host, it));
      const auto rank = static_cast<int32_t>(r);
      sink_.metric(rank, it, kLoss, loss(it));
      sink_.metric(rank, it, kStepMs, static_cast<double>(s.host - begin[r]) / 1e6);
      s.host += rng_.vary(kDataLoadNs);
    }
  }

  int64_t rank_start(size_t r) const { return ranks_[r].start; }
  int64_t rank_end(size_t r) const { return std::max(ranks_[r].host, ranks_[r].comm_free); }

 private:
  struct RankState {
    int64_t start = 0;
    int64_t host = 0;       // the main lane's clock
    int64_t comm_free = 0;  // when the comm lane's last collective ends
    CpuClock cpu;           // the main lane's thread (Note [Synthetic CPU time])
    std::array<int64_t, trace::kMemoryCategoryCount> held_{};  // bytes by stacked category
    int64_t& held(trace::MemoryCategory category) { return held_[static_cast<size_t>(category)]; }
  };

  Times hosts() const {
    Times times;
    for (const RankState& s : ranks_) times.push_back(s.host);
    return times;
  }

  static trace::Event event(size_t r, trace::EventKind kind, int64_t begin, int64_t end, int32_t iteration) {
    trace::Event e;
    e.kind = kind;
    e.rank = static_cast<int16_t>(r);
    e.begin_ns = begin;
    e.end_ns = end;
    e.iteration = iteration;
    return e;
  }
  // A phase of rank r's main lane, with its thread's CPU times.
  trace::Event phase(size_t r, trace::NameId name, int64_t begin, int64_t end, int32_t iteration) const {
    trace::Event e = event(r, trace::EventKind::Phase, begin, end, iteration);
    e.name = name;
    e.cpu_begin_ns = ranks_[r].cpu.at(begin);
    e.cpu_end_ns = ranks_[r].cpu.at(end);
    return e;
  }
  static trace::Event instant(size_t r, trace::EventKind kind, int64_t ts, int32_t iteration, size_t bucket,
                       int64_t seq = trace::kNone64) {
    trace::Event e = event(r, kind, ts, ts, iteration);
    e.bucket = static_cast<int32_t>(bucket);
    e.seq = seq;
    return e;
  }

  // Samples the given categories of rank r at its host clock, then the allocator total (the
  // sum of every category).
  void sample(size_t r, std::initializer_list<trace::MemoryCategory> categories) {
    RankState& s = ranks_[r];
    int64_t total = 0;
    for (int64_t bytes : s.held_) total += bytes;
    const auto rank = static_cast<int32_t>(r);
    for (trace::MemoryCategory category : categories)
      sink_.memory(rank, s.host, category, s.held(category));
    sink_.memory(rank, s.host, trace::MemoryCategory::AllocatorTotal, total);
  }

  // One collective on every rank: each rank's comm thread starts it after its enqueue and its
  // previous collective; it completes on all ranks once the last rank has started it and the
  // data has moved. Emits the Collective slices; returns each rank's end.
  Times collective(trace::CollectiveOp op, int64_t bytes, trace::DType dtype, int32_t iteration, int32_t bucket,
                   const Times& enqueue) {
    const int64_t seq = next_seq_++;
    const double R = static_cast<double>(ranks_.size());
    Times begin(ranks_.size()), end(ranks_.size());
    int64_t last_start = 0;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      begin[r] = std::max(enqueue[r] + rng_.vary(kDispatchNs), ranks_[r].comm_free);
      last_start = std::max(last_start, begin[r]);
    }
    // The ring model of the link (what the emulated link holds a collective to); the real
    // transfer varies around it.
    const int64_t done =
        last_start + rng_.vary(static_cast<double>(core::link_model_ns(op, bytes, static_cast<int>(R), link_)));
    for (size_t r = 0; r < ranks_.size(); ++r) {
      end[r] = ranks_[r].comm_free = done + rng_.upto(2'000);
      trace::Event e = event(r, trace::EventKind::Collective, begin[r], end[r], iteration);
      e.lane = 1;
      e.enqueue_ns = enqueue[r];
      e.cpu_begin_ns = ranks_[r].cpu.at(enqueue[r]);  // the issuing thread's, at the issue
      e.bucket = bucket;
      e.op = static_cast<uint8_t>(op);
      e.grp = 0;
      e.seq = seq;
      e.bytes = bytes;
      e.dtype = static_cast<uint8_t>(dtype);
      sink_.event(e);
    }
    return end;
  }

  // The main lane of rank r waits from `from` for the collective `seq` that ends at `done`;
  // returns when the wait returns.
  int64_t wait(size_t r, trace::CollectiveOp op, int64_t seq, int32_t iteration, int32_t bucket,
               int64_t from, int64_t done) {
    trace::Event e = event(r, trace::EventKind::CollectiveWait, from,
                    std::max(from, done) + 500 + rng_.upto(1'500), iteration);
    e.cpu_begin_ns = ranks_[r].cpu.at(from);
    ranks_[r].cpu.wait(from, e.end_ns);
    e.cpu_end_ns = ranks_[r].cpu.at(e.end_ns);
    e.bucket = bucket;
    e.op = static_cast<uint8_t>(op);
    e.grp = 0;
    e.seq = seq;
    sink_.event(e);
    return e.end_ns;
  }

  // broadcast_state: rank 0's parameters, flattened into chunks of at most 250 MiB, at most
  // two broadcasts in flight, each chunk unflattened once its broadcast is waited for.
  void broadcast_state() {
    const auto chunks = static_cast<size_t>(state_chunks(model_));
    std::vector<int64_t> chunk_bytes, seqs;
    std::vector<Times> enqueues, ends;
    auto finish_chunk = [&](size_t k) {
      const double copy = static_cast<double>(chunk_bytes[k]) / kCopyBytesPerNs;
      for (size_t r = 0; r < ranks_.size(); ++r) {
        RankState& s = ranks_[r];
        s.host = wait(r, trace::CollectiveOp::Broadcast, seqs[k], trace::kNone, trace::kNone, s.host, ends[k][r]);
        s.host += rng_.vary(copy);
      }
    };
    for (size_t k = 0; k < chunks; ++k) {
      if (k >= 2) finish_chunk(k - 2);
      const int64_t offset = static_cast<int64_t>(k) * kBroadcastChunkBytes;
      chunk_bytes.push_back(std::min(kBroadcastChunkBytes, model_.param_bytes - offset));
      Times enqueue(ranks_.size());
      for (size_t r = 0; r < ranks_.size(); ++r) {
        ranks_[r].host += rng_.vary(static_cast<double>(chunk_bytes[k]) / kCopyBytesPerNs);
        enqueue[r] = ranks_[r].host;
      }
      seqs.push_back(next_seq_);
      ends.push_back(collective(trace::CollectiveOp::Broadcast, chunk_bytes[k], trace::DType::Float32, trace::kNone,
                                trace::kNone, enqueue));
      enqueues.push_back(std::move(enqueue));
    }
    for (size_t k = chunks < 2 ? 0 : chunks - 2; k < chunks; ++k) finish_chunk(k);
  }

  // Iteration 1 starts by rebuilding the buckets; rank 0 broadcasts the new plan (bucket sizes
  // and parameter indices, int32) so that every rank uses the same one.
  void rebuild_buckets() {
    const Times begin = hosts();
    Times enqueue(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r) {
      enqueue[r] = begin[r] + rng_.vary(20'000 + 200.0 * static_cast<double>(model_.params.size()));
    }
    const auto bytes = 4 * static_cast<int64_t>(model_.params.size() + rebuilt_.buckets.size() + 1);
    const int64_t seq = next_seq_;
    const Times ends = collective(trace::CollectiveOp::Broadcast, bytes, trace::DType::Int32, 1, trace::kNone, enqueue);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r].host = wait(r, trace::CollectiveOp::Broadcast, seq, 1, trace::kNone, enqueue[r], ends[r]);
      sink_.event(phase(r, kRebuildBuckets, begin[r], ranks_[r].host, 1));
    }
  }

  void forward(size_t r, int32_t it) {
    RankState& s = ranks_[r];
    const int64_t begin = s.host;
    for (size_t l = 0; l < model_.layer_flops.size(); ++l) {
      s.host += rng_.vary(static_cast<double>(model_.layer_flops[l]) / kFlopsPerNs);
      s.held(trace::MemoryCategory::Activations) += model_.layer_activations[l];
      sample(r, {trace::MemoryCategory::Activations});
    }
    sink_.event(phase(r, kForward, begin, s.host, it));
  }

  // Backward on every rank: layers in reverse, a hook per gradient copying it into its bucket,
  // a full bucket launching its all-reduce (in bucket order, as DDP requires); then the
  // all-reduces across ranks; then each rank waits for every bucket and writes it back.
  void backward(int32_t it, const Plan& plan) {
    const size_t buckets = plan.buckets.size();
    const int64_t first_seq = next_seq_;
    const Times begin = hosts();
    std::vector<Times> launch(buckets, Times(ranks_.size()));
    for (size_t r = 0; r < ranks_.size(); ++r) {
      RankState& s = ranks_[r];
      std::vector<int64_t> fill(buckets, 0);
      std::vector<size_t> missing(buckets);
      for (size_t b = 0; b < buckets; ++b) missing[b] = plan.buckets[b].params.size();
      size_t next_launch = 0;
      for (size_t l = model_.layer_flops.size(); l-- > 0;) {
        s.host += rng_.vary(2.0 * static_cast<double>(model_.layer_flops[l]) / kFlopsPerNs);
        s.held(trace::MemoryCategory::Activations) -= model_.layer_activations[l];
        for (size_t p : {2 * l + 1, 2 * l}) {  // bias, then weight
          const auto bucket = static_cast<size_t>(plan.bucket_of[p]);
          const int64_t bytes = model_.params[p].numel * 4;
          const int64_t hook_begin = s.host;
          s.host += rng_.vary(kHookOverheadNs + static_cast<double>(bytes) / kCopyBytesPerNs);
          trace::Event hook = event(r, trace::EventKind::Hook, hook_begin, s.host, it);
          hook.cpu_end_ns = ranks_[r].cpu.at(s.host);
          hook.param = static_cast<int32_t>(p);
          hook.bucket = static_cast<int32_t>(bucket);
          hook.value = fill[bucket] += bytes;
          s.held(trace::MemoryCategory::Gradients) += bytes;
          if (--missing[bucket] > 0) {
            sink_.event(hook);
            continue;
          }
          // The hook that completes a bucket marks it ready and launches it (and every full
          // bucket after it) before it returns, as the Reducer's does: the instants lie inside it.
          std::vector<trace::Event> instants = {instant(r, trace::EventKind::BucketReady, s.host, it, bucket)};
          sample(r, {trace::MemoryCategory::Gradients, trace::MemoryCategory::Activations});
          for (; next_launch < buckets && missing[next_launch] == 0; ++next_launch) {
            s.host += rng_.vary(3'000);
            launch[next_launch][r] = s.host;
            instants.push_back(instant(r, trace::EventKind::BucketLaunch, s.host, it, next_launch,
                                       first_seq + static_cast<int64_t>(next_launch)));
          }
          hook.end_ns = s.host + 500;
          hook.cpu_end_ns = ranks_[r].cpu.at(hook.end_ns);
          s.host = hook.end_ns;
          sink_.event(hook);
          for (const trace::Event& e : instants) sink_.event(e);
        }
      }
    }
    std::vector<Times> ends;
    for (size_t b = 0; b < buckets; ++b) {
      ends.push_back(collective(trace::CollectiveOp::AllReduce, plan.buckets[b].bytes, trace::DType::Float32, it,
                                static_cast<int32_t>(b), launch[b]));
    }
    for (size_t r = 0; r < ranks_.size(); ++r) {
      RankState& s = ranks_[r];
      for (size_t b = 0; b < buckets; ++b) {
        s.host = wait(r, trace::CollectiveOp::AllReduce, first_seq + static_cast<int64_t>(b), it,
                      static_cast<int32_t>(b), s.host, ends[b][r]);
        // Average and copy the result back into the parameters' .grad.
        s.host += rng_.vary(static_cast<double>(plan.buckets[b].bytes) / kCopyBytesPerNs);
        sink_.event(instant(r, trace::EventKind::BucketDone, s.host, it, b));
      }
      sink_.event(phase(r, kBackward, begin[r], s.host, it));
    }
  }

  // Falls from about 2.3 (ln 10 classes) towards 0.05 over the run, with noise per rank.
  double loss(int32_t it) {
    const double progress = static_cast<double>(it) / static_cast<double>(iterations_);
    return 0.05 + 2.25 * std::exp(-4.0 * progress) * (1 + 0.1 * (2 * rng_.uniform() - 1));
  }

  const core::LinkSpec link_;
  const int64_t iterations_;
  const Model& model_;
  const Plan& initial_;
  const Plan& rebuilt_;
  Sink& sink_;
  Rng rng_;
  std::vector<RankState> ranks_;
  int64_t next_seq_ = 0;  // process group 0's sequence number: the same on every rank
};

std::string config_json(const SynthOptions& options) {
  namespace config_key = trace::config_key;
  nlohmann::json config = {{config_key::kSynthetic, true},
                           {config_key::kSeed, options.seed},
                           {config_key::kEvents, options.events},
                           {config_key::kLayers, options.layers},
                           {config_key::kHidden, options.hidden},
                           {config_key::kBatchSize, kBatch},
                           {config_key::kFirstBucketBytes, options.first_bucket_bytes},
                           {config_key::kBucketCapBytes, options.bucket_cap_bytes},
                           {config_key::kLinkGbps, options.link_gbps},
                           {config_key::kLinkLatencyUs, options.link_latency_us}};
  return config.dump();
}

// The run file at options.out, replaced if it exists.
std::unique_ptr<trace::Writer> open_run_file(const SynthOptions& options) {
  try {
    return std::make_unique<trace::Writer>(options.out);
  } catch (const trace::TraceError& error) {
    throw trace::TraceError(std::string("synth: ") + error.what() + "; choose a writable --out path");
  }
}

// The meta table, as `dpscope train --strategy ddp` writes it for the same run.
void write_meta(trace::Writer& w, const SynthOptions& options, const Model& model) {
  namespace key = trace::meta_key;
  w.set_meta(key::kStrategy, trace::to_string(trace::Strategy::Ddp));
  w.set_meta(key::kDdpInitialBuckets, trace::to_string(trace::InitialBuckets::PyTorch));
  w.set_meta(key::kBackend, trace::to_string(trace::Backend::Gloo));
  w.set_meta(key::kWorldSize, std::to_string(options.ranks));
  w.set_meta(key::kModel, "synthetic mlp");
  w.set_meta(key::kModelSummary,
             std::to_string(options.layers) + " Linear layers (" + std::to_string(kInputs) +
                 " -> " + std::to_string(options.hidden) + " -> ... -> " +
                 std::to_string(kClasses) + "), " + std::to_string(model.params.size()) +
                 " parameters, " + std::to_string(model.param_bytes / 4) + " elements");
  w.set_meta(key::kCommandLine, "dpscope synth --events " + std::to_string(options.events) +
                                    " --ranks " + std::to_string(options.ranks) + " --out " +
                                    options.out + " --seed " + std::to_string(options.seed));
  w.set_meta(key::kConfig, config_json(options));
  w.set_meta(key::kTraceLevel, trace::to_string(trace::TraceLevel::Full));
  w.set_meta(key::kDevice, trace::to_string(trace::Device::Cpu));
  // The link the collectives were sized by, and one thread a rank: what the cluster clock needs.
  w.set_meta(key::kLinkGbps, core::link_value_text(options.link_gbps));
  w.set_meta(key::kLinkLatencyUs, core::link_value_text(options.link_latency_us));
  w.set_meta(key::kIntraOpThreads, "1");
  w.set_meta(key::kCreatedUnixMs,
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count()));
}

// What the events refer to: the names, every rank's two lanes, the parameters and both
// generations of buckets.
void write_setup(trace::Writer& w, const SynthOptions& options, const Model& model,
                 const Plan& initial, const Plan& rebuilt) {
  for (trace::NameId id = kDdpInit; id <= kStepMs; ++id) w.add_name(id, kNames[id - 1]);
  for (int r = 0; r < options.ranks; ++r) {
    w.add_lane(trace::LaneInfo{r, 0, "main", trace::LaneKind::Host});
    w.add_lane(trace::LaneInfo{r, 1, "gloo comm", trace::LaneKind::Comm});
  }
  for (trace::ParamInfo p : model.params) {
    p.bucket = initial.bucket_of[static_cast<size_t>(p.index)];
    p.rebuilt_bucket = rebuilt.bucket_of[static_cast<size_t>(p.index)];
    w.add_param(p);
  }
  for (const Plan* generation : {&initial, &rebuilt}) {
    for (const auto& b : generation->buckets) w.add_bucket(b);
  }
}

// Every rank's row of `ranks`, complete, on hosts of 8 ranks each.
void write_ranks(trace::Writer& w, int ranks, const Simulation& simulation, const Sink& sink) {
  for (int r = 0; r < ranks; ++r) {
    trace::RankInfo info;
    info.rank = r;
    info.host = "synth-node" + std::to_string(r / 8);
    info.pid = 10000 + r;
    info.local_rank = r % 8;
    info.start_ns = simulation.rank_start(static_cast<size_t>(r));
    info.end_ns = simulation.rank_end(static_cast<size_t>(r));
    info.events = sink.rank_events(r);
    info.status = trace::to_string(trace::RankStatus::Complete);
    w.put_rank(info);
  }
}

}  // namespace

void check_synth_options(const SynthOptions& options) { validate(options); }

SynthResult synthesize(const SynthOptions& options, const std::function<void(double)>& progress) {
  validate(options);
  const Model model = make_model(options);
  const auto [initial, rebuilt] = make_plans(model, options);
  const RowPlan plan = row_plan(model, initial, rebuilt);
  const int64_t iterations = choose_iterations(plan, options.events, options.ranks);
  const Rows rows_per_rank = plan.per_rank(iterations);
  const int64_t index_units = rows_per_rank.events * options.ranks;
  Progress tracker(rows_per_rank.total() * options.ranks +
                       index_units * static_cast<int64_t>(std::size(trace::kIndexes)),
                   progress);

  const std::unique_ptr<trace::Writer> writer = open_run_file(options);
  trace::Writer& w = *writer;
  w.begin();
  write_meta(w, options, model);
  write_setup(w, options, model, initial, rebuilt);
  w.commit();

  Sink sink(w, options.ranks, tracker);
  Simulation simulation(options, iterations, model, initial, rebuilt, sink);
  simulation.construction();
  for (int64_t it = 0; it < iterations; ++it) simulation.iteration(static_cast<int32_t>(it));
  write_ranks(w, options.ranks, simulation, sink);
  sink.commit();
  // The indexes one by one, for progress; finish() then finds them there.
  for (const char* ddl : trace::kIndexes) {
    w.db().exec(ddl);
    tracker.advance(index_units);
  }
  w.finish();
  if (progress) progress(1.0);

  SynthResult result;
  result.events = sink.rows().events;
  result.memory_samples = sink.rows().memory;
  result.metrics = sink.rows().metrics;
  result.iterations = static_cast<int32_t>(iterations);
  result.params = static_cast<int32_t>(model.params.size());
  result.buckets_initial = static_cast<int32_t>(initial.buckets.size());
  result.buckets_rebuilt = static_cast<int32_t>(rebuilt.buckets.size());
  return result;
}

}  // namespace dpscope::formats
