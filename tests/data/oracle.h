// The PyTorch oracle for tests/data: runs oracle.py under /usr/bin/python3 (the interpreter that
// has torch 1.13) with a batch of queries, one JSON answer per query.
#pragma once

#include <gtest/gtest.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <cstring>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace dpscope::testing {

// A float tensor's values as their bit patterns, for comparisons with the oracle's that must be
// exact to the bit.
inline std::vector<uint32_t> float_bits(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  std::vector<uint32_t> bits(static_cast<size_t>(c.numel()));
  std::memcpy(bits.data(), c.data_ptr<float>(), bits.size() * sizeof(float));
  return bits;
}

inline constexpr const char* kOraclePython = "/usr/bin/python3";

// Why the oracle cannot run here, or "" when it can.
inline const std::string& oracle_unavailable() {
  static const std::string reason = [] {
    CommandResult r = run_command(std::string(kOraclePython) + " -c 'import torch'");
    if (r.exit_code == 0) return std::string();
    return std::string(kOraclePython) + " cannot import torch (install python3-torch); the PyTorch "
           "comparison is skipped. Output: " + r.output.substr(0, 300);
  }();
  return reason;
}

#define SKIP_WITHOUT_ORACLE()                                              \
  do {                                                                     \
    if (!::dpscope::testing::oracle_unavailable().empty()) {               \
      GTEST_SKIP() << ::dpscope::testing::oracle_unavailable();            \
    }                                                                      \
  } while (0)

// Answers to `queries` (each "kind arg arg ...", see oracle.py), in order. Fails the test (and
// returns fewer answers) when Python fails.
inline std::vector<nlohmann::json> ask_oracle(const std::vector<std::string>& queries) {
  TempDir dir;
  const std::string input = dir.file("queries.txt");
  {
    std::ofstream out(input);
    for (const auto& q : queries) out << q << '\n';
  }
  CommandResult r = run_command(std::string(kOraclePython) + " " + DPSCOPE_SOURCE_DIR +
                                "/tests/data/oracle.py < " + input);
  std::vector<nlohmann::json> answers;
  if (r.exit_code != 0) {
    ADD_FAILURE() << "oracle.py failed (exit " << r.exit_code << "):\n" << r.output;
    return answers;
  }
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] == '{') answers.push_back(nlohmann::json::parse(line));
  }
  if (answers.size() != queries.size()) {
    ADD_FAILURE() << "oracle.py answered " << answers.size() << " of " << queries.size()
                  << " queries:\n" << r.output.substr(0, 2000);
  }
  return answers;
}

}  // namespace dpscope::testing
