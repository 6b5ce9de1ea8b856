// The tests' own comparison helpers, which every check against PyTorch and between strategies
// relies on: a NaN or an infinity must fail a comparison, in Python (compare_state.py, through
// tests/torch_oracle.h) and in C++ (tests/tensor_diff.h), instead of counting as no difference.
#include <gtest/gtest.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tests/tensor_diff.h"
#include "tests/test_util.h"
#include "tests/torch_oracle.h"

using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

const std::string kCompare = std::string(DPSCOPE_SOURCE_DIR) + "/tests/ddp/compare_state.py";

// Writes state files, one a name, each {"w": values, "step": an integer tensor} with torch.save.
void save_states(const TempDir& dir, const std::vector<std::pair<std::string, std::string>>& states) {
  std::string script = "import torch\n";
  for (const auto& [name, values] : states) {
    script += "torch.save({'w': torch.tensor(" + values + "), 'step': torch.tensor(3)}, '" +
              dir.file(name) + "')\n";
  }
  std::ofstream(dir.file("save.py")) << script;
  const auto saved = run_command("/usr/bin/python3 " + dir.file("save.py"));
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
}

TEST(Comparisons, PythonReportsEachPairsLargestDifference) {
  TempDir dir;
  save_states(dir, {{"a.pt", "[1.0, 2.0, 3.0]"}, {"b.pt", "[1.0, 2.5, 3.0]"},
                    {"c.pt", "[1.0, 2.0, 2.75]"}});
  const std::vector<double> diffs = dpscope::testing::max_abs_diffs(
      {{dir.file("a.pt"), dir.file("b.pt")}, {dir.file("a.pt"), dir.file("c.pt")},
       {dir.file("a.pt"), dir.file("a.pt")}});
  EXPECT_EQ(diffs, (std::vector<double>{0.5, 0.25, 0.0}));
}

TEST(Comparisons, PythonFailsOnNanInfinityAndShapes) {
  TempDir dir;
  save_states(dir, {{"ok.pt", "[1.0, 2.0]"}, {"nan.pt", "[1.0, float('nan')]"},
                    {"inf.pt", "[float('-inf'), 2.0]"}, {"long.pt", "[1.0, 2.0, 3.0]"}});
  struct Case {
    std::string other, says;
  };
  for (const Case& c : {Case{"nan.pt", "non-finite values in w of " + dir.file("nan.pt")},
                        Case{"inf.pt", "non-finite values in w of " + dir.file("inf.pt")},
                        Case{"long.pt", "w: shape [2] in"}}) {
    // The bad pair second: an earlier good pair must not hide it.
    const auto result = run_command("/usr/bin/python3 " + kCompare + " " + dir.file("ok.pt") +
                                    " " + dir.file("ok.pt") + " " + dir.file("ok.pt") + " " +
                                    dir.file(c.other));
    EXPECT_EQ(result.exit_code, 1) << c.other << ": " << result.output;
    EXPECT_NE(result.output.find(c.says), std::string::npos) << result.output;
  }
}

TEST(Comparisons, CppCountsNanAndInfinityAsInfinite) {
  using dpscope::testing::max_abs_diff;
  const double inf = std::numeric_limits<double>::infinity();
  const at::Tensor ok = at::tensor({1.0f, 2.0f, 3.0f});
  EXPECT_EQ(max_abs_diff(ok, at::tensor({1.0f, 2.5f, 3.0f})), 0.5);
  EXPECT_EQ(max_abs_diff(ok, ok), 0.0);
  EXPECT_EQ(max_abs_diff(ok, at::tensor({1.0f, std::nanf(""), 3.0f})), inf);
  EXPECT_EQ(max_abs_diff(at::tensor({std::nanf(""), 2.0f, 3.0f}), ok), inf);
  EXPECT_EQ(max_abs_diff(ok, at::tensor({1.0f, 2.0f, -inf})), inf);
  // The same infinity on both sides is no agreement: inf - inf is NaN.
  const at::Tensor infinite = at::tensor({1.0f, static_cast<float>(inf), 3.0f});
  EXPECT_EQ(max_abs_diff(infinite, infinite), inf);
  EXPECT_EQ(max_abs_diff(at::empty({0}), at::empty({0})), 0.0);
  EXPECT_THROW(max_abs_diff(ok, at::tensor({1.0f, 2.0f})), c10::Error);
}

}  // namespace
