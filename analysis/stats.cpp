// compute_stats: run statistics from a Reader (definitions in stats.h). Streams the events once
// and reduces each to counters and intervals as it passes, so a multi-million-event trace never
// sits in memory whole; the run-wide steps after the pass are in stats_run.cpp.
#include "analysis/stats.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>
#include <utility>

#include "analysis/cluster_clock.h"
#include "analysis/stats_run.h"
#include "analysis/intervals.h"
#include "trace/error.h"
#include "trace/saturate.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {
namespace {

using trace::detail::saturating_sub;

double to_ms(int64_t ns) { return double(ns) / 1e6; }

// See Note [Compute and exposed communication].
struct OverlapSets {
  IntervalSet compute;  // compute phases less waits
  IntervalSet comm;
};

OverlapSets overlap_sets(std::vector<Interval> compute_slices, std::vector<Interval> wait_slices,
                         std::vector<Interval> comm_slices) {
  return {IntervalSet::union_of(std::move(compute_slices))
              .minus(IntervalSet::union_of(std::move(wait_slices))),
          IntervalSet::union_of(std::move(comm_slices))};
}

OverlapStats overlap_of(const OverlapSets& sets) {
  const int64_t comm_ns = sets.comm.length();
  const int64_t hidden_ns = sets.comm.intersection_length(sets.compute);
  return OverlapStats{to_ms(sets.compute.length()), to_ms(comm_ns), to_ms(hidden_ns),
                      to_ms(saturating_sub(comm_ns, hidden_ns))};
}

// Work intervals of one kind (compute, waits, communication) with the iteration each belongs to
// (kNone outside the steps): one list for the run-wide overlap and the per-iteration ones, not a
// list for the run plus a vector per iteration, which on a 10 M-event trace cost twice the
// intervals and half a million small vectors.
class TaggedIntervals {
 public:
  void add(int64_t begin_ns, int64_t end_ns, int32_t iteration) {
    list_.push_back({{begin_ns, end_ns}, iteration >= 0 ? iteration : trace::kNone});
  }
  // Every interval, for the run-wide overlap.
  std::vector<Interval> all() const {
    std::vector<Interval> out;
    out.reserve(list_.size());
    for (const Tagged& t : list_) out.push_back(t.span);
    return out;
  }
  // Puts the intervals in iteration order, for iteration() to hand them out in turn.
  void order_by_iteration() {
    std::stable_sort(list_.begin(), list_.end(), [](const Tagged& a, const Tagged& b) { return a.iteration < b.iteration; });
    next_ = 0;
  }
  // The intervals of `iteration`; call with ascending iterations after order_by_iteration().
  std::vector<Interval> iteration(int32_t iteration) {
    while (next_ < list_.size() && list_[next_].iteration < iteration) ++next_;
    std::vector<Interval> out;
    for (; next_ < list_.size() && list_[next_].iteration == iteration; ++next_) out.push_back(list_[next_].span);
    return out;
  }

 private:
  struct Tagged {
    Interval span;
    int32_t iteration;
  };
  std::vector<Tagged> list_;
  size_t next_ = 0;
};

// Everything compute_stats gathers about one rank before the run's iteration count is known.
// Per-iteration vectors grow to the largest iteration the rank has seen.
struct RankScratch {
  std::vector<int64_t> hooks;
  std::vector<std::array<int64_t, trace::kCollectiveOpCount>> collectives;
  // The earliest "iteration" phase of each iteration: (begin_ns, length_ns).
  std::vector<std::optional<std::pair<int64_t, int64_t>>> iteration_phase;
  std::vector<std::optional<double>> step_ms;
  std::vector<std::optional<double>> loss;
  TaggedIntervals compute, waits, comm;
  // The compute kernels of a rank with GPU kernels (Note [Compute and exposed communication]).
  TaggedIntervals gpu_compute;
  int64_t gpu_kernels = 0;
  std::vector<CollectiveStats> collective_list;
  GpuBreakdownBuilder gpu;  // GPU kernels and ProfilerSteps (imported traces)
  // DDP bucket all-reduces: (iteration, bucket, span), for BucketExposure.
  struct BucketComm {
    int32_t iteration;
    int32_t bucket;
    int64_t bytes;
    Interval span;
  };
  std::vector<BucketComm> bucket_comm;
  std::map<int32_t, BucketExposure> buckets;
  int32_t last_iteration = trace::kNone;  // the largest iteration of its events and metrics
  int64_t first_iteration_ns = INT64_MAX;  // the earliest begin of an event of an iteration
  int64_t last_iteration_end_ns = INT64_MIN;  // the latest end of an event of an iteration
  int64_t compute_phases = 0;
  // DDP logging marks by iteration (See DdpTimings): the last forward (begin, end), the last
  // backward's begin, finalize_backward (begin, end), the first BucketLaunch.
  struct DdpMarks {
    std::optional<std::pair<int64_t, int64_t>> forward;
    std::optional<int64_t> backward_begin;
    std::optional<std::pair<int64_t, int64_t>> finalize;
    std::optional<int64_t> first_launch;
  };
  std::vector<DdpMarks> ddp;

