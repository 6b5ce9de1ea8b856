// The trace's disk filling up (a small tmpfs in a private mount namespace; a file-size limit)
// and Ctrl-C at any moment of a real `dpscope train` job: training goes on with tracing
// stopped and a warning, or stops with a clear error, and every trace file left reads.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "tests/reliability/reliability_util.h"

using namespace dpscope::testing;

namespace {

// Runs `commands` (a shell script) with a tmpfs of `size` mounted at `mount` in a private
// mount namespace, then copies what it left to `copy_to`; the mount vanishes with the
// namespace. False when this machine cannot make one (no CAP_SYS_ADMIN, no user namespaces).
bool run_on_small_tmpfs(const TempDir& dir, const std::string& size, const std::string& commands,
                        CommandResult* result) {
  if (run_command("unshare -m -r true || unshare -m true").exit_code != 0) return false;
  const std::string mount = dir.file("mnt");
  const std::string script = "mkdir -p " + mount + " " + dir.file("copy") +
                             " && mount -t tmpfs -o size=" + size + " dpscope-test " + mount +
                             " && { " + commands + "; echo \"exit=$?\"; cp -a " + mount +
                             "/. " + dir.file("copy") + "; }";
  const std::string unshare =
      run_command("unshare -m true").exit_code == 0 ? "unshare -m" : "unshare -m -r";
  *result = run_command(unshare + " sh -c '" + script + "'");
  return true;
}

}  // namespace

TEST(reliability, DiskFullMidRunStopsTracingAndTrainingGoesOn) {
  TempDir dir;
  CommandResult result;
  const std::string command = dpscope_bin() + " launch -n 2 --trace-dir " + dir.file("mnt/t") +
                              " -- " + train_command("ddp", 2000);
  if (!run_on_small_tmpfs(dir, "8m", command, &result)) GTEST_SKIP() << "no mount namespace";
  EXPECT_TRUE(contains(result.output, "exit=0")) << result.output;
  EXPECT_TRUE(contains(result.output, "tracing stopped on rank 0")) << result.output;
  EXPECT_TRUE(contains(result.output, "the disk is full")) << result.output;
  EXPECT_TRUE(contains(result.output, "step_ms")) << "training did not finish: " << result.output;
  for (const TraceFile& file : read_all_traces(dir.file("copy/t"))) {
    EXPECT_GT(file.events, 0) << file.path << ": the events committed before the disk filled";
  }
}

TEST(reliability, DiskFullAtStartStopsWithTheFixAndLeavesNoDamagedFile) {
  TempDir dir;
  CommandResult result;
  const std::string command = dpscope_bin() + " launch -n 2 --trace-dir " + dir.file("mnt/t") +
                              " -- " + train_command("ddp", 5);
  if (!run_on_small_tmpfs(dir, "1m", command, &result)) GTEST_SKIP() << "no mount namespace";
  EXPECT_TRUE(contains(result.output, "exit=1")) << result.output;
  EXPECT_TRUE(contains(result.output, "the disk is full")) << result.output;
  EXPECT_TRUE(contains(result.output, "free space or write the trace elsewhere")) << result.output;
  read_all_traces(dir.file("copy/t"));  // whatever is there reads; a schema-less file would not
}

// ulimit -f: past the limit the default SIGXFSZ would kill the rank mid-write; dpscope ignores
// it, so the write fails, tracing stops with a warning and the job finishes.
TEST(reliability, FileSizeLimitStopsTracingNotTheJob) {
  TempDir dir;
  const CommandResult result =
      run_command("sh -c 'ulimit -f 8192; " + dpscope_bin() + " launch -n 2 --trace-dir " +
                  dir.file("t") + " -- " + train_command("ddp", 1000) + "'");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "tracing stopped on rank")) << result.output;
  EXPECT_FALSE(contains(result.output, "SIGXFSZ")) << result.output;
  const auto files = read_all_traces(dir.file("t"));
  EXPECT_EQ(files.size(), 3u) << "rank0, rank1 and run.sqlite";
  for (const TraceFile& file : files) EXPECT_GT(file.events, 0) << file.path;
}

namespace {

// Ctrl-C sent by rank 1 itself to the launcher when it reaches a fault point: the launcher
// passes it on to every rank, which closes its trace as "interrupted (SIGINT)".
struct InterruptCase {
  const char* name;
  const char* fault;
  const char* strategy;
  const char* extra;
};

void PrintTo(const InterruptCase& c, std::ostream* out) { *out << c.fault << " " << c.strategy; }

class InterruptedAt : public ::testing::TestWithParam<InterruptCase> {};

}  // namespace

TEST_P(InterruptedAt, EveryRankClosesItsTrace) {
  const InterruptCase& c = GetParam();
  TempDir dir;
  const CommandResult result = launch(std::string("DPSCOPE_FAULT=") + c.fault, 2, dir.file("t"),
                                      train_command(c.strategy, 400, c.extra));
  EXPECT_EQ(result.exit_code, 130) << result.output;
  EXPECT_TRUE(contains(result.output, "interrupted (signal 2); every rank stopped")) << result.output;
  const auto files = read_all_traces(dir.file("t"));
  EXPECT_EQ(files.size(), 3u) << result.output;
  for (int rank : {0, 1}) EXPECT_EQ(rank_status(dir.file("t"), rank), "interrupted (SIGINT)");
}

INSTANTIATE_TEST_SUITE_P(
    reliability, InterruptedAt,
    ::testing::Values(
        InterruptCase{"Construction", "construction@1:interrupt", "ddp", ""},
        InterruptCase{"DdpBackward", "backward#20@1:interrupt", "ddp", ""},
        InterruptCase{"FsdpAllGather", "allgather#30@1:interrupt", "fsdp", "--wrap-min-params 1000"},
        InterruptCase{"FsdpReduceScatter", "reduce_scatter#12@1:interrupt", "fsdp", "--wrap-min-params 1000"},
        InterruptCase{"OptimizerStep", "optimizer_step#40@1:interrupt", "fsdp", ""}),
    [](const ::testing::TestParamInfo<InterruptCase>& info) { return std::string(info.param.name); });

// Ctrl-C from outside at moments spread over a run, from just after the ranks created their
// files to past the end: whatever the moment, every file in the trace directory reads.
TEST(reliability, CtrlCAtAnyMomentLeavesReadableTraces) {
  for (const char* delay : {"0", "0.05", "0.2", "0.5", "0.9", "1.4", "2.5"}) {
    TempDir dir;
    const std::string traces = dir.file("t");
    const std::string script =
        dpscope_bin() + " launch -n 2 --trace-dir " + traces + " -- " +
        train_command("fsdp", 600, "--wrap-min-params 1000") + " > " + dir.file("out.txt") +
        " 2>&1 & pid=$!; while [ ! -e " + traces + "/rank1.sqlite ] && kill -0 $pid; do " +
        "sleep 0.01; done; sleep " + delay + "; kill -INT $pid; wait $pid; echo exit=$?";
    const CommandResult result = run_command("sh -c '" + script + "'");
    SCOPED_TRACE(std::string("Ctrl-C ") + delay + " s after the rank files appeared: " +
                 result.output + read_text(dir.file("out.txt")));
    EXPECT_TRUE(contains(result.output, "exit=130") || contains(result.output, "exit=0"));
    read_all_traces(traces);
    // A rank still starting up (before its recorder exists) dies of the signal with no file.
    for (int rank : {0, 1}) {
      const std::string status = rank_status(traces, rank);
      EXPECT_TRUE(status == "interrupted (SIGINT)" || status == "complete" || status.empty())
          << "rank " << rank << ": " << status;
    }
  }
}
