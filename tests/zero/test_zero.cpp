// ZeRO-1 through real ranks: equal to DDP (bit for bit on 2 ranks) with SGD and Adam, equal to one
// process training on every rank's batch, gradients reset to none between steps, every rank
// started from rank 0's model, and the errors of bad input — each within a time limit, so a hang
// fails instead of blocking the suite.
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

// The run succeeded, and every rank printed `verdict` (after checking that training moved the
// parameters and that the results agree): an exit status alone would pass a worker that
// compared nothing.
void expect_every_rank_says(int world, const std::string& mode, const std::string& verdict) {
  TempDir dir;
  const auto run = launch(world, mode, dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  for (int r = 0; r < world; ++r) {
    const std::string line = "rank " + std::to_string(r) + ": " + verdict;
    EXPECT_NE(run.output.find(line), std::string::npos) << "no '" << line << "' in:\n" << run.output;
  }
}

TEST(Zero1, EqualsDdpBitForBitOnTwoRanks) { expect_every_rank_says(2, "equal_ddp", "zero-1 equals ddp"); }

TEST(Zero1, EqualsDdpOnThreeRanks) { expect_every_rank_says(3, "equal_ddp", "zero-1 equals ddp"); }

TEST(Zero1, EqualsOneProcessOnEveryBatch) {
  expect_every_rank_says(3, "single", "zero-1 equals one process");
}

TEST(Zero1, GradientsSetToNoneStillReduced) {
  expect_every_rank_says(2, "set_to_none", "set_to_none ok");
}

TEST(Zero1, EveryRankStartsFromRankZerosModel) {
  expect_every_rank_says(3, "rank0_start", "starts from rank 0's model");
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
