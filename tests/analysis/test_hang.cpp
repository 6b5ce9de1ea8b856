// The hang section (analysis/hang.h) on hand-made collectives: a rank that skipped one, a resized
// one, a missing rank, a majority, the flight-recorder analyzer's verdicts in its order, and no
// report for a run whose collectives all completed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analysis/hang.h"
#include "analysis/hang_report.h"

using dpscope::analysis::analyze_hang;
using dpscope::analysis::flight_recorder_match;
using dpscope::analysis::HangCollective;
using dpscope::trace::CollectiveEndState;
using dpscope::trace::CollectiveOp;

namespace {

constexpr int64_t kBucket0 = 1 << 20;
constexpr int64_t kBucket1 = 512 << 10;

HangCollective collective(int32_t rank, int64_t seq, int32_t iteration, int32_t bucket, int64_t bytes,
                          CollectiveEndState state = CollectiveEndState::Completed) {
  HangCollective c;
  c.rank = rank;
  c.seq = seq;
  c.op = CollectiveOp::AllReduce;
  c.bytes = bytes;
  c.dtype = 0;  // float32
  c.iteration = iteration;
  c.bucket = bucket;
  c.state = state;
  c.issued_ns = seq * 1'000'000;
  c.end_ns = c.issued_ns + (state == CollectiveEndState::Completed ? 100'000 : 3'000'000'000);
  return c;
}

// Two buckets an iteration, `iterations` of them, on `ranks` ranks; every collective completed.
std::vector<HangCollective> healthy(int ranks, int iterations) {
  std::vector<HangCollective> out;
  for (int r = 0; r < ranks; ++r) {
    for (int it = 0; it < iterations; ++it) {
      out.push_back(collective(r, 2 * it, it, 0, kBucket0));
      out.push_back(collective(r, 2 * it + 1, it, 1, kBucket1));
    }
  }
  return out;
}

}  // namespace

TEST(Hang, NoReportWhenEveryCollectiveCompleted) {
  EXPECT_FALSE(analyze_hang(healthy(2, 3), {0, 1}, {}).has_value());
  EXPECT_TRUE(dpscope::analysis::hang_json(std::nullopt).is_null());
  EXPECT_EQ(dpscope::analysis::hang_text(std::nullopt), "");
}

// Rank 1 skips iteration 2's bucket 0: its bucket 1 takes seq 4, and from there on it is one
// collective ahead until the others wait in seq 6 for ever.
TEST(Hang, ASkippedBucketNamesTheRankThatNeverIssuedIt) {
  std::vector<HangCollective> all;
  for (int r = 0; r < 2; ++r) {
    for (int it = 0; it < 2; ++it) {
      all.push_back(collective(r, 2 * it, it, 0, kBucket0));
      all.push_back(collective(r, 2 * it + 1, it, 1, kBucket1));
    }
  }
  // Rank 0: iteration 2's bucket 0 and 1 complete against rank 1's shifted ones (same size on
  // purpose here would hide it; these differ), then it hangs.
  all.push_back(collective(0, 4, 2, 0, kBucket0, CollectiveEndState::Started));
  all.push_back(collective(1, 4, 2, 1, kBucket1, CollectiveEndState::Started));
  const auto report = analyze_hang(all, {0, 1}, {{0, "world"}});
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->culprit, 1);
  ASSERT_TRUE(report->first_disagreement.has_value());
  EXPECT_EQ(report->first_disagreement->seq, 4);
  EXPECT_EQ(report->first_disagreement->grp, 0);
  EXPECT_EQ(report->first_disagreement->field, "size");
  EXPECT_EQ(report->verdict, "SIZE_OR_SYNTAX_MISMATCH");
  EXPECT_EQ(report->verdict_seq, 4);
  EXPECT_NE(report->sentence.find("rank 1 never issued allreduce #4 (iteration 2, bucket 0, 1.0 MiB"),
            std::string::npos)
      << report->sentence << " | " << report->culprit_reason;
  EXPECT_NE(report->sentence.find("rank 0 waited up to 3.0 s in allreduce #4"), std::string::npos)
      << report->sentence;
  // Each rank's progress.
  ASSERT_EQ(report->groups.size(), 1u);
  EXPECT_EQ(report->groups[0].name, "world");
  EXPECT_EQ(report->groups[0].ranks[0].last_completed_seq, 3);
  ASSERT_EQ(report->groups[0].ranks[1].pending.size(), 1u);
  EXPECT_EQ(report->groups[0].ranks[1].pending[0].bucket, 1);
}

