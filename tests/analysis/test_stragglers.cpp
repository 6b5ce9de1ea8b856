// Straggler attribution and the wait / transfer split (Note [Stragglers], Note [Waiting and
// transfer]): the pure pieces on hand-made collectives, then compute_stats and stats_json on
// small traces written with Writer whose every number is worked out in the comments.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <functional>
#include <string>
#include <vector>

#include "analysis/collective_match.h"
#include "analysis/stats.h"
#include "analysis/stats_report.h"
#include "analysis/stragglers.h"
#include "tests/test_util.h"
#include "trace/reader.h"
#include "trace/writer.h"

namespace dpscope::analysis {
namespace {

using namespace dpscope::trace;

using testing::TempDir;

constexpr int64_t ms(double v) { return static_cast<int64_t>(v * 1'000'000); }

CollectiveStats all_reduce(int64_t seq, int32_t iteration, int64_t begin, int64_t end) {
  CollectiveStats c;
  c.grp = 0;
  c.seq = seq;
  c.op = CollectiveOp::AllReduce;
  c.bytes = 4096;
  c.dtype = static_cast<uint8_t>(DType::Float32);
  c.iteration = iteration;
  c.begin_ns = begin;
  c.end_ns = end;
  return c;
}

TEST(stragglers, TheSplitIsAtTheLastArrival) {
  const CollectiveStats early = all_reduce(0, 0, ms(10), ms(45));
  EXPECT_EQ(split_at_arrival(early, ms(40)).wait_ns, ms(30));
  EXPECT_EQ(split_at_arrival(early, ms(40)).transfer_ns, ms(5));
  const CollectiveStats last = all_reduce(0, 0, ms(40), ms(45));
  EXPECT_EQ(split_at_arrival(last, ms(40)).wait_ns, 0);
  EXPECT_EQ(split_at_arrival(last, ms(40)).transfer_ns, ms(5));
  // A last arrival after this span's end (clocks that disagree): all of it is waiting.
  EXPECT_EQ(split_at_arrival(early, ms(50)).wait_ns, ms(35));
  EXPECT_EQ(split_at_arrival(early, ms(50)).transfer_ns, 0);
}

TEST(stragglers, AMatchKnowsItsLastRankAndHowLateItWas) {
  // Ranks 0, 1, 2 begin at 10, 12 and 40 ms: rank 2 is last, 28 ms after rank 1.
  const auto matches = match_collectives({0, 1, 2},
                                         {{all_reduce(0, 0, ms(10), ms(45))},
                                          {all_reduce(0, 0, ms(12), ms(45))},
                                          {all_reduce(0, 0, ms(40), ms(45))}},
                                         3);
  ASSERT_EQ(matches.size(), 1u);
  EXPECT_EQ(matches[0].last_rank, 2);
  EXPECT_EQ(matches[0].last_begin_ns, ms(40));
  EXPECT_EQ(matches[0].late_ns, ms(28));
  EXPECT_EQ(matches[0].skew_ns, ms(30));
}

// Matches of `iterations` iterations on 3 ranks, one all-reduce each, where the iteration's last
// rank is last_of(it), `late` ms after the others.
std::vector<CollectiveMatch> steps(int iterations, const std::function<int(int)>& last_of, double late) {
  std::vector<std::vector<CollectiveStats>> by_rank(3);
  for (int it = 0; it < iterations; ++it) {
    const int64_t t = ms(100.0 * it);
    for (int r = 0; r < 3; ++r) {
      const int64_t begin = t + (r == last_of(it) ? ms(late) : 0);
      by_rank[size_t(r)].push_back(all_reduce(it, it, begin, t + ms(late) + ms(5)));
    }
  }
  return match_collectives({0, 1, 2}, by_rank, 3);
}

TEST(stragglers, ARankLastInEveryStepIsNamedWithItsMeanLateness) {
  const StragglerFinding f = find_stragglers(steps(10, [](int) { return 2; }, 30), 2, 10, {0, 0, 0});
  EXPECT_DOUBLE_EQ(f.threshold_ms, 1.0);
  ASSERT_EQ(f.stragglers.size(), 1u);
  EXPECT_EQ(f.stragglers[0].rank, 2);
  EXPECT_NEAR(f.stragglers[0].late_ms, 30.0, 1e-9);
  EXPECT_NEAR(f.stragglers[0].next_late_ms, 0.0, 1e-9);
  EXPECT_EQ(f.stragglers[0].last_in_steps, 8);  // iterations 2..9: the steady ones
  EXPECT_EQ(f.stragglers[0].steps, 8);
  EXPECT_EQ(stragglers_text(f), "rank 2 arrives last in 8 of 8 steps, 30.0 ms late per step");
}

TEST(stragglers, NoneWhenTheLastRankChangesFromStepToStep) {
  const StragglerFinding f = find_stragglers(steps(12, [](int it) { return it % 3; }, 30), 2, 12, {0, 0, 0});
  EXPECT_TRUE(f.stragglers.empty());
  EXPECT_EQ(stragglers_text(f), "none (no rank is consistently last, more than 1.0 ms behind the rest)");
}

// Two steady steps name nobody, however late one rank is in both: too few to tell from noise.
TEST(stragglers, TwoSteadyStepsNameNobody) {
  const StragglerFinding two = find_stragglers(steps(4, [](int) { return 2; }, 30), 2, 4, {0, 0, 0});
  EXPECT_TRUE(two.stragglers.empty());
  EXPECT_EQ(two.steps, 2);
  EXPECT_EQ(stragglers_text(two), "none named (2 steady steps; naming one takes at least 3)");
  EXPECT_EQ(find_stragglers(steps(5, [](int) { return 2; }, 30), 2, 5, {0, 0, 0}).stragglers.size(), 1u);
}

// Every step, rank 0 is 2.5 ms late at one collective and rank 2 3 ms late at another: rank 2 is
// the last arriver of every step, but only 0.5 ms behind rank 0 — noise of a step with many
// collectives, not a straggler.
TEST(stragglers, NoneWhenTheLastRankIsBarelyAheadOfTheOthers) {
  std::vector<std::vector<CollectiveStats>> by_rank(3);
  for (int it = 0; it < 10; ++it) {
    const int64_t t = ms(100.0 * it);
    for (int r = 0; r < 3; ++r) {
      by_rank[size_t(r)].push_back(all_reduce(2 * it, it, t + (r == 0 ? ms(2.5) : 0), t + ms(10)));
      by_rank[size_t(r)].push_back(all_reduce(2 * it + 1, it, t + ms(20) + (r == 2 ? ms(3) : 0), t + ms(30)));
    }
  }
  const StragglerFinding f = find_stragglers(match_collectives({0, 1, 2}, by_rank, 3), 2, 10, {0, 0, 0});
  EXPECT_TRUE(f.stragglers.empty()) << stragglers_text(f);
}

TEST(stragglers, NoneBelowTheThreshold) {
  EXPECT_TRUE(find_stragglers(steps(10, [](int) { return 1; }, 0.5), 2, 10, {0, 0, 0}).stragglers.empty());
}

TEST(stragglers, TheThresholdGrowsWithTheClockUncertainty) {
  // Rank 1's clock is known to within 10 ms: two ranks may disagree by 20, so only more than 40
  // ms of lateness counts.
  EXPECT_DOUBLE_EQ(straggler_threshold_ms({0, ms(10), 0}), 40.0);
  const auto matches = steps(10, [](int) { return 2; }, 30);
  EXPECT_TRUE(find_stragglers(matches, 2, 10, {0, ms(10), 0}).stragglers.empty());
  EXPECT_EQ(find_stragglers(matches, 2, 10, {0, ms(5), 0}).stragglers.size(), 1u);
}

// Three ranks, five iterations of [100·it, 100·it + 60] ms: forward [0, 20], backward [20, 60];
// one all-reduce per iteration that ranks 0 and 1 begin at 25 ms and rank 2 at 55 ms (30 ms
// late), all ending at 60 ms. Rank 2's clock is aligned within 0.2 ms.
// Per collective: ranks 0 and 1 wait 30 ms and transfer 5; rank 2 waits 0 and transfers 5.
std::string straggler_trace(const TempDir& dir) {
  const std::string path = dir.file("straggler.sqlite");
  Writer w(path);
  w.begin();
  w.add_name(1, "forward");
  w.add_name(2, "backward");
  w.add_name(3, "iteration");
  for (int32_t r = 0; r < 3; ++r) {
    RankInfo info;
    info.rank = r;
    info.host = "localhost";
    info.status = "complete";
    info.clock_uncertainty_ns = r == 2 ? ms(0.2) : 0;
    w.put_rank(info);
    for (int32_t it = 0; it < 5; ++it) {
      const int64_t t = ms(100.0 * it);
      const auto phase = [&](NameId name, int64_t begin, int64_t end) {
        Event e;
        e.rank = static_cast<int16_t>(r);
        e.kind = EventKind::Phase;
        e.name = name;
        e.begin_ns = t + begin;
        e.end_ns = t + end;
        e.iteration = it;
        w.add_event(e);
      };
      phase(3, 0, ms(60));
      phase(1, 0, ms(20));
      phase(2, ms(20), ms(60));
      Event c;
      c.rank = static_cast<int16_t>(r);
      c.lane = 1;
      c.kind = EventKind::Collective;
      c.op = static_cast<uint8_t>(CollectiveOp::AllReduce);
      c.grp = 0;
      c.seq = it;
      c.bytes = 4096;
      c.dtype = static_cast<uint8_t>(DType::Float32);
      c.iteration = it;
      c.begin_ns = t + (r == 2 ? ms(55) : ms(25));
      c.end_ns = t + ms(60);
      w.add_event(c);
    }
  }
  w.commit();
  w.finish();
  return path;
}

TEST(stragglers, StatsSplitEveryRanksCollectivesAndNameTheStraggler) {
  TempDir dir;
  Reader reader(straggler_trace(dir));
  const RunStats s = compute_stats(reader);
  ASSERT_EQ(s.ranks.size(), 3u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(s.ranks[size_t(r)].wait_ms, 5 * 30.0, 1e-6) << "rank " << r;
    EXPECT_NEAR(s.ranks[size_t(r)].transfer_ms, 5 * 5.0, 1e-6) << "rank " << r;
  }
  for (const IterationStats& it : s.ranks[0].iterations) {
    EXPECT_NEAR(it.wait_ms, 30.0, 1e-6) << "iteration " << it.iteration;
    EXPECT_NEAR(it.transfer_ms, 5.0, 1e-6) << "iteration " << it.iteration;
  }
  EXPECT_NEAR(wait_per_step(s.ranks[1]).first, 30.0, 1e-6);
  EXPECT_NEAR(wait_per_step(s.ranks[1]).second, 5.0, 1e-6);
  EXPECT_NEAR(wait_per_step(s.ranks[2]).first, 0.0, 1e-6);
  EXPECT_NEAR(s.ranks[2].wait_ms, 0, 1e-6);
  EXPECT_NEAR(s.ranks[2].transfer_ms, 5 * 5.0, 1e-6);
  EXPECT_EQ(s.ranks[2].clock_uncertainty_ns, ms(0.2));
  EXPECT_DOUBLE_EQ(s.stragglers.threshold_ms, 1.0);  // 4 x 0.2 ms is less than the 1 ms floor
  ASSERT_EQ(s.stragglers.stragglers.size(), 1u);
  EXPECT_EQ(s.stragglers.stragglers[0].rank, 2);
  EXPECT_NEAR(s.stragglers.stragglers[0].late_ms, 30.0, 1e-6);
  EXPECT_EQ(s.stragglers.stragglers[0].steps, 3);  // iterations 2, 3, 4

  const auto j = nlohmann::json::parse(stats_json(s));
  ASSERT_EQ(j["stragglers"].size(), 1u);
  EXPECT_EQ(j["stragglers"][0]["rank"], 2);
  EXPECT_NEAR(j["stragglers"][0]["late_ms"].get<double>(), 30.0, 1e-6);
  EXPECT_NEAR(j["stragglers"][0]["next_late_ms"].get<double>(), 0.0, 1e-6);
  EXPECT_EQ(j["stragglers"][0]["last_in_steps"], 3);
  EXPECT_EQ(j["stragglers"][0]["steps"], 3);
  EXPECT_DOUBLE_EQ(j["collective_matching"]["straggler_threshold_ms"].get<double>(), 1.0);
  EXPECT_NEAR(j["ranks"][0]["wait_ms"].get<double>(), 150.0, 1e-6);
  EXPECT_NEAR(j["ranks"][0]["transfer_ms"].get<double>(), 25.0, 1e-6);
  EXPECT_NEAR(j["ranks"][2]["clock_uncertainty_ms"].get<double>(), 0.2, 1e-9);

  const std::string text = stats_text(s);
  EXPECT_NE(text.find("stragglers: rank 2 arrives last in 3 of 3 steps, 30.0 ms late per step"), std::string::npos)
      << text;
  EXPECT_NE(text.find("waiting for the last rank to arrive 150.000 ms, transferring 25.000 ms"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace dpscope::analysis
