// compute_stats' DDP figures: PyTorch DDP's logging data from phases, and collectives matched
// across ranks (mismatches, skew) with each bucket's exposure.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/stats_report.h"
#include "tests/analysis/stats_fixture.h"

namespace dpscope::analysis {
namespace {

using namespace dpscope::trace;

using namespace stats_fixture;

// PyTorch DDP's logging data from phases, the first BucketLaunch and finalize_backward.
// it 0: forward [0,1000] backward [1000,5000] launch 2000 finalize [4500,6000]
//       -> forward 1, backward compute 3.5, backward comm 4, overlap 2.5 (ms).
// it 1 (two micro-steps; the last forward and backward count): forwards [10000,11000] and
//       [12000,12500], backwards from 11000 and 12500, launch 13000, finalize [14000,14500]
//       -> 0.5, 1.5, 1.5, 1.0.   it 2: no finalize -> not averaged.
TEST(stats, DdpLoggingData) {
  TempDir dir;
  const RunStats s = stats_of_trace(dir, "ddp.sqlite", [](Writer& w) {
    w.put_rank(rank_row(0, "complete", 0));
    w.add_lane(LaneInfo{0, 0, "main", LaneKind::Host});
    w.add_name(kForward, "forward");
    w.add_name(kBackward, "backward");
    w.add_name(kSetup, "finalize_backward");
    for (const Event& e : {phase(0, kForward, 0, 1000, 0), phase(0, kBackward, 1000, 5000, 0),
                           bucket_event(0, EventKind::BucketLaunch, 0, 2000, 0),
                           phase(0, kSetup, 4500, 6000, 0),
                           phase(0, kForward, 10000, 11000, 1), phase(0, kBackward, 11000, 12000, 1),
                           phase(0, kForward, 12000, 12500, 1), phase(0, kBackward, 12500, 14000, 1),
                           bucket_event(0, EventKind::BucketLaunch, 1, 13000, 1),
                           bucket_event(0, EventKind::BucketLaunch, 0, 13500, 1),
                           phase(0, kSetup, 14000, 14500, 1),
                           phase(0, kForward, 20000, 21000, 2)}) {
      w.add_event(e);
    }
  });
  ASSERT_TRUE(s.ranks[0].ddp.has_value());
  const DdpTimings& d = *s.ranks[0].ddp;
  EXPECT_EQ(d.iterations, 2);
  EXPECT_DOUBLE_EQ(d.forward_compute_ms, 0.75);
  EXPECT_DOUBLE_EQ(d.backward_compute_ms, 2.5);
  EXPECT_DOUBLE_EQ(d.backward_comm_ms, 2.75);
  EXPECT_DOUBLE_EQ(d.backward_compute_comm_overlap_ms, 1.75);
  EXPECT_NE(stats_text(s).find("ddp logging (avg over 2 iterations): forward compute 0.750 ms"),
            std::string::npos)
      << stats_text(s);
}


CollectiveStats on_rank(int64_t seq, CollectiveOp op, int64_t bytes, DType dtype, int64_t begin_ns) {
  CollectiveStats c;
  c.grp = 0;
  c.seq = seq;
  c.op = op;
  c.bytes = bytes;
  c.dtype = static_cast<uint8_t>(dtype);
  c.begin_ns = begin_ns;
  c.end_ns = begin_ns + 10;
  return c;
}

TEST(CollectiveMatching, BytesDtypeOpAndMissingRanksAreMismatchesSkewIsTheBeginSpread) {
  const auto ar = CollectiveOp::AllReduce;
  std::vector<std::vector<CollectiveStats>> by_rank = {
      {on_rank(0, ar, 4096, DType::Float32, 100), on_rank(1, ar, 4096, DType::Float32, 200),
       on_rank(2, ar, 4096, DType::Float32, 300), on_rank(3, ar, 64, DType::Float32, 400),
       on_rank(4, ar, 8, DType::Float32, 500)},
      {on_rank(0, ar, 4096, DType::Float32, 130), on_rank(1, ar, 2048, DType::Float32, 200),
       on_rank(2, ar, 4096, DType::Float16, 300),
       on_rank(3, CollectiveOp::Broadcast, 64, DType::Float32, 400)},
  };
  const auto matches = match_collectives({0, 1}, by_rank, 2);
  ASSERT_EQ(matches.size(), 5u);
  EXPECT_FALSE(matches[0].mismatch);
  EXPECT_EQ(matches[0].skew_ns, 30);
  EXPECT_EQ(matches[0].ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(matches[1].mismatch);
  EXPECT_NE(matches[1].why.find("rank 1 ran allreduce of 2.0 KiB float32"), std::string::npos) << matches[1].why;
  EXPECT_TRUE(matches[2].mismatch);
  EXPECT_NE(matches[2].why.find("float16"), std::string::npos) << matches[2].why;
  EXPECT_TRUE(matches[3].mismatch);
  EXPECT_NE(matches[3].why.find("broadcast"), std::string::npos) << matches[3].why;
  EXPECT_TRUE(matches[4].mismatch);
  EXPECT_EQ(matches[4].why, "ran on 1 of 2 ranks");
}

TEST(stats, MatchesAndBucketExposureOfTheKnownTrace) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  // Rank 1 stopped early: its last collectives are not on rank 0, rank 0's not on it.
  EXPECT_GT(s.matches.size(), 0u);
  int64_t mismatches = 0;
  for (const CollectiveMatch& m : s.matches) mismatches += m.mismatch;
  EXPECT_EQ(mismatches, s.mismatches);
  for (const RankStats& r : s.ranks) {
    double comm = 0, exposed = 0;
    for (const BucketExposure& b : r.buckets) {
      comm += b.comm_ms;
      exposed += b.exposed_comm_ms;
      EXPECT_LE(b.exposed_comm_ms, b.comm_ms + 1e-9);
    }
    EXPECT_LE(exposed, r.overlap.exposed_comm_ms + 1e-9) << "rank " << r.rank;
  }
}

}  // namespace
}  // namespace dpscope::analysis
