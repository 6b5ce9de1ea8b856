// What-if lanes (see whatif_lanes.h): analysis::predict (DDP) or analysis::predict_fsdp per rank,
// turned into lanes of spans the timeline draws like any other.
#include "viewer/whatif_lanes.h"

#include <cstdio>
#include <optional>

#include "analysis/stats.h"
#include "core/link_model.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::view {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// The lane id of the what-if lanes: above any lane a recorder makes, so it is never taken for one.
constexpr trace::LaneId kWhatifLaneId = 0x7fff;

std::string mb_text(double mb) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g MiB", mb);
  return text;
}

Lane lane_of(std::vector<Span> spans, int32_t rank, const std::string& name) {
  Lane lane;
  lane.info.rank = rank;
  lane.info.lane = kWhatifLaneId;
  lane.info.name = name;
  lane.info.kind = trace::LaneKind::Comm;
  lane.spans = std::move(spans);
  build_rows(lane);
  return lane;
}

std::string cost_text(const analysis::AllReduceModel& cost, const char* what) {
  char text[200];
  if (cost.source == analysis::AllReduceModel::Source::Link) {
    std::snprintf(text, sizeof(text), "%s %s, the %g Gb/s, %g \u00b5s link's ring model", what,
                  cost.line_text().c_str(), cost.link_gbps, cost.link_latency_us);
  } else {
    std::snprintf(text, sizeof(text), "%s %s, fitted to %lld (error %.1f %%)", what, cost.line_text().c_str(),
                  static_cast<long long>(cost.samples), cost.fit_error_pct);
  }
  return text;
}

// One rank's predicted spans, whichever strategy replayed it.
struct RankSpans {
  std::vector<Span> comm;   // the predicted collectives
  std::vector<Span> waits;  // the main thread's waits for them: a lane of their own, they overlap

  void add_waits(const std::vector<analysis::Interval>& intervals, trace::CollectiveOp op) {
    for (const analysis::Interval& wait : intervals) {
      waits.push_back(Span::collective_wait(wait.begin_ns, wait.end_ns, op, trace::kNone));
    }
  }
};

// The medians the panel and the headless JSON show, which both strategies' predictions
// (analysis::Prediction, analysis::FsdpPrediction) name alike.
template <class Prediction>
void take_medians(const Prediction& p, WhatifLanes& lanes) {
  lanes.measured_step_ms = p.measured_step_ms;
  lanes.predicted_step_ms = p.predicted_step_ms;
  lanes.measured_exposed_comm_ms = p.measured_exposed_comm_ms;
  lanes.predicted_exposed_comm_ms = p.predicted_exposed_comm_ms;
}

// One rank of a DDP trace: the plan for the request's limits; its all-reduces and tail waits.
// `summary` (the first rank replayed) takes the plan, the medians and the cost model.
RankSpans replay_ddp(trace::Reader& reader, const analysis::RunStats& stats, int32_t rank,
                     const WhatifRequest& request, const analysis::ClusterClockRun* cluster,
                     WhatifLanes* summary) {
  const analysis::ReplayTrace replay = analysis::load_replay_trace(reader, stats, rank, cluster);
  const analysis::AllReduceModel cost =
      cluster ? analysis::link_collective_model(trace::CollectiveOp::AllReduce, cluster->link, replay.world_size)
              : analysis::fit_allreduce_model(replay);
  analysis::BucketLimits limits = replay.recorded_limits.value_or(analysis::BucketLimits{});
  limits.bucket_cap_bytes = static_cast<int64_t>(request.bucket_cap_mb * kMiB);
  if (request.first_bucket_mb > 0) limits.first_bucket_bytes = static_cast<int64_t>(request.first_bucket_mb * kMiB);
  const analysis::Prediction p = analysis::predict(replay, analysis::plan_for(replay, limits), cost);
  RankSpans spans;
  for (const analysis::IterationPrediction& it : p.iterations) {
    for (const auto& bucket : it.buckets) {
      spans.comm.push_back(Span::collective(bucket.start_ns, bucket.end_ns, trace::CollectiveOp::AllReduce, trace::kNone));
    }
    spans.add_waits(it.predicted_waits, trace::CollectiveOp::AllReduce);
  }
  if (summary) {
    take_medians(p, *summary);
    summary->bucket_bytes = p.bucket_bytes;
    summary->model_text = cost_text(cost, "all-reduce");
  }
  return spans;
}

