// The cluster clock's replay (Note [Cluster clock]): each rank's program walked on its thread's
// CPU clock, collectives scheduled on the link as soon as every rank has issued them, and the
// reading of a trace into those programs.
#include "analysis/cluster_clock.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string_view>
#include <tuple>

#include "analysis/stats.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {

// Note [Cluster clock]
// The replay keeps the order of everything each rank did and replaces every duration with the
// one a cluster would give it:
//  1. Each rank's computing thread (lane 0, the thread that runs forward, backward, the hooks and
//     the optimizer, and issues and waits for the collectives) is a program of points on its two
//     clocks (Note [Thread CPU time]). Between two points it computed for the CPU time between
//     them: the cluster clock advances by that, whatever the machine's scheduler did meanwhile.
//  2. A collective is issued at its Issue point. It starts on the link when every rank of its
//     group has issued it and each of those ranks' NIC is free of the collectives it issued
//     earlier (one NIC a rank, first in first out: the emulated link's queue), and lasts
//     link_model_ns (the ring formulas of docs/communication.md). The real transfer, which on
//     this machine competed with compute for the same cores, counts for nothing.
//  3. A wait ends when its collective ends on the link, or at once when it already has: the CPU
//     time the thread spent inside the wait (running a Gloo collective on the waiting thread,
//     Note [Run on wait]) is the link's time, already counted.
//  4. --straggler's delay is a sleep that stands for work: its wall time counts as compute.
//  5. Every rank starts at cluster time 0. A straggler's wait falls out of the model: the other
//     ranks' waits end when its collective can start.
// The replay runs the ranks forward together: each advances until it waits for a collective
// not yet on the link, then every collective that all its ranks have issued is scheduled, and
// so on. A wait for a collective that some rank of its group never issued (a rank that failed)
// would block for ever; it takes its recorded wall time instead (unmatched_waits).

namespace {

// The begin of a wait or a sleep: its cluster time and its wall time.
struct Hold {
  int64_t at = 0;
  int64_t wall = 0;
  // Its end at `end` when the wall time in between counts (a sleep, a wait taken as recorded).
  int64_t after_wall(const ThreadPoint& end) const { return at + std::max<int64_t>(end.wall_ns - wall, 0); }
};

struct RankState {
  const RankProgram* program = nullptr;
  size_t next = 0;          // the next point to place
  int64_t now = 0;          // the cluster time of the last point placed
  int64_t cpu = 0;          // the CPU clock at the last point placed
  bool started = false;
  Hold wait;                // the WaitBegin being waited out
  Hold sleep;               // the SleepBegin
  std::vector<int64_t>* placed = nullptr;
  std::vector<CollectiveKey> issue_order;  // this rank's collectives, as issued
  size_t nic_next = 0;                     // the first of them not yet on the link
  int64_t nic_free = 0;                    // when its NIC is free of those on the link
};

class Replay {
 public:
  Replay(const std::vector<RankProgram>& programs, const core::LinkSpec& link) : link_(link) {
    for (const RankProgram& program : programs) {
      check_order(program);
      RankState state;
      state.program = &program;
      state.placed = &timeline_.point_ns[program.rank];
      state.placed->reserve(program.points.size());
      for (const ThreadPoint& point : program.points) {
        if (point.kind != PointKind::Issue) continue;
        if (!program.collectives.count(point.collective)) {
          throw ClusterClockError("rank " + std::to_string(program.rank) + " issues collective #" +
                                  std::to_string(point.collective.second) + " of group " +
                                  std::to_string(point.collective.first) +
                                  " without saying what it moves: add it to the program's collectives");
        }
        state.issue_order.push_back(point.collective);
      }
      for (const auto& [key, issued] : program.collectives) group_members_[key.first].insert(program.rank);
      ranks_.emplace(program.rank, std::move(state));
    }
  }

