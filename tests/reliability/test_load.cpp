// Load: 8 ranks on this machine's few cores, 200 steps each with full tracing. Nothing may
// grow with the steps: the ranks' resident size (the per-step `resident_mb` metric) at step
// 200 is within a small margin of step 50's, no event is dropped, and the trace is whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "tests/reliability/reliability_util.h"

using namespace dpscope::testing;

namespace {

// What may still fill after step 50, each bounded: the writer's SQLite page cache (512 KiB at
// most, trace/writer.cpp), the recorder's event queue at its high-water mark (deeper when the
// writer thread gets less CPU) and glibc's arenas, which grow resident size in steps of about
// 0.25 MiB. Measured on 2 idle cores: +0.12 to 0.37 MiB from step 50 to 200, then nothing to
// step 400. Under CI's load one rank of eight grew 0.59 MiB.
//
// A leak in the engine or the recorder grows every rank alike, so the median rank is held to
// the tight bound, and each rank to the loose one that scheduling cannot explain: a leak of
// 3.5 KiB a step or more fails the test (checked by leaking 4 KiB a step in the trainer). With
// SQLite's former 64 MiB cache resident size grew with the trace file, for as long as the run
// went on.
constexpr double kMaxMedianGrowthMiB = 0.5;
constexpr double kMaxRankGrowthMiB = 1.5;

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
  std::vector<double> growths;
  std::string report;
  for (const auto& [rank, by_step] : resident) {
    ASSERT_TRUE(by_step.count(49) && by_step.count(199)) << "rank " << rank;
    const double growth = by_step.at(199) - by_step.at(49);
    growths.push_back(growth);
    report += "rank " + std::to_string(rank) + ": " + std::to_string(by_step.at(49)) +
              " MiB at step 50, " + std::to_string(by_step.at(199)) + " MiB at step 200\n";
    EXPECT_LT(growth, kMaxRankGrowthMiB) << "rank " << rank << " alone grew:\n" << report;
  }
  std::sort(growths.begin(), growths.end());
  const double median = (growths[3] + growths[4]) / 2;
  EXPECT_LT(median, kMaxMedianGrowthMiB) << "every rank grows alike, as with a leak:\n"
                                         << report;
}
