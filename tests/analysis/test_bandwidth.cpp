// Bandwidth of every collective (analysis/bandwidth.h, Note [Bus bandwidth]): nccl-tests' algbw
// and busbw of each op from the bytes the trace counts, and on an emulated link, replayed on the
// cluster clock, a large all-reduce's busbw is the link's bandwidth less its latency term; the
// ring's wire bytes of the ops only imported traces carry (analysis/group_traffic.h).
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>

#include "analysis/bandwidth.h"
#include "analysis/cluster_clock.h"
#include "analysis/group_traffic.h"
#include "analysis/stats.h"
#include "formats/synth.h"
#include "tests/test_util.h"
#include "trace/reader.h"

namespace dpscope::analysis {
namespace {

using trace::CollectiveOp;

TEST(Bandwidth, EachOpAsNcclTestsCountsIt) {
  // 1 GB in 1 s among 4 ranks: algbw 8 Gb/s.
  const int64_t gb = 1'000'000'000, second = 1'000'000'000;
  const std::optional<Bandwidth> all_reduce = bandwidth_of(CollectiveOp::AllReduce, gb, 4, second);
  ASSERT_TRUE(all_reduce);
  EXPECT_DOUBLE_EQ(all_reduce->algbw_gbps, 8);
  EXPECT_DOUBLE_EQ(all_reduce->busbw_gbps, 8 * 2.0 * 3 / 4);
  // The trace counts one rank's all-gather input: the output nccl-tests divides is 4 of them.
  const auto all_gather = bandwidth_of(CollectiveOp::AllGather, gb / 4, 4, second);
  EXPECT_DOUBLE_EQ(all_gather->algbw_gbps, 8);
  EXPECT_DOUBLE_EQ(all_gather->busbw_gbps, 6);
  EXPECT_DOUBLE_EQ(bandwidth_of(CollectiveOp::ReduceScatter, gb, 4, second)->busbw_gbps, 6);
  EXPECT_DOUBLE_EQ(bandwidth_of(CollectiveOp::AllToAll, gb, 4, second)->busbw_gbps, 6);
  EXPECT_DOUBLE_EQ(bandwidth_of(CollectiveOp::Broadcast, gb, 4, second)->busbw_gbps, 8);
  EXPECT_DOUBLE_EQ(bandwidth_of(CollectiveOp::SendRecv, gb, 2, second)->busbw_gbps, 8);
}

// S = 4000 bytes over 4 ranks: an all-to-all sends each peer its quarter and keeps its own, 3000
// bytes; a send/recv sends the whole. (The ops dpscope's engine issues: HsdpTrace.RingWireBytes.)
TEST(RingWireBytes, AnAllToAllSendsAllButItsOwnShareAndASendItsWhole) {
  EXPECT_EQ(ring_wire_bytes(CollectiveOp::AllToAll, 4000, 4), 3000);
  EXPECT_EQ(ring_wire_bytes(CollectiveOp::AllToAll, 4000, 2), 2000);
  EXPECT_EQ(ring_wire_bytes(CollectiveOp::SendRecv, 4000, 2), 4000);
  EXPECT_EQ(ring_wire_bytes(CollectiveOp::AllToAll, 4000, 1), 0);
}

TEST(Bandwidth, NoneWithoutBytesTimeOrPeers) {
  EXPECT_FALSE(bandwidth_of(CollectiveOp::Barrier, 0, 4, 1000));
  EXPECT_FALSE(bandwidth_of(CollectiveOp::AllReduce, trace::kNone64, 4, 1000));
  EXPECT_FALSE(bandwidth_of(CollectiveOp::AllReduce, 1024, 1, 1000));
  EXPECT_FALSE(bandwidth_of(CollectiveOp::AllReduce, 1024, 4, 0));
  EXPECT_FALSE(bandwidth_of(CollectiveOp::AllReduce, 1024, 4, trace::kNone64));
}

// A synthetic DDP run on a 4 Gb/s, 50 µs link, on the cluster clock: each all-reduce's time is the
// ring model's 2(n-1)(L + S/(nB)), so its busbw is 8 S / (n L + 8 S / G) Gb/s: the link's G less
// the latency term, within 1 % for the largest.
TEST(Bandwidth, OnTheClusterClockALargeAllReduceRunsAtTheLinksBandwidthLessItsLatency) {
  testing::TempDir dir;
  formats::SynthOptions options;
  options.events = 20000;
  options.ranks = 4;
  options.out = dir.file("synth.sqlite");
  formats::synthesize(options);
  trace::Reader reader(options.out);
  const ClusterClockRun cluster = cluster_clock(reader, options.out, std::nullopt);
  const RunStats stats = compute_stats(reader, cluster);
  const CollectiveStats* largest = nullptr;
  for (const CollectiveStats& c : stats.ranks[0].collectives) {
    if (c.op == CollectiveOp::AllReduce && c.transfer_ns > 0 && (!largest || c.bytes > largest->bytes)) largest = &c;
  }
  ASSERT_NE(largest, nullptr);
  ASSERT_GE(largest->bytes, int64_t{1} << 20);
  EXPECT_EQ(largest->group_ranks, 4);
  const std::optional<Bandwidth> bw = bandwidth_of(largest->op, largest->bytes, largest->group_ranks, largest->transfer_ns);
  ASSERT_TRUE(bw);
  const double n = 4, s = static_cast<double>(largest->bytes), latency_ns = options.link_latency_us * 1e3;
  const double expected = 8 * s / (n * latency_ns + 8 * s / options.link_gbps);
  EXPECT_NEAR(bw->busbw_gbps, expected, expected * 0.01) << "bytes " << largest->bytes;
  EXPECT_LT(bw->busbw_gbps, options.link_gbps);
  ASSERT_FALSE(stats.groups.empty());
  ASSERT_TRUE(stats.groups[0].median_busbw_gbps);
  EXPECT_NEAR(*stats.groups[0].median_busbw_gbps, options.link_gbps, options.link_gbps * 0.05);
}

}  // namespace
}  // namespace dpscope::analysis