  ClusterTimeline run() {
    while (true) {
      bool moved = false;
      for (auto& [rank, state] : ranks_) moved |= advance(state);
      while (schedule_one()) moved = true;
      if (moved) continue;
      if (!unblock_one()) break;
    }
    return std::move(timeline_);
  }

 private:
  static void check_order(const RankProgram& program) {
    for (size_t i = 1; i < program.points.size(); ++i) {
      const ThreadPoint& a = program.points[i - 1];
      const ThreadPoint& b = program.points[i];
      if (b.wall_ns < a.wall_ns || b.cpu_ns < a.cpu_ns) {
        throw ClusterClockError("rank " + std::to_string(program.rank) + ": point " +
                                std::to_string(i) + " comes before the one preceding it (wall " +
                                std::to_string(b.wall_ns) + " < " + std::to_string(a.wall_ns) +
                                " or CPU " + std::to_string(b.cpu_ns) + " < " +
                                std::to_string(a.cpu_ns) + "): a program is in the order it ran");
      }
    }
  }

  // The compute since the last point placed.
  static int64_t computed(RankState& state, const ThreadPoint& point) {
    const int64_t delta = state.started ? std::max<int64_t>(point.cpu_ns - state.cpu, 0) : 0;
    state.started = true;
    return delta;
  }

  void place(RankState& state, const ThreadPoint& point, int64_t at) {
    state.now = at;
    state.cpu = point.cpu_ns;
    state.placed->push_back(at);
    ++state.next;
  }

  void begin_hold(RankState& state, const ThreadPoint& point, Hold& hold) {
    hold = Hold{state.now + computed(state, point), point.wall_ns};
    place(state, point, hold.at);
  }

  // Places the rank's points until one waits for a collective not yet on the link.
  bool advance(RankState& state) {
    const std::vector<ThreadPoint>& points = state.program->points;
    const size_t before = state.next;
    while (state.next < points.size()) {
      const ThreadPoint& point = points[state.next];
      switch (point.kind) {
        case PointKind::Compute:
          place(state, point, state.now + computed(state, point));
          break;
        case PointKind::Issue: {
          const int64_t at = state.now + computed(state, point);
          issued_[point.collective][state.program->rank] = at;
          place(state, point, at);
          break;
        }
        case PointKind::WaitBegin:
          begin_hold(state, point, state.wait);
          break;
        case PointKind::WaitEnd: {
          const auto done = timeline_.collectives.find(point.collective);
          if (done == timeline_.collectives.end()) return state.next != before;
          place(state, point, std::max(state.wait.at, done->second.end_ns));
          break;
        }
        case PointKind::SleepBegin:
          begin_hold(state, point, state.sleep);
          break;
        case PointKind::SleepEnd:
          place(state, point, state.sleep.after_wall(point));
          break;
      }
    }
    return state.next != before;
  }

  // Puts on the link one collective that every rank of its group has issued and that is next
  // on each of their NICs. False when there is none.
  bool schedule_one() {
    for (auto& [rank, state] : ranks_) {
      skip_abandoned(state);
      if (state.nic_next >= state.issue_order.size()) continue;
      const CollectiveKey key = state.issue_order[state.nic_next];
      if (!fully_issued(key)) continue;
      const auto issues = issued_.find(key);
      const std::set<int32_t>& group = group_members_.at(key.first);
      int64_t start = 0;
      bool ready = true;
      for (const int32_t member : group) {
        RankState& other = ranks_.at(member);
        skip_abandoned(other);
        if (other.nic_next >= other.issue_order.size() || other.issue_order[other.nic_next] != key) {
          ready = false;
          break;
        }
        start = std::max({start, issues->second.at(member), other.nic_free});
      }
      if (!ready) continue;
      const IssuedCollective& what = state.program->collectives.at(key);
      const int64_t end = start + core::link_model_ns(what.op, what.bytes, int(group.size()), link_);
      timeline_.collectives[key] = ClusterSpan{start, end};
      for (const int32_t member : group) {
        RankState& other = ranks_.at(member);
        other.nic_free = end;
        ++other.nic_next;
      }
      return true;
    }
    return false;
  }

