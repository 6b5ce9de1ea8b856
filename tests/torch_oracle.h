// The PyTorch oracle of the engine tests: the largest difference between saved state dicts
// (tests/ddp/compare_state.py), for tests that hold dpscope's training results to PyTorch's.
// python3-torch is required (scripts/setup installs it): without it these tests fail, not skip.
#pragma once

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/test_util.h"

namespace dpscope::testing {

// The largest absolute difference of each pair of state files written by --save-init/--save-final
// or torch.save (same names), in the order given, from one run of tests/ddp/compare_state.py
// (each run imports torch, about 2 s). Names or shapes that differ, a NaN or an infinity, or a
// missing python3-torch fail the test, and every value returned is then huge, so that no
// tolerance passes it.
inline std::vector<double> max_abs_diffs(
    const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::string command =
      "/usr/bin/python3 " + std::string(DPSCOPE_SOURCE_DIR) + "/tests/ddp/compare_state.py";
  for (const auto& [a, b] : pairs) command += " " + a + " " + b;
  const auto result = run_command(command);
  std::vector<double> diffs;
  const std::regex line(R"(max_abs_diff (\S+))");
  for (auto it = std::sregex_iterator(result.output.begin(), result.output.end(), line);
       it != std::sregex_iterator(); ++it) {
    diffs.push_back(std::stod((*it)[1]));
  }
  if (result.exit_code != 0 || diffs.size() != pairs.size()) {
    ADD_FAILURE() << "compare_state.py failed (without python3-torch: apt-get install "
                     "python3-torch, or run scripts/setup): "
                  << result.output;
    return std::vector<double>(pairs.size(), 1e9);
  }
  return diffs;
}

inline double max_abs_diff(const std::string& a, const std::string& b) {
  return max_abs_diffs({{a, b}})[0];
}

// The comparisons' short training: `world` ranks of `dpscope train` through `dpscope launch`, 8
// steps of batch 16 at lr 0.05 on 256 samples, one intra-op thread, with `model` (the flags both
// runs of a comparison share) and `extra` (this run's strategy and flags); traces in DIR/NAME,
// the final parameters in DIR/NAME.pt. A failed launch fails the test with its output.
inline void train_for_comparison(int world, const std::string& model, const std::string& dir,
                                 const std::string& name, const std::string& extra) {
  const std::string bin = std::string(DPSCOPE_BIN_DIR) + "/dpscope";
  const auto run = run_command(
      "timeout 300 " + bin + " launch -n " + std::to_string(world) + " --trace-dir " + dir + "/" +
      name + " -- " + bin + " train --threads 1 --progress-every 0 --steps 8 --batch-size 16" +
      " --lr 0.05 --samples 256 " + model + " " + extra + " --save-final " + dir + "/" + name + ".pt");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_NE(run.output.find("step_ms "), std::string::npos) << run.output;
}

}  // namespace dpscope::testing
