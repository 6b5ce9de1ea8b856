// The what-if replay (Note [What-if replay] in whatif.h): reading what a DDP trace recorded of its
// steady iterations, deriving bucket plans from the order gradients arrived, and replaying the
// iterations with another plan.
#include "analysis/whatif.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "analysis/replay.h"
#include "trace/vocabulary.h"

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

// The recorded limits and comm hook from meta config: `dpscope train` writes bucket_cap_mb and
// first_bucket_mb, `dpscope synth` bucket_cap_bytes and first_bucket_bytes.
struct RecordedConfig {
  std::optional<BucketLimits> limits;
  std::string comm_hook;
};

RecordedConfig read_config(trace::Reader& reader) {
  const RecordedConfigJson json(reader);
  RecordedConfig config;
  namespace config_key = trace::config_key;
  if (auto cap = json.number<double>(config_key::kBucketCapMb),
      first = json.number<double>(config_key::kFirstBucketMb);
      cap && first) {
    config.limits = BucketLimits{mib_to_bytes(*first), mib_to_bytes(*cap)};
  } else if (auto cap_bytes = json.number<double>(config_key::kBucketCapBytes),
             first_bytes = json.number<double>(config_key::kFirstBucketBytes);
             cap_bytes && first_bytes) {
    config.limits = BucketLimits{static_cast<int64_t>(*first_bytes), static_cast<int64_t>(*cap_bytes)};
  }
  config.comm_hook = json.text(config_key::kCommHook).value_or("");
  return config;
}

