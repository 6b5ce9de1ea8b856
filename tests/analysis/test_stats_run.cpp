// compute_stats on the known trace and small hand-written ones: the run, its parameters, buckets
// and units, iterations, compute/communication overlap and exposure, collectives, rank status.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/stats_report.h"
#include "analysis/intervals.h"
#include "tests/analysis/stats_fixture.h"

namespace dpscope::analysis {
namespace {

using namespace dpscope::trace;

using namespace stats_fixture;

TEST(stats, RunParamsBucketsUnits) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  EXPECT_EQ(s.schema_version, kSchemaVersion);
  EXPECT_EQ(s.strategy, Strategy::Ddp);
  EXPECT_EQ(s.strategy_recorded, "ddp");
  EXPECT_EQ(s.backend, "gloo");
  EXPECT_EQ(s.model, "toy");
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.iterations, 2);

  ASSERT_EQ(s.params.size(), 4u);
  EXPECT_EQ(s.params[2].name, "net2.weight");
  EXPECT_EQ(s.params[2].shape, (std::vector<int64_t>{5, 10}));
  EXPECT_EQ(s.params[3].rebuilt_bucket, kNone);

  ASSERT_EQ(s.buckets.size(), 4u);
  EXPECT_EQ(s.buckets[1].generation, 0);
  EXPECT_EQ(s.buckets[1].index, 1);
  EXPECT_EQ(s.buckets[1].params, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(s.buckets[3].generation, 1);
  EXPECT_EQ(s.buckets[3].bytes, 220);

  ASSERT_EQ(s.units.size(), 2u);
  EXPECT_EQ(s.units[0].unit.name, "root");
  EXPECT_EQ(s.units[0].params, (std::vector<int32_t>{2}));  // param 3 has no unit
  EXPECT_EQ(s.units[1].params, (std::vector<int32_t>{0, 1}));
}

TEST(stats, Iterations) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  ASSERT_EQ(s.ranks.size(), 2u);
  const auto& r0 = s.ranks[0].iterations;
  const auto& r1 = s.ranks[1].iterations;
  ASSERT_EQ(r0.size(), 2u);
  ASSERT_EQ(r1.size(), 2u);

  EXPECT_EQ(r0[0].iteration, 0);
  EXPECT_EQ(r0[1].iteration, 1);
  EXPECT_EQ(r0[0].hooks, 4);
  EXPECT_EQ(r0[1].hooks, 4);
  EXPECT_EQ(r1[0].hooks, 3);
  EXPECT_EQ(r1[1].hooks, 2);

  EXPECT_EQ(r0[0].step_ms, 9.5);   // metric, not the 10 ms phase
  EXPECT_EQ(r0[1].step_ms, 10.25);
  EXPECT_EQ(r1[0].step_ms, 11.0);  // the iteration phase
  EXPECT_EQ(r1[1].step_ms, 0.0);   // neither
  EXPECT_EQ(r0[0].loss, 2.5);
  EXPECT_EQ(r0[1].loss, 1.25);
  EXPECT_FALSE(r1[0].loss.has_value());
  EXPECT_FALSE(r1[1].loss.has_value());

  EXPECT_EQ(r0[0].collectives, (Counts{0, 2, 1, 0, 0}));
  EXPECT_EQ(r0[1].collectives, (Counts{0, 2, 0, 0, 1}));
  EXPECT_EQ(r1[0].collectives, (Counts{0, 2, 0, 0, 0}));
  EXPECT_EQ(r1[1].collectives, (Counts{1, 0, 0, 0, 0}));
}