  void skip_abandoned(RankState& state) {
    while (state.nic_next < state.issue_order.size() &&
           abandoned_.count(state.issue_order[state.nic_next])) {
      ++state.nic_next;
    }
  }

  // Whether every rank of the collective's group (every rank that recorded any collective of
  // that group) has issued it.
  bool fully_issued(const CollectiveKey& key) const {
    const auto issues = issued_.find(key);
    const auto group = group_members_.find(key.first);
    return issues != issued_.end() && group != group_members_.end() &&
           issues->second.size() >= group->second.size();
  }

  // Nothing moves, and a rank is still to finish: some collective never gets on the link. Take
  // the earliest blocked wait. If every rank issued its collective, a collective ahead of it in
  // a NIC's queue is one that some rank never issued: it leaves the queues, and the rest can go.
  // Otherwise the wait takes its recorded wall time, and its collective leaves the queues.
  bool unblock_one() {
    RankState* earliest = nullptr;
    for (auto& [rank, state] : ranks_) {
      if (state.next >= state.program->points.size()) continue;
      if (!earliest || state.wait.at < earliest->wait.at) earliest = &state;
    }
    if (!earliest) return false;
    const ThreadPoint& point = earliest->program->points[earliest->next];
    if (fully_issued(point.collective)) {  // then its group is known
      for (const int32_t member : group_members_.at(point.collective.first)) {
        RankState& other = ranks_.at(member);
        skip_abandoned(other);
        if (other.nic_next >= other.issue_order.size()) continue;
        const CollectiveKey head = other.issue_order[other.nic_next];
        if (head != point.collective && !fully_issued(head)) {
          abandoned_.insert(head);
          return true;
        }
      }
    }
    abandoned_.insert(point.collective);
    ++timeline_.unmatched_waits;
    place(*earliest, point, earliest->wait.after_wall(point));
    return true;
  }

  const core::LinkSpec link_;
  ClusterTimeline timeline_;
  std::map<int32_t, RankState> ranks_;
  std::map<int32_t, std::set<int32_t>> group_members_;  // by group id
  std::map<CollectiveKey, std::map<int32_t, int64_t>> issued_;  // cluster time of each issue
  std::set<CollectiveKey> abandoned_;
};

}  // namespace

// ---- Steady compute ----------------------------------------------------------------------

// Note [Steady compute]
// A step's CPU time is the work's cost plus the machine's moment: on this laptop's virtual
// machine the same 512x512 matmuls took 32.5 ms of thread CPU time at best and 36-42 ms at the
// 90th percentile, idle or beside busy loops alike (a host's other guests, a core that halted
// and comes back with cold caches). The slow moments come and go over seconds, so one run's
// median step moved by about +-5 % from one run of a command to the next, more than the load
// moved it. Training repeats the same work every step, so the cluster clock can take each piece
// of that work at what it costs rather than at what it cost once:
//  1. A rank's steady steps (its `iteration` phases from steady_from() on, Note [Steady
//     steps]) are grouped by shape: the sequence of their points' kinds, sites (which event,
//     begin or end) and groups. Steps of one shape did the same work in the same order.
//  2. In a shape seen in at least kSteadyMinSteps steps, the k-th piece of compute (the CPU time
//     from point k-1 to point k of the step) takes the least of the k-th pieces over those
//     steps. The machine's moments only ever add CPU time to a piece (the matmuls above never
//     took less than 32.5 ms, often more), so the least is the best estimate of the work's cost:
//     over six runs of one command idle and six beside two busy loops, the per-piece minimum kept
//     the median step within 1.6-4.1 % (DDP with 1 MiB buckets, DDP with one bucket, FSDP) where
//     each step's own CPU time spread them over 6.1-11.7 % and the lower quartile over
//     2.5-8.4 % (bench/README.md, "Steady compute").
//  3. Everything else keeps its own CPU time: the warm-up steps, the moments between steps, and
//     steps of a shape too rare to compare (one that rebuilt its buckets).
// What moves the result is then the work (its kernels, the bytes a bucket copies), not when it
// ran. Per-step differences that are the work's own (a data-dependent step) are flattened within
// a shape; ComputeTime::Recorded (`dpscope stats --compute-time recorded`) replays each step's
// own CPU time for those.

