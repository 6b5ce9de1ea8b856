// test_gloo: the Gloo backend across processes. Launches gloo_worker under `dpscope launch` for
// 1 to 5 ranks: the worker checks every collective's result against a local computation; this
// test checks that every rank exited 0 and that every rank's trace holds exactly the collectives
// rank 0 says it issued, in sequence order, one after the other on the "gloo comm (world)" lane,
// and that the collectives waited for at once ran on the waiting thread (Note [Run on wait]).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "trace/reader.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
namespace trace = dpscope::trace;

namespace {

struct Expected {
  int64_t seq;
  std::string op;
  std::string dtype;
  int64_t bytes;
};

// Rank 0's "expect SEQ OP DTYPE BYTES" lines, prefixed "[0] " by the launcher.
std::vector<Expected> expected_collectives(const std::string& output) {
  std::vector<Expected> expected;
  const std::regex line(R"(\[0\] expect (\d+) (\w+) (\w+) (\d+))");
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it) {
    expected.push_back({std::stoll((*it)[1]), (*it)[2], (*it)[3], std::stoll((*it)[4])});
  }
  return expected;
}

void run_world(int world) {
  TempDir dir;
  const std::string traces = dir.file("traces");
  const auto result =
      run_command(dpscope_bin() + " launch -n " + std::to_string(world) + " --trace-dir " +
                  traces + " -- " + std::string(DPSCOPE_BIN_DIR) + "/gloo_worker");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::vector<Expected> expected = expected_collectives(result.output);
  ASSERT_GT(expected.size(), 100u) << result.output;
  for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(expected[i].seq, int64_t(i));

  trace::Reader reader(traces + "/run.sqlite");
  std::map<std::pair<int32_t, trace::LaneId>, trace::LaneInfo> lanes;
  for (const trace::LaneInfo& lane : reader.lanes()) lanes[{lane.rank, lane.lane}] = lane;
  for (int rank = 0; rank < world; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    std::vector<trace::Event> events = reader.events_of_kind(trace::EventKind::Collective, rank);
    ASSERT_EQ(events.size(), expected.size());
    std::sort(events.begin(), events.end(),
              [](const trace::Event& a, const trace::Event& b) { return a.seq < b.seq; });
    for (size_t i = 0; i < events.size(); ++i) {
      const trace::Event& e = events[i];
      SCOPED_TRACE("collective #" + std::to_string(i));
      EXPECT_EQ(e.seq, expected[i].seq);
      EXPECT_EQ(trace::to_string(static_cast<trace::CollectiveOp>(e.op)), expected[i].op);
      EXPECT_EQ(trace::to_string(static_cast<trace::DType>(e.dtype)), expected[i].dtype);
      EXPECT_EQ(e.bytes, expected[i].bytes);
      EXPECT_EQ(e.grp, 0);
      EXPECT_GE(e.begin_ns, e.enqueue_ns);
      EXPECT_GE(e.end_ns, e.begin_ns);
      if (i > 0) {
        EXPECT_GE(e.begin_ns, events[i - 1].end_ns) << "one at a time, in sequence order";
      }
      const auto lane = lanes.find({rank, e.lane});
      ASSERT_NE(lane, lanes.end());
      EXPECT_EQ(lane->second.name, "gloo comm (world)");
      EXPECT_EQ(lane->second.kind, trace::LaneKind::Comm);
    }
    EXPECT_EQ(reader.events_of_kind(trace::EventKind::CollectiveWait, rank).size(),
              expected.size())
        << "the worker waits for every collective once";
  }
}

}  // namespace

TEST(gloo, OneRank) { run_world(1); }
TEST(gloo, TwoRanks) { run_world(2); }
TEST(gloo, ThreeRanks) { run_world(3); }
TEST(gloo, FourRanks) { run_world(4); }
TEST(gloo, FiveRanks) { run_world(5); }
