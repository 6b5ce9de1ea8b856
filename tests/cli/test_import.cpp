// `dpscope import` end to end: the shipped PyTorch profiler traces (tests/data/kineto) into a run
// file that `dpscope stats --json` (ranks[].gpu, HTA's breakdown) and `dpscope export --chrome`
// read like any other; a bad input gets one line naming the file, exit 1 and no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_run.h"
#include "tests/test_util.h"

namespace dpscope::cli {
namespace {

using testing::CliOutcome;
using testing::run_dpscope;
using testing::TempDir;

std::string shipped(const std::string& name) {
  return "'" + std::string(DPSCOPE_SOURCE_DIR) + "/tests/data/kineto/" + name + "'";
}

// A profiler trace records no thread CPU times: the cluster clock refuses it with that reason
// first, whatever its link or device, saying where the run came from and which clock reads it.
TEST(CliImport, TheClusterClockRefusesAnImportedRunNamingWhatItCameFrom) {
  TempDir dir;
  const std::string run = dir.file("run.sqlite"), trace = dir.file("rank-0.json");
  // A CPU run in PyTorch 1.13's bare-list form.
  std::ofstream(trace) << R"([{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1,
      "ts": 10, "dur": 900, "args": {}},
    {"ph": "X", "cat": "user_annotation", "name": "DistributedDataParallel.forward", "pid": 1, "tid": 1,
      "ts": 20, "dur": 100, "args": {}},
    {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": 1, "tid": 3, "ts": 250, "dur": 300, "args": {}}])";
  ASSERT_EQ(run_dpscope(dir, "import '" + trace + "' -o '" + run + "'").exit_code, 0);
  const CliOutcome stats = run_dpscope(dir, "stats --clock cluster --link-gbps 4 --link-latency-us 50 '" + run + "'");
  EXPECT_NE(stats.exit_code, 0);
  EXPECT_NE(stats.err.find("recorded no thread CPU times (imported from PyTorch profiler"), std::string::npos) << stats.err;
  EXPECT_NE(stats.err.find("read this one on the measured clock"), std::string::npos) << stats.err;
  // A GPU run without an emulated link: still the missing CPU times first, not the link.
  const std::string gpu_run = dir.file("gpu.sqlite");
  ASSERT_EQ(run_dpscope(dir, "import " + shipped("nccl_data.json.gz") + " -o '" + gpu_run + "'").exit_code, 0);
  const CliOutcome gpu = run_dpscope(dir, "stats --clock cluster '" + gpu_run + "'");
  EXPECT_NE(gpu.err.find("recorded no thread CPU times (imported from PyTorch profiler"), std::string::npos) << gpu.err;
  EXPECT_EQ(gpu.err.find("emulated link"), std::string::npos) << gpu.err;
  // whatif names the same reason, not a trace level to record at.
  const CliOutcome whatif = run_dpscope(dir, "whatif '" + gpu_run + "'");
  EXPECT_NE(whatif.exit_code, 0);
  EXPECT_NE(whatif.err.find("a profiler trace records neither DDP's gradient hooks"), std::string::npos) << whatif.err;
  EXPECT_EQ(whatif.err.find("--trace-level"), std::string::npos) << whatif.err;
}

// `dpscope stats` reads one profiler file as the viewer opens one: imported into a temporary run
// file, the report naming the file given; its ranks' alignment is said (one rank: none).
TEST(CliImport, StatsReadsAProfilerFileDirectly) {
  TempDir dir;
  const CliOutcome text = run_dpscope(dir, "stats " + shipped("nccl_data.json.gz"));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.rfind(std::string(DPSCOPE_SOURCE_DIR) + "/tests/data/kineto/nccl_data.json.gz\n", 0), 0u)
      << text.out.substr(0, 200);
  EXPECT_NE(text.out.find("GPU (HTA's breakdown"), std::string::npos) << text.out;
  const CliOutcome json = run_dpscope(dir, "stats --json " + shipped("nccl_data.json.gz"));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out)["run"]["alignment"], "none");
}

TEST(CliImport, SampledRanksImportAndGiveTheGpuBreakdownInStatsJson) {
  TempDir dir;
  const std::string run = dir.file("run.sqlite");
  const CliOutcome imported = run_dpscope(dir, "import " + shipped("sampled_rank-0.json.gz") + " " +
                                            shipped("sampled_rank-1.json.gz") + " -o '" + run + "'");
  ASSERT_EQ(imported.exit_code, 0) << imported.out << imported.err;
  EXPECT_NE(imported.out.find("import: 2 ranks,"), std::string::npos) << imported.out;
  EXPECT_TRUE(imported.err.empty()) << imported.err;
  const CliOutcome stats = run_dpscope(dir, "stats --json '" + run + "'");
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const auto json = nlohmann::json::parse(stats.out);
  ASSERT_EQ(json["ranks"].size(), 2u);
  const auto& gpu = json["ranks"][0]["gpu"];
  for (const char* key : {"kernel_span_ms", "idle_pct", "compute_pct", "non_compute_pct", "comm_overlap_pct"}) {
    EXPECT_TRUE(gpu.contains(key)) << key;
  }
  EXPECT_NEAR(gpu["comm_overlap_pct"].get<double>(), 11.81, 0.05);
  EXPECT_NEAR(json["ranks"][1]["gpu"]["idle_pct"].get<double>(), 54.72, 0.05);
  const CliOutcome text = run_dpscope(dir, "stats '" + run + "'");
  EXPECT_NE(text.out.find("GPU (HTA's breakdown"), std::string::npos) << text.out;
  const CliOutcome exported = run_dpscope(dir, "export --chrome '" + dir.file("run.json") + "' '" + run + "'");
  EXPECT_EQ(exported.exit_code, 0) << exported.err;
}

