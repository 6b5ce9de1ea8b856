// FSDP2's features through real ranks (fsdp2_worker): the sharded state dict's content per rank,
// clip_grad_norm across shards and explicit prefetching, each within a time limit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/test_util.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

const std::string kWorker = std::string(DPSCOPE_BIN_DIR) + "/fsdp2_worker";

dpscope::testing::CommandResult launch(int world, const std::string& mode, const TempDir& dir) {
  return run_command("timeout 120 " + dpscope_bin() + " launch -n " + std::to_string(world) +
                     " --trace-dir " + dir.file("traces") + " -- " + kWorker + " " + mode);
}

TEST(Fsdp2Worker, ShardedStateDictHoldsEachRanksRowsFourRanks) {
  TempDir dir;
  const auto run = launch(4, "sharded", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  // fc0.weight is [10, 64]: rows 0-3, 3-6, 6-9 and 9-10.
  EXPECT_NE(run.output.find("rank 3: fc0.weight rows [9, 10) of 10"), std::string::npos) << run.output;
}

TEST(Fsdp2Worker, ShardedStateDictUnevenRowsThreeRanks) {
  TempDir dir;
  const auto run = launch(3, "sharded", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 2: fc0.bias rows [8, 10) of 10"), std::string::npos) << run.output;
}

TEST(Fsdp2Worker, ShardedStateDictWithAnEmptyChunkFourRanks) {
  TempDir dir;
  const auto run = launch(4, "sharded 3", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 3: fc0.weight rows [3, 3) of 3"), std::string::npos) << run.output;
}

TEST(Fsdp2Worker, ClipGradNormAcrossShards) {
  TempDir dir;
  const auto run = launch(3, "clip", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(run.output.find("rank " + std::to_string(r) + ": norm "), std::string::npos) << run.output;
  }
}

TEST(Fsdp2Worker, ExplicitPrefetchTrainsToTheSameBits) {
  TempDir dir;
  const auto run = launch(3, "prefetch", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 2: prefetch 6 parameters equal"), std::string::npos) << run.output;
}

}  // namespace
