// Reading a finished run back for the tutorials' printouts (see report.h).
#include "tutorials/common/report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

namespace dpscope::tutorials {

namespace {

std::string param_name(const trace::RunStats& stats, int32_t param) {
  if (param >= 0 && param < static_cast<int32_t>(stats.params.size())) return stats.params[param].name;
  return "#" + std::to_string(param);
}

// One event as a phrase: "hook net2.bias -> bucket 0 (filled 20 B)", "allreduce #3 660 B float32".
std::string describe_event(const trace::Event& e, const trace::RunStats& stats,
                           const std::vector<std::string>& names) {
  auto name_of = [&](trace::NameId id) {
    return id >= 0 && id < static_cast<trace::NameId>(names.size()) ? names[id] : std::string("?");
  };
  const std::string bucket = "bucket " + std::to_string(e.bucket);
  switch (e.kind) {
    case trace::EventKind::Phase: return "phase " + name_of(e.name);
    case trace::EventKind::Hook:
      return "hook " + param_name(stats, e.param) + " -> " + bucket + " (filled " +
             bytes_text(e.value) + ")";
    case trace::EventKind::BucketReady: return bucket + " ready";
    case trace::EventKind::BucketLaunch: return bucket + " launched as collective #" + std::to_string(e.seq);
    case trace::EventKind::BucketDone: return bucket + " done: averaged gradients written back";
    case trace::EventKind::Collective: {
      const auto op = static_cast<trace::CollectiveOp>(e.op);
      std::string text = std::string(trace::to_string(op)) + " #" + std::to_string(e.seq) + " " +
                         bytes_text(e.bytes);
      if (e.dtype != 0xff) text += " " + std::string(trace::to_string(static_cast<trace::DType>(e.dtype)));
      if (e.bucket != trace::kNone) text += " (" + bucket + ")";
      return text;
    }
    case trace::EventKind::CollectiveWait:
      return "wait for " + std::string(trace::to_string(static_cast<trace::CollectiveOp>(e.op))) +
             " #" + std::to_string(e.seq);
    case trace::EventKind::UnitState:
      return "unit " + std::to_string(e.unit) + " " +
             std::string(trace::to_string(static_cast<trace::UnitState>(e.op)));
    case trace::EventKind::Mark: return "mark " + name_of(e.name);
  }
  return "?";
}

}  // namespace

trace::RunStats read_stats(const std::string& path) {
  trace::Reader reader(path);
  return trace::compute_stats(reader);
}

const trace::RankStats& rank_stats(const trace::RunStats& stats, int rank) {
  for (const trace::RankStats& candidate : stats.ranks) {
    if (candidate.rank == rank) return candidate;
  }
  throw std::out_of_range(stats.path + " holds no rank " + std::to_string(rank) +
                          "; was the run merged from every rank's file?");
}

int64_t collectives_in(const trace::RankStats& rank, int32_t iteration, trace::CollectiveOp op) {
  int64_t count = 0;
  for (const trace::CollectiveStats& c : rank.collectives) {
    if (c.iteration == iteration && c.op == op) ++count;
  }
  return count;
}

int64_t collective_bytes_in(const trace::RankStats& rank, int32_t iteration, trace::CollectiveOp op) {
  int64_t bytes = 0;
  for (const trace::CollectiveStats& c : rank.collectives) {
    if (c.iteration == iteration && c.op == op && c.bytes > 0) bytes += c.bytes;
  }
  return bytes;
}

std::vector<trace::BucketInfo> bucket_plan(const trace::RunStats& stats, int generation) {
  std::vector<trace::BucketInfo> plan;
  for (const trace::BucketInfo& bucket : stats.buckets) {
    if (bucket.generation == generation) plan.push_back(bucket);
  }
  return plan;
}

std::vector<trace::BucketInfo> plan_in_force(const trace::RunStats& stats, int32_t iteration) {
  std::vector<trace::BucketInfo> rebuilt = bucket_plan(stats, 1);
  if (iteration >= 1 && !rebuilt.empty()) return rebuilt;
  return bucket_plan(stats, 0);
}

void print_bucket_plan(const trace::RunStats& stats, const std::vector<trace::BucketInfo>& plan,
                       const char* indent) {
  for (const trace::BucketInfo& bucket : plan) {
    std::string names;
    for (const int32_t param : bucket.params) names += (names.empty() ? "" : ", ") + param_name(stats, param);
    std::printf("%sbucket %d  %10s  [%s]\n", indent, bucket.index, bytes_text(bucket.bytes).c_str(),
                names.c_str());
  }
}


void print_timeline(trace::Reader& reader, const trace::RunStats& stats, int rank,
                    int32_t iteration, size_t max_lines) {
  std::vector<trace::Event> events;
  for (int kind = 0; kind < trace::kEventKindCount; ++kind) {
    for (const trace::Event& e : reader.events_of_kind(static_cast<trace::EventKind>(kind), rank)) {
      if (e.iteration == iteration) events.push_back(e);
    }
  }
  if (events.empty()) {
    std::printf("  (rank %d recorded nothing in this iteration)\n", rank);
    return;
  }
  // Enclosing phases before what they enclose, so the printout nests like the timeline.
  std::stable_sort(events.begin(), events.end(), [](const trace::Event& a, const trace::Event& b) {
    if (a.begin_ns != b.begin_ns) return a.begin_ns < b.begin_ns;
    return a.end_ns > b.end_ns;
  });
  std::map<trace::LaneId, std::string> lanes;
  for (const trace::LaneInfo& lane : reader.lanes()) {
    if (lane.rank == rank) lanes[lane.lane] = lane.name;
  }
  const std::vector<std::string> names = reader.names();
  const int64_t origin = events.front().begin_ns;
  std::printf("  %9s %9s  %-22s %s\n", "start ms", "length ms", "lane", "event");
  for (size_t i = 0; i < events.size() && i < max_lines; ++i) {
    const trace::Event& e = events[i];
    const double start_ms = static_cast<double>(e.begin_ns - origin) / 1e6;
    const bool instant = e.end_ns == e.begin_ns;
    char length[16] = "";
    if (!instant) std::snprintf(length, sizeof(length), "%.3f", static_cast<double>(e.end_ns - e.begin_ns) / 1e6);
    std::printf("  %9.3f %9s  %-22s %s\n", start_ms, length, lanes[e.lane].c_str(),
                describe_event(e, stats, names).c_str());
  }
  if (events.size() > max_lines) {
    std::printf("  ... and %zu more events (see them all in the viewer)\n", events.size() - max_lines);
  }
}

std::string bytes_text(int64_t bytes) {
  char text[32];
  if (bytes < 1024) {
    std::snprintf(text, sizeof(text), "%lld B", static_cast<long long>(bytes));
  } else if (bytes < 1024 * 1024) {
    std::snprintf(text, sizeof(text), "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(text, sizeof(text), "%.2f MiB", static_cast<double>(bytes) / (1024 * 1024));
  }
  return text;
}

}  // namespace dpscope::tutorials