  template <typename T>
  static T& at(std::vector<T>& v, int32_t iteration) {
    if (static_cast<size_t>(iteration) >= v.size()) v.resize(static_cast<size_t>(iteration) + 1);
    return v[static_cast<size_t>(iteration)];
  }
  template <typename T>
  static T get(const std::vector<T>& v, int32_t iteration) {
    return static_cast<size_t>(iteration) < v.size() ? v[static_cast<size_t>(iteration)] : T{};
  }
};

// What a Phase slice's name makes it, decided once per name id rather than once per event.
enum class PhaseRole : uint8_t { Other, Forward, Backward, OptimizerStep, Iteration, Finalize };

std::vector<PhaseRole> phase_roles(const std::vector<std::string>& names) {
  std::vector<PhaseRole> roles(names.size(), PhaseRole::Other);
  for (size_t id = 0; id < names.size(); ++id) {
    if (names[id] == trace::kPhaseForward) roles[id] = PhaseRole::Forward;
    else if (names[id] == trace::kPhaseBackward) roles[id] = PhaseRole::Backward;
    else if (names[id] == trace::kPhaseOptimizerStep) roles[id] = PhaseRole::OptimizerStep;
    else if (names[id] == trace::kPhaseIteration) roles[id] = PhaseRole::Iteration;
    else if (names[id] == trace::kPhaseFinalizeBackward) roles[id] = PhaseRole::Finalize;
  }
  return roles;
}

void add_gpu_kernel(const trace::Event& e, const std::vector<KernelClass>& classes, RankScratch& s) {
  s.gpu.add_kernel(e);
  ++s.gpu_kernels;
  if (e.kind == trace::EventKind::Collective || e.name < 0 || size_t(e.name) >= classes.size() ||
      classes[size_t(e.name)] != KernelClass::Compute) {
    return;
  }
  s.gpu_compute.add(e.begin_ns, e.end_ns, e.iteration);
}

void add_event(const trace::Event& e, const std::vector<PhaseRole>& roles,
               const std::vector<KernelClass>& kernel_classes, RankScratch& s) {
  const bool in_iteration = e.iteration >= 0;
  if (e.flags & trace::kFlagGpuKernel) add_gpu_kernel(e, kernel_classes, s);
  if (in_iteration) {
    s.last_iteration = std::max(s.last_iteration, e.iteration);
    s.first_iteration_ns = std::min(s.first_iteration_ns, e.begin_ns);
    s.last_iteration_end_ns = std::max(s.last_iteration_end_ns, e.end_ns);
  }
  switch (e.kind) {
    case trace::EventKind::Phase: {
      const PhaseRole role = e.name >= 0 && static_cast<size_t>(e.name) < roles.size()
                                 ? roles[static_cast<size_t>(e.name)]
                                 : PhaseRole::Other;
      if (role == PhaseRole::Forward || role == PhaseRole::Backward ||
          role == PhaseRole::OptimizerStep) {
        ++s.compute_phases;
        s.compute.add(e.begin_ns, e.end_ns, e.iteration);
        if (in_iteration) {
          auto& marks = RankScratch::at(s.ddp, e.iteration);
          if (role == PhaseRole::Forward && (!marks.forward || e.begin_ns > marks.forward->first)) {
            marks.forward.emplace(e.begin_ns, e.end_ns);
          } else if (role == PhaseRole::Backward &&
                     (!marks.backward_begin || e.begin_ns > *marks.backward_begin)) {
            marks.backward_begin = e.begin_ns;
          }
        }
      } else if (role == PhaseRole::Finalize && in_iteration) {
        RankScratch::at(s.ddp, e.iteration).finalize.emplace(e.begin_ns, e.end_ns);
      } else if (role == PhaseRole::Iteration && in_iteration) {
        s.gpu.add_iteration(e);
        auto& phase = RankScratch::at(s.iteration_phase, e.iteration);
        if (!phase || e.begin_ns < phase->first) {
          phase.emplace(e.begin_ns, saturating_sub(e.end_ns, e.begin_ns));
        }
      }
      break;
    }
    case trace::EventKind::Hook:
      if (in_iteration) ++RankScratch::at(s.hooks, e.iteration);
      break;
    case trace::EventKind::BucketLaunch:
      if (in_iteration) {
        auto& launch = RankScratch::at(s.ddp, e.iteration).first_launch;
        if (!launch || e.begin_ns < *launch) launch = e.begin_ns;
      }
      break;
    case trace::EventKind::CollectiveWait:
      s.waits.add(e.begin_ns, e.end_ns, e.iteration);
      break;
    case trace::EventKind::Collective: {
      s.comm.add(e.begin_ns, e.end_ns, e.iteration);
      if (in_iteration) {
        if (e.op < trace::kCollectiveOpCount) ++RankScratch::at(s.collectives, e.iteration)[e.op];
        if (e.bucket != trace::kNone && e.op == static_cast<uint8_t>(trace::CollectiveOp::AllReduce)) {
          s.bucket_comm.push_back({e.iteration, e.bucket, e.bytes, {e.begin_ns, e.end_ns}});
        }
      }
      CollectiveStats c;
      c.grp = e.grp;
      c.iteration = e.iteration;
      c.seq = e.seq;
      c.bytes = e.bytes;
      c.begin_ns = e.begin_ns;
      c.end_ns = e.end_ns;
      c.lane = e.lane;
      c.op = static_cast<trace::CollectiveOp>(e.op);
      c.dtype = e.dtype;
      s.collective_list.push_back(c);
      break;
    }
    default:
      break;
  }
}

void finish_collectives(RankScratch& s, RankStats& out) {
  auto& list = s.collective_list;
  std::stable_sort(list.begin(), list.end(), [](const CollectiveStats& a, const CollectiveStats& b) {
    return std::tie(a.grp, a.seq, a.begin_ns) < std::tie(b.grp, b.seq, b.begin_ns);
  });
  out.collectives = std::move(list);
  list = {};
}

}  // namespace

