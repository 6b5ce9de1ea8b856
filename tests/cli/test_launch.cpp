// dpscope launch: torchrun's environment (and the emulated link's) for every rank, output
// prefixed by rank, a failing or killed rank stopping the others with a message naming it,
// Ctrl-C passed on to the ranks (which flush their traces), and the ranks' trace files merged.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>

#include "tests/test_util.h"
#include "trace/reader.h"

using dpscope::testing::CommandResult;
using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

const std::string kChild = std::string(DPSCOPE_BIN_DIR) + "/crash_child";

CommandResult launch(const TempDir& dir, const std::string& args) {
  return run_command(dpscope_bin() + " launch --trace-dir " + dir.file("traces") + " " + args);
}

}  // namespace

TEST(launch, GivesEveryRankTorchrunsEnvironment) {
  TempDir dir;
  auto result = launch(dir, "-n 4 -- sh -c 'echo env $RANK $LOCAL_RANK $WORLD_SIZE "
                            "$LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT'");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::regex line(R"(\[(\d)\] env (\d) (\d) 4 4 127\.0\.0\.1 (\d+))");
  std::set<int> ranks;
  std::set<std::string> ports;
  for (std::sregex_iterator it(result.output.begin(), result.output.end(), line), end; it != end;
       ++it) {
    const int prefix = std::stoi((*it)[1]);
    EXPECT_EQ(std::stoi((*it)[2]), prefix) << "the prefix names the rank";
    EXPECT_EQ(std::stoi((*it)[3]), prefix) << "one node: LOCAL_RANK == RANK";
    ranks.insert(prefix);
    ports.insert((*it)[4]);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3})) << result.output;
  EXPECT_EQ(ports.size(), 1u) << "every rank meets at one port";
}

TEST(launch, SecondNodeOfTwoGetsTheUpperRanks) {
  TempDir dir;
  auto result = launch(dir, "-n 2 --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 "
                            "--master-port 29501 -- sh -c 'echo env $RANK $LOCAL_RANK "
                            "$WORLD_SIZE $MASTER_ADDR:$MASTER_PORT'");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("[2] env 2 0 4 10.0.0.1:29501"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("[3] env 3 1 4 10.0.0.1:29501"), std::string::npos)
      << result.output;
}

TEST(launch, SeveralNodesNeedAMasterPort) {
  TempDir dir;
  auto result = launch(dir, "-n 2 --nnodes 2 --node-rank 0 -- true");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("--master-port"), std::string::npos) << result.output;
}

// --link-gbps and --link-latency-us reach every rank as DPSCOPE_LINK_GBPS and
// DPSCOPE_LINK_LATENCY_US (Note [Link emulation]); bad values start no rank.
TEST(launch, PassesTheLinkToEveryRank) {
  TempDir dir;
  auto result = launch(dir, "-n 2 --link-gbps 4 --link-latency-us 50 -- sh -c "
                            "'echo link $DPSCOPE_LINK_GBPS $DPSCOPE_LINK_LATENCY_US'");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("[0] link 4 50"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("[1] link 4 50"), std::string::npos) << result.output;
  result = launch(dir, "-n 2 --link-gbps 0 --link-latency-us 50 -- sh -c 'echo started'");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output.find("started"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("dpscope: launch: --link-gbps 0 is out of range"),
            std::string::npos)
      << result.output;
}

TEST(launch, AFailingRankStopsTheOthers) {
  TempDir dir;
  // The others would sleep far past the test's timeout if they were not stopped.
  auto result = launch(dir, "-n 3 -- sh -c 'if [ $RANK = 1 ]; then exit 3; fi; sleep 1000'");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("rank 1 (pid"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("exited with status 3"), std::string::npos) << result.output;
}

TEST(launch, AKilledRankIsNamedWithItsSignal) {
  TempDir dir;
  auto result = launch(dir, "-n 3 -- sh -c 'if [ $RANK = 2 ]; then kill -9 $$; fi; sleep 1000'");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("rank 2"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("killed by signal 9 (SIGKILL)"), std::string::npos)
      << result.output;
}

TEST(launch, AMissingProgramIsNamed) {
  TempDir dir;
  auto result = launch(dir, "-n 2 -- /no/such/program");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("cannot start /no/such/program"), std::string::npos)
      << result.output;
}

TEST(launch, MergesTheRankTracesAtTheEnd) {
  TempDir dir;
  auto result = launch(dir, "-n 3 -- " + kChild + " complete -");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string run = dir.file("traces") + "/run.sqlite";
  ASSERT_TRUE(std::filesystem::exists(run)) << result.output;
  dpscope::trace::Reader reader(run);
  ASSERT_EQ(reader.ranks().size(), 3u);
  EXPECT_EQ(reader.event_count(), 300);
  for (const auto& rank : reader.ranks()) EXPECT_EQ(rank.status, "complete");
}

// Ctrl-C on the launcher reaches every rank; each flushes its trace, and the merged file says
// the run was interrupted.
TEST(launch, InterruptReachesTheRanksAndTheirTracesSurvive) {
  TempDir dir;
  const std::string out = dir.file("out.txt");
  const std::string traces = dir.file("traces");
  const std::string bin = dpscope_bin();
  const pid_t launcher = ::fork();
  if (launcher == 0) {
    FILE* sink = std::fopen(out.c_str(), "w");
    ::dup2(fileno(sink), STDOUT_FILENO);
    ::dup2(fileno(sink), STDERR_FILENO);
    ::execl(bin.c_str(), bin.c_str(), "launch", "-n", "2", "--trace-dir", traces.c_str(), "--",
            kChild.c_str(), "stream", "-", nullptr);
    ::_exit(127);
  }
  // Wait until each rank has committed something, then Ctrl-C the launcher.
  for (int tries = 0; tries < 1200; ++tries) {
    auto zero = run_command("grep -c '^\\[0\\] committed' " + out);
    auto one = run_command("grep -c '^\\[1\\] committed' " + out);
    if (std::atoi(zero.output.c_str()) >= 2 && std::atoi(one.output.c_str()) >= 2) break;
    ::usleep(50000);
  }
  ::kill(launcher, SIGINT);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT);

  const std::string run = traces + "/run.sqlite";
  ASSERT_TRUE(std::filesystem::exists(run)) << run_command("cat " + out).output;
  dpscope::trace::Reader reader(run);
  ASSERT_EQ(reader.ranks().size(), 2u);
  for (const auto& rank : reader.ranks()) {
    EXPECT_EQ(rank.status, "interrupted (SIGINT)");
    EXPECT_GE(rank.events, 1000);
  }
}
