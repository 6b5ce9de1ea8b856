// The PyTorch oracle of the engine tests: whether Debian's python3-torch is there, and the largest
// difference between two saved state dicts (tests/ddp/compare_state.py), for tests that hold
// dpscope's training results to PyTorch's.
#pragma once

#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/test_util.h"

namespace dpscope::testing {

// True when /usr/bin/python3 imports torch.distributed (apt-get install python3-torch).
inline bool have_python_torch() {
  static const bool have =
      run_command("/usr/bin/python3 -c 'import torch.distributed'").exit_code == 0;
  return have;
}

// The largest absolute difference of two state files written by --save-init/--save-final or
// torch.save (same names); a failure of the script fails the test and returns a huge value.
inline double max_abs_diff(const std::string& a, const std::string& b) {
  const auto result = run_command("/usr/bin/python3 " + std::string(DPSCOPE_SOURCE_DIR) +
                                  "/tests/ddp/compare_state.py " + a + " " + b);
  std::smatch match;
  if (result.exit_code != 0 ||
      !std::regex_search(result.output, match, std::regex(R"(max_abs_diff (\S+))"))) {
    ADD_FAILURE() << "compare_state.py failed: " << result.output;
    return 1e9;
  }
  return std::stod(match[1]);
}

}  // namespace dpscope::testing