// A wait inside a phase is not compute: backward [0,10] ms with the caller waiting [8,10] for an
// all-reduce that ran [6,9] leaves compute [0,8] and the all-reduce's last millisecond exposed.
TEST(stats, WaitInsidePhaseIsExposedCommunication) {
  TempDir dir;
  const RunStats s = stats_of_trace(dir, "wait.dpscope", [](Writer& w) {
    w.put_rank(rank_row(0, "complete", 0));
    w.add_lane(LaneInfo{0, 0, "main", LaneKind::Host});
    w.add_lane(LaneInfo{0, 1, "gloo", LaneKind::Comm});
    add_names(w);
    w.add_event(phase(0, kBackward, 0, 10000, 0));
    w.add_event(collective(0, CollectiveOp::AllReduce, 0, 0, 400, 6000, 9000, 0));
    w.add_event(trace_event(0, 0, EventKind::CollectiveWait, us(8000), us(10000), 0));
  });
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks[0].overlap.compute_ms, 8.0);
  EXPECT_EQ(s.ranks[0].overlap.comm_ms, 3.0);
  EXPECT_EQ(s.ranks[0].overlap.exposed_comm_ms, 1.0);
  ASSERT_EQ(s.ranks[0].iterations.size(), 1u);
  EXPECT_EQ(s.ranks[0].iterations[0].overlap.exposed_comm_ms, 1.0);
}

TEST(stats, Overlap) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  const RankStats& r0 = s.ranks[0];
  const RankStats& r1 = s.ranks[1];
  EXPECT_EQ(r0.overlap.compute_ms, 15.0);
  EXPECT_EQ(r0.overlap.comm_ms, 7.6);
  EXPECT_EQ(r0.overlap.exposed_comm_ms, 3.1);
  EXPECT_EQ(r0.iterations[0].overlap.compute_ms, 8.0);
  EXPECT_EQ(r0.iterations[0].overlap.comm_ms, 3.5);
  EXPECT_EQ(r0.iterations[0].overlap.exposed_comm_ms, 0.5);
  EXPECT_EQ(r0.iterations[1].overlap.compute_ms, 7.0);
  EXPECT_EQ(r0.iterations[1].overlap.comm_ms, 3.5);
  EXPECT_EQ(r0.iterations[1].overlap.exposed_comm_ms, 2.0);

  EXPECT_EQ(r1.overlap.compute_ms, 11.0);
  EXPECT_EQ(r1.overlap.comm_ms, 6.1);
  EXPECT_EQ(r1.overlap.exposed_comm_ms, 1.6);
  EXPECT_EQ(r1.iterations[0].overlap.compute_ms, 9.0);
  EXPECT_EQ(r1.iterations[0].overlap.comm_ms, 5.0);
  EXPECT_EQ(r1.iterations[0].overlap.exposed_comm_ms, 1.0);
  EXPECT_EQ(r1.iterations[1].overlap.compute_ms, 2.0);
  EXPECT_EQ(r1.iterations[1].overlap.comm_ms, 0.5);
  EXPECT_EQ(r1.iterations[1].overlap.exposed_comm_ms, 0.0);
}

TEST(stats, CollectivesInGroupSequenceOrder) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  struct Expected {
    int32_t grp;
    int64_t seq;
    CollectiveOp op;
    int64_t bytes;
    int32_t iteration;
  };
  const std::vector<Expected> expected = {
      {0, 0, CollectiveOp::Broadcast, 660, kNone}, {0, 1, CollectiveOp::AllReduce, 220, 0},
      {0, 2, CollectiveOp::AllReduce, 440, 0},     {0, 3, CollectiveOp::AllReduce, 440, 1},
      {0, 4, CollectiveOp::AllReduce, 220, 1},     {1, 0, CollectiveOp::AllGather, 100, 0},
      {1, 1, CollectiveOp::Barrier, 0, 1}};
  const auto& got = s.ranks[0].collectives;
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].grp, expected[i].grp);
    EXPECT_EQ(got[i].seq, expected[i].seq);
    EXPECT_EQ(got[i].op, expected[i].op);
    EXPECT_EQ(got[i].bytes, expected[i].bytes);
    EXPECT_EQ(got[i].iteration, expected[i].iteration);
  }
  EXPECT_EQ(s.ranks[1].collectives.size(), 4u);
}


