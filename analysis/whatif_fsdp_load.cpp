// Reading an FSDP trace for the what-if replay (Note [FSDP what-if replay] in whatif_fsdp.h): the
// recorded configuration, the refusals, the cost model's samples, and each steady iteration's
// main-thread program.
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "analysis/whatif_fsdp.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {
namespace {

// The replay's settings as `dpscope train` wrote them (meta "config"), falling back to the
// fsdp.* meta keys; the sharding in effect is meta fsdp.sharding (world size 1 runs no_shard).
FsdpRecordedConfig read_config(trace::Reader& reader, int32_t& grad_accum) {
  FsdpRecordedConfig config;
  grad_accum = 1;
  const nlohmann::json json = nlohmann::json::parse(reader.meta_value("config"), nullptr, false);
  const auto text = [&](const char* key, const std::string& fallback) {
    if (json.is_object()) {
      if (const auto it = json.find(key); it != json.end() && it->is_string()) return it->get<std::string>();
    }
    return fallback;
  };
  const auto number = [&](const char* key, int32_t fallback) {
    if (json.is_object()) {
      if (const auto it = json.find(key); it != json.end() && it->is_number()) return it->get<int32_t>();
    }
    return fallback;
  };
  const auto flag = [&](const char* key, bool fallback) {
    if (json.is_object()) {
      if (const auto it = json.find(key); it != json.end() && it->is_boolean()) return it->get<bool>();
    }
    return fallback;
  };
  config.settings.backward_prefetch =
      trace::parse_mode(trace::kBackwardPrefetches, text("backward_prefetch", reader.meta_value("fsdp.backward_prefetch", "pre")))
          .value_or(trace::BackwardPrefetch::Pre);
  config.settings.limit_all_gathers = number("limit_all_gathers", 0);
  config.forward_prefetch = flag("forward_prefetch", reader.meta_value("fsdp.forward_prefetch") == "true");
  config.limit_reduce_scatters = number("limit_reduce_scatters", 1);
  config.sharding = reader.meta_value("fsdp.sharding", text("sharding", "full"));
  config.mixed_precision = text("mixed_precision", "none");
  config.cpu_offload = flag("cpu_offload", false);
  grad_accum = number("grad_accum", 1);
  return config;
}

// The events of one iteration of the replayed rank, as streamed.
struct IterationEvents {
  std::vector<trace::Event> phases, collectives, waits, unit_states;
};

bool is_compute_phase(const std::string& name) {
  return name == trace::kPhaseForward || name == trace::kPhaseBackward || name == trace::kPhaseOptimizerStep;
}

// Builds the main thread's program of one iteration (Note [FSDP what-if replay]).
FsdpIteration build_iteration(int32_t iteration, IterationEvents& ev,
                              const std::vector<std::string>& names) {
  FsdpIteration it;
  it.iteration = iteration;
  std::sort(ev.collectives.begin(), ev.collectives.end(), [](const trace::Event& a, const trace::Event& b) {
    const int64_t ia = a.enqueue_ns != trace::kNone64 ? a.enqueue_ns : a.begin_ns;
    const int64_t ib = b.enqueue_ns != trace::kNone64 ? b.enqueue_ns : b.begin_ns;
    return std::tie(ia, a.seq) < std::tie(ib, b.seq);
  });
  std::map<std::pair<int32_t, int64_t>, int32_t> by_seq;
  std::vector<FsdpStep> steps;
  for (const trace::Event& c : ev.collectives) {
    FsdpCollective collective;
    collective.op = static_cast<trace::CollectiveOp>(c.op);
    collective.unit = c.unit;
    collective.bytes = std::max<int64_t>(c.bytes, 0);
    collective.flags = c.flags;
    collective.enqueue_ns = c.enqueue_ns != trace::kNone64 ? c.enqueue_ns : c.begin_ns;
    collective.span = {c.begin_ns, c.end_ns};
    const auto index = static_cast<int32_t>(it.collectives.size());
    by_seq[{c.grp, c.seq}] = index;
    it.collectives.push_back(collective);
    FsdpStep issue;
    issue.recorded_ns = collective.enqueue_ns;
    issue.collective = index;
    issue.unit = c.unit;
    if (collective.op != trace::CollectiveOp::AllGather) {
      issue.kind = FsdpStepKind::kIssue;
    } else if (!(c.flags & trace::kFlagPrefetch)) {
      issue.kind = FsdpStepKind::kIssueGather;
    } else if (!(c.flags & trace::kFlagBackward)) {
      issue.kind = FsdpStepKind::kPrefetch;
    } else {
      continue;  // a backward prefetch: the mode replayed puts its own back
    }
    steps.push_back(issue);
  }
  for (const trace::Event& w : ev.waits) {
    const auto found = by_seq.find({w.grp, w.seq});
    if (found == by_seq.end()) continue;  // a collective of another iteration
    FsdpStep wait;
    wait.recorded_ns = w.begin_ns;
    wait.collective = found->second;
    const FsdpCollective& c = it.collectives[static_cast<size_t>(found->second)];
    wait.unit = c.unit;
    wait.kind = c.op == trace::CollectiveOp::AllGather ? FsdpStepKind::kWaitGather : FsdpStepKind::kWait;
    steps.push_back(wait);
  }
  int64_t backward_begin = INT64_MAX, backward_end = INT64_MIN;
  for (const trace::Event& p : ev.phases) {
    const std::string name = p.name >= 0 && static_cast<size_t>(p.name) < names.size() ? names[p.name] : "";
    if (!is_compute_phase(name) && name != trace::kPhaseIteration) continue;
    const auto mark = static_cast<int32_t>(it.mark_recorded_ns.size());
    it.mark_recorded_ns.push_back(p.begin_ns);
    it.mark_recorded_ns.push_back(p.end_ns);
    if (is_compute_phase(name)) it.phases.push_back({name, mark, mark + 1});
    if (name == trace::kPhaseBackward) {
      backward_begin = std::min(backward_begin, p.begin_ns);
      backward_end = std::max(backward_end, p.end_ns);
    }
    for (const int32_t m : {mark, mark + 1}) {
      FsdpStep step;
      step.kind = FsdpStepKind::kMark;
      step.recorded_ns = it.mark_recorded_ns[static_cast<size_t>(m)];
      step.mark = m;
      steps.push_back(step);
    }
  }
  // A unit's post-backward hook reshards it: the end of its `full` state inside backward.
  for (const trace::Event& u : ev.unit_states) {
    if (u.op != static_cast<uint8_t>(trace::UnitState::Full) || u.end_ns <= backward_begin ||
        u.end_ns > backward_end) {
      continue;
    }
    FsdpStep post;
    post.kind = FsdpStepKind::kPostBackward;
    post.recorded_ns = u.end_ns;
    post.unit = u.unit;
    steps.push_back(post);
  }
  // Recorded order; at one instant a phase boundary first (a slice that begins there is inside
  // the phase), then as the engine runs them.
  std::stable_sort(steps.begin(), steps.end(), [](const FsdpStep& a, const FsdpStep& b) {
    return std::tie(a.recorded_ns, a.kind) < std::tie(b.recorded_ns, b.kind);
  });
  // The main thread's work between points: time since the previous point, or since the end of
  // the previous wait.
  int64_t cursor = steps.empty() ? 0 : steps.front().recorded_ns;
  std::map<int32_t, int64_t> wait_end;  // by collective: the end of its recorded wait
  for (const trace::Event& w : ev.waits) {
    if (const auto found = by_seq.find({w.grp, w.seq}); found != by_seq.end()) {
      wait_end[found->second] = std::max(wait_end[found->second], w.end_ns);
    }
  }
  for (FsdpStep& step : steps) {
    step.work_ns = std::max<int64_t>(0, step.recorded_ns - cursor);
    cursor = std::max(cursor, step.recorded_ns);
    if (step.kind == FsdpStepKind::kWaitGather || step.kind == FsdpStepKind::kWait) {
      cursor = std::max(cursor, wait_end[step.collective]);
    }
  }
  it.recorded_end_ns = cursor;
  // Where each backward gather's prefetch is aimed: the next unit's gather wait in this pass.
  std::map<int32_t, int32_t> next_after_unit;
  int32_t previous = -1;
  for (size_t i = 0; i < steps.size(); ++i) {
    FsdpStep& step = steps[i];
    if (step.kind == FsdpStepKind::kMark && it.mark_recorded_ns[step.mark] == backward_end) previous = -1;
    if (step.kind != FsdpStepKind::kWaitGather ||
        !(it.collectives[static_cast<size_t>(step.collective)].flags & trace::kFlagBackward)) {
      continue;
    }
    if (previous >= 0) steps[static_cast<size_t>(previous)].next_backward_wait = static_cast<int32_t>(i);
    previous = static_cast<int32_t>(i);
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == FsdpStepKind::kWaitGather && steps[i].next_backward_wait >= 0) {
      next_after_unit[steps[i].unit] = steps[i].next_backward_wait;
    }
  }
  for (FsdpStep& step : steps) {
    if (step.kind != FsdpStepKind::kPostBackward) continue;
    const auto found = next_after_unit.find(step.unit);
    if (found != next_after_unit.end()) step.next_backward_wait = found->second;
  }
  it.program = std::move(steps);
  return it;
}