// Only the engine's tags tell a skip apart when every collective is the same size: the flight
// recorder sees every seq fully matched but the last.
TEST(Hang, ASilentDesynchronisationIsFoundByTheIterationTag) {
  std::vector<HangCollective> all;
  for (int r = 0; r < 2; ++r) {
    for (int it = 0; it < 3; ++it) all.push_back(collective(r, it, it, 0, kBucket0));
  }
  // Rank 1 skipped iteration 3's all-reduce: its seq 3 is iteration 4's.
  all.push_back(collective(0, 3, 3, 0, kBucket0));
  all.push_back(collective(1, 3, 4, 0, kBucket0));
  all.push_back(collective(0, 4, 4, 0, kBucket0, CollectiveEndState::Started));
  HangCollective barrier = collective(1, 4, dpscope::trace::kNone, dpscope::trace::kNone, 0,
                                      CollectiveEndState::Started);
  barrier.op = CollectiveOp::Barrier;
  all.push_back(barrier);
  const auto report = analyze_hang(all, {0, 1}, {});
  ASSERT_TRUE(report.has_value());
  ASSERT_TRUE(report->first_disagreement.has_value());
  EXPECT_EQ(report->first_disagreement->seq, 3);
  EXPECT_EQ(report->first_disagreement->field, "iteration");
  EXPECT_EQ(report->first_disagreement->verdict, "FULLY_MATCHED");
  EXPECT_EQ(report->verdict, "COLLECTIVE_TYPE_MISMATCH");
  EXPECT_EQ(report->verdict_seq, 4);
  EXPECT_EQ(report->culprit, 1);
}

// Rank 0 issues iteration 2's bucket 0 with half its elements: its own history says it is wrong.
TEST(Hang, AResizedCollectiveNamesItsRankEvenWithTwoRanks) {
  std::vector<HangCollective> all = healthy(2, 2);
  all.push_back(collective(0, 4, 2, 0, kBucket0 / 2, CollectiveEndState::Started));
  all.push_back(collective(1, 4, 2, 0, kBucket0, CollectiveEndState::Started));
  const auto report = analyze_hang(all, {0, 1}, {});
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->culprit, 0);
  EXPECT_EQ(report->first_disagreement->field, "size");
}

TEST(Hang, AMissingRankIsTheCulpritAndNamed) {
  std::vector<HangCollective> all = healthy(3, 1);
  all.push_back(collective(0, 2, 1, 0, kBucket0, CollectiveEndState::Started));
  all.push_back(collective(2, 2, 1, 0, kBucket0, CollectiveEndState::Started));
  const auto report = analyze_hang(all, {0, 1, 2}, {});
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->culprit, 1);
  EXPECT_EQ(report->missing_ranks, std::vector<int32_t>{1});
  EXPECT_EQ(report->verdict, "NOT_ALL_RANKS_JOINING");
  EXPECT_NE(report->sentence.find("rank 1 never issued allreduce #2"), std::string::npos) << report->sentence;
  EXPECT_NE(report->sentence.find("ranks 0, 2 waited up to 3.0 s"), std::string::npos) << report->sentence;
  const nlohmann::ordered_json json = dpscope::analysis::hang_json(report);
  EXPECT_EQ(json["culprit"], 1);
  EXPECT_EQ(json["missing_ranks"].dump(), "[1]");
  EXPECT_EQ(json["first_disagreement"]["collectives"][0]["kind"], "allreduce");
  EXPECT_EQ(json["first_disagreement"]["collectives"][0]["bucket"], 0);
  EXPECT_EQ(json["groups"][0]["ranks"][1]["last_completed_seq"], 1);
  EXPECT_EQ(json["groups"][0]["ranks"][0]["pending"][0]["state"], "started");
}

