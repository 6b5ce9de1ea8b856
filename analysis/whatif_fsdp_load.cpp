// Reading an FSDP trace for the what-if replay (Note [FSDP what-if replay] in whatif_fsdp.h): the
// recorded configuration, the refusals, the cost model's samples, and each steady iteration's
// main-thread program.
#include "analysis/whatif_fsdp_load.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include "analysis/replay.h"
#include "analysis/whatif_fsdp.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {
namespace {

// FSDP2's reshard_after_forward as recorded, N read as PyTorch reads it: the world size is
// "true", 1 is "false"; any other N stays as recorded.
std::string fsdp2_reshard_word(const std::string& recorded, int32_t world_size) {
  const std::optional<trace::ReshardAfterForward> mode =
      trace::read_reshard_after_forward(recorded, world_size);
  if (mode && *mode != trace::ReshardAfterForward::ToGroupSize) return std::string(trace::to_string(*mode));
  return recorded;
}

// The recorded word's mode: Reshard or Keep, nullopt for a group size N (and for FSDP1's "").
std::optional<trace::ReshardAfterForward> reshard_word_mode(const std::string& word) {
  return trace::parse_mode(trace::kReshardAfterForwardWords, word);
}

// FSDP2's settings in FSDP1's terms (Note [FSDP2 in the FSDP replay]): implicit backward
// prefetch is `pre`, no all-gather limit, reshard_after_forward true full_shard and false
// shard_grad_op; one rank gathers nothing (no_shard).
void read_fsdp2_config(trace::Reader& reader, const RecordedConfigJson& json, int32_t world_size,
                       FsdpRecordedConfig& config) {
  config.strategy = trace::Strategy::Fsdp2;
  config.explicit_prefetch = json.number<int32_t>(trace::config_key::kExplicitPrefetch).value_or(0);
  config.reshard_after_forward = fsdp2_reshard_word(
      reader.meta_value(std::string(trace::meta_key::kFsdp2ReshardAfterForward),
                        std::string(trace::to_string(trace::ReshardAfterForward::Reshard))),
      world_size);
  config.settings = {trace::BackwardPrefetch::Pre, 0};
  config.forward_prefetch = config.explicit_prefetch > 0;
  config.limit_reduce_scatters = 1;
  config.sharding = reshard_word_mode(config.reshard_after_forward) == trace::ReshardAfterForward::Keep
                        ? trace::ShardingStrategy::ShardGradOp
                        : trace::ShardingStrategy::FullShard;
  if (world_size < 2) config.sharding = trace::ShardingStrategy::NoShard;
}

// The replay's settings as `dpscope train` wrote them (meta config), falling back to the fsdp.*
// meta keys; the sharding in effect is meta fsdp.sharding (world size 1 runs no_shard). An FSDP2
// trace's in FSDP1's terms (read_fsdp2_config). Sets `grad_accum` to the recorded micro-steps per
// step.
FsdpRecordedConfig read_config(trace::Reader& reader, const RunStats& stats, int32_t& grad_accum) {
  const RecordedConfigJson json(reader);
  const auto meta = [&](std::string_view key, std::string_view fallback = {}) {
    return reader.meta_value(std::string(key), std::string(fallback));
  };
  FsdpRecordedConfig config;
  const std::string backward_prefetch = json.text(trace::config_key::kBackwardPrefetch)
      .value_or(meta(trace::meta_key::kFsdpBackwardPrefetch, trace::to_string(trace::BackwardPrefetch::Pre)));
  config.settings.backward_prefetch = trace::parse_mode(trace::kBackwardPrefetches, backward_prefetch)
                                          .value_or(trace::BackwardPrefetch::Pre);
  config.settings.limit_all_gathers = json.number<int32_t>(trace::config_key::kLimitAllGathers).value_or(0);
  config.forward_prefetch =
      json.flag(trace::config_key::kForwardPrefetch)
          .value_or(trace::parse_flag(meta(trace::meta_key::kFsdpForwardPrefetch)).value_or(false));
  config.limit_reduce_scatters = json.number<int32_t>(trace::config_key::kLimitReduceScatters).value_or(1);
  const std::string sharding = meta(
      trace::meta_key::kFsdpSharding,
      json.text(trace::config_key::kSharding).value_or(std::string(trace::to_string(trace::ShardingStrategy::FullShard))));
  config.sharding = trace::parse_mode(trace::kShardingStrategies, sharding).value_or(trace::ShardingStrategy::FullShard);
  config.mixed_precision = json.text(trace::config_key::kMixedPrecision).value_or(config.mixed_precision);
  config.cpu_offload = json.flag(trace::config_key::kCpuOffload).value_or(false);
  grad_accum = json.number<int32_t>(trace::config_key::kGradAccum).value_or(1);
  if (stats.strategy == trace::Strategy::Fsdp2) read_fsdp2_config(reader, json, stats.world_size, config);
  return config;
}

// The iteration's collectives by (group, sequence number): their index in FsdpIteration.
using CollectiveIndex = std::map<std::pair<int32_t, int64_t>, int32_t>;

int64_t enqueue_or_begin(const trace::Event& c) {
  return c.enqueue_ns != trace::kNone64 ? c.enqueue_ns : c.begin_ns;
}

// The iteration's collectives in issue order, each with the step that issues it, except the
// recorded backward prefetches: the mode replayed puts its own back.
void add_collectives(std::vector<trace::Event>& collectives, FsdpIteration& it, CollectiveIndex& by_seq,
                     std::vector<FsdpStep>& steps) {
  std::sort(collectives.begin(), collectives.end(), [](const trace::Event& a, const trace::Event& b) {
    return std::make_tuple(enqueue_or_begin(a), a.seq) < std::make_tuple(enqueue_or_begin(b), b.seq);
  });
  for (const trace::Event& c : collectives) {
    FsdpCollective collective;
    collective.op = static_cast<trace::CollectiveOp>(c.op);
    collective.grp = c.grp;
    collective.unit = c.unit;
    collective.bytes = std::max<int64_t>(c.bytes, 0);
    collective.flags = c.flags;
    collective.enqueue_ns = enqueue_or_begin(c);
    collective.span = {c.begin_ns, c.end_ns};
    const auto index = static_cast<int32_t>(it.collectives.size());
    by_seq[{c.grp, c.seq}] = index;
    it.collectives.push_back(collective);
    FsdpStep issue;
    issue.recorded_ns = collective.enqueue_ns;
    issue.collective = index;
    issue.unit = c.unit;
    if (collective.op != trace::CollectiveOp::AllGather) {
      issue.kind = FsdpStepKind::Issue;
    } else if (!(c.flags & trace::kFlagPrefetch)) {
      issue.kind = FsdpStepKind::IssueGather;
    } else if (!(c.flags & trace::kFlagBackward)) {
      issue.kind = FsdpStepKind::Prefetch;
    } else {
      continue;  // a backward prefetch
    }
    steps.push_back(issue);
  }
}

// A wait step for each recorded wait for one of the iteration's collectives.
void add_waits(const std::vector<trace::Event>& waits, const CollectiveIndex& by_seq,
               const FsdpIteration& it, std::vector<FsdpStep>& steps) {
  for (const trace::Event& w : waits) {
    const auto found = by_seq.find({w.grp, w.seq});
    if (found == by_seq.end()) continue;  // a collective of another iteration
    FsdpStep wait;
    wait.recorded_ns = w.begin_ns;
    wait.collective = found->second;
    const FsdpCollective& c = it.collectives[static_cast<size_t>(found->second)];
    wait.unit = c.unit;
    wait.kind = c.op == trace::CollectiveOp::AllGather ? FsdpStepKind::WaitGather : FsdpStepKind::Wait;
    steps.push_back(wait);
  }
}

// From the first backward phase's begin to the last one's end; empty (begin > end) without one.
struct BackwardSpan {
  int64_t begin_ns = INT64_MAX, end_ns = INT64_MIN;
};

// A mark step at the begin and the end of each compute and iteration phase, the compute ones
// kept as the iteration's phases. Returns the backward's span.
BackwardSpan add_phase_marks(const std::vector<trace::Event>& phases, const std::vector<std::string>& names,
                             FsdpIteration& it, std::vector<FsdpStep>& steps) {
  BackwardSpan backward;
  for (const trace::Event& p : phases) {
    const std::string name = phase_name(p, names);
    if (!is_compute_phase(name) && name != trace::kPhaseIteration) continue;
    const auto mark = static_cast<int32_t>(it.mark_recorded_ns.size());
    it.mark_recorded_ns.push_back(p.begin_ns);
    it.mark_recorded_ns.push_back(p.end_ns);
    if (is_compute_phase(name)) it.phases.push_back({name, mark, mark + 1});
    if (name == trace::kPhaseBackward) {
      backward.begin_ns = std::min(backward.begin_ns, p.begin_ns);
      backward.end_ns = std::max(backward.end_ns, p.end_ns);
    }
    for (const int32_t m : {mark, mark + 1}) {
      FsdpStep step;
      step.kind = FsdpStepKind::Mark;
      step.recorded_ns = it.mark_recorded_ns[static_cast<size_t>(m)];
      step.mark = m;
      steps.push_back(step);
    }
  }
  return backward;
}

// A post-backward step for each unit's post-backward hook, which reshards it: the end of its
// `full` state inside backward.
void add_post_backward_hooks(const std::vector<trace::Event>& unit_states, const BackwardSpan& backward,
                             std::vector<FsdpStep>& steps) {
  for (const trace::Event& u : unit_states) {
    if (u.op != static_cast<uint8_t>(trace::UnitState::Full) || u.end_ns <= backward.begin_ns ||
        u.end_ns > backward.end_ns) {
      continue;
    }
    FsdpStep post;
    post.kind = FsdpStepKind::PostBackward;
    post.recorded_ns = u.end_ns;
    post.unit = u.unit;
    steps.push_back(post);
  }
}

// Sets each step's work, the main thread's time since the previous point or since the end of the
// previous wait, the steps in recorded order. Returns when the program ended.
int64_t set_work(std::vector<FsdpStep>& steps, const std::vector<trace::Event>& waits,
                 const CollectiveIndex& by_seq) {
  int64_t cursor = steps.empty() ? 0 : steps.front().recorded_ns;
  std::map<int32_t, int64_t> wait_end;  // by collective: the end of its recorded wait
  for (const trace::Event& w : waits) {
    if (const auto found = by_seq.find({w.grp, w.seq}); found != by_seq.end()) {
      wait_end[found->second] = std::max(wait_end[found->second], w.end_ns);
    }
  }
  for (FsdpStep& step : steps) {
    step.work_ns = std::max<int64_t>(0, step.recorded_ns - cursor);
    cursor = std::max(cursor, step.recorded_ns);
    if (step.kind == FsdpStepKind::WaitGather || step.kind == FsdpStepKind::Wait) {
      cursor = std::max(cursor, wait_end[step.collective]);
    }
  }
  return cursor;
}

// Where each backward prefetch is aimed: from a unit's backward gather wait (BACKWARD_PRE) and
// its post-backward hook (BACKWARD_POST), the next unit's gather wait in the same backward pass.
void aim_backward_prefetches(std::vector<FsdpStep>& steps, const FsdpIteration& it, int64_t backward_end) {
  int32_t previous = -1;
  for (size_t i = 0; i < steps.size(); ++i) {
    FsdpStep& step = steps[i];
    if (step.kind == FsdpStepKind::Mark && it.mark_recorded_ns[step.mark] == backward_end) previous = -1;
    if (step.kind != FsdpStepKind::WaitGather ||
        !(it.collectives[static_cast<size_t>(step.collective)].flags & trace::kFlagBackward)) {
      continue;
    }
    if (previous >= 0) steps[static_cast<size_t>(previous)].next_backward_wait = static_cast<int32_t>(i);
    previous = static_cast<int32_t>(i);
  }
  std::map<int32_t, int32_t> next_after_unit;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == FsdpStepKind::WaitGather && steps[i].next_backward_wait >= 0) {
      next_after_unit[steps[i].unit] = steps[i].next_backward_wait;
    }
  }
  for (FsdpStep& step : steps) {
    if (step.kind != FsdpStepKind::PostBackward) continue;
    const auto found = next_after_unit.find(step.unit);
    if (found != next_after_unit.end()) step.next_backward_wait = found->second;
  }
}

