// The file you name is the file you get (Note [Trace files of a run]): `dpscope train --trace
// t.sqlite` on several ranks leaves the merged run at t.sqlite and the rank files beside it;
// `--trace DIR` leaves DIR/run.sqlite; one rank writes the named file itself; ranks on several
// hosts keep their rank files and rank 0 prints the one command that merges them.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/test_util.h"
#include "trace/reader.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::free_port;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

const std::string kTrain = " train --model mlp --hidden 16 --layers 1 --steps 2 --threads 1 --progress-every 0";

size_t ranks_in(const std::string& path) {
  dpscope::trace::Reader reader(path);
  return reader.ranks().size();
}

TEST(TraceFiles, ANamedSqliteFileIsTheMergedRun) {
  TempDir dir;
  const std::string trace = dir.file("t.sqlite");
  const auto run = run_command("timeout 120 " + dpscope_bin() + " launch -n 3 --trace-dir " + dir.file("launcher") + " -- " + dpscope_bin() +
                               kTrain + " --trace " + trace);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(std::filesystem::exists(trace)) << run.output;
  EXPECT_EQ(ranks_in(trace), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(std::filesystem::exists(dir.file("t.rank" + std::to_string(r) + ".sqlite"))) << r;
  }
  EXPECT_NE(run.output.find("[0] trace " + trace + " (merged from 3 rank files"), std::string::npos)
      << run.output;
  EXPECT_EQ(run_command(dpscope_bin() + " stats " + trace).exit_code, 0);
}

TEST(TraceFiles, ADirectoryGetsRunSqlite) {
  TempDir dir;
  const std::string traces = dir.file("traces");
  const auto run = run_command("timeout 120 " + dpscope_bin() + " launch -n 2 --trace-dir " + dir.file("launcher") + " -- " + dpscope_bin() +
                               kTrain + " --trace " + traces);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(std::filesystem::exists(traces + "/run.sqlite")) << run.output;
  EXPECT_EQ(ranks_in(traces + "/run.sqlite"), 2u);
  EXPECT_TRUE(std::filesystem::exists(traces + "/rank1.sqlite"));
}

TEST(TraceFiles, OneRankWritesTheNamedFileItself) {
  TempDir dir;
  const std::string trace = dir.file("single.sqlite");
  const auto run = run_command("cd " + dir.path().string() + " && timeout 120 " + dpscope_bin() +
                               kTrain + " --trace " + trace);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(ranks_in(trace), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir.file("single.rank0.sqlite")));
}

// Two "hosts" (two launchers of one rank each, as torchrun on two nodes starts them): rank 0
// cannot see rank 1's file, so it says where the rank files are and how to merge them.
TEST(TraceFiles, RanksOnSeveralHostsAreToldHowToMerge) {
  TempDir dir;
  const std::string trace = dir.file("two-hosts.sqlite");
  const std::string node = dpscope_bin() + " launch --trace-dir " + dir.file("launcher") + " -n 1 --nnodes 2 --master-addr 127.0.0.1 --master-port " +
                           std::to_string(free_port());
  const auto run = run_command("(timeout 120 " + node + " --node-rank 1 -- " + dpscope_bin() + kTrain +
                               " --trace " + trace + " > " + dir.file("node1.log") + " 2>&1 &) ; timeout 120 " +
                               node + " --node-rank 0 -- " + dpscope_bin() + kTrain + " --trace " + trace);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("dpscope merge " + trace + " " + dir.file("two-hosts.rank0.sqlite") + " " +
                            dir.file("two-hosts.rank1.sqlite")),
            std::string::npos)
      << run.output;
  EXPECT_FALSE(std::filesystem::exists(trace));
}

}  // namespace