TEST(Hang, TheMajorityDecidesOnThreeRanks) {
  std::vector<HangCollective> all = healthy(3, 1);
  all.push_back(collective(0, 2, 1, 0, kBucket0, CollectiveEndState::Started));
  all.push_back(collective(1, 2, 1, 0, kBucket0, CollectiveEndState::Started));
  all.push_back(collective(2, 2, 1, 1, kBucket1, CollectiveEndState::Started));
  const auto report = analyze_hang(all, {0, 1, 2}, {});
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->culprit, 2);
}

// The analyzer's Op.match order: kind, then sizes, then dtype, then state.
TEST(Hang, FlightRecorderVerdictsInTheAnalyzersOrder) {
  const HangCollective a = collective(0, 0, 0, 0, kBucket0);
  HangCollective b = a;
  EXPECT_EQ(flight_recorder_match(a, b, 2), "FULLY_MATCHED");
  b.state = CollectiveEndState::Started;
  EXPECT_EQ(flight_recorder_match(a, b, 2), "COLLECTIVE_STATE_MISMATCH");
  b.dtype = 3;  // float64, same bytes: half the elements
  EXPECT_EQ(flight_recorder_match(a, b, 2), "SIZE_OR_SYNTAX_MISMATCH");
  b.dtype = 5;  // int32, same bytes and elements
  EXPECT_EQ(flight_recorder_match(a, b, 2), "COLLECTIVE_DTYPE_MISMATCH");
  b.op = CollectiveOp::AllGather;
  EXPECT_EQ(flight_recorder_match(a, b, 2), "COLLECTIVE_TYPE_MISMATCH");
  // The engine's tags are not the flight recorder's business.
  HangCollective c = a;
  c.iteration = 7;
  c.bucket = 3;
  EXPECT_EQ(flight_recorder_match(a, c, 2), "FULLY_MATCHED");
}

// Two ranks, iteration 0 only, so no history tells the sides apart; their iterations do.
TEST(Hang, AMetricOnOneOfTwoRanksIsItsOwnCollectiveInTheEarlierIteration) {
  std::vector<HangCollective> all;
  for (int r = 0; r < 2; ++r) all.push_back(collective(r, 0, 0, 0, kBucket0));
  // Rank 0 all-reduces a 4-byte metric, no bucket; rank 1 is in iteration 1's first bucket.
  all.push_back(collective(0, 1, 0, dpscope::trace::kNone, 4, CollectiveEndState::Started));
  all.push_back(collective(1, 1, 1, 0, kBucket0, CollectiveEndState::Started));
  const auto report = analyze_hang(all, {0, 1}, {});
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->culprit, 0) << report->culprit_reason;
}

TEST(Hang, ARankAheadByAnIterationSkippedTheOthersEngineCollective) {
  std::vector<HangCollective> all;
  for (int r = 0; r < 2; ++r) all.push_back(collective(r, 0, 0, 0, kBucket0));
  // Rank 0 skipped iteration 0's bucket 1: its seq 1 is iteration 1's bucket 0.
  all.push_back(collective(0, 1, 1, 0, kBucket0, CollectiveEndState::Started));
  all.push_back(collective(1, 1, 0, 1, kBucket1, CollectiveEndState::Started));
  const auto report = analyze_hang(all, {0, 1}, {});
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->culprit, 0) << report->culprit_reason;
  EXPECT_NE(report->sentence.find("rank 0 never issued allreduce #1 (iteration 0, bucket 1"), std::string::npos)
      << report->sentence;
}
