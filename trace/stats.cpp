// compute_stats: run statistics from a Reader (definitions in stats.h). Streams the events once
// and reduces each to counters and intervals as it passes, so a multi-million-event trace never
// sits in memory whole.
#include "trace/stats.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <tuple>
#include <utility>

#include "trace/error.h"
#include "trace/saturate.h"

namespace dpscope::trace {
namespace {

using detail::saturating_add;
using detail::saturating_sub;

using Interval = std::pair<int64_t, int64_t>;  // [begin_ns, end_ns)

// Sorted, disjoint, non-empty intervals covering the same time as `slices`.
std::vector<Interval> union_of(std::vector<Interval> slices) {
  std::sort(slices.begin(), slices.end());
  std::vector<Interval> merged;
  for (const auto& [begin, end] : slices) {
    if (end <= begin) continue;
    if (!merged.empty() && begin <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, end);
    } else {
      merged.emplace_back(begin, end);
    }
  }
  return merged;
}

int64_t length_of(const std::vector<Interval>& merged) {
  int64_t total = 0;
  for (const auto& [begin, end] : merged) total = saturating_add(total, saturating_sub(end, begin));
  return total;
}

// Length of the intersection of two outputs of union_of.
int64_t intersection_length(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t begin = std::max(a[i].first, b[j].first);
    const int64_t end = std::min(a[i].second, b[j].second);
    if (end > begin) total = saturating_add(total, saturating_sub(end, begin));
    if (a[i].second < b[j].second) ++i;
    else ++j;
  }
  return total;
}

// The parts of `a` outside `b` (both outputs of union_of).
std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t j = 0;
  for (auto [begin, end] : a) {
    while (j < b.size() && b[j].second <= begin) ++j;
    for (size_t k = j; k < b.size() && b[k].first < end; ++k) {
      if (b[k].first > begin) out.emplace_back(begin, b[k].first);
      begin = std::max(begin, b[k].second);
    }
    if (end > begin) out.emplace_back(begin, end);
  }
  return out;
}

double to_ms(int64_t ns) { return double(ns) / 1e6; }

// Time spent waiting for a collective inside a phase is not compute: that is communication
// nothing hid (DDP's final wait for its buckets, FSDP's wait for an all-gather).
OverlapStats overlap_of(std::vector<Interval> compute_slices, std::vector<Interval> wait_slices,
                        std::vector<Interval> comm_slices) {
  const auto compute = subtract(union_of(std::move(compute_slices)), union_of(std::move(wait_slices)));
  const auto comm = union_of(std::move(comm_slices));
  const int64_t comm_ns = length_of(comm);
  return OverlapStats{to_ms(length_of(compute)), to_ms(comm_ns),
                      to_ms(comm_ns - intersection_length(comm, compute))};
}

// Everything compute_stats gathers about one rank before the run's iteration count is known.
// Per-iteration vectors grow to the largest iteration the rank has seen.
struct RankScratch {
  std::vector<int64_t> hooks;
  std::vector<std::array<int64_t, kCollectiveOpCount>> collectives;
  // The earliest "iteration" phase of each iteration: (begin_ns, length_ns).
  std::vector<std::optional<std::pair<int64_t, int64_t>>> iteration_phase;
  std::vector<std::optional<double>> step_ms;
  std::vector<std::optional<double>> loss;
  std::vector<std::vector<Interval>> compute, waits, comm;  // by iteration
  std::vector<Interval> all_compute, all_waits, all_comm;
  std::vector<std::pair<int64_t, CollectiveStats>> collective_list;  // (begin, collective)
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
  template <typename T>
  static T take(std::vector<T>& v, int32_t iteration) {
    return static_cast<size_t>(iteration) < v.size() ? std::move(v[static_cast<size_t>(iteration)])
                                                     : T{};
  }
};

// What a Phase slice's name makes it, decided once per name id rather than once per event.
enum class PhaseRole : uint8_t { Other, Forward, Backward, OptimizerStep, Iteration, Finalize };

std::vector<PhaseRole> phase_roles(const std::vector<std::string>& names) {
  std::vector<PhaseRole> roles(names.size(), PhaseRole::Other);
  for (size_t id = 0; id < names.size(); ++id) {
    if (names[id] == "forward") roles[id] = PhaseRole::Forward;
    else if (names[id] == "backward") roles[id] = PhaseRole::Backward;
    else if (names[id] == "optimizer_step") roles[id] = PhaseRole::OptimizerStep;
    else if (names[id] == "iteration") roles[id] = PhaseRole::Iteration;
    else if (names[id] == "finalize_backward") roles[id] = PhaseRole::Finalize;
  }
  return roles;
}