// One rank of an FSDP trace: its all-gathers and reduce-scatters as the request's prefetch and
// all-gather limit would schedule them, and the main thread's waits. `summary` (the first rank
// replayed) takes the settings replayed, the medians and the cost model.
RankSpans replay_fsdp(trace::Reader& reader, const analysis::RunStats& stats, int32_t rank,
                      const WhatifRequest& request, const analysis::ClusterClockRun* cluster,
                      WhatifLanes* summary) {
  const analysis::FsdpReplayTrace replay = analysis::load_fsdp_replay_trace(reader, stats, rank, cluster);
  const auto link_cost = [&](trace::CollectiveOp op) {
    return analysis::link_collective_model(op, cluster->link, replay.gather_ranks);
  };
  const analysis::FsdpCostModel cost =
      cluster ? analysis::FsdpCostModel{link_cost(trace::CollectiveOp::AllGather), link_cost(trace::CollectiveOp::ReduceScatter)}
              : analysis::fit_fsdp_cost_model(replay);
  analysis::FsdpSettings settings = replay.recorded.settings;
  if (request.backward_prefetch) settings.backward_prefetch = *request.backward_prefetch;
  if (request.limit_all_gathers) settings.limit_all_gathers = *request.limit_all_gathers;
  const analysis::FsdpPrediction p = analysis::predict_fsdp(replay, settings, cost);
  RankSpans spans;
  for (size_t i = 0; i < p.iterations.size() && i < replay.iterations.size(); ++i) {
    for (const analysis::FsdpScheduledCollective& c : p.iterations[i].collectives) {
      const analysis::FsdpCollective& recorded = replay.iterations[i].collectives[size_t(c.collective)];
      spans.comm.push_back(Span::collective(c.start_ns, c.end_ns, recorded.op, trace::kNone));
    }
    spans.add_waits(p.iterations[i].waits, trace::CollectiveOp::AllGather);
  }
  if (summary) {
    take_medians(p, *summary);
    summary->model_text = cost_text(cost.all_gather, "all-gather") + "; " + cost_text(cost.reduce_scatter, "reduce-scatter");
    summary->fsdp_settings = settings;
  }
  return spans;
}

// Why `request` cannot be replayed on a trace of the other strategy, with limits out of range,
// or on an FSDP2 trace with what FSDP2 has not (Note [FSDP2 in the FSDP replay]); "" when it can.
std::string request_error(const WhatifRequest& request, bool fsdp, bool fsdp2) {
  if (request.settings == WhatifSettings::Ddp && fsdp) {
    return "--whatif-cap-mb and --whatif-first-bucket-mb are for DDP traces; this one is FSDP: "
           "use --whatif-backward-prefetch and --whatif-limit-all-gathers";
  }
  if (request.settings == WhatifSettings::Fsdp && !fsdp) {
    return "--whatif-backward-prefetch and --whatif-limit-all-gathers are for FSDP traces; this one "
           "is DDP: use --whatif-cap-mb";
  }
  if (!fsdp && (!(request.bucket_cap_mb > 0) || request.first_bucket_mb < 0)) {
    return "the what-if bucket cap must be positive (MiB), and the first bucket positive or 0 (as recorded)";
  }
  if (fsdp && request.limit_all_gathers.value_or(0) < 0) return "the what-if all-gather limit must be 0 (none) or more";
  if (fsdp2 && request.backward_prefetch == trace::BackwardPrefetch::Post) {
    return "this is an FSDP2 trace, and FSDP2 prefetches in a group's pre-backward only: pick pre or none";
  }
  if (fsdp2 && request.limit_all_gathers.value_or(0) != 0) {
    return "this is an FSDP2 trace, and FSDP2 has no all-gather limit: leave it at 0 (none)";
  }
  return "";
}

// Replays every rank into `lanes`; throws the first rank's refusal (analysis::WhatifError) or
// a file's error. A later rank that is refused keeps empty lanes.
void replay_ranks(const Model& model, const WhatifRequest& request, const analysis::RunStats* analysed,
                  const analysis::ClusterClockRun* cluster, WhatifLanes& lanes) {
  trace::Reader reader(model.path);
  std::optional<analysis::RunStats> own;
  if (!analysed) own = cluster ? analysis::compute_stats(reader, *cluster) : analysis::compute_stats(reader);
  const analysis::RunStats& stats = analysed ? *analysed : *own;
  bool first = true;
  for (size_t r = 0; r < model.ranks.size(); ++r) {
    const int32_t rank = model.ranks[r].info.rank;
    WhatifLanes* summary = first ? &lanes : nullptr;
    RankSpans spans;
    try {
      spans = lanes.fsdp ? replay_fsdp(reader, stats, rank, request, cluster, summary)
                         : replay_ddp(reader, stats, rank, request, cluster, summary);
    } catch (const analysis::WhatifError&) {
      if (first) throw;  // the same refusal for every rank: say it once
      continue;
    }
    first = false;
    lanes.by_rank[r].comm = lane_of(std::move(spans.comm), rank, lanes.title());
    lanes.by_rank[r].waits = lane_of(std::move(spans.waits), rank, "what-if: waits");
  }
}

}  // namespace

std::string WhatifLanes::title() const {
  if (fsdp) {
    return "what-if: prefetch " + std::string(trace::to_string(fsdp_settings.backward_prefetch)) + ", limit " +
           std::to_string(fsdp_settings.limit_all_gathers);
  }
  std::string text = "what-if: cap " + mb_text(request.bucket_cap_mb);
  if (request.first_bucket_mb > 0) text += ", first " + mb_text(request.first_bucket_mb);
  return text;
}

std::shared_ptr<const WhatifLanes> compute_whatif_lanes(const Model& model, const WhatifRequest& request,
                                                        const analysis::RunStats* analysed,
                                                        const analysis::ClusterClockRun* cluster) {
  auto lanes = std::make_shared<WhatifLanes>();
  lanes->request = request;
  lanes->fsdp = model.sharded_units();
  lanes->by_rank.resize(model.ranks.size());
  lanes->error = request_error(request, lanes->fsdp, model.strategy() == trace::Strategy::Fsdp2);
  if (!lanes->error.empty()) return lanes;
  try {
    replay_ranks(model, request, analysed, cluster, *lanes);
  } catch (const std::exception& error) {
    lanes->error = error.what();
    lanes->by_rank.assign(model.ranks.size(), WhatifLanes::RankLanes{});
  }
  return lanes;
}

}  // namespace dpscope::view