// Builds the main thread's program of one iteration (Note [FSDP what-if replay]).
FsdpIteration build_iteration(int32_t iteration, IterationEvents& ev,
                              const std::vector<std::string>& names) {
  FsdpIteration it;
  it.iteration = iteration;
  CollectiveIndex by_seq;
  std::vector<FsdpStep> steps;
  add_collectives(ev.collectives, it, by_seq, steps);
  add_waits(ev.waits, by_seq, it, steps);
  const BackwardSpan backward = add_phase_marks(ev.phases, names, it, steps);
  add_post_backward_hooks(ev.unit_states, backward, steps);
  // Recorded order; at one instant a phase boundary first (a slice that begins there is inside
  // the phase), then as the engine runs them.
  std::stable_sort(steps.begin(), steps.end(), [](const FsdpStep& a, const FsdpStep& b) {
    return std::tie(a.recorded_ns, a.kind) < std::tie(b.recorded_ns, b.kind);
  });
  it.recorded_end_ns = set_work(steps, ev.waits, by_seq);
  aim_backward_prefetches(steps, it, backward.end_ns);
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
      if (!queued_behind(c.span.begin_ns, previous_end)) offsets.push_back(double(c.span.begin_ns - c.enqueue_ns));
      previous_end = std::max(previous_end, c.span.end_ns);
    }
  }
  return launch_offset_of(std::move(offsets));
}

