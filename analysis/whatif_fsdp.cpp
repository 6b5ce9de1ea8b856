// The FSDP what-if replay (Note [FSDP what-if replay] in whatif_fsdp.h): running each steady
// iteration's main-thread program again with another backward prefetch mode and all-gather
// limit, collectives costed by the fitted or given model and queued on their group's link.
#include "analysis/whatif_fsdp.h"

#include <algorithm>
#include <deque>
#include <map>

namespace dpscope::analysis {

int64_t FsdpCostModel::duration_ns(const FsdpCollective& c) const {
  switch (c.op) {
    case trace::CollectiveOp::AllGather: return all_gather.duration_ns(c.bytes);
    case trace::CollectiveOp::ReduceScatter: return reduce_scatter.duration_ns(c.bytes);
    // As recorded from its issue: with the wait for its group's last rank in it, which a replay of
    // one rank cannot know otherwise (HSDP's replicate group joins ranks of two shard groups).
    default: return std::max<int64_t>(0, c.span.end_ns - c.enqueue_ns);
  }
}

FsdpCostModel fit_fsdp_cost_model(const FsdpReplayTrace& trace) {
  return {fit_collective_model(trace.allgather_samples, trace, "all-gathers"),
          fit_collective_model(trace.reduce_scatter_samples, trace, "reduce-scatters")};
}

namespace {

// One iteration's replay: the main thread's clock, the link and the gathers in flight.
class IterationReplay {
 public:
  IterationReplay(const FsdpIteration& it, const FsdpSettings& settings, const FsdpCostModel& model,
                  int64_t launch_offset_ns)
      : it_(it), settings_(settings), model_(model), launch_offset_ns_(launch_offset_ns),
        scheduled_(it.collectives.size(), -1), reached_(it.program.size(), false),
        mark_ns_(it.mark_recorded_ns.size(), 0) {}

  FsdpIterationPrediction run() {
    const std::vector<FsdpStep>& program = it_.program;
    if (!program.empty()) now_ = program.front().recorded_ns;
    for (size_t i = 0; i < program.size(); ++i) {
      const FsdpStep& step = program[i];
      now_ += step.work_ns;
      switch (step.kind) {
        case FsdpStepKind::Mark:
          mark_ns_[static_cast<size_t>(step.mark)] = now_;
          break;
        case FsdpStepKind::IssueGather:
          issue_gather(step.collective, false);
          break;
        case FsdpStepKind::Prefetch:
          issue_gather(step.collective, true);
          break;
        case FsdpStepKind::WaitGather: {
          reached_[i] = true;
          issue_gather(step.collective, false);
          const auto found = std::find(in_flight_.begin(), in_flight_.end(), step.collective);
          if (found != in_flight_.end()) in_flight_.erase(found);
          wait_for(step.collective);
          const bool backward = it_.collectives[static_cast<size_t>(step.collective)].flags & trace::kFlagBackward;
          if (backward && settings_.backward_prefetch == trace::BackwardPrefetch::Pre) {
            prefetch(step.next_backward_wait);
          }
          break;
        }
        case FsdpStepKind::PostBackward:
          if (settings_.backward_prefetch == trace::BackwardPrefetch::Post) prefetch(step.next_backward_wait);
          break;
        case FsdpStepKind::Issue:
          issue(step.collective, false);
          break;
        case FsdpStepKind::Wait:
          issue(step.collective, false);
          wait_for(step.collective);
          break;
      }
    }
    FsdpIterationPrediction out;
    out.iteration = it_.iteration;
    out.measured = it_.measured;
    out.measured_step_ms = it_.measured_step_ms;
    out.predicted_step_ms = it_.measured_step_ms + double(now_ - it_.recorded_end_ns) / 1e6;
    std::vector<Interval> compute, comm;
    for (const FsdpPhase& p : it_.phases) {
      compute.push_back({mark_ns_[static_cast<size_t>(p.begin_mark)], mark_ns_[static_cast<size_t>(p.end_mark)]});
    }
    for (const FsdpScheduledCollective& c : collectives_) comm.push_back({c.start_ns, c.end_ns});
    out.predicted = overlap_of_slices(std::move(compute), waits_, std::move(comm));
    out.collectives = std::move(collectives_);
    out.waits = std::move(waits_);
    out.max_gathers_in_flight = max_in_flight_;
    return out;
  }

