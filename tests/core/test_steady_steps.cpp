// core/steady_steps.h (Note [Steady steps]): the summary `dpscope train` prints and `dpscope
// stats` shows skips the first two iterations of three or more, and steps not recorded.
#include <gtest/gtest.h>

#include <vector>

#include "core/steady_steps.h"

namespace dpscope::core {
namespace {

TEST(SteadySteps, TheFirstTwoOfThreeOrMoreAreWarmUp) {
  EXPECT_EQ(steady_from(0), 0);
  EXPECT_EQ(steady_from(2), 0);
  EXPECT_EQ(steady_from(3), 2);
  EXPECT_EQ(steady_from(150), 2);
}

TEST(SteadySteps, MedianLeastAndLargestOfTheSteadyStepsRecorded) {
  const StepSummary odd = summarize_steps({100, 50, 4, 2, 3});
  EXPECT_EQ(odd.from_iteration, 2);
  EXPECT_EQ(odd.count, 3u);
  EXPECT_EQ(odd.median_ms, 3);
  EXPECT_EQ(odd.min_ms, 2);
  EXPECT_EQ(odd.max_ms, 4);
  const StepSummary even = summarize_steps({100, 50, 4, 2, 0, 6, 8});
  EXPECT_EQ(even.count, 4u);  // the 0 was not recorded
  EXPECT_EQ(even.median_ms, 5);
  const StepSummary short_run = summarize_steps({7, 9});
  EXPECT_EQ(short_run.from_iteration, 0);
  EXPECT_EQ(short_run.median_ms, 8);
  EXPECT_EQ(summarize_steps({}).count, 0u);
}

}  // namespace
}  // namespace dpscope::core
