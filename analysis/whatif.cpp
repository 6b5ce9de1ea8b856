// The what-if replay (Note [What-if replay] in whatif.h): reading what a DDP trace recorded of its
// steady iterations, deriving bucket plans from the order gradients arrived, and replaying the
// iterations with another plan.
#include "analysis/whatif.h"
#include "trace/vocabulary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

namespace dpscope::analysis {
namespace {

int64_t element_size(trace::DType dtype) {
  switch (dtype) {
    case trace::DType::Float64:
    case trace::DType::Int64:
      return 8;
    case trace::DType::Float32:
    case trace::DType::Int32:
      return 4;
    case trace::DType::Float16:
    case trace::DType::BFloat16:
      return 2;
    default:
      return 1;
  }
}

int64_t mib_to_bytes(double mb) { return static_cast<int64_t>(mb * 1024 * 1024); }

// The recorded limits and comm hook from meta "config": `dpscope train` writes bucket_cap_mb and
// first_bucket_mb, `dpscope synth` bucket_cap_bytes and first_bucket_bytes.
struct RecordedConfig {
  std::optional<BucketLimits> limits;
  std::string comm_hook;
};

RecordedConfig read_config(const std::string& text) {
  RecordedConfig config;
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_object()) return config;
  const auto number = [&](const char* key) -> std::optional<double> {
    const auto it = json.find(key);
    if (it == json.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  if (auto cap = number("bucket_cap_mb"), first = number("first_bucket_mb"); cap && first) {
    config.limits = BucketLimits{mib_to_bytes(*first), mib_to_bytes(*cap)};
  } else if (auto cap_bytes = number("bucket_cap_bytes"), first_bytes = number("first_bucket_bytes");
             cap_bytes && first_bytes) {
    config.limits = BucketLimits{static_cast<int64_t>(*first_bytes), static_cast<int64_t>(*cap_bytes)};
  }
  if (const auto it = json.find("comm_hook"); it != json.end() && it->is_string()) {
    config.comm_hook = it->get<std::string>();
  }
  return config;
}

// The events of one iteration of the replayed rank, as streamed.
struct IterationEvents {
  std::vector<trace::Event> hooks, phases, collectives, waits;
  std::vector<int64_t> bucket_done_ns;
};

bool is_bucket_allreduce(const trace::Event& e) {
  return e.kind == trace::EventKind::Collective && e.bucket != trace::kNone &&
         e.op == static_cast<uint8_t>(trace::CollectiveOp::AllReduce);
}

// Fills a ReplayIteration from its events (Note [What-if replay]): ready times, the tail, and
// the slices the overlap figures are computed on.
ReplayIteration replay_iteration(int32_t iteration, IterationEvents& ev, size_t params,
                                 const std::vector<std::string>& names) {
  ReplayIteration it;
  it.iteration = iteration;
  int64_t first_hook_end = INT64_MAX, last_hook_end = INT64_MIN;
  std::vector<int64_t> ready(params, trace::kNone64);
  for (const trace::Event& h : ev.hooks) {
    first_hook_end = std::min(first_hook_end, h.end_ns);
    last_hook_end = std::max(last_hook_end, h.end_ns);
    if (h.param >= 0 && static_cast<size_t>(h.param) < params) {
      ready[h.param] = std::max(ready[h.param], h.end_ns);
    }
  }
  for (int64_t& t : ready) {
    if (t == trace::kNone64) t = first_hook_end;
  }
  it.ready_ns = std::move(ready);

  std::optional<Interval> finalize;
  const auto name_of = [&](const trace::Event& e) {
    return e.name >= 0 && static_cast<size_t>(e.name) < names.size() ? names[e.name] : std::string();
  };
  for (const trace::Event& p : ev.phases) {
    const std::string name = name_of(p);
    if (name == trace::kPhaseForward || name == trace::kPhaseBackward || name == trace::kPhaseOptimizerStep) {
      it.compute.push_back({p.begin_ns, p.end_ns});
    } else if (name == trace::kPhaseFinalizeBackward) {
      finalize = Interval{p.begin_ns, p.end_ns};
    }
  }
  std::set<std::pair<int32_t, int64_t>> bucket_seqs;
  for (const trace::Event& c : ev.collectives) {
    if (is_bucket_allreduce(c)) {
      bucket_seqs.insert({c.grp, c.seq});
      it.allreduces.push_back({c.bucket, c.bytes, {c.begin_ns, c.end_ns}});
    } else {
      it.other_comm.push_back({c.begin_ns, c.end_ns});
    }
  }
  std::sort(it.allreduces.begin(), it.allreduces.end(),
            [](const auto& a, const auto& b) { return a.span.begin_ns < b.span.begin_ns; });
  std::vector<Interval> bucket_waits;
  for (const trace::Event& w : ev.waits) {
    if (bucket_seqs.count({w.grp, w.seq})) bucket_waits.push_back({w.begin_ns, w.end_ns});
    else it.waits.push_back({w.begin_ns, w.end_ns});
  }
  if (finalize) {
    it.tail = *finalize;
  } else {
    it.tail = {last_hook_end, last_hook_end};
    int64_t begin = INT64_MAX;
    for (const Interval& w : bucket_waits) {
      if (w.begin_ns >= last_hook_end) begin = std::min(begin, w.begin_ns);
      it.tail.end_ns = std::max(it.tail.end_ns, w.end_ns);
    }
    for (const int64_t done : ev.bucket_done_ns) it.tail.end_ns = std::max(it.tail.end_ns, done);
    if (begin != INT64_MAX) it.tail.begin_ns = begin;
  }
  // Bucket waits outside the tail stay as recorded (none in a DDP run).
  std::vector<Interval> inside;
  for (const Interval& w : bucket_waits) {
    if (w.begin_ns >= it.tail.begin_ns && w.end_ns <= it.tail.end_ns) inside.push_back(w);
    else it.waits.push_back(w);
  }
  it.tail_work_ns = std::max<int64_t>(
      0, (it.tail.end_ns - it.tail.begin_ns) - IntervalSet::union_of(std::move(inside)).length());
  return it;
}

// Median of (all-reduce start - its bucket's ready time) over the recorded all-reduces that did
// not queue behind the previous one.
int64_t launch_offset(const std::vector<ReplayIteration>& iterations, const BucketPlan& plan) {
  std::vector<double> offsets;
  for (const ReplayIteration& it : iterations) {
    int64_t previous_end = INT64_MIN;
    for (const auto& a : it.allreduces) {
      if (a.bucket < 0 || static_cast<size_t>(a.bucket) >= plan.buckets.size()) continue;
      int64_t ready = INT64_MIN;
      for (const int64_t p : plan.buckets[a.bucket]) ready = std::max(ready, it.ready_ns[p]);
      if (a.span.begin_ns > previous_end + 1000) offsets.push_back(double(a.span.begin_ns - ready));
      previous_end = a.span.end_ns;
    }
  }
  return static_cast<int64_t>(std::llround(median_of(std::move(offsets))));
}

}  // namespace

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

ReplayOrigin replay_origin(const std::string& path, const RunStats& stats, int32_t rank) {
  ReplayOrigin origin;
  origin.path = path;
  origin.world_size = stats.world_size;
  origin.rank = rank;
  origin.link_gbps = stats.link_gbps;
  origin.link_latency_us = stats.link_latency_us;
  return origin;
}

const RankStats& replayable_rank(const std::string& path, const RunStats& stats, int32_t rank) {
  const auto found = std::find_if(stats.ranks.begin(), stats.ranks.end(), [&](const RankStats& r) { return r.rank == rank; });
  if (found == stats.ranks.end()) {
    throw WhatifError(path + ": has no rank " + std::to_string(rank) + " (it holds " +
                      std::to_string(stats.ranks.size()) + " ranks); pass --rank with one of them");
  }
  if (steady_from(size_t(std::max(stats.iterations, 0))) == 0) {
    throw WhatifError(path + ": no steady iterations (it has " + std::to_string(stats.iterations) +
                      "; whatif replays iteration 2 on, Note [Steady steps]): record at least "
                      "3 steps");
  }
  return *found;
}

ReplayTrace load_replay_trace(trace::Reader& reader, const RunStats& stats, int32_t rank) {
  ReplayTrace trace;
  trace.path = reader.path();
  const std::string& path = trace.path;
  if (stats.strategy == trace::Strategy::Fsdp) {
    throw WhatifError(path + ": an FSDP trace has no DDP bucket plan to replay; replay its "
                             "prefetch and all-gather limit with load_fsdp_replay_trace "
                             "(analysis/whatif_fsdp.h), as `dpscope whatif` does");
  }
  if (stats.strategy != trace::Strategy::Ddp) {
    throw WhatifError(path + ": not a DDP trace (meta strategy '" + stats.strategy_recorded +
                      "'); whatif replays what `dpscope train --strategy ddp` or "
                      "`dpscope synth` records");
  }
  const RecordedConfig config = read_config(reader.meta_value("config"));
  if (!config.comm_hook.empty() && config.comm_hook != "none" && config.comm_hook != "allreduce") {
    throw WhatifError(path + ": recorded with --comm-hook " + config.comm_hook +
                      "; whatif models each bucket's built-in all-reduce, not comm hooks: "
                      "record a run without --comm-hook");
  }
  trace.recorded_limits = config.limits;
  int64_t hooks = 0;
  for (const RankStats& r : stats.ranks) {
    for (const IterationStats& it : r.iterations) hooks += it.hooks;
  }
  if (hooks == 0) {
    throw WhatifError(path + ": no gradient hook events (recorded at trace level summary?); "
                             "whatif needs each gradient's ready time: record with "
                             "--trace-level full");
  }
  const RankStats& rank_stats = replayable_rank(path, stats, rank);
  static_cast<ReplayOrigin&>(trace) = replay_origin(path, stats, rank);
  for (const trace::ParamInfo& p : stats.params) {
    trace.gradients.push_back(
        {static_cast<int32_t>(p.dtype), 0, p.numel * element_size(p.dtype), p.sparse});
    trace.param_names.push_back(p.name);
  }
  const int32_t rebuilt = std::any_of(stats.buckets.begin(), stats.buckets.end(),
                                      [](const trace::BucketInfo& b) { return b.generation == 1; });
  for (const trace::BucketInfo& b : stats.buckets) {
    if (b.generation != rebuilt) continue;
    trace.recorded_plan.buckets.emplace_back(b.params.begin(), b.params.end());
    trace.recorded_plan.size_limits.push_back(0);
  }

  const int32_t steady = steady_from(size_t(stats.iterations));
  const size_t params = trace.gradients.size();
  const std::vector<std::string> names = reader.names();
  std::map<int32_t, IterationEvents> events;       // of `rank`, steady iterations
  std::map<int32_t, std::vector<std::pair<int64_t, int32_t>>> rank0_hooks;  // (begin, param)
  reader.for_each_event([&](const trace::Event& e) {
    if (e.iteration < 0) return true;
    if (e.rank == 0 && e.kind == trace::EventKind::Hook && e.iteration < steady) {
      rank0_hooks[e.iteration].push_back({e.begin_ns, e.param});
    }
    if (e.iteration < steady) return true;
    if (is_bucket_allreduce(e)) trace.allreduce_samples.push_back({e.bytes, e.end_ns - e.begin_ns});
    if (e.rank != rank) return true;
    IterationEvents& it = events[e.iteration];
    switch (e.kind) {
      case trace::EventKind::Hook: it.hooks.push_back(e); break;
      case trace::EventKind::Phase: it.phases.push_back(e); break;
      case trace::EventKind::Collective: it.collectives.push_back(e); break;
      case trace::EventKind::CollectiveWait: it.waits.push_back(e); break;
      case trace::EventKind::BucketDone: it.bucket_done_ns.push_back(e.begin_ns); break;
      default: break;
    }
    return true;
  });
  // The arrival order: rank 0's first iteration in which every gradient's hook fired.
  for (auto& [iteration, list] : rank0_hooks) {
    std::sort(list.begin(), list.end());
    std::set<int32_t> seen;
    for (const auto& [begin, param] : list) seen.insert(param);
    if (seen.size() < params) continue;
    std::set<int32_t> placed;
    for (const auto& [begin, param] : list) {
      if (placed.insert(param).second) trace.arrival_order.push_back(param);
    }
    break;
  }
  if (trace.arrival_order.empty()) {
    throw WhatifError(path + ": rank 0 fired no gradient hook for some parameters in iterations "
                             "0 and 1, so the order gradients arrive in is unknown; whatif needs "
                             "a run where every parameter gets a gradient");
  }
  for (auto& [iteration, ev] : events) {
    if (ev.hooks.empty() || static_cast<size_t>(iteration) >= rank_stats.iterations.size()) continue;
    ReplayIteration it = replay_iteration(iteration, ev, params, names);
    if (it.allreduces.empty()) continue;
    const IterationStats& measured = rank_stats.iterations[static_cast<size_t>(iteration)];
    it.measured_step_ms = measured.step_ms;
    it.measured = measured.overlap;
    trace.iterations.push_back(std::move(it));
  }
  if (trace.iterations.empty()) {
    throw WhatifError(path + ": rank " + std::to_string(rank) + " has no steady iteration with "
                      "gradient hooks and bucket all-reduces (the steady ones: iteration 2 on); "
                      "record a DDP run of at least 3 steps at --trace-level full");
  }
  trace.launch_offset_ns = launch_offset(trace.iterations, trace.recorded_plan);
  return trace;
}

OverlapStats overlap_of_slices(std::vector<Interval> compute, std::vector<Interval> waits,
                               std::vector<Interval> comm) {
  const IntervalSet compute_set =
      IntervalSet::union_of(std::move(compute)).minus(IntervalSet::union_of(std::move(waits)));
  const IntervalSet comm_set = IntervalSet::union_of(std::move(comm));
  const int64_t comm_ns = comm_set.length();
  const int64_t hidden_ns = comm_set.intersection_length(compute_set);
  return OverlapStats{compute_set.length() / 1e6, comm_ns / 1e6, hidden_ns / 1e6,
                      (comm_ns - hidden_ns) / 1e6};
}

BucketPlan plan_for(const ReplayTrace& trace, const BucketLimits& limits) {
  std::vector<GradientDesc> walk;
  for (const int64_t p : trace.arrival_order) walk.push_back(trace.gradients[p]);
  return plan_buckets(walk, {limits.first_bucket_bytes, limits.bucket_cap_bytes},
                      trace.arrival_order);
}

Prediction predict(const ReplayTrace& trace, const BucketPlan& plan, const AllReduceModel& model) {
  Prediction prediction;
  int64_t total_bytes = 0;
  for (const auto& bucket : plan.buckets) {
    int64_t bytes = 0;
    for (const int64_t p : bucket) bytes += trace.gradients[p].bytes;
    prediction.bucket_bytes.push_back(bytes);
    total_bytes += bytes;
  }
  // A bucket of the new plan that holds exactly the parameters of a recorded bucket keeps that
  // bucket's recorded all-reduce time, iteration by iteration: a measurement of that very
  // message beats the fitted line (See Note [What-if replay]). Not on another link.
  std::vector<int32_t> recorded_twin(plan.buckets.size(), trace::kNone);
  if (model.source == AllReduceModel::Source::kFitted) {
    const auto sorted = [](std::vector<int64_t> params) {
      std::sort(params.begin(), params.end());
      return params;
    };
    for (size_t b = 0; b < plan.buckets.size(); ++b) {
      for (size_t r = 0; r < trace.recorded_plan.buckets.size(); ++r) {
        if (sorted(plan.buckets[b]) == sorted(trace.recorded_plan.buckets[r])) recorded_twin[b] = int32_t(r);
      }
      prediction.buckets_timed_as_recorded += recorded_twin[b] != trace::kNone ? 1 : 0;
    }
  }
  for (const ReplayIteration& it : trace.iterations) {
    IterationPrediction out;
    out.iteration = it.iteration;
    int64_t previous_launch = INT64_MIN, previous_end = INT64_MIN;
    for (size_t b = 0; b < plan.buckets.size(); ++b) {
      BucketSchedule s;
      s.bytes = prediction.bucket_bytes[b];
      s.ready_ns = INT64_MIN;
      for (const int64_t p : plan.buckets[b]) s.ready_ns = std::max(s.ready_ns, it.ready_ns[p]);
      s.launch_ns = std::max(s.ready_ns, previous_launch);
      s.start_ns = std::max(s.launch_ns + trace.launch_offset_ns, previous_end);
      int64_t duration = model.duration_ns(s.bytes);
      if (recorded_twin[b] != trace::kNone) {
        for (const ReplayIteration::RecordedAllReduce& a : it.allreduces) {
          if (a.bucket == recorded_twin[b]) duration = a.span.end_ns - a.span.begin_ns;
        }
      }
      s.end_ns = s.start_ns + duration;
      previous_launch = s.launch_ns;
      previous_end = s.end_ns;
      out.buckets.push_back(s);
    }
    // The tail waits for the buckets in index order; its other work is shared by bytes.
    int64_t t = it.tail.begin_ns, work_left = it.tail_work_ns, bytes_left = total_bytes;
    for (const BucketSchedule& s : out.buckets) {
      if (s.end_ns > t) {
        out.predicted_waits.push_back({t, s.end_ns});
        t = s.end_ns;
      }
      const int64_t share =
          bytes_left > 0 ? static_cast<int64_t>(double(work_left) * double(s.bytes) / double(bytes_left))
                         : 0;
      t += share;
      work_left -= share;
      bytes_left -= s.bytes;
    }
    t += work_left;
    out.tail_end_ns = t;
    const int64_t delta = t - it.tail.end_ns;
    const auto shift = [&](Interval i) {
      if (i.begin_ns >= it.tail.end_ns) i.begin_ns += delta;
      if (i.end_ns >= it.tail.end_ns) i.end_ns += delta;
      return i;
    };
    std::vector<Interval> compute, waits, comm;
    for (const Interval& i : it.compute) compute.push_back(shift(i));
    for (const Interval& i : it.waits) waits.push_back(shift(i));
    waits.insert(waits.end(), out.predicted_waits.begin(), out.predicted_waits.end());
    for (const Interval& i : it.other_comm) comm.push_back(shift(i));
    for (const BucketSchedule& s : out.buckets) comm.push_back({s.start_ns, s.end_ns});
    out.predicted = overlap_of_slices(std::move(compute), std::move(waits), std::move(comm));
    out.measured = it.measured;
    out.measured_step_ms = it.measured_step_ms;
    out.predicted_step_ms = it.measured_step_ms + delta / 1e6;
    prediction.iterations.push_back(std::move(out));
  }
  summarize_iterations(prediction);
  return prediction;
}

}  // namespace dpscope::analysis