TEST(stats, RankStatus) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  EXPECT_EQ(s.ranks[0].status, "complete");
  EXPECT_EQ(s.ranks[0].dropped_events, 0);
  EXPECT_TRUE(s.ranks[0].complete());
  EXPECT_EQ(s.ranks[1].status, "interrupted (SIGINT)");
  EXPECT_EQ(s.ranks[1].dropped_events, 3);
  EXPECT_FALSE(s.ranks[1].complete());
}


// Iterations count every event kind and metric; world_size falls back to the ranks table.
TEST(stats, IterationsFromAnyEventOrMetric) {
  TempDir dir;
  const auto stats_of = [&](const std::string& name, const std::function<void(Writer&)>& fill) {
    return stats_of_trace(dir, name, [&](Writer& w) {
      for (int32_t r = 0; r < 3; ++r) w.put_rank(rank_row(r, "complete", 0));
      fill(w);
    });
  };
  const RunStats empty = stats_of("empty.dpscope", [](Writer&) {});
  EXPECT_EQ(empty.iterations, 0);
  EXPECT_EQ(empty.world_size, 3);
  ASSERT_EQ(empty.ranks.size(), 3u);
  EXPECT_TRUE(empty.ranks[2].iterations.empty());
  EXPECT_FALSE(empty.ranks[2].memory_peak.found());
  EXPECT_FALSE(empty.ranks[2].step_memory_peak.found());
  EXPECT_FALSE(empty.ranks[2].memory_after_steps.found());
  EXPECT_TRUE(empty.ranks[2].category_max.empty());
  const auto j = nlohmann::json::parse(stats_json(empty));
  EXPECT_EQ(j["ranks"][0]["peak_memory_bytes"], (nlohmann::json{{"total", 0}}));
  EXPECT_EQ(j["run"]["strategy"], "");

  const RunStats marked = stats_of("mark.dpscope", [](Writer& w) {
    w.add_event(trace_event(2, 0, EventKind::Mark, us(5), us(5), 4));
  });
  EXPECT_EQ(marked.iterations, 5);
  ASSERT_EQ(marked.ranks[0].iterations.size(), 5u);
  EXPECT_EQ(marked.ranks[0].iterations[4].iteration, 4);
  EXPECT_EQ(marked.ranks[0].iterations[4].hooks, 0);

  const RunStats measured = stats_of("metric.dpscope", [](Writer& w) {
    w.set_meta("world_size", "8");
    w.add_name(kStepMs, "step_ms");
    w.add_metric(1, 2, kStepMs, 7.0);
  });
  EXPECT_EQ(measured.iterations, 3);
  EXPECT_EQ(measured.world_size, 8);
  EXPECT_EQ(measured.ranks[1].iterations[2].step_ms, 7.0);
  EXPECT_EQ(measured.ranks[0].iterations[2].step_ms, 0.0);
}


TEST(IntervalSet, UnionIntersectionDifferenceAndCoverage) {
  const IntervalSet a = IntervalSet::union_of({{0, 10}, {5, 20}, {30, 40}, {50, 50}});
  EXPECT_EQ(a.intervals().size(), 2u);
  EXPECT_EQ(a.length(), 30);
  const IntervalSet b = IntervalSet::union_of({{15, 35}});
  EXPECT_EQ(a.intersection_length(b), 10);
  const IntervalSet d = a.minus(b);
  EXPECT_EQ(d.length(), 20);
  ASSERT_EQ(d.intervals().size(), 2u);
  EXPECT_EQ(d.intervals()[0].end_ns, 15);
  EXPECT_EQ(d.intervals()[1].begin_ns, 35);
  EXPECT_EQ(a.covered(8, 32), 14);
  EXPECT_EQ(a.covered(20, 30), 0);
}

}  // namespace
}  // namespace dpscope::analysis
