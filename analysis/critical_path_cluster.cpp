// The critical path of a dpscope run on the cluster clock: walked back through the replay's own
// dependencies from a region's end (Note [Critical path on the cluster clock]).
#include <algorithm>

#include "analysis/critical_path.h"
#include "analysis/critical_path_region.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {

// Note [Critical path on the cluster clock]
// The replay (Note [Cluster clock]) places every point of a rank's computing thread at the
// latest of what it waited for, so each point has one binding predecessor, and the path is
// walked back from the region's end until its begin:
//  - a compute point (a span's begin or end, an issue, a wait's or sleep's begin) follows the
//    point before it on its thread by the CPU time between them: cpu_bound, the time of the
//    innermost event of the thread that holds both (a phase, a hook, a wait);
//  - a wait's end that its collective's end set follows that collective on the link: comm_bound,
//    the collective's transfer; the collective began when the last of its ranks issued it (the
//    path goes on from that rank's issue, this rank's first when several tie) or when a rank's NIC
//    finished the collective before it (the path goes on through that one);
//  - a wait taken at its recorded wall time (a collective some rank never issued) and a sleep
//    standing for work are the thread's own time: cpu_bound.
// The pieces are contiguous, so the path's length is the region's length on its rank: the step
// on the cluster clock for an iteration. It is one path of the replay: where two ranks or a
// rank and the link tie, the other path is as long (docs/critical-path.md).

namespace {

struct ThreadEvent {
  int64_t begin_wall = 0, end_wall = 0;
  std::string name;
};

struct CollectiveEvent {
  std::string name;
  trace::LaneId lane = 0;
};

// An event's name as the path lists it: its own, else what it is ("allreduce #12 of group 0",
// "wait for allreduce #12 of group 0").
std::string label(const trace::Event& e, const std::vector<std::string>& names) {
  if (e.name >= 0 && size_t(e.name) < names.size() && !names[size_t(e.name)].empty()) return names[size_t(e.name)];
  const std::string collective = e.op < trace::kCollectiveOpCount
                                     ? std::string(trace::to_string(static_cast<trace::CollectiveOp>(e.op))) + " #" +
                                           std::to_string(e.seq) + " of group " + std::to_string(e.grp)
                                     : "collective";
  if (e.kind == trace::EventKind::Collective) return collective;
  if (e.kind == trace::EventKind::CollectiveWait) return "wait for " + collective;
  return std::string(trace::to_string(e.kind));
}

struct RunEvents {
  std::map<int32_t, std::vector<ThreadEvent>> thread;  // lane 0's events by rank, by begin
  std::map<std::pair<int32_t, CollectiveKey>, CollectiveEvent> collectives;
  std::vector<RegionCandidate> candidates;
};

RunEvents read_run_events(trace::Reader& reader, const std::vector<std::string>& names, const ClusterClockRun& run) {
  RunEvents out;
  reader.for_each_event([&](const trace::Event& e) {
    if (e.kind == trace::EventKind::Collective && e.seq != trace::kNone64) {
      out.collectives[{e.rank, CollectiveKey{e.grp, e.seq}}] = CollectiveEvent{label(e, names), e.lane};
      return true;
    }
    if (e.lane != 0) return true;
    out.thread[e.rank].push_back(ThreadEvent{e.begin_ns, e.end_ns, label(e, names)});
    const bool timed = e.cpu_begin_ns != trace::kNone64 && e.cpu_end_ns != trace::kNone64;
    if (e.kind == trace::EventKind::Phase && timed && e.name >= 0 && size_t(e.name) < names.size()) {
      const std::string& name = names[size_t(e.name)];
      out.candidates.push_back(RegionCandidate{e.rank, run.to_cluster(e.rank, e.begin_ns),
                                               run.to_cluster(e.rank, e.end_ns), name,
                                               name == trace::kPhaseIteration ? e.iteration : trace::kNone});
    }
    return true;
  });
  return out;
}

class PathWalk {
 public:
  PathWalk(const ClusterClockRun& run, const RunEvents& events,
           const std::map<std::pair<int32_t, trace::LaneId>, std::string>& lanes)
      : run_(run), events_(events), lanes_(lanes) {
    for (const RankProgram& program : run.programs) {
      programs_[program.rank] = &program;
      CollectiveKey previous{trace::kNone, trace::kNone64};
      for (size_t i = 0; i < program.points.size(); ++i) {
        const ThreadPoint& p = program.points[i];
        if (p.kind != PointKind::Issue || !run.timeline.collectives.count(p.collective)) continue;
        issue_point_[{program.rank, p.collective}] = i;
        nic_previous_[{program.rank, p.collective}] = previous;
        previous = p.collective;
      }
    }
  }

