// ZeRO-1 through real ranks: equal to DDP (bit for bit on 2 ranks) with SGD and Adam, equal to one
// process training on every rank's batch, gradients reset to none between steps, and the errors
// of bad input — each within a time limit, so a hang fails instead of blocking the suite.
#include <gtest/gtest.h>

#include <string>

#include "tests/test_util.h"
#include "tests/worker_checks.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::expect_error_on_every_rank;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

const std::string kWorker = std::string(DPSCOPE_BIN_DIR) + "/zero_worker";

dpscope::testing::CommandResult launch(int world, const std::string& mode, const TempDir& dir) {
  return run_command("timeout 120 " + dpscope_bin() + " launch -n " + std::to_string(world) +
                     " --trace-dir " + dir.file("traces") + " -- " + kWorker + " " + mode);
}

TEST(Zero1, EqualsDdpBitForBitOnTwoRanks) {
  TempDir dir;
  const auto run = launch(2, "equal_ddp", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
}

TEST(Zero1, EqualsDdpOnThreeRanks) {
  TempDir dir;
  const auto run = launch(3, "equal_ddp", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
}

TEST(Zero1, EqualsOneProcessOnEveryBatch) {
  TempDir dir;
  const auto run = launch(3, "single", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
}

TEST(Zero1, GradientsSetToNoneStillReduced) {
  TempDir dir;
  const auto run = launch(2, "set_to_none", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
}

TEST(Zero1, FrozenParameterRefusedByName) {
  TempDir dir;
  expect_error_on_every_rank(launch(2, "frozen", dir), 2,
                             "parameter 1 (shape [37]) does not require grad; leave frozen parameters out");
}

TEST(Zero1, ClosureRefused) {
  TempDir dir;
  expect_error_on_every_rank(launch(2, "closure", dir), 2, "run them before step() on every rank");
}

}  // namespace