void add_event(const Event& e, const std::vector<PhaseRole>& roles, RankScratch& s) {
  const bool in_iteration = e.iteration >= 0;
  switch (e.kind) {
    case EventKind::Phase: {
      const PhaseRole role = e.name >= 0 && static_cast<size_t>(e.name) < roles.size()
                                 ? roles[static_cast<size_t>(e.name)]
                                 : PhaseRole::Other;
      if (role == PhaseRole::Forward || role == PhaseRole::Backward ||
          role == PhaseRole::OptimizerStep) {
        s.all_compute.emplace_back(e.begin_ns, e.end_ns);
        if (in_iteration) {
          RankScratch::at(s.compute, e.iteration).emplace_back(e.begin_ns, e.end_ns);
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
        auto& phase = RankScratch::at(s.iteration_phase, e.iteration);
        if (!phase || e.begin_ns < phase->first) {
          phase.emplace(e.begin_ns, saturating_sub(e.end_ns, e.begin_ns));
        }
      }
      break;
    }
    case EventKind::Hook:
      if (in_iteration) ++RankScratch::at(s.hooks, e.iteration);
      break;
    case EventKind::BucketLaunch:
      if (in_iteration) {
        auto& launch = RankScratch::at(s.ddp, e.iteration).first_launch;
        if (!launch || e.begin_ns < *launch) launch = e.begin_ns;
      }
      break;
    case EventKind::CollectiveWait:
      s.all_waits.emplace_back(e.begin_ns, e.end_ns);
      if (in_iteration) RankScratch::at(s.waits, e.iteration).emplace_back(e.begin_ns, e.end_ns);
      break;
    case EventKind::Collective:
      s.all_comm.emplace_back(e.begin_ns, e.end_ns);
      if (in_iteration) {
        RankScratch::at(s.comm, e.iteration).emplace_back(e.begin_ns, e.end_ns);
        if (e.op < kCollectiveOpCount) ++RankScratch::at(s.collectives, e.iteration)[e.op];
      }
      s.collective_list.emplace_back(
          e.begin_ns, CollectiveStats{e.grp, e.seq, static_cast<CollectiveOp>(e.op), e.bytes,
                                      e.iteration});
      break;
    default:
      break;
  }
}

void finish_collectives(RankScratch& s, RankStats& out) {
  auto& list = s.collective_list;
  std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second.grp, a.second.seq, a.first) <
           std::tie(b.second.grp, b.second.seq, b.first);
  });
  out.collectives.reserve(list.size());
  for (const auto& [begin, collective] : list) out.collectives.push_back(collective);
  list = {};
}

void read_memory(Reader& reader, int32_t rank, RankStats& out) {
  const auto samples = reader.memory(rank);
  std::array<int64_t, kMemoryCategoryCount> current{}, peak{};
  std::array<bool, kMemoryCategoryCount> seen{};
  int64_t stacked_peak = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto category = static_cast<size_t>(samples[i].category);
    if (category >= kMemoryCategoryCount) continue;
    current[category] = samples[i].bytes;
    peak[category] = seen[category] ? std::max(peak[category], samples[i].bytes) : samples[i].bytes;
    seen[category] = true;
    // Samples of one timestamp describe one moment; a sum between them never existed.
    if (i + 1 < samples.size() && samples[i + 1].ts_ns == samples[i].ts_ns) continue;
    int64_t stacked = 0;
    for (int c = 0; c < kMemoryCategoryStacked; ++c) {
      stacked = saturating_add(stacked, current[static_cast<size_t>(c)]);
    }
    stacked_peak = std::max(stacked_peak, stacked);
  }
  const auto allocator = static_cast<size_t>(MemoryCategory::AllocatorTotal);
  out.peak_total_bytes = seen[allocator] ? peak[allocator] : stacked_peak;
  for (size_t c = 0; c < kMemoryCategoryCount; ++c) {
    if (seen[c]) out.peak_memory.push_back(MemoryPeak{static_cast<MemoryCategory>(c), peak[c]});
  }
}

// Note [Iteration bound]
// The per-iteration tables grow to the largest iteration number seen, for every rank of the
// ranks table, so one event of a damaged file at iteration 2,000,000,000 would ask for terabytes.
// A dpscope trace numbers iterations 0, 1, 2, ... and records several events (at least the
// phases) or metrics in each, on each rank that got that far. So (iterations x ranks) beyond
// 16 times the file's events and metrics (room for 63 of 64 ranks dying at the start), plus a
// margin of 65,536 (any short run), is damage, not a long run: a TraceError. The rows are
// counted (a scan) only past the margin.
class IterationBound {
 public:
  IterationBound(Reader& reader, size_t ranks)
      : reader_(reader), ranks_(std::max<int64_t>(1, static_cast<int64_t>(ranks))) {}

  void check(int32_t iteration, int32_t rank) {
    if (iteration < checked_) return;
    const int64_t cells = (int64_t{iteration} + 1) * ranks_;
    if (cells > kMargin) {
      if (rows_ < 0) {
        rows_ = reader_.event_count() + static_cast<int64_t>(reader_.metrics().size());
      }
      if (cells > 16 * rows_ + kMargin) {
        throw TraceError(reader_.path() + ": damaged trace file: rank " + std::to_string(rank) +
                         " records iteration " + std::to_string(iteration) + ", but the file " +
                         "holds only " + std::to_string(rows_) + " events and metrics over " +
                         std::to_string(ranks_) + " ranks (iterations count from 0, each " +
                         "recorded); restore a copy or re-run");
      }
    }
    checked_ = iteration + 1;
  }

