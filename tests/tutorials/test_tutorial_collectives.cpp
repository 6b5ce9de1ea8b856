// test_tutorial_collectives: tutorial 01's claims. Every rank's numbers after broadcast,
// all-reduce, reduce-scatter and all-gather are the hand-computed ones (2 and 3 ranks); the trace
// counts each collective's bytes; an all-reduce and a reduce-scatter + all-gather agree bit for
// bit on 2 ranks, and on 3 but for the floats at their chunk boundaries; the ring bytes follow 2(n-1)/n S and (n-1)/n S exactly; and on an emulated
// link the fitted latency and bandwidth are the ring model of the link, on 2 and 3 ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tutorials/tutorial_checks.h"

using namespace dpscope::testing::tutorial;
using dpscope::testing::TempDir;

namespace {

constexpr const char* kTutorial = "tutorial-01-collectives";
constexpr int64_t kChunk = 2;  // the tutorial's default --chunk

std::vector<double> numbers_in(const std::string& text) {
  std::vector<double> numbers;
  std::istringstream in(text);
  for (double v; in >> v;) numbers.push_back(v);
  return numbers;
}

// Part 1 by hand: rank r starts with r*10 + i, i < n * chunk; one (before, after) pair per rank
// for each collective, in the order printed.
std::vector<std::pair<std::vector<double>, std::vector<double>>> by_hand(int n) {
  const int64_t m = n * kChunk;
  auto start = [&](int r, int64_t count) {
    std::vector<double> v;
    for (int64_t i = 0; i < count; ++i) v.push_back(r * 10.0 + double(i));
    return v;
  };
  std::vector<double> sum(size_t(m), 0.0), first_chunks;
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < m; ++i) sum[size_t(i)] += r * 10.0 + double(i);
    for (const double v : start(r, kChunk)) first_chunks.push_back(v);
  }
  std::vector<std::pair<std::vector<double>, std::vector<double>>> rows;
  for (int r = 0; r < n; ++r) rows.push_back({start(r, m), start(0, m)});  // broadcast from 0
  for (int r = 0; r < n; ++r) rows.push_back({start(r, m), sum});           // all-reduce
  for (int r = 0; r < n; ++r) {                                               // reduce-scatter
    rows.push_back({start(r, m), std::vector<double>(sum.begin() + r * kChunk, sum.begin() + (r + 1) * kChunk)});
  }
  for (int r = 0; r < n; ++r) rows.push_back({start(r, kChunk), first_chunks});  // all-gather
  return rows;
}

void expect_part_1_by_hand(const std::string& output, int n) {
  const std::regex row(R"(rank (\d+)\s+\[([^\]]*)\]\s+->\s+\[([^\]]*)\])");
  const auto expected = by_hand(n);
  size_t i = 0;
  for (std::sregex_iterator it(output.begin(), output.end(), row), end; it != end; ++it, ++i) {
    ASSERT_LT(i, expected.size()) << output;
    EXPECT_EQ(std::stoi((*it)[1]), int(i % size_t(n))) << "row " << i;
    EXPECT_EQ(numbers_in((*it)[2]), expected[i].first) << "row " << i << " before";
    EXPECT_EQ(numbers_in((*it)[3]), expected[i].second) << "row " << i << " after";
  }
  EXPECT_EQ(i, expected.size()) << output;
}

// The ring lines of part 3 for S bytes on n ranks: 2(n-1)/n S for the all-reduce, (n-1)/n S for
// each half, to the byte.
void expect_ring_bytes(const std::string& output, int n, int64_t s) {
  EXPECT_EQ(last_number_on(output, "ring all-reduce"), std::llround(2.0 * (n - 1) / n * double(s)));
  EXPECT_EQ(last_number_on(output, "ring reduce-scatter"), std::llround(double(n - 1) / n * double(s)));
  EXPECT_EQ(last_number_on(output, "ring all-gather"), std::llround(double(n - 1) / n * double(s)));
}

// Rank `rank`'s collectives of the primer's `iteration`, as (op, bytes) in issue order.
std::vector<std::pair<trace::CollectiveOp, int64_t>> issued(const analysis::RunStats& stats, int rank, int32_t iteration) {
  std::vector<std::pair<trace::CollectiveOp, int64_t>> found;
  for (const auto& c : stats.ranks.at(size_t(rank)).collectives) {
    if (c.iteration == iteration) found.emplace_back(c.op, c.bytes);
  }
  return found;
}

// The fitted latency (us) and bandwidth (Gb/s) that part 4 printed, within 0.5 % of the link's
// ring model: the fit goes through each size's fastest all-reduce, which the emulated link holds
// to its model's time and a busy machine does not stretch when the real transfer is far shorter.
// Measured on 2 and 3 ranks, idle and beside two busy loops and a build: 1000.0 us and 2.00 Gb/s,
// 2000.0-2000.2 us and 1.50 Gb/s (0.01 %); 0.5 % is the printed bandwidth's resolution.
void expect_fit(const std::string& output, double alpha_us, double gbps) {
  std::smatch m;
  ASSERT_TRUE(std::regex_search(output, m, std::regex(R"(latency \(alpha\)\s+([0-9.]+) us)"))) << output;
  EXPECT_NEAR(std::stod(m[1]), alpha_us, 0.005 * alpha_us) << output;
  ASSERT_TRUE(std::regex_search(output, m, std::regex(R"(bandwidth \(1/beta\)\s+([0-9.]+) Gb/s)"))) << output;
  EXPECT_NEAR(std::stod(m[1]), gbps, 0.005 * gbps) << output;
}