// Whether meta config's comm_hook leaves each bucket to the built-in all-reduce the replay models:
// none recorded, or `dpscope train --comm-hook` none or allreduce.
bool uses_built_in_allreduce(const std::string& comm_hook) {
  if (comm_hook.empty()) return true;
  const std::optional<trace::CommHookKind> kind = trace::parse_mode(trace::kCommHookKinds, comm_hook);
  return kind && trace::reduces_buckets_unchanged(*kind);
}

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
  for (const trace::Event& p : ev.phases) {
    const std::string name = phase_name(p, names);
    if (is_compute_phase(name)) {
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
int64_t launch_offset(const std::vector<ReplayIteration>& iterations, const core::BucketPlan& plan) {
  std::vector<double> offsets;
  for (const ReplayIteration& it : iterations) {
    int64_t previous_end = INT64_MIN;
    for (const auto& a : it.allreduces) {
      if (a.bucket < 0 || static_cast<size_t>(a.bucket) >= plan.buckets.size()) continue;
      int64_t ready = INT64_MIN;
      for (const int64_t p : plan.buckets[a.bucket]) ready = std::max(ready, it.ready_ns[p]);
      if (!queued_behind(a.span.begin_ns, previous_end)) offsets.push_back(double(a.span.begin_ns - ready));
      previous_end = a.span.end_ns;
    }
  }
  return launch_offset_of(std::move(offsets));
}

// The refusals of a run that is not DDP's: an FSDP trace is pointed to its own replay.
void refuse_non_ddp_run(const std::string& path, const RunStats& stats) {
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
}

// The refusals of a DDP run the replay cannot model: a comm hook other than the built-in
// all-reduce, or no gradient hooks to time the gradients by.
void refuse_unmodelled_run(const std::string& path, const RunStats& stats, const RecordedConfig& config) {
  if (!uses_built_in_allreduce(config.comm_hook)) {
    throw WhatifError(path + ": recorded with --comm-hook " + config.comm_hook +
                      "; whatif models each bucket's built-in all-reduce, not comm hooks: "
                      "record a run without --comm-hook");
  }
  int64_t hooks = 0;
  for (const RankStats& r : stats.ranks) {
    for (const IterationStats& it : r.iterations) hooks += it.hooks;
  }
  if (hooks == 0) {
    throw WhatifError(path + ": no gradient hook events (recorded at trace level summary?); "
                             "whatif needs each gradient's ready time: record with "
                             "--trace-level full");
  }
}

// The gradients, their names and the recorded plan (the rebuilt one, generation 1, when the
// trace has it) from the run's parameters and buckets.
void describe_parameters(const RunStats& stats, ReplayTrace& trace) {
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
}

// Rank 0's gradient hooks of the iterations before the steady ones, by iteration: (begin, param).
using WarmupHooks = std::map<int32_t, std::vector<std::pair<int64_t, int32_t>>>;

// The order gradients arrive in: rank 0's first iteration in which every one of the `params`
// gradients' hook fired. Throws WhatifError naming `path` when there is none.
std::vector<int64_t> arrival_order(const std::string& path, WarmupHooks& rank0_hooks, size_t params) {
  std::vector<int64_t> order;
  for (auto& [iteration, list] : rank0_hooks) {
    std::sort(list.begin(), list.end());
    std::set<int32_t> seen;
    for (const auto& [begin, param] : list) seen.insert(param);
    if (seen.size() < params) continue;
    std::set<int32_t> placed;
    for (const auto& [begin, param] : list) {
      if (placed.insert(param).second) order.push_back(param);
    }
    break;
  }
  if (order.empty()) {
    throw WhatifError(path + ": rank 0 fired no gradient hook for some parameters in iterations "
                             "0 and 1, so the order gradients arrive in is unknown; whatif needs "
                             "a run where every parameter gets a gradient");
  }
  return order;
}

// The bytes of each bucket of `plan`, by bucket index.
std::vector<int64_t> bucket_bytes(const ReplayTrace& trace, const core::BucketPlan& plan) {
  std::vector<int64_t> bytes_by_bucket;
  for (const auto& bucket : plan.buckets) {
    int64_t bytes = 0;
    for (const int64_t p : bucket) bytes += trace.gradients[p].bytes;
    bytes_by_bucket.push_back(bytes);
  }
  return bytes_by_bucket;
}

// By bucket of `plan`: the recorded bucket holding exactly its parameters, whose recorded
// all-reduce time it keeps iteration by iteration (a measurement of that very message beats the
// fitted line: Note [What-if replay]); kNone for the others, and for all on another link.
std::vector<int32_t> recorded_twins(const ReplayTrace& trace, const core::BucketPlan& plan,
                                    const AllReduceModel& model) {
  std::vector<int32_t> twins(plan.buckets.size(), trace::kNone);
  if (model.source != AllReduceModel::Source::Fitted) return twins;
  const auto sorted = [](std::vector<int64_t> params) {
    std::sort(params.begin(), params.end());
    return params;
  };
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    for (size_t r = 0; r < trace.recorded_plan.buckets.size(); ++r) {
      if (sorted(plan.buckets[b]) == sorted(trace.recorded_plan.buckets[r])) twins[b] = int32_t(r);
    }
  }
  return twins;
}

// The plan every iteration is replayed with: its buckets, their bytes and recorded twins.
struct ReplayPlan {
  const core::BucketPlan& plan;
  const std::vector<int64_t>& bytes;   // by bucket
  const std::vector<int32_t>& twins;   // by bucket (recorded_twins)
  int64_t total_bytes = 0;
};

// Each bucket's launch and all-reduce in iteration `it` (Note [What-if replay]), in index order.
std::vector<BucketSchedule> schedule_buckets(const ReplayIteration& it, const ReplayPlan& replay,
                                             const AllReduceModel& model, int64_t launch_offset_ns) {
  std::vector<BucketSchedule> buckets;
  const bool every_rank = !it.ready_everywhere_ns.empty();
  int64_t previous_launch = INT64_MIN, previous_launch_everywhere = INT64_MIN, previous_end = INT64_MIN;
  for (size_t b = 0; b < replay.plan.buckets.size(); ++b) {
    BucketSchedule s;
    s.bytes = replay.bytes[b];
    s.ready_ns = INT64_MIN;
    int64_t ready_everywhere = INT64_MIN;
    for (const int64_t p : replay.plan.buckets[b]) {
      s.ready_ns = std::max(s.ready_ns, it.ready_ns[p]);
      if (every_rank) ready_everywhere = std::max(ready_everywhere, it.ready_everywhere_ns[p]);
    }
    s.launch_ns = std::max(s.ready_ns, previous_launch);
    s.start_ns = std::max(s.launch_ns + launch_offset_ns, previous_end);
    // The transfer begins once the last rank launched the bucket: on the measured clock each
    // rank is replayed on its own, so that is this rank.
    int64_t transfer_ns = s.start_ns;
    if (every_rank) {
      const int64_t launch_everywhere = std::max(ready_everywhere, previous_launch_everywhere);
      transfer_ns = std::max(s.start_ns, std::max(launch_everywhere + launch_offset_ns, previous_end));
      previous_launch_everywhere = launch_everywhere;
    }
    int64_t duration = model.duration_ns(s.bytes);
    if (replay.twins[b] != trace::kNone) {
      for (const ReplayIteration::RecordedAllReduce& a : it.allreduces) {
        if (a.bucket == replay.twins[b]) duration = a.span.end_ns - a.span.begin_ns;
      }
    }
    s.end_ns = transfer_ns + duration;
    previous_launch = s.launch_ns;
    previous_end = s.end_ns;
    buckets.push_back(s);
  }
  return buckets;
}

// The backward's tail on the predicted buckets: it waits for them in index order and shares its
// other work among them by bytes. Sets out.predicted_waits and out.tail_end_ns.
void replay_tail(const ReplayIteration& it, int64_t total_bytes, IterationPrediction& out) {
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
  out.tail_end_ns = t + work_left;
}

// The overlap figures on the predicted slices: every recorded slice at or after the recorded
// tail's end moved by `delta`, the tail's predicted waits and the predicted all-reduces.
OverlapStats predicted_overlap(const ReplayIteration& it, const IterationPrediction& out, int64_t delta) {
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
  return overlap_of_slices(std::move(compute), std::move(waits), std::move(comm));
}

IterationPrediction predict_iteration(const ReplayTrace& trace, const ReplayIteration& it,
                                      const ReplayPlan& replay, const AllReduceModel& model) {
  IterationPrediction out;
  out.iteration = it.iteration;
  out.buckets = schedule_buckets(it, replay, model, trace.launch_offset_ns);
  replay_tail(it, replay.total_bytes, out);
  const int64_t delta = out.tail_end_ns - it.tail.end_ns;
  out.predicted = predicted_overlap(it, out, delta);
  out.measured = it.measured;
  out.measured_step_ms = it.measured_step_ms;
  out.predicted_step_ms = it.measured_step_ms + delta / 1e6;
  return out;
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

ReplayTrace load_replay_trace(trace::Reader& reader, const RunStats& stats, int32_t rank,
                              const ClusterClockRun* cluster) {
  const std::string path = reader.path();
  refuse_imported_run(path, stats);
  refuse_non_ddp_run(path, stats);
  const RecordedConfig config = read_config(reader);
  refuse_unmodelled_run(path, stats, config);
  ReplayTrace trace;
  trace.recorded_limits = config.limits;
  describe_parameters(stats, trace);
  const size_t params = trace.gradients.size();
  WarmupHooks rank0_hooks;
  ReplaySteps<ReplayIteration> steps;
  steps.warmup = [&](const trace::Event& e) {
    if (e.rank == 0 && e.kind == trace::EventKind::Hook) rank0_hooks[e.iteration].push_back({e.begin_ns, e.param});
  };
  // On the cluster clock, each gradient's latest hook end on any rank, by iteration and parameter
  // (See Note [What-if replay]).
  std::map<std::pair<int32_t, int32_t>, int64_t> ready_everywhere;
  steps.steady = [&](const trace::Event& e) {
    if (is_bucket_allreduce(e)) trace.allreduce_samples.push_back({e.bytes, e.end_ns - e.begin_ns});
    if (cluster && e.kind == trace::EventKind::Hook && e.param >= 0) {
      int64_t& ready = ready_everywhere.try_emplace({e.iteration, e.param}, INT64_MIN).first->second;
      ready = std::max(ready, e.end_ns);
    }
  };
  steps.check = [&](const std::map<int32_t, IterationEvents>&) {
    trace.arrival_order = arrival_order(path, rank0_hooks, params);
  };
  steps.build = [&](int32_t iteration, IterationEvents& ev,
                    const std::vector<std::string>& names) -> std::optional<ReplayIteration> {
    if (ev.hooks.empty()) return std::nullopt;
    ReplayIteration it = replay_iteration(iteration, ev, params, names);
    if (it.allreduces.empty()) return std::nullopt;
    return it;
  };
  steps.kept = "gradient hooks and bucket all-reduces";
  steps.record = "record a DDP run of at least 3 steps at --trace-level full";
  trace.iterations = load_steady_iterations(reader, stats, rank, trace, steps, cluster);
  if (cluster) {
    for (ReplayIteration& it : trace.iterations) {
      it.ready_everywhere_ns = it.ready_ns;
      for (size_t p = 0; p < it.ready_ns.size(); ++p) {
        const auto found = ready_everywhere.find({it.iteration, int32_t(p)});
        if (found != ready_everywhere.end()) {
          it.ready_everywhere_ns[p] = std::max(it.ready_ns[p], found->second);
        }
      }
    }
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

core::BucketPlan plan_for(const ReplayTrace& trace, const BucketLimits& limits) {
  std::vector<core::GradientDesc> walk;
  for (const int64_t p : trace.arrival_order) walk.push_back(trace.gradients[p]);
  return core::plan_buckets(walk, {limits.first_bucket_bytes, limits.bucket_cap_bytes},
                      trace.arrival_order);
}

Prediction predict(const ReplayTrace& trace, const core::BucketPlan& plan, const AllReduceModel& model) {
  Prediction prediction;
  prediction.bucket_bytes = bucket_bytes(trace, plan);
  const std::vector<int32_t> twins = recorded_twins(trace, plan, model);
  for (const int32_t twin : twins) prediction.buckets_timed_as_recorded += twin != trace::kNone ? 1 : 0;
  ReplayPlan replay{plan, prediction.bucket_bytes, twins};
  for (const int64_t bytes : prediction.bucket_bytes) replay.total_bytes += bytes;
  for (const ReplayIteration& it : trace.iterations) {
    prediction.iterations.push_back(predict_iteration(trace, it, replay, model));
  }
  summarize_iterations(prediction);
  return prediction;
}

}  // namespace dpscope::analysis
