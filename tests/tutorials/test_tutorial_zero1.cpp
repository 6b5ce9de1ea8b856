// Tutorial 13 (ZeRO-1) as a learner runs it, checked against what its README states: ZeRO-1
// trains as DDP does (bit for bit on 2 ranks), holds 1/n of DDP's optimizer state after the steps
// and exactly ZeRO's formula, and sends DDP's bytes; ZeRO-3 sends 1.5 times them.
#include <gtest/gtest.h>

#include <string>

#include "tests/tutorials/tutorial_checks.h"

using namespace dpscope::testing::tutorial;

namespace {

using C = trace::MemoryCategory;

int64_t after_steps(const analysis::RunStats& stats, C category) {
  return stats.ranks.at(0).memory_after_steps.bytes(category);
}

TEST(TutorialZero1, TrainsAsDdpWithAnNthOfItsOptimizerStateAndItsBytes) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-13-zero1", "--steps 3",
                                 "--link-gbps 4 --link-latency-us 50");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("largest parameter difference\n[0] on any rank 0 (bit for bit)"), std::string::npos)
      << run.output;

  const analysis::RunStats ddp = stats_of(run.trace_dir + "/ddp/run.sqlite");
  const analysis::RunStats zero1 = stats_of(run.trace_dir + "/zero1/run.sqlite");
  const analysis::RunStats zero3 = stats_of(run.trace_dir + "/full-shard/run.sqlite");
  int64_t psi = 0;
  for (const auto& p : ddp.params) psi += p.numel;
  const int64_t shard = (psi + 1) / 2;  // 2 ranks; the flat buffer is padded to 2 * shard
  ASSERT_TRUE(zero1.ranks.at(0).memory_after_steps.found());

  // ZeRO's formula for ZeRO-1 with fp32 Adam: 4p + 4p + 8p/n, plus the reduce-scatter's output.
  EXPECT_EQ(after_steps(zero1, C::Parameters), 4 * 2 * shard);
  EXPECT_EQ(after_steps(zero1, C::Gradients), 4 * 2 * shard);
  EXPECT_EQ(after_steps(zero1, C::OptimizerState), 8 * shard);
  EXPECT_EQ(after_steps(zero1, C::GradientShards), 4 * shard);
  EXPECT_EQ(after_steps(zero1, C::Buckets), 0);
  // DDP: 4p + 4p + 8p, plus its buckets.
  EXPECT_EQ(after_steps(ddp, C::Parameters), 4 * psi);
  EXPECT_EQ(after_steps(ddp, C::OptimizerState), 8 * psi);
  EXPECT_EQ(after_steps(ddp, C::Buckets), 4 * psi);
  // ZeRO-3: (4p + 4p + 8p)/n, each unit padded on its own.
  const int64_t zero3_states =
      after_steps(zero3, C::Shards) + after_steps(zero3, C::GradientShards) + after_steps(zero3, C::OptimizerState);
  EXPECT_GE(zero3_states, 16 * psi / 2);
  EXPECT_LE(zero3_states, 16 * psi / 2 + 16 * 64);
  expect_little_other(zero1);

  // One reduce-scatter and one all-gather a step, of the whole flat buffer.
  for (const analysis::RankStats& rank : zero1.ranks) {
    for (const analysis::IterationStats& it : rank.iterations) {
      EXPECT_EQ(it.collectives[static_cast<int>(trace::CollectiveOp::ReduceScatter)], 1) << "rank " << rank.rank;
      EXPECT_EQ(it.collectives[static_cast<int>(trace::CollectiveOp::AllGather)], 1) << "rank " << rank.rank;
      EXPECT_EQ(it.collectives[static_cast<int>(trace::CollectiveOp::AllReduce)], 0) << "rank " << rank.rank;
    }
  }
  // The bytes each sends on the ring, against DDP's: the README's 1.00 / 1.00 / 1.00 / 1.50.
  const size_t traffic_at = run.output.find("Communication per step");
  ASSERT_NE(traffic_at, std::string::npos) << run.output;
  const std::string traffic = run.output.substr(traffic_at);
  EXPECT_DOUBLE_EQ(last_number_on(traffic, "  ZeRO-1 "), 1.00);
  EXPECT_DOUBLE_EQ(last_number_on(traffic, "  ZeRO-2 "), 1.00);
  EXPECT_DOUBLE_EQ(last_number_on(traffic, "  ZeRO-3 "), 1.50);
}

}  // namespace
