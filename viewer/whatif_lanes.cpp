// What-if lanes (see whatif_lanes.h): trace::predict per rank, turned into lanes of spans the
// timeline draws like any other.
#include "viewer/whatif_lanes.h"

#include <cstdio>

#include "trace/reader.h"
#include "trace/stats.h"

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

Lane lane_of(const trace::IterationPrediction* begin, const trace::IterationPrediction* end, int32_t rank,
             const std::string& name) {
  Lane lane;
  lane.info.rank = rank;
  lane.info.lane = kWhatifLaneId;
  lane.info.name = name;
  lane.info.kind = trace::LaneKind::Comm;
  for (const trace::IterationPrediction* it = begin; it != end; ++it) {
    for (size_t b = 0; b < it->buckets.size(); ++b) {
      EventSpan s;
      s.begin_ns = it->buckets[b].start_ns;
      s.end_ns = it->buckets[b].end_ns;
      s.rank = static_cast<int16_t>(rank);
      s.lane = kWhatifLaneId;
      s.kind = trace::EventKind::Collective;
      s.op = static_cast<uint8_t>(trace::CollectiveOp::AllReduce);
      s.bucket_or_unit = static_cast<int16_t>(b);
      lane.spans.push_back(s);
    }
    for (const trace::Interval& wait : it->predicted_waits) {
      EventSpan s;
      s.begin_ns = wait.begin_ns;
      s.end_ns = wait.end_ns;
      s.rank = static_cast<int16_t>(rank);
      s.lane = kWhatifLaneId;
      s.kind = trace::EventKind::CollectiveWait;
      s.op = static_cast<uint8_t>(trace::CollectiveOp::AllReduce);
      lane.spans.push_back(s);
    }
  }
  build_rows(lane);
  return lane;
}

}  // namespace

std::string WhatifLanes::title() const {
  std::string text = "what-if: cap " + mb_text(request.bucket_cap_mb);
  if (request.first_bucket_mb > 0) text += ", first " + mb_text(request.first_bucket_mb);
  return text;
}

std::shared_ptr<const WhatifLanes> compute_whatif_lanes(const Model& model, const WhatifRequest& request) {
  auto lanes = std::make_shared<WhatifLanes>();
  lanes->request = request;
  lanes->by_rank.resize(model.ranks.size());
  if (!(request.bucket_cap_mb > 0) || request.first_bucket_mb < 0) {
    lanes->error = "the what-if bucket cap must be positive (MiB), and the first bucket positive or 0 (as recorded)";
    return lanes;
  }
  try {
    trace::Reader reader(model.path);
    const trace::RunStats stats = trace::compute_stats(reader);
    bool first = true;
    for (size_t r = 0; r < model.ranks.size(); ++r) {
      const int32_t rank = model.ranks[r].info.rank;
      trace::ReplayTrace replay;
      try {
        replay = trace::load_replay_trace(reader, stats, rank);
      } catch (const trace::WhatifError& error) {
        if (first) throw;  // the same refusal for every rank: say it once
        continue;
      }
      const trace::AllReduceModel cost = trace::fit_allreduce_model(replay);
      trace::BucketLimits limits = replay.recorded_limits.value_or(trace::BucketLimits{});
      limits.bucket_cap_bytes = static_cast<int64_t>(request.bucket_cap_mb * kMiB);
      if (request.first_bucket_mb > 0) limits.first_bucket_bytes = static_cast<int64_t>(request.first_bucket_mb * kMiB);
      const trace::Prediction p = trace::predict(replay, trace::plan_for(replay, limits), cost);
      lanes->by_rank[r] = lane_of(p.iterations.data(), p.iterations.data() + p.iterations.size(), rank,
                                  lanes->title());
      if (first) {
        first = false;
        lanes->bucket_bytes = p.bucket_bytes;
        lanes->measured_step_ms = p.measured_step_ms;
        lanes->predicted_step_ms = p.predicted_step_ms;
        lanes->measured_exposed_comm_ms = p.measured_exposed_comm_ms;
        lanes->predicted_exposed_comm_ms = p.predicted_exposed_comm_ms;
        char text[160];
        std::snprintf(text, sizeof(text), "%.1f \u00b5s + bytes at %.2f Gb/s, fitted to %lld all-reduces (error %.1f %%)",
                      cost.latency_us(), cost.gbps(), static_cast<long long>(cost.samples), cost.fit_error_pct);
        lanes->model_text = text;
      }
    }
  } catch (const std::exception& error) {
    lanes->error = error.what();
    lanes->by_rank.assign(model.ranks.size(), Lane{});
  }
  return lanes;
}

}  // namespace dpscope::view
