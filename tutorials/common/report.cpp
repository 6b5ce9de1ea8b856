// Reading a finished run back for the tutorials' printouts (see report.h).
#include "tutorials/common/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "analysis/clock_choice.h"
#include "analysis/whatif.h"
#include "core/link_model.h"
#include "trace/vocabulary.h"

namespace dpscope::tutorials {

namespace {

std::string param_name(const analysis::RunStats& stats, int32_t param) {
  if (param >= 0 && param < static_cast<int32_t>(stats.params.size())) return stats.params[param].name;
  return "#" + std::to_string(param);
}

// One event as a phrase: "hook net2.bias -> bucket 0 (filled 20 B)", "allreduce #3 660 B float32".
std::string describe_event(const trace::Event& e, const analysis::RunStats& stats,
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

analysis::RunStats read_stats(const std::string& path) {
  trace::Reader reader(path);
  return analysis::compute_lesson_stats(reader);
}

LessonEvents::LessonEvents(trace::Reader& reader) : reader_(reader) {
  // The same choice as analysis::compute_lesson_stats (Note [The lesson's clock]).
  if (!reader.meta().count(std::string(trace::meta_key::kLinkGbps))) return;
  try {
    cluster_ = analysis::cluster_clock(reader, reader.path(), std::nullopt);
    clock_ = analysis::ClockLabel{analysis::Clock::Cluster, cluster_->link.gbps, cluster_->link.latency_us, cluster_->compute};
  } catch (const analysis::ClusterClockError&) {
    // A GPU run or a trace without CPU times: its measured clock is the lesson's.
  }
}

std::vector<trace::Event> LessonEvents::of_kind(trace::EventKind kind, int rank) const {
  std::vector<trace::Event> events = reader_.events_of_kind(kind, rank);
  if (cluster_) {
    for (trace::Event& e : events) e = cluster_->to_cluster(e);
  }
  return events;
}

analysis::RunStats read_measured_stats(const std::string& path) {
  trace::Reader reader(path);
  return analysis::compute_stats(reader);
}

const analysis::RankStats& rank_stats(const analysis::RunStats& stats, int rank) {
  for (const analysis::RankStats& candidate : stats.ranks) {
    if (candidate.rank == rank) return candidate;
  }
  throw std::out_of_range(stats.path + " holds no rank " + std::to_string(rank) +
                          "; was the run merged from every rank's file?");
}

int64_t collectives_in(const analysis::RankStats& rank, int32_t iteration, trace::CollectiveOp op) {
  int64_t count = 0;
  for (const analysis::CollectiveStats& c : rank.collectives) {
    if (c.iteration == iteration && c.op == op) ++count;
  }
  return count;
}

int64_t collective_bytes_in(const analysis::RankStats& rank, int32_t iteration, trace::CollectiveOp op) {
  int64_t bytes = 0;
  for (const analysis::CollectiveStats& c : rank.collectives) {
    if (c.iteration == iteration && c.op == op && c.bytes > 0) bytes += c.bytes;
  }
  return bytes;
}

std::vector<trace::BucketInfo> bucket_plan(const analysis::RunStats& stats, int generation) {
  std::vector<trace::BucketInfo> plan;
  for (const trace::BucketInfo& bucket : stats.buckets) {
    if (bucket.generation == generation) plan.push_back(bucket);
  }
  return plan;
}

std::vector<trace::BucketInfo> plan_in_force(const analysis::RunStats& stats, int32_t iteration) {
  std::vector<trace::BucketInfo> rebuilt = bucket_plan(stats, 1);
  if (iteration >= 1 && !rebuilt.empty()) return rebuilt;
  return bucket_plan(stats, 0);
}

void print_bucket_plan(const analysis::RunStats& stats, const std::vector<trace::BucketInfo>& plan,
                       const char* indent) {
  for (const trace::BucketInfo& bucket : plan) {
    std::string names;
    for (const int32_t param : bucket.params) names += (names.empty() ? "" : ", ") + param_name(stats, param);
    std::printf("%sbucket %d  %10s  [%s]\n", indent, bucket.index, bytes_text(bucket.bytes).c_str(),
                names.c_str());
  }
}


void print_timeline(trace::Reader& reader, const analysis::RunStats& stats, int rank,
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

// ---- Runs side by side

namespace {

std::string mib_text(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", static_cast<double>(bytes) / (1 << 20));
  return text;
}

const analysis::MemoryAtPeak& step_peak(const LabelledRun& run, int rank) {
  return rank_stats(*run.stats, rank).step_memory_peak;
}

}  // namespace

void print_step_memory_peaks(const std::vector<LabelledRun>& runs) {
  constexpr trace::MemoryCategory kShown[] = {
      trace::MemoryCategory::Parameters,     trace::MemoryCategory::Gradients,
      trace::MemoryCategory::Buckets,        trace::MemoryCategory::Shards,
      trace::MemoryCategory::GradientShards, trace::MemoryCategory::FullParameters,
      trace::MemoryCategory::FullGradients,  trace::MemoryCategory::OptimizerState,
      trace::MemoryCategory::Activations,    trace::MemoryCategory::Data,
      trace::MemoryCategory::Other,
  };
  if (runs.empty()) return;
  int width = 14;  // each run's column: its label, and at least "12345.67"
  for (const LabelledRun& run : runs) width = std::max(width, static_cast<int>(run.label.size()) + 1);
  std::printf("\nRank 0 at its peak in the steps, MiB by category (what each category held when the total\n"
              "peaked; `dpscope stats` prints the same as \"peak in the steps\"):\n");
  std::printf("  %-16s", "category");
  for (const LabelledRun& run : runs) std::printf(" %*s", width, run.label.c_str());
  std::printf("\n");
  for (const trace::MemoryCategory category : kShown) {
    bool any = false;
    for (const LabelledRun& run : runs) any |= step_peak(run, 0).bytes(category) != 0;
    if (!any) continue;
    std::printf("  %-16s", std::string(trace::to_string(category)).c_str());
    for (const LabelledRun& run : runs) std::printf(" %*s", width, mib_text(step_peak(run, 0).bytes(category)).c_str());
    std::printf("\n");
  }
  std::printf("  %-16s", "peak (total)");
  for (const LabelledRun& run : runs) std::printf(" %*s", width, mib_text(step_peak(run, 0).total_bytes).c_str());
  std::printf("\n  %-16s", ("of " + runs.front().label + "'s").c_str());
  const double first = static_cast<double>(step_peak(runs.front(), 0).total_bytes);
  for (const LabelledRun& run : runs) {
    std::printf(" %*.2f", width, static_cast<double>(step_peak(run, 0).total_bytes) / first);
  }
  std::printf("\n\nPeak in the steps per rank, MiB:\n");
  for (const LabelledRun& run : runs) {
    std::printf("  %-*s", width, run.label.c_str());
    for (const analysis::RankStats& rank : run.stats->ranks) {
      std::printf("  rank %d %s", rank.rank, mib_text(rank.step_memory_peak.total_bytes).c_str());
    }
    std::printf("\n");
  }
}

int64_t ring_bytes_sent(trace::CollectiveOp op, int64_t bytes, int ranks) {
  const double n = ranks, s = static_cast<double>(bytes);
  double sent = 0;
  switch (op) {
    case trace::CollectiveOp::AllReduce: sent = 2 * (n - 1) / n * s; break;
    case trace::CollectiveOp::ReduceScatter: sent = (n - 1) / n * s; break;
    case trace::CollectiveOp::AllGather: sent = (n - 1) * s; break;
    case trace::CollectiveOp::Broadcast: sent = s; break;
    case trace::CollectiveOp::Barrier: break;
    case trace::CollectiveOp::AllToAll: sent = (n - 1) / n * s; break;
    case trace::CollectiveOp::SendRecv: sent = s; break;
  }
  return static_cast<int64_t>(std::llround(sent));
}

void print_clocks(const std::vector<LabelledRun>& runs) {
  if (runs.empty()) return;
  const analysis::ClockLabel& clock = runs.front().stats->clock;
  if (clock.clock == analysis::Clock::Measured) {
    std::printf("\nTimes above: %s. On an emulated link (dpscope launch --link-gbps 4 "
                "--link-latency-us 50) they would be on the cluster clock, the same on a busy "
                "machine (docs/cluster-clock.md).\n",
                analysis::clock_text(clock).c_str());
    return;
  }
  std::printf("\nTimes above: %s, the run replayed as\nthe cluster would run it, whatever else this "
              "machine ran (docs/cluster-clock.md). Step, rank 0, median of the\nsteady steps, on both "
              "clocks (measured: this machine's scheduler and real transfers included):\n",
              analysis::clock_text(clock).c_str());
  std::printf("  %-16s %16s %26s\n", "run", "cluster clock ms", "measured (this machine) ms");
  for (const LabelledRun& run : runs) {
    const analysis::RunStats measured = read_measured_stats(run.stats->path);
    std::printf("  %-16s %16.2f %26.2f\n", run.label.c_str(),
                analysis::step_summary(rank_stats(*run.stats, 0)).median_ms,
                analysis::step_summary(rank_stats(measured, 0)).median_ms);
  }
}

void print_ring_traffic(const std::vector<LabelledRun>& runs, int ranks) {
  std::printf("\nCommunication per step (rank 0, median of steps 1.., iteration 0 building plans and\n"
              "warming connections up; sent: the bytes rank 0 puts on the\n"
              "ring, 2(n-1)/n of a tensor for an all-reduce, (n-1)/n for a reduce-scatter or an\n"
              "all-gather; link ms: what the emulated link needs for them, by its ring model; comm ms:\n"
              "time with a collective running, waits for the other rank included; exposed ms: the part\n"
              "of it during which the rank computes nothing, as `dpscope stats` counts it):\n");
  std::printf("  %-14s %12s %12s %9s %9s %11s %14s\n", "run", "collectives", "sent", "link ms", "comm ms",
              "exposed ms", ("sent of " + runs.front().label + "'s").c_str());
  double first_sent = 0;
  for (const LabelledRun& run : runs) {
    const analysis::RankStats& rank0 = rank_stats(*run.stats, 0);
    const core::LinkSpec link{run.stats->link_gbps, run.stats->link_latency_us};
    struct StepTraffic {
      int64_t collectives = 0;
      double sent = 0;
      double link_ms = 0;
    };
    std::map<int32_t, StepTraffic> per_step;
    for (const analysis::CollectiveStats& c : rank0.collectives) {
      if (c.iteration == trace::kNone || c.op == trace::CollectiveOp::Broadcast) continue;
      StepTraffic& step = per_step[c.iteration];
      ++step.collectives;
      step.sent += static_cast<double>(ring_bytes_sent(c.op, c.bytes, ranks));
      if (link.gbps > 0) step.link_ms += static_cast<double>(core::link_model_ns(c.op, c.bytes, ranks, link)) / 1e6;
    }
    std::vector<double> counts, sent, link_ms, comm_ms, exposed_ms;
    for (const analysis::IterationStats& it : rank0.iterations) {
      if (it.iteration < 1) continue;  // iteration 0 builds plans and warms connections up
      counts.push_back(double(per_step[it.iteration].collectives));
      sent.push_back(per_step[it.iteration].sent);
      link_ms.push_back(per_step[it.iteration].link_ms);
      comm_ms.push_back(it.overlap.comm_ms);
      exposed_ms.push_back(it.overlap.exposed_comm_ms);
    }
    if (sent.empty()) continue;
    // The median as `dpscope stats` takes it: the mean of the middle two of an even count.
    const double median_sent = analysis::median_of(sent);
    if (first_sent == 0) first_sent = median_sent;
    char link_text[32] = "-";
    if (link.gbps > 0) std::snprintf(link_text, sizeof(link_text), "%.2f", analysis::median_of(link_ms));
    std::printf("  %-14s %12g %12s %9s %9.2f %11.2f %14.2f\n", run.label.c_str(), analysis::median_of(counts),
                bytes_text(static_cast<int64_t>(median_sent)).c_str(), link_text, analysis::median_of(comm_ms),
                analysis::median_of(exposed_ms), median_sent / first_sent);
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