namespace {

constexpr size_t kSteadyMinSteps = 3;

using PointShape = std::tuple<PointKind, uint32_t, int32_t>;

}  // namespace

int64_t steady_compute(RankProgram& program, const std::vector<StepWall>& steps) {
  std::vector<ThreadPoint>& points = program.points;
  if (points.size() < 2) return 0;
  const int32_t from = core::steady_from(steps.size());
  std::map<std::vector<PointShape>, std::vector<size_t>> shapes;  // shape -> each step's first point
  for (const StepWall& step : steps) {
    if (step.iteration < from) continue;
    const auto first = std::lower_bound(points.begin(), points.end(), step.begin_ns,
                                        [](const ThreadPoint& p, int64_t wall) { return p.wall_ns < wall; });
    const auto last = std::upper_bound(first, points.end(), step.end_ns,
                                       [](int64_t wall, const ThreadPoint& p) { return wall < p.wall_ns; });
    if (last - first < 2) continue;
    std::vector<PointShape> shape;
    shape.reserve(size_t(last - first));
    for (auto point = first; point != last; ++point) shape.emplace_back(point->kind, point->site, point->collective.first);
    shapes[std::move(shape)].push_back(size_t(first - points.begin()));
  }
  std::vector<int64_t> piece(points.size(), 0);
  for (size_t i = 1; i < points.size(); ++i) piece[i] = std::max<int64_t>(points[i].cpu_ns - points[i - 1].cpu_ns, 0);
  int64_t rewritten = 0;
  for (const auto& [shape, firsts] : shapes) {
    if (firsts.size() < kSteadyMinSteps) continue;
    for (size_t k = 1; k < shape.size(); ++k) {
      int64_t least = piece[firsts.front() + k];
      for (const size_t first : firsts) least = std::min(least, piece[first + k]);
      for (const size_t first : firsts) piece[first + k] = least;
    }
    rewritten += int64_t(firsts.size());
  }
  for (size_t i = 1; i < points.size(); ++i) points[i].cpu_ns = points[i - 1].cpu_ns + piece[i];
  return rewritten;
}

