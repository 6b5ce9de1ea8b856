// `dpscope stats --json` on the demo's own traces, against the JSON the same command printed
// before trace/ was split into trace/, analysis/ and formats/ (tests/cli/data, recorded by
// `dpscope demo` at 8ca2b69). A refactoring must leave every number and every byte as it was;
// a change meant to alter the report updates the .json.gz files in the same commit and says why.
// Updated three times since: the top-level "clock" and each collective's "begin_ms" and "ms" (issue
// 30, `dpscope stats --clock`), checked to leave every other key and value as it was; and the
// top-level "groups" (issue 32, HSDP: each process group's traffic), every other key and value
// checked equal to the previous file's; and the clock's "compute" (null on the measured clock;
// Note [Steady compute]), every other key and value checked equal; and the run's "alignment"
// ("rendezvous") with each rank's "clock_offset_ms" (issue 47, ranks on one clock for imported
// traces), and each collective's "transfer_ms", "algbw_gbps" and "busbw_gbps" with each group's
// "busbw_gbps_median" (issue 47, Note [Bus bandwidth]), every other key and value checked equal;
// and each rank's "overlap_compute", each bucket's "bytes" and each iteration's "alltoall" and
// "send_recv" counts (issue 47, part 2 and 6), every other key and value checked equal; and the
// run's "memory_accounting" ("tracking": the demo's runs are on the CPU; issue 50), every other
// key and value checked equal; and the top-level "hang" (null: the demo's runs completed; issue
// 49, docs/hangs.md), every other byte checked equal.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tests/test_util.h"

namespace {

using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

std::string data_file(const std::string& name) {
  return std::string(DPSCOPE_SOURCE_DIR) + "/tests/cli/data/" + name;
}

// The first line (1-based) where `a` and `b` differ, with both lines, for a readable failure.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream left(a), right(b);
  std::string l, r;
  for (int line = 1;; ++line) {
    const bool more_left = static_cast<bool>(std::getline(left, l));
    const bool more_right = static_cast<bool>(std::getline(right, r));
    if (!more_left && !more_right) return "no difference";
    if (l != r || more_left != more_right) {
      size_t column = 0;
      while (column < l.size() && column < r.size() && l[column] == r[column]) ++column;
      const size_t from = column > 80 ? column - 80 : 0;
      return "line " + std::to_string(line) + ", column " + std::to_string(column + 1) +
             ":\n  now:    ..." + l.substr(from, 200) + "\n  before: ..." + r.substr(from, 200);
    }
  }
}

class StatsGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(StatsGolden, TheDemosTraceGivesTheSameJsonAsBefore) {
  const std::string run = GetParam();
  TempDir dir;
  const std::string trace = dir.file(run + ".sqlite");
  const auto unpacked = run_command("gzip -dc " + data_file("demo-" + run + ".sqlite.gz") + " > " + trace);
  ASSERT_EQ(unpacked.exit_code, 0) << unpacked.output;
  const auto before = run_command("gzip -dc " + data_file("demo-" + run + "-stats.json.gz"));
  ASSERT_EQ(before.exit_code, 0) << before.output;
  ASSERT_GT(before.output.size(), 1000u);

  const auto now = run_command(dpscope_bin() + " stats --json " + trace);
  ASSERT_EQ(now.exit_code, 0) << now.output;
  EXPECT_EQ(now.output.size(), before.output.size());
  EXPECT_TRUE(now.output == before.output) << first_difference(now.output, before.output);
}

INSTANTIATE_TEST_SUITE_P(DemoRuns, StatsGolden, ::testing::Values("ddp", "fsdp"));

}  // namespace