// Median of (start - enqueue) over the replayed rank's collectives that did not queue behind the
// previous one on the link.
int64_t launch_offset(const std::vector<FsdpIteration>& iterations) {
  std::vector<double> offsets;
  for (const FsdpIteration& it : iterations) {
    int64_t previous_end = INT64_MIN;
    for (const FsdpCollective& c : it.collectives) {
      if (c.span.begin_ns > previous_end + 1000) offsets.push_back(double(c.span.begin_ns - c.enqueue_ns));
      previous_end = std::max(previous_end, c.span.end_ns);
    }
  }
  return static_cast<int64_t>(std::llround(median_of(std::move(offsets))));
}

}  // namespace

FsdpReplayTrace load_fsdp_replay_trace(trace::Reader& reader, const RunStats& stats, int32_t rank) {
  FsdpReplayTrace trace;
  trace.path = reader.path();
  const std::string& path = trace.path;
  if (stats.strategy != trace::Strategy::Fsdp) {
    throw WhatifError(path + ": not an FSDP trace (meta strategy '" + stats.strategy_recorded +
                      "'); --backward-prefetch and --limit-all-gathers replay what "
                      "`dpscope train --strategy fsdp` records");
  }
  int32_t grad_accum = 1;
  trace.recorded = read_config(reader, grad_accum);
  if (trace.recorded.sharding == "no_shard") {
    throw WhatifError(path + ": recorded with sharding no_shard (or on one rank), which gathers "
                             "nothing: there is no all-gather to prefetch or limit; record with "
                             "--sharding full or grad_op on 2 or more ranks");
  }
  if (grad_accum > 1) {
    throw WhatifError(path + ": recorded with --grad-accum " + std::to_string(grad_accum) +
                      "; the FSDP replay models one forward and backward per step: record "
                      "with --grad-accum 1");
  }
  const RankStats& rank_stats = replayable_rank(path, stats, rank);
  static_cast<ReplayOrigin&>(trace) = replay_origin(path, stats, rank);
  for (const UnitStats& u : stats.units) {
    if (u.unit.index >= static_cast<int32_t>(trace.unit_names.size())) {
      trace.unit_names.resize(static_cast<size_t>(u.unit.index) + 1);
    }
    trace.unit_names[static_cast<size_t>(u.unit.index)] = u.unit.name;
  }

  const std::vector<std::string> names = reader.names();
  std::map<int32_t, IterationEvents> events;  // of `rank`, steady iterations
  int64_t unit_states = 0;
  const int32_t steady = steady_from(size_t(stats.iterations));
  reader.for_each_event([&](const trace::Event& e) {
    if (e.iteration < steady) return true;
    if (e.kind == trace::EventKind::Collective) {
      const std::pair<int64_t, int64_t> sample{std::max<int64_t>(e.bytes, 0), e.end_ns - e.begin_ns};
      if (e.op == static_cast<uint8_t>(trace::CollectiveOp::AllGather)) trace.allgather_samples.push_back(sample);
      if (e.op == static_cast<uint8_t>(trace::CollectiveOp::ReduceScatter)) trace.reduce_scatter_samples.push_back(sample);
    }
    if (e.rank != rank) return true;
    IterationEvents& it = events[e.iteration];
    switch (e.kind) {
      case trace::EventKind::Phase: it.phases.push_back(e); break;
      case trace::EventKind::Collective: it.collectives.push_back(e); break;
      case trace::EventKind::CollectiveWait: it.waits.push_back(e); break;
      case trace::EventKind::UnitState: it.unit_states.push_back(e); ++unit_states; break;
      default: break;
    }
    return true;
  });
  if (unit_states == 0) {
    throw WhatifError(path + ": rank " + std::to_string(rank) + " recorded no unit state events "
                      "in its steady iterations, so where each unit's backward ends is unknown; "
                      "record with `dpscope train --strategy fsdp` at --trace-level summary or "
                      "full");
  }
  for (auto& [iteration, ev] : events) {
    if (static_cast<size_t>(iteration) >= rank_stats.iterations.size()) continue;
    FsdpIteration it = build_iteration(iteration, ev, names);
    const bool gathers = std::any_of(it.collectives.begin(), it.collectives.end(), [](const FsdpCollective& c) {
      return c.op == trace::CollectiveOp::AllGather;
    });
    if (!gathers || it.phases.empty()) continue;
    const IterationStats& measured = rank_stats.iterations[static_cast<size_t>(iteration)];
    it.measured_step_ms = measured.step_ms;
    it.measured = measured.overlap;
    trace.iterations.push_back(std::move(it));
  }
  if (trace.iterations.empty()) {
    throw WhatifError(path + ": rank " + std::to_string(rank) + " has no steady iteration with "
                      "phases and all-gathers (the steady ones: iteration 2 on); record an FSDP "
                      "run of at least 3 steps");
  }
  trace.launch_offset_ns = launch_offset(trace.iterations);
  return trace;
}

}  // namespace dpscope::analysis
