// The test side of tests/rank_worker.h: what a worker launched on several ranks printed.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/test_util.h"

namespace dpscope::testing {

// Every one of `world` ranks printed "rank R: error: ..." containing `text`, and the launch failed.
inline void expect_error_on_every_rank(const CommandResult& run, int world, const std::string& text) {
  EXPECT_NE(run.exit_code, 0) << run.output;
  for (int r = 0; r < world; ++r) {
    const std::string prefix = "rank " + std::to_string(r) + ": error: ";
    const size_t at = run.output.find(prefix);
    ASSERT_NE(at, std::string::npos) << "rank " << r << " printed no error:\n" << run.output;
    EXPECT_NE(run.output.find(text, at), std::string::npos) << run.output;
  }
}

}  // namespace dpscope::testing