namespace {

int64_t bytes_of(const std::vector<CategoryBytes>& list, trace::MemoryCategory category) {
  for (const CategoryBytes& c : list) {
    if (c.category == category) return c.bytes;
  }
  return 0;
}

}  // namespace

int64_t RankStats::largest(trace::MemoryCategory category) const { return bytes_of(category_max, category); }

int64_t RankStats::largest_in_steps(trace::MemoryCategory category) const {
  return bytes_of(step_category_max, category);
}

bool RankStats::sampled_gpu_memory() const {
  for (const CategoryBytes& c : category_max) {
    if (c.category == trace::MemoryCategory::CudaAllocated) return true;
  }
  return false;
}

namespace {

// Memory at the peak, over the run and over the steps (Note [Memory at the peak]), memory after
// the steps, and each category's largest sample.
void read_memory(trace::Reader& reader, int32_t rank, const RankScratch& scratch,
                 const ClusterClockRun* cluster, RankStats& out) {
  // The steps end with the last iteration's last event: an evaluation after them is no step's
  // (Note [Work outside iterations]).
  MemoryPeakFinder run, steps(scratch.first_iteration_ns, scratch.last_iteration_end_ns);
  std::array<int64_t, trace::kMemoryCategoryCount> largest{};
  std::array<bool, trace::kMemoryCategoryCount> seen{};
  // In the steps: the largest value each category held from the first iteration's begin to the
  // last one's end, the value sampled before the begin included.
  const bool any_steps = scratch.first_iteration_ns != INT64_MAX;
  std::array<int64_t, trace::kMemoryCategoryCount> largest_in_steps{};
  std::array<bool, trace::kMemoryCategoryCount> seen_in_steps{};
  const auto add_in_steps = [&](size_t category, int64_t bytes) {
    largest_in_steps[category] = seen_in_steps[category] ? std::max(largest_in_steps[category], bytes) : bytes;
    seen_in_steps[category] = true;
  };
  std::array<int64_t, trace::kMemoryCategoryCount> after_steps{};
  std::array<bool, trace::kMemoryCategoryCount> seen_after_steps{};
  bool any_after_steps = false;
  int64_t after_steps_ns = INT64_MIN;  // the last sample up to the end of the last iteration
  // Streamed: a rank of a long run has millions of samples, and this is their only pass.
  reader.for_each_memory_sample(rank, [&](trace::MemorySample sample) {
    if (cluster) sample.ts_ns = cluster->to_cluster(rank, sample.ts_ns);
    const auto category = static_cast<size_t>(sample.category);
    if (category >= trace::kMemoryCategoryCount) return true;
    run.add(sample.ts_ns, sample.category, sample.bytes);
    steps.add(sample.ts_ns, sample.category, sample.bytes);
    if (any_steps && sample.ts_ns <= scratch.last_iteration_end_ns) {
      // Before the steps only the last value counts (it holds into them); later ones all do.
      if (sample.ts_ns < scratch.first_iteration_ns) seen_in_steps[category] = false;
      add_in_steps(category, sample.bytes);
    }
    largest[category] = seen[category] ? std::max(largest[category], sample.bytes) : sample.bytes;
    seen[category] = true;
    if (trace::is_stacked(sample.category) && sample.ts_ns <= scratch.last_iteration_end_ns) {
      after_steps[category] = sample.bytes;
      seen_after_steps[category] = true;
      after_steps_ns = std::max(after_steps_ns, sample.ts_ns);
      any_after_steps = true;
    }
    return true;
  });
  out.memory_peak = run.finish();
  if (scratch.first_iteration_ns != INT64_MAX) out.step_memory_peak = steps.finish();
  if (any_after_steps) {
    out.memory_after_steps.ts_ns = after_steps_ns;
    for (size_t c = 0; c < trace::kMemoryCategoryCount; ++c) {
      if (!seen_after_steps[c]) continue;
      out.memory_after_steps.categories.push_back({static_cast<trace::MemoryCategory>(c), after_steps[c]});
      // Saturating, as the peak is: a damaged file may hold sizes near INT64_MAX.
      out.memory_after_steps.total_bytes =
          trace::detail::saturating_add(out.memory_after_steps.total_bytes, after_steps[c]);
    }
  }
  for (size_t c = 0; c < trace::kMemoryCategoryCount; ++c) {
    if (seen[c]) out.category_max.push_back({static_cast<trace::MemoryCategory>(c), largest[c]});
    if (seen_in_steps[c]) out.step_category_max.push_back({static_cast<trace::MemoryCategory>(c), largest_in_steps[c]});
  }
}

// Note [Iteration bound]
// The per-iteration tables grow to the largest iteration number seen, for every rank of the
// ranks table, so one event of a damaged file at iteration 2,000,000,000 would ask for terabytes.
// A dpscope trace numbers iterations 0, 1, 2, ... and records several events (at least the
// phases) or metrics in each, on each rank that got that far. So (iterations x ranks) beyond
// 16 times the file's events and metrics (room for 63 of 64 ranks dying at the start), plus a
// margin of 4,096 cells (any short run), is damage, not a long run: a TraceError. The rows are
// counted (a scan) only past the margin. The margin was 65,536 until a fuzzed trace of a few rows
// claimed 32,768 iterations on 2 ranks: its 65,536 empty rows took 17 s to print as JSON under
// the fuzzers' sanitizers, past their 10 s limit.
class IterationBound {
 public:
  IterationBound(trace::Reader& reader, size_t ranks)
      : reader_(reader), ranks_(std::max<int64_t>(1, static_cast<int64_t>(ranks))) {}

