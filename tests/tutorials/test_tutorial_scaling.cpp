// Tutorial 09 (scaling): runs it on 1, 2 and 4 ranks on its README's emulated link, as the README's
// loop does, and checks what it claims: the global batch's three factors, the all-reduce growing
// with the rank count as the ring model says, and the cluster estimate's efficiency falling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/link_model.h"
#include "tests/tutorials/tutorial_checks.h"

using namespace dpscope::testing::tutorial;
using dpscope::testing::TempDir;

namespace {

constexpr double kLinkGbps = 0.2;
constexpr double kLinkLatencyUs = 50;

// The numbers of the line of the table under `title` whose first number after the launcher's "[0]"
// is `ranks`.
std::vector<double> table_row(const std::string& output, const std::string& title, int ranks) {
  const size_t table = output.rfind(title);
  std::istringstream lines(table == std::string::npos ? "" : output.substr(table));
  std::string line;
  while (std::getline(lines, line)) {
    const std::vector<double> numbers = numbers_on(line, "");
    if (numbers.size() > 5 && numbers[1] == ranks) return numbers;
  }
  ADD_FAILURE() << "no row for " << ranks << " ranks under '" << title << "' in\n" << output;
  return std::vector<double>(12, 0.0);
}

// The all-reduce once every rank arrived, per step: the longest rank's transfer, median over the
// steady steps (what the tutorial prints as "link ms").
double link_ms_of(const analysis::RunStats& stats) {
  std::vector<double> by_step;
  for (int32_t it = dpscope::core::steady_from(size_t(stats.iterations)); it < stats.iterations; ++it) {
    double longest = 0;
    for (const auto& rank : stats.ranks) longest = std::max(longest, rank.iterations.at(size_t(it)).transfer_ms);
    by_step.push_back(longest);
  }
  std::sort(by_step.begin(), by_step.end());
  const size_t n = by_step.size();
  return n % 2 ? by_step[n / 2] : (by_step[n / 2 - 1] + by_step[n / 2]) / 2;
}

TEST(TutorialScaling, GlobalBatchRingModelAndEfficiency) {
  TempDir dir;
  char link[96];
  std::snprintf(link, sizeof(link), "--link-gbps %g --link-latency-us %g", kLinkGbps, kLinkLatencyUs);
  const std::vector<int> rank_counts = {1, 2, 4};
  std::map<int, std::string> output;
  std::map<int, analysis::RunStats> stats;
  for (const int n : rank_counts) {
    const TutorialRun run = launch(dir, "tutorial-09-scaling", "--steps 6 --accumulate 2", link, n,
                                   "ranks-" + std::to_string(n));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    output[n] = run.output;
    stats[n] = stats_of(run.trace_dir + "/run.sqlite");
  }

  // global batch = micro-batch x accumulation steps x ranks, the global batch fixed (strong scaling).
  for (const int n : rank_counts) {
    const std::vector<double> factors = numbers_on(output[n], "] global batch ");
    ASSERT_EQ(factors.size(), 5u) << output[n];  // [0], global, micro, accumulation, ranks
    EXPECT_EQ(factors[1], 8192);
    EXPECT_EQ(factors[2], 8192 / (2 * n));
    EXPECT_EQ(factors[3], 2);
    EXPECT_EQ(factors[4], n);
    EXPECT_EQ(factors[1], factors[2] * factors[3] * factors[4]);
  }

  // The ring model, exactly: one all-reduce of the gradients per step, 2(n-1)/n S/B + 2(n-1) L.
  const std::string& all_rows = output[4];
  const int64_t gradient_bytes = all_reduce_bytes(stats[4].ranks.at(0), 3);
  const dpscope::core::LinkSpec spec{kLinkGbps, kLinkLatencyUs};
  std::map<int, double> model_ms, link_ms;
  for (const int n : {2, 4}) {
    const auto& rank0 = stats[n].ranks.at(0);
    EXPECT_EQ(all_reduces(rank0, 3), 1) << "one bucket, one all-reduce per step, " << n << " ranks";
    EXPECT_EQ(all_reduce_bytes(rank0, 3), gradient_bytes);
    const double s_over_b_ms = double(gradient_bytes) * 8 / (kLinkGbps * 1e9) * 1e3;
    model_ms[n] = 2.0 * (n - 1) / n * s_over_b_ms + 2.0 * (n - 1) * kLinkLatencyUs / 1e3;
    EXPECT_NEAR(double(dpscope::core::link_model_ns(trace::CollectiveOp::AllReduce, gradient_bytes, n, spec)) / 1e6,
                model_ms[n], 1e-4);
    const std::vector<double> row = table_row(all_rows, "On a cluster", n);
    EXPECT_NEAR(row[9], model_ms[n], 0.051) << "the printed ring model, " << n << " ranks\n" << all_rows;
    // The trace on the cluster clock (stats_of): the last rank's all-reduce lasts the model's
    // time. Measured idle and beside two busy loops: 48.3 and 72.6 ms, the model's to the
    // printed 0.1 ms, on 2 and 4 ranks; 1 % is three times that resolution on 48 ms.
    link_ms[n] = link_ms_of(stats[n]);
    EXPECT_NEAR(link_ms[n], model_ms[n], 0.01 * model_ms[n]) << n << " ranks";
    EXPECT_NEAR(table_row(all_rows, "On a cluster", n)[3], link_ms[n], 0.051) << all_rows;
  }
  EXPECT_NEAR(link_ms[4] / link_ms[2], model_ms[4] / model_ms[2], 0.02);

  // Compute: each rank's CPU time falls with its share of the batch (a quarter on 4 ranks), even
  // where 4 ranks share fewer cores. Less than half: a step's fixed costs (hooks, the Gloo
  // threads' bookkeeping) do not shrink with the batch, and weigh more under the sanitizers (0.42
  // of one rank's there in one CI-like run).
  const std::vector<double> here_1 = table_row(all_rows, "Measured here", 1);
  const std::vector<double> here_4 = table_row(all_rows, "Measured here", 4);
  EXPECT_LT(here_4[9], 0.5 * here_1[9]) << all_rows;

  // The cluster estimate: efficiency falls with the ranks, clearly.
  const double efficiency_2 = table_row(all_rows, "On a cluster", 2)[7];
  const double efficiency_4 = table_row(all_rows, "On a cluster", 4)[7];
  EXPECT_EQ(table_row(all_rows, "On a cluster", 1)[7], 100);
  EXPECT_LT(efficiency_4, efficiency_2 - 10) << all_rows;
  EXPECT_LT(efficiency_4, 60) << all_rows;
  const double crossing = last_number_on(all_rows, "Compute C1/n falls below it at n =");
  EXPECT_GT(crossing, 2);
  EXPECT_LT(crossing, 8);
}

}  // namespace