void refuse_non_fsdp_run(const std::string& path, const RunStats& stats) {
  if (!trace::is_fsdp_family(stats.strategy)) {
    throw WhatifError(path + ": not an FSDP trace (meta strategy '" + stats.strategy_recorded +
                      "'); --backward-prefetch and --limit-all-gathers replay what "
                      "`dpscope train --strategy fsdp` or `--strategy fsdp2` records");
  }
}

// The refusals of an FSDP run the replay cannot model: no all-gathers (no_shard), or several
// forward and backward passes per step. Hybrid sharding's all-reduces replay as recorded, on
// their replicate group's link (Note [FSDP what-if replay]).
// See Note [FSDP2 in the FSDP replay] for FSDP2's refusals.
void refuse_unmodelled_run(const std::string& path, const FsdpRecordedConfig& recorded, int32_t grad_accum) {
  if (recorded.strategy == trace::Strategy::Fsdp2 && !reshard_word_mode(recorded.reshard_after_forward)) {
    throw WhatifError(path + ": recorded with FSDP2's reshard_after_forward " + recorded.reshard_after_forward +
                      ", whose backward all-gathers run in groups of that many ranks; the FSDP "
                      "replay costs every all-gather on one ring of all the ranks (docs/whatif.md, "
                      "\"FSDP2\"): record with --reshard-after-forward true or false");
  }
  if (recorded.strategy == trace::Strategy::Fsdp2 && recorded.explicit_prefetch > 1) {
    throw WhatifError(path + ": recorded with --explicit-prefetch " + std::to_string(recorded.explicit_prefetch) +
                      ", whose backward prefetches run that many groups ahead; the FSDP replay "
                      "puts back one group ahead (BACKWARD_PRE; docs/whatif.md, \"FSDP2\"): "
                      "record with --explicit-prefetch 0 or 1");
  }
  if (recorded.strategy == trace::Strategy::Fsdp2 && recorded.sharding == trace::ShardingStrategy::NoShard) {
    throw WhatifError(path + ": an FSDP2 run on one rank gathers nothing: there is no all-gather "
                             "to prefetch; record with `dpscope launch -n 2` or more");
  }
  if (recorded.sharding == trace::ShardingStrategy::NoShard) {
    throw WhatifError(path + ": recorded with sharding no_shard (or on one rank), which gathers "
                             "nothing: there is no all-gather to prefetch or limit; record with "
                             "--sharding full or grad_op on 2 or more ranks");
  }
  if (grad_accum > 1) {
    throw WhatifError(path + ": recorded with --grad-accum " + std::to_string(grad_accum) +
                      "; the FSDP replay models one forward and backward per step: record "
                      "with --grad-accum 1");
  }
}

