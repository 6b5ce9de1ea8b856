// A rank of a real `dpscope train` job killed (DPSCOPE_FAULT, Note [Fault points]) during
// construction, backward, an FSDP all-gather and the optimizer step, and the store's host
// dying under ranks started by hand: the others stop with an error naming what failed, nobody
// hangs, and every trace file left behind reads, saying how its rank ended.
#include <gtest/gtest.h>

#include <chrono>
#include <ostream>
#include <stdexcept>

#include "engine/fault/fault_injection.h"
#include "tests/reliability/reliability_util.h"

using namespace dpscope::testing;

namespace {

struct KillCase {
  const char* name;
  const char* fault;     // DPSCOPE_FAULT
  const char* strategy;  // ddp | fsdp
  const char* extra;     // more train flags
  int killed_rank;
};

void PrintTo(const KillCase& c, std::ostream* out) { *out << c.fault << " " << c.strategy; }

class RankKilled : public ::testing::TestWithParam<KillCase> {};

}  // namespace

TEST_P(RankKilled, OthersStopClearlyAndEveryTraceReads) {
  const KillCase& c = GetParam();
  TempDir dir;
  const std::string traces = dir.file("t");
  const auto started = std::chrono::steady_clock::now();
  const CommandResult result = launch(std::string("DPSCOPE_FAULT=") + c.fault, 2, traces,
                                      train_command(c.strategy, 30, c.extra));
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::steady_clock::now() - started)
                           .count();
  const int survivor = 1 - c.killed_rank;
  const std::string killed = std::to_string(c.killed_rank);

  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "DPSCOPE_FAULT: rank " + killed + " at")) << result.output;
  EXPECT_TRUE(contains(result.output, "failed: rank " + killed + " (pid ")) << result.output;
  EXPECT_TRUE(contains(result.output, "was killed by signal 9 (SIGKILL)")) << result.output;
  EXPECT_LT(seconds, 60) << "the survivor waited for a timeout instead of failing";

  const auto files = read_all_traces(traces);
  EXPECT_EQ(files.size(), 3u) << "rank0, rank1 and the merged run.sqlite";
  EXPECT_EQ(rank_status(traces, c.killed_rank), "process was killed by signal 9 (SIGKILL)");
  // The survivor either saw the broken connection first (its own error) or was stopped by the
  // launcher; either way its file was closed and says so.
  const std::string status = rank_status(traces, survivor);
  EXPECT_TRUE(status.rfind("failed: ", 0) == 0 || status == "terminated (SIGTERM)") << status;
  if (status.rfind("failed: ", 0) == 0) {
    EXPECT_TRUE(contains(status, "A peer rank probably exited")) << status;
  }
  dpscope::trace::Reader merged(traces + "/run.sqlite");
  EXPECT_EQ(merged.ranks().size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(
    reliability, RankKilled,
    ::testing::Values(
        KillCase{"DuringDdpConstruction", "construction@1", "ddp", "", 1},
        KillCase{"DuringDdpBackward", "backward#7@1", "ddp", "", 1},
        KillCase{"DuringFsdpAllGather", "allgather#9@1", "fsdp", "--wrap-min-params 1000", 1},
        KillCase{"StoreHostDuringOptimizerStep", "optimizer_step#3@0", "fsdp", "", 0}),
    [](const ::testing::TestParamInfo<KillCase>& info) { return std::string(info.param.name); });

namespace {

// Two ranks started by hand (no launcher stops the survivor); rank 0, which serves the
// rendezvous store, is killed at its third optimizer step. Returns rank 1's output.
std::string run_without_launcher(const TempDir& dir, const std::string& environment,
                                 const std::string& strategy) {
  const std::string rank_command = "timeout 120 " + train_command(strategy, 30);
  const std::string script =
      "export MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) +
      " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 DPSCOPE_TRACE_DIR=" + dir.file("t") +
      " DPSCOPE_FAULT=optimizer_step#3@0 " + environment + "; " +
      "(RANK=1 LOCAL_RANK=1 " + rank_command + " > " + dir.file("rank1.txt") +
      " 2>&1; echo $? > " + dir.file("rank1.rc") + ") & " +
      "RANK=0 LOCAL_RANK=0 " + rank_command + " > " + dir.file("rank0.txt") + " 2>&1; wait";
  run_command("sh -c '" + script + "'");
  return read_text(dir.file("rank1.txt"));
}

}  // namespace

TEST(reliability, StoreHostDyingFailsTheOtherRankInsideACollective) {
  TempDir dir;
  const std::string out = run_without_launcher(dir, "", "ddp");
  EXPECT_EQ(read_text(dir.file("rank1.rc")), "1\n") << out;  // not 124: no hang
  EXPECT_TRUE(contains(out, "on gloo group 'world', rank 1 failed")) << out;
  EXPECT_TRUE(contains(out, "A peer rank probably exited")) << out;
  read_all_traces(dir.file("t"));
  EXPECT_EQ(rank_status(dir.file("t"), 0), "running");  // killed: nobody closed it
  EXPECT_TRUE(contains(rank_status(dir.file("t"), 1), "failed: ")) << rank_status(dir.file("t"), 1);
}

// With DPSCOPE_CHECK_COLLECTIVES every collective first goes through the store itself.
TEST(reliability, StoreHostDyingIsNamedInCheckMode) {
  TempDir dir;
  const std::string out = run_without_launcher(dir, "DPSCOPE_CHECK_COLLECTIVES=1", "fsdp");
  EXPECT_EQ(read_text(dir.file("rank1.rc")), "1\n") << out;
  EXPECT_TRUE(contains(out, "the store that DPSCOPE_CHECK_COLLECTIVES compares through is "
                            "unreachable"))
      << out;
  EXPECT_TRUE(contains(out, "served by rank 0's process, which probably ended")) << out;
  read_all_traces(dir.file("t"));
}

TEST(reliability, FaultSpecParsing) {
  using dpscope::fault::FaultAction;
  using dpscope::fault::parse_fault_spec;
  const auto spec = parse_fault_spec("allgather#3@1");
  EXPECT_EQ(spec.point, "allgather");
  EXPECT_EQ(spec.occurrence, 3);
  EXPECT_EQ(spec.rank, 1);
  EXPECT_EQ(spec.action, FaultAction::Kill);
  const auto interrupt = parse_fault_spec("optimizer_step@0:interrupt");
  EXPECT_EQ(interrupt.occurrence, 1);
  EXPECT_EQ(interrupt.action, FaultAction::Interrupt);
  for (const char* bad : {"allgather", "allgather@x", "allgather#0@1", "nowhere@1",
                          "backward@1:explode", "backward#-2@1", "@1"}) {
    EXPECT_THROW(parse_fault_spec(bad), std::invalid_argument) << bad;
  }
  try {
    parse_fault_spec("nowhere@1");
  } catch (const std::invalid_argument& error) {
    EXPECT_TRUE(contains(error.what(), "the points are construction, backward")) << error.what();
  }
}

TEST(reliability, ABadFaultSpecStopsTrainingWithTheFix) {
  TempDir dir;
  const CommandResult result =
      run_command("DPSCOPE_FAULT=allgather@one " + train_command("ddp", 2) + " --trace " +
                  dir.file("t.sqlite"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "DPSCOPE_FAULT='allgather@one': rank 'one'")) << result.output;
}