  void check(int32_t iteration, int32_t rank) {
    if (iteration < checked_) return;
    const int64_t cells = (int64_t{iteration} + 1) * ranks_;
    if (cells > kMargin) {
      if (rows_ < 0) {
        rows_ = reader_.event_count() + static_cast<int64_t>(reader_.metrics().size());
      }
      if (cells > 16 * rows_ + kMargin) {
        throw trace::TraceError(reader_.path() + ": damaged trace file: rank " + std::to_string(rank) +
                         " records iteration " + std::to_string(iteration) + ", but the file " +
                         "holds only " + std::to_string(rows_) + " events and metrics over " +
                         std::to_string(ranks_) + " ranks (iterations count from 0, each " +
                         "recorded); restore a copy or re-run");
      }
    }
    checked_ = iteration + 1;
  }

 private:
  static constexpr int64_t kMargin = int64_t{1} << 12;
  trace::Reader& reader_;
  int64_t ranks_;
  int64_t rows_ = -1;
  int64_t checked_ = 0;  // iterations below this passed
};

void read_metrics(trace::Reader& reader, int32_t rank, RankScratch& s, int32_t& max_iteration,
                  IterationBound& bound, const ClusterClockRun* cluster) {
  for (const trace::Metric& m : reader.metrics(rank)) {
    if (m.iteration < 0) continue;
    bound.check(m.iteration, rank);
    max_iteration = std::max(max_iteration, m.iteration);
    s.last_iteration = std::max(s.last_iteration, m.iteration);
    // On the cluster clock the step is the iteration phase's (Note [Stats on the cluster clock]).
    if (m.name == trace::kMetricStepMs) {
      if (!cluster) RankScratch::at(s.step_ms, m.iteration) = m.value;
    }
    else if (m.name == trace::kMetricLoss) RankScratch::at(s.loss, m.iteration) = m.value;
  }
}

// Fills the per-iteration rows first..iterations-1 from what the scratch gathered (a row past
// the scratch's iterations is empty).
void finish_iterations(RankScratch& s, int32_t first, int32_t iterations, RankStats& out) {
  std::stable_sort(s.bucket_comm.begin(), s.bucket_comm.end(),
                   [](const auto& a, const auto& b) { return a.iteration < b.iteration; });
  size_t next_bucket = 0;
  for (TaggedIntervals* list : {&s.compute, &s.waits, &s.comm, &s.gpu_compute}) list->order_by_iteration();
  out.iterations.resize(static_cast<size_t>(iterations));
  for (int32_t i = first; i < iterations; ++i) {
    IterationStats& it = out.iterations[static_cast<size_t>(i)];
    it.iteration = i;
    it.hooks = RankScratch::get(s.hooks, i);
    it.collectives = RankScratch::get(s.collectives, i);
    const auto step_ms = RankScratch::get(s.step_ms, i);
    const auto phase = RankScratch::get(s.iteration_phase, i);
    it.step_ms = step_ms ? *step_ms : phase ? to_ms(phase->second) : 0.0;
    it.loss = RankScratch::get(s.loss, i);
    const bool on_gpu = s.gpu_kernels > 0;
    const OverlapSets sets = overlap_sets((on_gpu ? s.gpu_compute : s.compute).iteration(i),
                                          on_gpu ? std::vector<Interval>{} : s.waits.iteration(i),
                                          s.comm.iteration(i));
    it.overlap = overlap_of(sets);
    // The bucket all-reduces of this iteration, against its compute.
    for (; next_bucket < s.bucket_comm.size() && s.bucket_comm[next_bucket].iteration == i; ++next_bucket) {
      const auto& b = s.bucket_comm[next_bucket];
      BucketExposure& e = s.buckets[b.bucket];
      e.bucket = b.bucket;
      if (b.bytes != trace::kNone64) e.bytes = b.bytes;
      ++e.collectives;
      const int64_t length = saturating_sub(b.span.end_ns, b.span.begin_ns);
      e.comm_ms += to_ms(length);
      e.exposed_comm_ms += to_ms(saturating_sub(length, sets.compute.covered(b.span.begin_ns, b.span.end_ns)));
    }
  }
  for (auto& [bucket, exposure] : s.buckets) out.buckets.push_back(exposure);
}

// The DdpTimings average over the iterations whose marks are all there.
std::optional<DdpTimings> ddp_timings(const RankScratch& s) {
  DdpTimings t;
  for (const auto& m : s.ddp) {
    if (!m.forward || !m.backward_begin || !m.finalize || !m.first_launch) continue;
    ++t.iterations;
    t.forward_compute_ms += to_ms(saturating_sub(m.forward->second, m.forward->first));
    t.backward_compute_ms += to_ms(saturating_sub(m.finalize->first, *m.backward_begin));
    t.backward_comm_ms += to_ms(saturating_sub(m.finalize->second, *m.first_launch));
    t.backward_compute_comm_overlap_ms +=
        to_ms(std::max<int64_t>(0, saturating_sub(m.finalize->first, *m.first_launch)));
  }
  if (t.iterations == 0) return std::nullopt;
  t.forward_compute_ms /= t.iterations;
  t.backward_compute_ms /= t.iterations;
  t.backward_comm_ms /= t.iterations;
  t.backward_compute_comm_overlap_ms /= t.iterations;
  return t;
}

// Note [One rank at a time]
// The statistics take one streaming pass over the events (measured on a 10 M-event trace it is
// twice as fast as a query per kind and rank, each of which sorts, and far faster on a file a
// crash left without indexes, where every such query scans the whole table). The pass comes in
// (rank, lane, begin_ns) order (Reader::for_each_event), so a rank's scratch is complete when
// the pass moves on to the next rank. The rank is settled then (its metrics and memory samples
// read, its collectives, overlap and per-iteration rows made) and its scratch freed: the pass
// holds one rank's intervals, not the run's, which on that trace took the analysis's peak from
// 266 to 147 MB. A rank's rows cover the iterations it has seen; once every rank is
// settled and the run's iteration count known (metrics may name a later iteration than any
// event), each rank's rows are padded to it with empty rows, as a rank's rows past its last
// iteration always were.
class RankPass {
 public:
  RankPass(trace::Reader& reader, const std::vector<trace::RankInfo>& ranks, IterationBound& bound,
           const ClusterClockRun* cluster)
      : reader_(reader),
        ranks_(ranks),
        bound_(bound),
        cluster_(cluster),
        roles_(phase_roles(reader.names())),
        kernel_classes_(classify_names(reader.names())),
        whole_us_ranks_(reader.meta_value(std::string(trace::meta_key::kImportedFractionalUsRanks))),
        settled_(ranks.size()) {
    for (size_t r = 0; r < ranks.size(); ++r) index_of_rank_[ranks[r].rank] = r;
  }