// Refuses a rank whose steady iterations (`events`) recorded no unit state: without them where
// each unit's backward ends is unknown.
void refuse_without_unit_states(const std::string& path, int32_t rank,
                                const std::map<int32_t, IterationEvents>& events) {
  size_t unit_states = 0;
  for (const auto& [iteration, ev] : events) unit_states += ev.unit_states.size();
  if (unit_states == 0) {
    throw WhatifError(path + ": rank " + std::to_string(rank) + " recorded no unit state events "
                      "in its steady iterations, so where each unit's backward ends is unknown; "
                      "record with `dpscope train --strategy fsdp` (or fsdp2) at --trace-level "
                      "summary or full");
  }
}

std::vector<std::string> unit_names(const RunStats& stats) {
  std::vector<std::string> names;
  for (const UnitStats& u : stats.units) {
    if (u.unit.index >= static_cast<int32_t>(names.size())) names.resize(static_cast<size_t>(u.unit.index) + 1);
    names[static_cast<size_t>(u.unit.index)] = u.unit.name;
  }
  return names;
}

// Keeps a steady collective of any rank as a sample of its op's cost: (bytes, ns).
void add_sample(const trace::Event& e, FsdpReplayTrace& trace) {
  if (e.kind != trace::EventKind::Collective) return;
  const std::pair<int64_t, int64_t> sample{std::max<int64_t>(e.bytes, 0), e.end_ns - e.begin_ns};
  if (e.op == static_cast<uint8_t>(trace::CollectiveOp::AllGather)) trace.allgather_samples.push_back(sample);
  if (e.op == static_cast<uint8_t>(trace::CollectiveOp::ReduceScatter)) trace.reduce_scatter_samples.push_back(sample);
}

}  // namespace