 private:
  // Puts collective `c` on the link at the main thread's current time, once.
  void issue(int32_t c, bool prefetch) {
    if (scheduled_[static_cast<size_t>(c)] >= 0) return;
    FsdpScheduledCollective s;
    s.collective = c;
    s.prefetch = prefetch;
    s.issue_ns = now_;
    const FsdpCollective& collective = it_.collectives[static_cast<size_t>(c)];
    // Each process group its own link (HSDP's shard group within a host, replicate group across).
    const auto link = link_free_ns_.try_emplace(collective.grp, INT64_MIN).first;
    s.start_ns = std::max(now_ + launch_offset_ns_, link->second);
    s.end_ns = s.start_ns + model_.duration_ns(collective);
    link->second = s.end_ns;
    scheduled_[static_cast<size_t>(c)] = static_cast<int32_t>(collectives_.size());
    collectives_.push_back(s);
  }

  // The engine's issue_gather: at most `limit_all_gathers` in flight, waiting for the oldest.
  void issue_gather(int32_t c, bool prefetch) {
    if (scheduled_[static_cast<size_t>(c)] >= 0) return;
    const auto limit = static_cast<size_t>(settings_.limit_all_gathers);
    while (limit > 0 && in_flight_.size() >= limit) {
      const int32_t oldest = in_flight_.front();
      in_flight_.pop_front();
      wait_for(oldest);
    }
    issue(c, prefetch);
    in_flight_.push_back(c);
    max_in_flight_ = std::max(max_in_flight_, static_cast<int32_t>(in_flight_.size()));
  }

  // Prefetches the gather of the unit whose backward gather wait is program step `step`, unless
  // that unit's backward already began.
  void prefetch(int32_t step) {
    if (step < 0 || reached_[static_cast<size_t>(step)]) return;
    issue_gather(it_.program[static_cast<size_t>(step)].collective, true);
  }

  void wait_for(int32_t c) {
    const int64_t end = collectives_[static_cast<size_t>(scheduled_[static_cast<size_t>(c)])].end_ns;
    if (end > now_) {
      waits_.push_back({now_, end});
      now_ = end;
    }
  }

  const FsdpIteration& it_;
  const FsdpSettings& settings_;
  const FsdpCostModel& model_;
  const int64_t launch_offset_ns_;
  int64_t now_ = 0;
  std::map<int16_t, int64_t> link_free_ns_;  // by process group: when its link is free
  std::vector<int32_t> scheduled_;  // by collective: index into collectives_, -1 until issued
  std::vector<bool> reached_;       // by program step: a gather wait the main thread has passed
  std::vector<int64_t> mark_ns_;
  std::deque<int32_t> in_flight_;   // all-gathers issued and not yet waited for by their unit
  int32_t max_in_flight_ = 0;
  std::vector<FsdpScheduledCollective> collectives_;
  std::vector<Interval> waits_;
};

}  // namespace

FsdpPrediction predict_fsdp(const FsdpReplayTrace& trace, const FsdpSettings& settings,
                            const FsdpCostModel& model) {
  FsdpPrediction prediction;
  prediction.settings = settings;
  for (const FsdpIteration& it : trace.iterations) {
    FsdpIterationPrediction out = IterationReplay(it, settings, model, trace.launch_offset_ns).run();
    prediction.max_gathers_in_flight = std::max(prediction.max_gathers_in_flight, out.max_gathers_in_flight);
    prediction.iterations.push_back(std::move(out));
  }
  summarize_iterations(prediction);
  return prediction;
}

}  // namespace dpscope::analysis