  // The pass, each rank settled as its events end; then the ranks without events.
  void run() {
    int32_t current_rank = trace::kNone;
    std::optional<size_t> current;  // events of ranks missing from the ranks table only count
                                    // towards the iterations
    RankScratch scratch;
    reader_.for_each_event([&](const trace::Event& recorded) {
      const trace::Event e = cluster_ ? cluster_->to_cluster(recorded) : recorded;
      origin_ns_ = std::min(origin_ns_, e.begin_ns);
      if (e.iteration >= 0) bound_.check(e.iteration, e.rank);
      max_iteration_ = std::max(max_iteration_, e.iteration);
      if (e.rank != current_rank) {
        if (current) settle(*current, scratch);
        current_rank = e.rank;
        const auto it = index_of_rank_.find(e.rank);
        current = it == index_of_rank_.end() ? std::nullopt : std::optional<size_t>(it->second);
      }
      if (current) add_event(e, roles_, kernel_classes_, scratch);
      return true;
    });
    if (current) settle(*current, scratch);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (settled_[r]) continue;
      RankScratch none;
      settle(r, none);
    }
  }

  int64_t origin_ns() const { return origin_ns_ == INT64_MAX ? 0 : origin_ns_; }
  // The run's iteration count: the largest iteration of any event or metric, plus one.
  int32_t iterations() const { return max_iteration_ == INT32_MAX ? INT32_MAX : max_iteration_ + 1; }