TEST(CliImport, ATraceWithoutCommunicationKernelsSaysSoInsteadOfNaN) {
  TempDir dir;
  const std::string trace = dir.file("one.json");
  std::ofstream(trace) << "{\"distributedInfo\": {\"rank\": 0, \"world_size\": 1}, \"traceEvents\": ["
                          "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"pid\": 0, \"tid\": 7, "
                          "\"ts\": 10, \"dur\": 5, \"args\": {\"stream\": 7, \"device\": 0}}]}";
  ASSERT_EQ(run_dpscope(dir, "import '" + trace + "' -o '" + dir.file("run.sqlite") + "'").exit_code, 0);
  const CliOutcome stats = run_dpscope(dir, "stats --json '" + dir.file("run.sqlite") + "'");
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(stats.out.find("NaN"), std::string::npos);
  EXPECT_EQ(stats.out.find("nan"), std::string::npos);
  const auto gpu = nlohmann::json::parse(stats.out)["ranks"][0]["gpu"];
  EXPECT_TRUE(gpu["comm_overlap_pct"].is_null());
  EXPECT_EQ(gpu["comm_note"], "no communication kernels");
  const CliOutcome text = run_dpscope(dir, "stats '" + dir.file("run.sqlite") + "'");
  EXPECT_NE(text.out.find("no communication kernels"), std::string::npos) << text.out;
}

TEST(CliImport, BadInputIsOneLineAndNoOutputFile) {
  TempDir dir;
  const std::string bad = dir.file("bad.json");
  std::ofstream(bad) << "{\"traceEvents\": [{\"ph\": \"X\",";
  const CliOutcome outcome = run_dpscope(dir, "import '" + bad + "' -o '" + dir.file("run.sqlite") + "'");
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_TRUE(outcome.out.empty()) << outcome.out;
  EXPECT_EQ(outcome.err.rfind("dpscope: " + bad + ": at byte ", 0), 0u) << outcome.err;
  EXPECT_EQ(std::count(outcome.err.begin(), outcome.err.end(), '\n'), 1) << outcome.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("run.sqlite")));
}

// --align collective-ends asked for by name on files that cannot give it (one rank; two that
// share only send/recv) is one line and exit 1, and no run file; the default aligns by none.
TEST(CliImport, AlignByNameOnFilesThatCannotGiveItIsRefused) {
  TempDir dir;
  const std::string run = dir.file("run.sqlite");
  for (const std::string& files : {shipped("nccl_data.json.gz"),
                                   shipped("sampled_rank-0.json.gz") + " " + shipped("sampled_rank-1.json.gz")}) {
    const CliOutcome refused = run_dpscope(dir, "import --align collective-ends " + files + " -o '" + run + "'");
    EXPECT_EQ(refused.exit_code, 1) << refused.err;
    EXPECT_NE(refused.err.find("--align collective-ends needs two or more ranks that share a blocking collective"),
              std::string::npos)
        << refused.err;
    EXPECT_NE(refused.err.find("--align none"), std::string::npos) << refused.err;
    EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
    EXPECT_FALSE(std::filesystem::exists(run));
    const CliOutcome plain = run_dpscope(dir, "import " + files + " -o '" + run + "'");
    EXPECT_EQ(plain.exit_code, 0) << plain.err;
    std::filesystem::remove(run);
  }
}

TEST(CliImport, MissingDistributedInfoWarnsOnStderr) {
  TempDir dir;
  const std::string trace = dir.file("cpu.json");
  std::ofstream(trace) << "[{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"gloo:all_reduce\", \"pid\": 1, "
                          "\"tid\": 1, \"ts\": 10, \"dur\": 5}]";
  const CliOutcome outcome = run_dpscope(dir, "import '" + trace + "' --rank 2 -o '" + dir.file("run.sqlite") + "'");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_NE(outcome.err.find("dpscope: warning: " + trace + ": no distributedInfo.rank; imported as rank 2"),
            std::string::npos)
      << outcome.err;
}

}  // namespace
}  // namespace dpscope::cli
