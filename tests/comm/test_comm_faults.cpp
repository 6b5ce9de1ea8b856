// Faults between real ranks over Gloo, through the launcher: the check mode stops a run whose
// ranks issue different collectives, naming them; a stalled rank makes the others time out with
// a message naming it. Neither hangs.
#include <gtest/gtest.h>

#include "tests/test_util.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

const std::string kWorker = std::string(DPSCOPE_BIN_DIR) + "/faults_worker";

}  // namespace

TEST(commFaults, CheckModeStopsMismatchedCollectivesNamingTheRanks) {
  TempDir dir;
  auto result = run_command("DPSCOPE_CHECK_COLLECTIVES=1 " + dpscope_bin() +
                            " launch -n 3 --trace-dir " + dir.file("t") + " -- " + kWorker +
                            " mismatch");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("collective #1 differs across ranks"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("ranks 0,2 issued allreduce of 16 bytes float32"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("rank 1 issued allreduce of 8 bytes float32"), std::string::npos)
      << result.output;
}

TEST(commFaults, AStalledRankIsNamedWhenTheOthersTimeOut) {
  TempDir dir;
  auto result = run_command(dpscope_bin() + " launch -n 3 --trace-dir " + dir.file("t") +
                            " -- " + kWorker + " stall");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("allreduce #1 on group 'world' timed out after 8 s"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("ranks not heard from: rank 1 (last issued #0)"),
            std::string::npos)
      << result.output;
}