  // Every rank's statistics in the ranks table's order, rows padded to `iterations`.
  std::vector<RankStats> take_ranks(int32_t iterations) {
    std::vector<RankStats> out;
    out.reserve(settled_.size());
    for (std::optional<RankStats>& rank : settled_) {
      RankScratch none;
      finish_iterations(none, static_cast<int32_t>(rank->iterations.size()), iterations, *rank);
      out.push_back(std::move(*rank));
    }
    settled_.clear();
    return out;
  }

 private:
  // A rank's statistics from its scratch, its metrics and its memory samples; the scratch is
  // left empty. Called once a rank: the pass's order brings all of a rank's events together.
  void settle(size_t r, RankScratch& scratch) {
    read_metrics(reader_, ranks_[r].rank, scratch, max_iteration_, bound_, cluster_);
    RankStats out;
    out.rank = ranks_[r].rank;
    out.status = ranks_[r].status;
    out.dropped_events = ranks_[r].dropped_events;
    read_memory(reader_, out.rank, scratch, cluster_, out);
    finish_collectives(scratch, out);
    if (scratch.gpu_kernels > 0) {
      out.compute_source = RankStats::ComputeSource::GpuKernels;
      out.overlap = overlap_of(overlap_sets(scratch.gpu_compute.all(), {}, scratch.comm.all()));
    } else {
      out.overlap = overlap_of(overlap_sets(scratch.compute.all(), scratch.waits.all(), scratch.comm.all()));
    }
    out.ddp = ddp_timings(scratch);
    out.compute_phases = scratch.compute_phases;
    out.clock_offset_ns = ranks_[r].clock_offset_ns;
    out.clock_uncertainty_ns = cluster_ ? 0 : ranks_[r].clock_uncertainty_ns;
    if (!cluster_) out.gpu = scratch.gpu.finish(kernel_classes_, rounding_for(whole_us_ranks_, out.rank));
    const int32_t rows = scratch.last_iteration == INT32_MAX ? INT32_MAX : scratch.last_iteration + 1;
    finish_iterations(scratch, 0, std::max(rows, 0), out);
    scratch = RankScratch{};
    settled_[r] = std::move(out);
  }

