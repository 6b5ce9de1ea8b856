// Load: 8 ranks on this machine's few cores, 200 steps each with full tracing. Nothing may
// grow with the steps: each rank's resident size (the per-step `resident_mb` metric) at step
// 200 is within a small margin of step 50's, no event is dropped, and the trace is whole.
#include <gtest/gtest.h>

#include <map>

#include "tests/reliability/reliability_util.h"

using namespace dpscope::testing;

namespace {

// The writer's SQLite page cache (512 KiB at most, trace/writer.cpp) may still be filling at
// step 50; past that nothing may grow. With SQLite's former 64 MiB cache, resident size grew
// with the trace file: about 0.35 MiB every 400 steps, for as long as the run went on.
constexpr double kMaxGrowthMiB = 0.5;

}  // namespace

TEST(reliability, EightRanksTwoHundredStepsStayFlat) {
  TempDir dir;
  const std::string traces = dir.file("t");
  const CommandResult result = launch("", 8, traces, train_command("ddp", 200));
  ASSERT_EQ(result.exit_code, 0) << result.output;

  dpscope::trace::Reader reader(traces + "/run.sqlite");
  const auto ranks = reader.ranks();
  ASSERT_EQ(ranks.size(), 8u);
  for (const auto& rank : ranks) {
    EXPECT_EQ(rank.status, "complete") << "rank " << rank.rank;
    EXPECT_EQ(rank.dropped_events, 0) << "rank " << rank.rank;
  }
  std::map<int, std::map<int, double>> resident;  // rank -> iteration -> MiB
  for (const auto& metric : reader.metrics()) {
    if (metric.name == "resident_mb") {
      resident[metric.rank][metric.iteration] = metric.value;
    }
  }
  ASSERT_EQ(resident.size(), 8u) << "every rank records resident_mb each step";
  for (const auto& [rank, by_step] : resident) {
    ASSERT_TRUE(by_step.count(49) && by_step.count(199)) << "rank " << rank;
    const double growth = by_step.at(199) - by_step.at(49);
    EXPECT_LT(growth, kMaxGrowthMiB) << "rank " << rank << ": resident size grew from "
                                     << by_step.at(49) << " MiB at step 50 to "
                                     << by_step.at(199) << " MiB at step 200";
  }
}