  // The path on `rank` from its window's end back to its begin.
  CriticalPath walk(int32_t rank, const Window& window) {
    CriticalPath path;
    path.rank = rank;
    path.clock = "cluster";
    path.region = window.label;
    path.region_ns = window.end_ns - window.begin_ns;
    stop_ = window.begin_ns;
    path_ = &path;
    const std::vector<int64_t>& placed = run_.timeline.point_ns.at(rank);
    size_t i = placed.size();
    while (i > 0 && placed[i - 1] > window.end_ns) --i;
    if (i == 0) return path;
    int32_t at_rank = rank;
    size_t at = i - 1;
    while (true) {
      const std::vector<int64_t>& times = run_.timeline.point_ns.at(at_rank);
      const RankProgram& program = *programs_.at(at_rank);
      const int64_t now = times[at];
      if (now <= stop_ || at == 0) break;
      const ThreadPoint& point = program.points[at];
      const int64_t before = times[at - 1];
      if (point.kind == PointKind::WaitEnd) {
        const auto link = run_.timeline.collectives.find(point.collective);
        if (link != run_.timeline.collectives.end() && link->second.end_ns == now && now > before) {
          if (!through_link(at_rank, point.collective, at_rank, at)) break;
          continue;
        }
      }
      if (!compute(at_rank, program.points[at - 1].wall_ns, point.wall_ns, before, now)) break;
      --at;
    }
    for (auto& [key, pe] : by_event_) path.events.push_back(pe);
    by_event_.clear();
    std::sort(path.segments.begin(), path.segments.end(),
              [](const PathSegment& a, const PathSegment& b) { return a.begin_ns < b.begin_ns; });
    return path;
  }

 private:
  // Adds [from, to] (clipped at the region's begin) to the path; false once the begin is reached.
  bool piece(int64_t from, int64_t to, BoundBy bound, const std::tuple<int32_t, int, int64_t>& owner, PathEvent what,
             trace::LaneId lane) {
    const int64_t begin = std::max(from, stop_);
    if (to > begin) {
      path_->length_ns += to - begin;
      path_->bound_ns[bound] += to - begin;
      path_->segments.push_back({what.rank, lane, begin, to, bound});
      PathEvent& pe = by_event_.emplace(owner, std::move(what)).first->second;
      pe.on_path_ns += to - begin;
      pe.bound = bound;
    }
    return from > stop_;
  }

  std::string lane_name(int32_t rank, trace::LaneId lane) const {
    const auto found = lanes_.find({rank, lane});
    return found != lanes_.end() ? found->second : "lane " + std::to_string(lane);
  }

  // Thread time from point wall `w0` to `w1`, placed at [t0, t1]: the innermost event holding it.
  bool compute(int32_t rank, int64_t w0, int64_t w1, int64_t t0, int64_t t1) {
    // Nested events: of those holding the piece, the one that began last is the innermost.
    const ThreadEvent* inner = nullptr;
    const auto thread = events_.thread.find(rank);
    if (thread != events_.thread.end()) {
      auto it = std::upper_bound(thread->second.begin(), thread->second.end(), w0,
                                 [](int64_t wall, const ThreadEvent& e) { return wall < e.begin_wall; });
      while (it != thread->second.begin()) {
        --it;
        if (it->end_wall >= w1 && it->end_wall > it->begin_wall) {
          inner = &*it;
          break;
        }
      }
    }
    PathEvent what;
    what.rank = rank;
    what.lane = lane_name(rank, 0);
    what.name = inner ? inner->name : "(between events)";
    what.begin_ns = inner ? run_.to_cluster(rank, inner->begin_wall) : t0;
    const int64_t id = inner ? int64_t(inner - thread->second.data()) : -1;
    return piece(t0, t1, BoundBy::CpuBound, {rank, 0, id}, std::move(what), 0);
  }