using Op = trace::CollectiveOp;

// On the link its README runs it on (2 Gb/s, 500 us: above this machine's own small all-reduce).
TEST(TutorialCollectives, TwoRanksByHandBitForBitRingBytesAndTheLinksAlphaBeta) {
  TempDir dir;
  const int64_t steps = 9;
  const TutorialRun run =
      launch(dir, kTutorial, "--steps " + std::to_string(steps), "--link-gbps 2 --link-latency-us 500", 2);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  expect_part_1_by_hand(run.output, 2);
  EXPECT_NE(run.output.find("identical: yes, all 262144 floats bit for bit on every rank"), std::string::npos)
      << run.output;
  expect_ring_bytes(run.output, 2, 1 << 20);

  // The trace counts what a rank hands each collective: the whole tensor, an all-gather's share.
  const analysis::RunStats primer = stats_of(run.trace_dir + "/primer/run.sqlite");
  EXPECT_EQ(primer.link_gbps, 2);
  EXPECT_EQ(primer.link_latency_us, 500);
  for (int rank = 0; rank < 2; ++rank) {
    const std::vector<std::pair<Op, int64_t>> four = {
        {Op::Broadcast, 16}, {Op::AllReduce, 16}, {Op::ReduceScatter, 16}, {Op::AllGather, 8}};
    EXPECT_EQ(issued(primer, rank, 0), four) << "rank " << rank;
    const std::vector<std::pair<Op, int64_t>> two_ways = {
        {Op::AllReduce, 1 << 20}, {Op::ReduceScatter, 1 << 20}, {Op::AllGather, 1 << 19}};
    EXPECT_EQ(issued(primer, rank, 1), two_ways) << "rank " << rank;
  }

  // The sweep: one all-reduce of each size, 4 B to 4 MiB by x4, per round.
  const analysis::RunStats sweep = stats_of(run.trace_dir + "/sweep/run.sqlite");
  ASSERT_EQ(sweep.iterations, steps);
  for (const auto& rank : sweep.ranks) {
    for (int32_t round = 0; round < steps; ++round) EXPECT_EQ(all_reduces(rank, round), 11) << "round " << round;
  }
  // The ring model of a 2 Gb/s, 500 us link on 2 ranks: alpha = 2(n-1) L = 1000 us and
  // 1/beta = n / (2(n-1)) B = 2 Gb/s.
  expect_fit(run.output, 1000.0, 2.0);
  EXPECT_NE(run.output.find("2.00 Gb/s, equal at 244.1 KiB"), std::string::npos) << run.output;
}

// On 3 ranks: the same hand-computed numbers, the ring bytes of 3 ranks, each collective's
// bytes in the trace, and the ring model of 3 ranks fitted on the same link.
TEST(TutorialCollectives, ThreeRanksByHandRingBytesAndTheLinksAlphaBeta) {
  TempDir dir;
  const TutorialRun run = launch(dir, kTutorial, "--steps 7", "--link-gbps 2 --link-latency-us 500", 3);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  expect_part_1_by_hand(run.output, 3);
  // The reduce-scatter's ring adds in the order of Gloo's all-reduce ring: only the floats where
  // their chunk boundaries differ (87381 against Gloo's 87382 per chunk) can come out different
  // (Note [Gloo reduce-scatter]); a reduce-scatter in another order differs in tens of thousands.
  std::smatch differ;
  if (run.output.find("identical: yes") == std::string::npos) {
    ASSERT_TRUE(std::regex_search(run.output, differ, std::regex(R"(identical: no, (\d+) of)")))
        << run.output;
    EXPECT_LE(std::stoi(differ[1]), 3) << run.output;
  }
  // 1 MiB rounded down to whole chunks of 3 ranks: 262143 floats.
  expect_ring_bytes(run.output, 3, 262143 * 4);
  const analysis::RunStats primer = stats_of(run.trace_dir + "/primer/run.sqlite");
  ASSERT_EQ(primer.ranks.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    const std::vector<std::pair<Op, int64_t>> four = {
        {Op::Broadcast, 24}, {Op::AllReduce, 24}, {Op::ReduceScatter, 24}, {Op::AllGather, 8}};
    EXPECT_EQ(issued(primer, rank, 0), four) << "rank " << rank;
  }
  // alpha = 2(n-1) L = 2000 us; 1/beta = n / (2(n-1)) B = 1.5 Gb/s.
  expect_fit(run.output, 2000.0, 1.5);
}

}  // namespace