  trace::Reader& reader_;
  const std::vector<trace::RankInfo>& ranks_;
  IterationBound& bound_;
  const ClusterClockRun* cluster_;
  const std::vector<PhaseRole> roles_;
  const std::vector<KernelClass> kernel_classes_;  // of every name (classify_names)
  const std::string whole_us_ranks_;
  std::map<int32_t, size_t> index_of_rank_;
  std::vector<std::optional<RankStats>> settled_;  // by the ranks table's index
  int32_t max_iteration_ = trace::kNone;
  int64_t origin_ns_ = INT64_MAX;  // the earliest begin of any event
};

// Both overloads of compute_stats: `cluster` null on the measured clock.
RunStats compute_stats_on(trace::Reader& reader, const ClusterClockRun* cluster) {
  RunStats stats;
  if (cluster) {
    stats.clock = ClockLabel{Clock::Cluster, cluster->link.gbps, cluster->link.latency_us, cluster->compute};
  }
  stats.path = reader.path();
  stats.schema_version = reader.schema_version();
  const std::map<std::string, std::string> meta = reader.meta();
  detail::read_run_meta(meta, stats);
  detail::read_layout(reader, stats);
  const auto ranks = reader.ranks();
  stats.world_size = detail::parse_count(detail::meta_or_empty(meta, trace::meta_key::kWorldSize))
                         .value_or(static_cast<int32_t>(ranks.size()));
  IterationBound bound(reader, ranks.size());
  RankPass pass(reader, ranks, bound, cluster);  // See Note [One rank at a time]
  pass.run();
  stats.origin_ns = pass.origin_ns();
  stats.iterations = pass.iterations();
  stats.ranks = pass.take_ranks(stats.iterations);
  std::map<std::pair<int32_t, int32_t>, std::string> lane_names;
  for (const trace::LaneInfo& lane : reader.lanes()) lane_names[{lane.rank, lane.lane}] = lane.name;
  const auto last_begin = detail::match_across_ranks(stats, lane_names);
  std::vector<int64_t> uncertainty;
  for (RankStats& out : stats.ranks) {
    uncertainty.push_back(out.clock_uncertainty_ns);
    detail::split_at_arrivals(last_begin, out);
  }
  detail::add_bus_bandwidth(stats);
  stats.stragglers = find_stragglers(stats.matches, core::steady_from(size_t(std::max(stats.iterations, 0))),
                                     stats.iterations, uncertainty);
  return stats;
}

}  // namespace

RunStats compute_stats(trace::Reader& reader) { return compute_stats_on(reader, nullptr); }

RunStats compute_stats(trace::Reader& reader, const ClusterClockRun& cluster) {
  return compute_stats_on(reader, &cluster);
}

}  // namespace dpscope::analysis
