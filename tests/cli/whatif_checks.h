// What the what-if tests ask of a prediction for the recorded settings: how far it is from the
// recorded run, step by step; and `dpscope whatif --json` run and parsed.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace dpscope::testing {

// The median over the steady iterations of |predicted - measured| / measured step time, from
// `whatif --json`'s "iterations". Per step and by median: a step whose recorded collectives
// overlapped (the replay runs one at a time) or that a busy machine slowed is one outlier, where
// a median or a sum of step times would move with it. -1 without iterations.
inline double median_step_error(const nlohmann::json& prediction) {
  std::vector<double> errors;
  for (const auto& it : prediction["iterations"]) {
    const double measured = it["measured_step_ms"].get<double>();
    if (measured > 0) errors.push_back(std::abs(it["predicted_step_ms"].get<double>() - measured) / measured);
  }
  if (errors.empty()) return -1;
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  return n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
}

// `dpscope whatif --json ARGS`, expected to succeed; its output parsed (discarded JSON when it is
// not JSON, which the caller's checks then fail on).
inline nlohmann::json whatif_json(const std::string& args) {
  const auto run = run_command(dpscope_bin() + " whatif --json " + args);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return nlohmann::json::parse(run.output, nullptr, false);
}

}  // namespace dpscope::testing
