// Tutorial 19 as its README runs it (tutorials/19_pytorch_profiler/run.sh): PyTorch's own DDP
// recorded by torch.profiler and imported, beside dpscope's DDP of the same shape. Every step
// both have one all-reduce per bucket, as many as PyTorch's DDP says it built, and the buckets of
// the same layers hold the same bytes.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/test_util.h"

using dpscope::testing::CommandResult;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

TEST(TutorialPytorchProfiler, BothRunsHaveOneAllReducePerBucketAndTheSameBuckets) {
  TempDir dir;
  const CommandResult run = run_command(std::string(DPSCOPE_SOURCE_DIR) + "/tutorials/19_pytorch_profiler/run.sh --bin " +
                                        DPSCOPE_BIN_DIR + " --out " + dir.file("t19"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string& out = run.output;
  // PyTorch's DDP logging data: 3 buckets after the rebuild, the head and four layers, then two
  // layers twice (of 256 x 256 + 256 floats).
  EXPECT_NE(out.find("PyTorch's DDP says it built 3 buckets after the rebuild: 1062952, 526336, 526336 bytes"),
            std::string::npos)
      << out;
  // "   1      3                            3 (1062952 + 526336 + 329728 B), 18 hooks"
  const std::regex row(R"(\n   (\d+) +(\d+) +(\d+) \((\d+) \+ (\d+) \+ (\d+) B\), (\d+) hooks)");
  int rows = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), row), end; it != end; ++it, ++rows) {
    const std::smatch& m = *it;
    EXPECT_EQ(m[2], "3") << "PyTorch's gloo:all_reduce ops in step " << m[1] << "\n" << out;
    EXPECT_EQ(m[3], "3") << "dpscope's all-reduces in step " << m[1] << "\n" << out;
    EXPECT_EQ(m[4], "1062952") << out;
    EXPECT_EQ(m[5], "526336") << out;
    // The first layer takes 64 inputs in dpscope's mlp: 256 x 256 + 256 and 64 x 256 + 256 floats.
    EXPECT_EQ(m[6], "329728") << out;
    EXPECT_EQ(m[7], "18") << "a hook per parameter (9 layers' weights and biases)\n" << out;
  }
  EXPECT_EQ(rows, 3) << out;
  // Every collective of the steps compared matched across the two ranks in both traces. PyTorch's
  // last profiled step may miss an all-reduce on one rank (the profiler stopped before Gloo's
  // thread closed it; the suite saw 1 mismatched once, in that step): only it may mismatch.
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(PyTorch's trace: [0-9]+ collectives matched on both ranks, [0-9]+ mismatched \(0 in the steps compared\))")))
      << out;
  EXPECT_NE(out.find("dpscope's trace: 16 collectives matched on both ranks, 0 mismatched"), std::string::npos) << out;
  EXPECT_NE(out.find("3 buckets (the import counts 3)"), std::string::npos) << out;
  // Each bucket, as each trace gives it: the import's without sizes (PyTorch 1.13's CPU trace has
  // none), a busbw from DDP's logged bytes; dpscope's with its bytes and a busbw.
  const std::regex bucket_row(R"(\n   ([0-9]) +\? \(DDP logged ([0-9]+)\), ([0-9.]+) +([0-9]+), ([0-9.]+)(?=\n))");
  const std::vector<std::string> ours = {"1062952", "526336", "329728"};
  int buckets = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), bucket_row); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const size_t b = size_t(std::stoi(m[1]));
    ASSERT_LT(b, ours.size()) << out;
    EXPECT_EQ(m[2], b == 0 ? "1062952" : "526336") << out;
    EXPECT_GT(std::stod(m[3]), 0) << out;
    EXPECT_EQ(m[4], ours[b]) << out;
    EXPECT_GT(std::stod(m[5]), 0) << out;
    ++buckets;
  }
  EXPECT_EQ(buckets, 3) << out;
  EXPECT_NE(out.find("--compare"), std::string::npos) << out;
}