namespace {

// ---- Reading a trace into programs --------------------------------------------------------

std::optional<double> meta_number(const std::map<std::string, std::string>& meta, std::string_view key) {
  const auto found = meta.find(std::string(key));
  if (found == meta.end() || found->second.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(found->second.c_str(), &end);
  if (end != found->second.c_str() + found->second.size()) return std::nullopt;
  return value;
}

core::LinkSpec choose_link(const std::map<std::string, std::string>& meta, const std::string& path,
                     const std::optional<core::LinkSpec>& given, bool& from_trace) {
  from_trace = !given;
  if (given) return *given;
  const std::optional<double> gbps = meta_number(meta, trace::meta_key::kLinkGbps);
  const std::optional<double> latency = meta_number(meta, trace::meta_key::kLinkLatencyUs);
  if (!gbps || !latency) {
    throw ClusterClockError(path + ": recorded without an emulated link, so the cluster clock "
                            "has no network to replay on: give one (--link-gbps 4 "
                            "--link-latency-us 50), or record with `dpscope launch --link-gbps G "
                            "--link-latency-us L`");
  }
  try {
    return *core::check_link(gbps, latency, "meta link_gbps", "meta link_latency_us");
  } catch (const std::invalid_argument& error) {
    throw ClusterClockError(path + ": " + error.what() + " (give --link-gbps and --link-latency-us)");
  }
}

struct ProgramBuilder {
  RankProgram program;
  bool has_cpu = false;
  void add(int64_t wall, int64_t cpu, PointKind kind, CollectiveKey key, uint32_t site) {
    program.points.push_back(ThreadPoint{wall, cpu, kind, key, site});
  }
  void add(int64_t wall, int64_t cpu, PointKind kind, uint32_t site) {
    add(wall, cpu, kind, {trace::kNone, trace::kNone64}, site);
  }
};

// Sorts a program into the order it ran: by wall time, then CPU time; at one instant on both,
// by kind, so that an issue comes before a wait and a span's begin before its end.
void order_points(RankProgram& program) {
  std::stable_sort(program.points.begin(), program.points.end(),
                   [](const ThreadPoint& a, const ThreadPoint& b) {
                     if (a.wall_ns != b.wall_ns) return a.wall_ns < b.wall_ns;
                     if (a.cpu_ns != b.cpu_ns) return a.cpu_ns < b.cpu_ns;
                     return a.kind < b.kind;
                   });
}

}  // namespace

ClusterTimeline replay_programs(const std::vector<RankProgram>& programs, const core::LinkSpec& link) {
  return Replay(programs, link).run();
}

int64_t ClusterClockRun::to_cluster(int32_t rank, int64_t wall_ns) const {
  const auto program = std::find_if(programs.begin(), programs.end(),
                                    [&](const RankProgram& p) { return p.rank == rank; });
  const auto placed = timeline.point_ns.find(rank);
  if (program == programs.end() || placed == timeline.point_ns.end() || placed->second.empty()) return 0;
  const std::vector<ThreadPoint>& points = program->points;
  const std::vector<int64_t>& at = placed->second;
  const size_t n = std::min(points.size(), at.size());
  const auto after = std::lower_bound(points.begin(), points.begin() + long(n), wall_ns,
                                      [](const ThreadPoint& p, int64_t wall) { return p.wall_ns < wall; });
  const size_t i = size_t(after - points.begin());
  if (i == 0) return at[0];
  if (i >= n) return at[n - 1];
  if (points[i].wall_ns == wall_ns) return at[i];
  const ThreadPoint& a = points[i - 1];
  const ThreadPoint& b = points[i];
  const double fraction = double(wall_ns - a.wall_ns) / double(b.wall_ns - a.wall_ns);
  return at[i - 1] + int64_t(fraction * double(at[i] - at[i - 1]));
}

trace::Event ClusterClockRun::to_cluster(const trace::Event& e) const {
  trace::Event out = e;
  if (e.kind == trace::EventKind::Collective && e.seq != trace::kNone64) {
    const auto rank = rank_collectives.find(e.rank);
    if (rank != rank_collectives.end()) {
      const auto span = rank->second.find(CollectiveKey{e.grp, e.seq});
      if (span != rank->second.end()) {
        out.begin_ns = span->second.begin_ns;
        out.end_ns = span->second.end_ns;
        if (e.enqueue_ns != trace::kNone64) out.enqueue_ns = span->second.issue_ns;
        return out;
      }
    }
  }
  out.begin_ns = to_cluster(e.rank, e.begin_ns);
  out.end_ns = std::max(out.begin_ns, to_cluster(e.rank, e.end_ns));
  if (e.enqueue_ns != trace::kNone64) out.enqueue_ns = std::min(out.begin_ns, to_cluster(e.rank, e.enqueue_ns));
  return out;
}

std::optional<double> ClusterClockRun::steady_step_ms(int32_t rank) const {
  const auto found = iterations.find(rank);
  if (found == iterations.end() || found->second.size() < 3) return std::nullopt;
  std::vector<double> step_ms(size_t(found->second.rbegin()->first) + 1, 0.0);
  for (const auto& [iteration, span] : found->second) {
    if (iteration >= 0) step_ms[size_t(iteration)] = double(span.end_ns - span.begin_ns) / 1e6;
  }
  const core::StepSummary summary = core::summarize_steps(step_ms);
  if (summary.count == 0) return std::nullopt;
  return summary.median_ms;
}

namespace {

// The refusals and warnings that the trace's meta table decides: a GPU run, a missing link,
// more than one intra-op thread.
void read_settings(const std::map<std::string, std::string>& meta, const std::string& path,
                   const std::optional<core::LinkSpec>& link, ClusterClockRun& run) {
  const auto device = meta.find(std::string(trace::meta_key::kDevice));
  if (device != meta.end() && trace::parse_mode(trace::kDevices, device->second) == trace::Device::Cuda) {
    throw ClusterClockError(path + ": a GPU run; its measured clock is already the cluster's "
                            "own (the cluster clock replays CPU runs, whose compute and "
                            "transfers shared this machine's cores): read its measured times");
  }
  run.link = choose_link(meta, path, link, run.link_from_trace);
  if (const std::optional<double> threads = meta_number(meta, trace::meta_key::kIntraOpThreads);
      threads && *threads > 1) {
    run.warnings.push_back("recorded with " + std::to_string(int(*threads)) +
                           " intra-op threads a rank: the cluster clock counts each rank's main "
                           "thread only, so compute that ran on the others is left out (record "
                           "with --threads 1)");
  }
}

// Which moment of which event a point is (Note [Steady compute]): the event's kind, name and
// operation, and whether it is the event's end.
uint32_t site_of(const trace::Event& e, bool end) {
  return (uint32_t(e.kind) << 24) ^ (uint32_t(e.op) << 16) ^ (uint32_t(e.name + 1) << 1) ^ uint32_t(end);
}

// Each rank's program, from one pass over the events (Note [Cluster clock], 1), and each rank's
// `iteration` phases into `iteration_phases`.
std::map<int32_t, ProgramBuilder> read_programs(
    trace::Reader& reader,
    std::map<int32_t, std::vector<std::pair<int32_t, trace::Event>>>& iteration_phases) {
  const std::vector<std::string> names = reader.names();
  const auto named = [&](const trace::Event& e, std::string_view name) {
    return e.name >= 0 && size_t(e.name) < names.size() && names[size_t(e.name)] == name;
  };
  std::map<int32_t, ProgramBuilder> builders;
  reader.for_each_event([&](const trace::Event& e) {
    ProgramBuilder& builder = builders[e.rank];
    builder.program.rank = e.rank;
    if (e.kind == trace::EventKind::Collective) {
      if (e.cpu_begin_ns == trace::kNone64 || e.seq == trace::kNone64) return true;
      const CollectiveKey key{e.grp, e.seq};
      builder.add(e.enqueue_ns != trace::kNone64 ? e.enqueue_ns : e.begin_ns, e.cpu_begin_ns,
                  PointKind::Issue, key, site_of(e, false));
      builder.program.collectives[key] =
          IssuedCollective{static_cast<trace::CollectiveOp>(e.op), std::max<int64_t>(e.bytes, 0)};
      return true;
    }
    if (e.kind == trace::EventKind::Hook) {
      // Only its end is read on both clocks (Note [Thread CPU time]): the gradient's ready moment.
      if (e.lane == 0 && e.cpu_end_ns != trace::kNone64) {
        builder.add(e.end_ns, e.cpu_end_ns, PointKind::Compute, site_of(e, true));
      }
      return true;
    }
    if (e.lane != 0 || e.cpu_begin_ns == trace::kNone64 || e.cpu_end_ns == trace::kNone64) return true;
    builder.has_cpu = true;
    switch (e.kind) {
      case trace::EventKind::CollectiveWait:
        builder.add(e.begin_ns, e.cpu_begin_ns, PointKind::WaitBegin, {e.grp, e.seq}, site_of(e, false));
        builder.add(e.end_ns, e.cpu_end_ns, PointKind::WaitEnd, {e.grp, e.seq}, site_of(e, true));
        break;
      case trace::EventKind::Phase:
        if (named(e, trace::kPhaseStragglerDelay)) {
          builder.add(e.begin_ns, e.cpu_begin_ns, PointKind::SleepBegin, site_of(e, false));
          builder.add(e.end_ns, e.cpu_end_ns, PointKind::SleepEnd, site_of(e, true));
          break;
        }
        if (named(e, trace::kPhaseIteration) && e.iteration >= 0) {
          iteration_phases[e.rank].emplace_back(e.iteration, e);
        }
        [[fallthrough]];
      default:
        builder.add(e.begin_ns, e.cpu_begin_ns, PointKind::Compute, site_of(e, false));
        if (e.end_ns != e.begin_ns) builder.add(e.end_ns, e.cpu_end_ns, PointKind::Compute, site_of(e, true));
        break;
    }
    return true;
  });
  return builders;
}

// Each rank's share of the collectives it issued that went on the link: its NIC takes one up
// at its issue, or when the one issued before it ends (Note [Cluster clock], 2).
void place_rank_collectives(ClusterClockRun& run) {
  for (const RankProgram& program : run.programs) {
    const std::vector<int64_t>& placed = run.timeline.point_ns.at(program.rank);
    std::map<CollectiveKey, RankCollectiveSpan>& spans = run.rank_collectives[program.rank];
    int64_t nic_free = 0;
    for (size_t i = 0; i < program.points.size() && i < placed.size(); ++i) {
      const ThreadPoint& point = program.points[i];
      if (point.kind != PointKind::Issue) continue;
      const auto link = run.timeline.collectives.find(point.collective);
      if (link == run.timeline.collectives.end()) continue;
      spans[point.collective] = RankCollectiveSpan{placed[i], std::max(placed[i], nic_free), link->second.end_ns};
      nic_free = link->second.end_ns;
    }
  }
}

}  // namespace

ClusterClockRun cluster_clock(trace::Reader& reader, const std::string& path,
                              const std::optional<core::LinkSpec>& link, ComputeTime compute) {
  ClusterClockRun run;
  run.compute = compute;
  // The real reason first: an imported run has no thread CPU times, whatever its link or device.
  const std::string imported = reader.meta_value(std::string(trace::meta_key::kImportedFrom));
  if (!imported.empty()) {
    throw ClusterClockError(path + ": recorded no thread CPU times (imported from " + imported +
                            ", which records none): the cluster clock replays runs dpscope "
                            "recorded; read this one on the measured clock");
  }
  read_settings(reader.meta(), path, link, run);
  std::map<int32_t, std::vector<std::pair<int32_t, trace::Event>>> iteration_phases;
  for (auto& [rank, builder] : read_programs(reader, iteration_phases)) {
    if (!builder.has_cpu) {
      throw ClusterClockError(path + ": rank " + std::to_string(rank) + " recorded no thread CPU times " +
                              "(a trace of schema version " + std::to_string(reader.schema_version()) +
                              "; they came in version 4): record the run again with this dpscope");
    }
    order_points(builder.program);
    if (compute == ComputeTime::Steady) {
      std::vector<StepWall> steps;
      for (const auto& [iteration, e] : iteration_phases[rank]) steps.push_back(StepWall{iteration, e.begin_ns, e.end_ns});
      steady_compute(builder.program, steps);
    }
    run.programs.push_back(std::move(builder.program));
  }
  run.timeline = replay_programs(run.programs, run.link);
  place_rank_collectives(run);
  for (const auto& [rank, phases] : iteration_phases) {
    for (const auto& [iteration, e] : phases) {
      run.iterations[rank][iteration] =
          ClusterSpan{run.to_cluster(rank, e.begin_ns), run.to_cluster(rank, e.end_ns)};
    }
  }
  return run;
}

}  // namespace dpscope::analysis