// The shard group's size under hybrid sharding (meta fsdp.shard_group_size, when it is a size
// between 1 and the world's), else the world size.
int32_t gather_ranks(trace::Reader& reader, int32_t world_size) {
  const std::string recorded = reader.meta_value(std::string(trace::meta_key::kFsdpShardGroupSize));
  int32_t size = 0;
  const auto [end, error] = std::from_chars(recorded.data(), recorded.data() + recorded.size(), size);
  const bool whole = error == std::errc() && end == recorded.data() + recorded.size();
  return whole && size >= 1 && size <= world_size ? size : world_size;
}

FsdpReplayTrace load_fsdp_replay_trace(trace::Reader& reader, const RunStats& stats, int32_t rank,
                                       const ClusterClockRun* cluster) {
  const std::string path = reader.path();
  refuse_imported_run(path, stats);
  refuse_non_fsdp_run(path, stats);
  FsdpReplayTrace trace;
  int32_t grad_accum = 1;
  trace.recorded = read_config(reader, stats, grad_accum);
  refuse_unmodelled_run(path, trace.recorded, grad_accum);
  trace.unit_names = unit_names(stats);
  trace.gather_ranks = gather_ranks(reader, stats.world_size);
  ReplaySteps<FsdpIteration> steps;
  steps.steady = [&](const trace::Event& e) { add_sample(e, trace); };
  steps.check = [&](const std::map<int32_t, IterationEvents>& events) {
    refuse_without_unit_states(path, rank, events);
  };
  steps.build = [](int32_t iteration, IterationEvents& ev,
                   const std::vector<std::string>& names) -> std::optional<FsdpIteration> {
    FsdpIteration it = build_iteration(iteration, ev, names);
    const bool gathers = std::any_of(it.collectives.begin(), it.collectives.end(), [](const FsdpCollective& c) {
      return c.op == trace::CollectiveOp::AllGather;
    });
    if (!gathers || it.phases.empty()) return std::nullopt;
    return it;
  };
  steps.kept = "phases and all-gathers";
  steps.record = "record an FSDP or FSDP2 run of at least 3 steps";
  trace.iterations = load_steady_iterations(reader, stats, rank, trace, steps, cluster);
  trace.launch_offset_ns = launch_offset(trace.iterations);
  return trace;
}

}  // namespace dpscope::analysis