 private:
  static constexpr int64_t kMargin = int64_t{1} << 16;
  Reader& reader_;
  int64_t ranks_;
  int64_t rows_ = -1;
  int64_t checked_ = 0;  // iterations below this passed
};

void read_metrics(Reader& reader, int32_t rank, RankScratch& s, int32_t& max_iteration,
                  IterationBound& bound) {
  for (const Metric& m : reader.metrics(rank)) {
    if (m.iteration < 0) continue;
    bound.check(m.iteration, rank);
    max_iteration = std::max(max_iteration, m.iteration);
    if (m.name == "step_ms") RankScratch::at(s.step_ms, m.iteration) = m.value;
    else if (m.name == "loss") RankScratch::at(s.loss, m.iteration) = m.value;
  }
}

// Fills the per-iteration rows once the run's iteration count is known.
void finish_iterations(RankScratch& s, int32_t iterations, RankStats& out) {
  out.iterations.resize(static_cast<size_t>(iterations));
  for (int32_t i = 0; i < iterations; ++i) {
    IterationStats& it = out.iterations[static_cast<size_t>(i)];
    it.iteration = i;
    it.hooks = RankScratch::get(s.hooks, i);
    it.collectives = RankScratch::get(s.collectives, i);
    const auto step_ms = RankScratch::get(s.step_ms, i);
    const auto phase = RankScratch::get(s.iteration_phase, i);
    it.step_ms = step_ms ? *step_ms : phase ? to_ms(phase->second) : 0.0;
    it.loss = RankScratch::get(s.loss, i);
    it.overlap = overlap_of(RankScratch::take(s.compute, i), RankScratch::take(s.waits, i),
                            RankScratch::take(s.comm, i));
  }
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

// meta world_size as a number; nullopt when absent or not a number.
std::optional<int32_t> parse_count(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || value < 0 || value > INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(value);
}

}  // namespace

RunStats compute_stats(Reader& reader) {
  RunStats stats;
  stats.path = reader.path();
  stats.schema_version = reader.schema_version();
  const auto meta = reader.meta();
  const auto meta_or_empty = [&](const char* key) {
    const auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  stats.strategy = meta_or_empty("strategy");
  stats.backend = meta_or_empty("backend");
  stats.model = meta_or_empty("model");

  stats.params = reader.params();
  stats.buckets = reader.buckets();
  for (UnitInfo& unit : reader.units()) {
    UnitStats u{std::move(unit), {}};
    for (const ParamInfo& p : stats.params) {
      if (p.unit == u.unit.index) u.params.push_back(p.index);
    }
    stats.units.push_back(std::move(u));
  }

  const auto ranks = reader.ranks();
  stats.world_size =
      parse_count(meta_or_empty("world_size")).value_or(static_cast<int32_t>(ranks.size()));

  // One streaming pass over every event: measured on a 10 M-event trace it is twice as fast
  // as a query per kind and rank (each sorts), and far faster on a file a crash left without
  // indexes, where every such query scans the whole table.
  std::map<int32_t, size_t> rank_index;
  for (size_t r = 0; r < ranks.size(); ++r) rank_index[ranks[r].rank] = r;
  std::vector<RankScratch> scratch(ranks.size());
  const auto roles = phase_roles(reader.names());
  int32_t max_iteration = kNone;
  int32_t current_rank = kNone;
  RankScratch* current = nullptr;  // events of ranks missing from the ranks table only count
                                   // towards the iterations
  IterationBound bound(reader, ranks.size());
  reader.for_each_event([&](const Event& e) {
    if (e.iteration >= 0) bound.check(e.iteration, e.rank);
    max_iteration = std::max(max_iteration, e.iteration);
    if (e.rank != current_rank) {
      current_rank = e.rank;
      const auto it = rank_index.find(e.rank);
      current = it == rank_index.end() ? nullptr : &scratch[it->second];
    }
    if (current) add_event(e, roles, *current);
    return true;
  });

  for (size_t r = 0; r < ranks.size(); ++r) {
    RankStats out;
    out.rank = ranks[r].rank;
    out.status = ranks[r].status;
    out.dropped_events = ranks[r].dropped_events;
    read_metrics(reader, out.rank, scratch[r], max_iteration, bound);
    read_memory(reader, out.rank, out);
    finish_collectives(scratch[r], out);
    out.overlap = overlap_of(std::move(scratch[r].all_compute), std::move(scratch[r].all_waits),
                             std::move(scratch[r].all_comm));
    out.ddp = ddp_timings(scratch[r]);
    stats.ranks.push_back(std::move(out));
  }
  stats.iterations = max_iteration == INT32_MAX ? INT32_MAX : max_iteration + 1;
  for (size_t r = 0; r < ranks.size(); ++r) {
    finish_iterations(scratch[r], stats.iterations, stats.ranks[r]);
  }
  return stats;
}

}  // namespace dpscope::trace