  // The collective `key` on the link, reached from `rank`; moves the cursor to what started it.
  bool through_link(int32_t rank, CollectiveKey key, int32_t& at_rank, size_t& at) {
    while (true) {
      const ClusterSpan span = run_.timeline.collectives.at(key);
      PathEvent what;
      what.rank = rank;
      const auto event = events_.collectives.find({rank, key});
      what.name = event != events_.collectives.end() ? event->second.name : "collective";
      what.lane = event != events_.collectives.end() ? lane_name(rank, event->second.lane) : "";
      what.begin_ns = span.begin_ns;
      const trace::LaneId lane = event != events_.collectives.end() ? event->second.lane : 0;
      if (!piece(span.begin_ns, span.end_ns, BoundBy::CommBound, {rank, 1, key.first * 1'000'000'007LL + key.second},
                 std::move(what), lane)) {
        return false;
      }
      // What set its start: a rank's issue (this rank's first), else a rank's previous collective.
      std::vector<int32_t> members{rank};
      for (const auto& [r, program] : programs_) if (r != rank) members.push_back(r);
      bool moved = false;
      for (const int32_t m : members) {
        const auto issue = issue_point_.find({m, key});
        if (issue == issue_point_.end()) continue;
        if (run_.timeline.point_ns.at(m)[issue->second] == span.begin_ns) {
          at_rank = m;
          at = issue->second;
          return true;
        }
      }
      for (const int32_t m : members) {
        const auto previous = nic_previous_.find({m, key});
        if (previous == nic_previous_.end() || previous->second.first == trace::kNone) continue;
        if (run_.timeline.collectives.at(previous->second).end_ns == span.begin_ns) {
          rank = m;
          key = previous->second;
          moved = true;
          break;
        }
      }
      if (!moved) return false;
    }
  }

  const ClusterClockRun& run_;
  const RunEvents& events_;
  const std::map<std::pair<int32_t, trace::LaneId>, std::string>& lanes_;
  std::map<int32_t, const RankProgram*> programs_;
  std::map<std::pair<int32_t, CollectiveKey>, size_t> issue_point_;
  std::map<std::pair<int32_t, CollectiveKey>, CollectiveKey> nic_previous_;
  int64_t stop_ = 0;
  CriticalPath* path_ = nullptr;
  std::map<std::tuple<int32_t, int, int64_t>, PathEvent> by_event_;  // (rank, thread 0 / link 1, event)
};

}  // namespace

CriticalPath cluster_critical_path(trace::Reader& reader, const std::string& path, const ClusterClockRun& run,
                                   const RegionRequest& request) {
  const std::vector<std::string> names = reader.names();
  std::map<std::pair<int32_t, trace::LaneId>, std::string> lanes;
  for (const trace::LaneInfo& lane : reader.lanes()) lanes[{lane.rank, lane.lane}] = lane.name;
  RunEvents events = read_run_events(reader, names, run);
  for (auto& [rank, thread] : events.thread) {
    std::stable_sort(thread.begin(), thread.end(),
                     [](const ThreadEvent& a, const ThreadEvent& b) { return a.begin_wall < b.begin_wall; });
  }
  const std::map<int32_t, Window> windows = region_windows(events.candidates, request, path);
  PathWalk walk(run, events, lanes);
  std::optional<CriticalPath> longest;
  for (const auto& [rank, window] : windows) {
    if (!run.timeline.point_ns.count(rank)) continue;
    CriticalPath p = walk.walk(rank, window);
    if (!longest || p.length_ns > longest->length_ns) longest = std::move(p);
  }
  if (!longest) {
    throw CriticalPathError(path + ": no rank's computing thread has the region on the cluster clock; choose "
                            "another (--iteration N)");
  }
  std::stable_sort(longest->events.begin(), longest->events.end(),
                   [](const PathEvent& a, const PathEvent& b) { return a.on_path_ns > b.on_path_ns; });
  return *longest;
}

}  // namespace dpscope::analysis
