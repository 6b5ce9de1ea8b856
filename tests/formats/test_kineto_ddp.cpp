// The Kineto import on PyTorch 1.13's own DDP (tests/formats/kineto_ddp.py, run with
// /usr/bin/python3 on the CPU with Gloo, on 2 and 4 ranks): the older bare-list form without
// distributedInfo imports with a warning per file, and every profiled step has as many
// gloo:all_reduce collectives as DDP has buckets (its logging data's rebuilt_bucket_sizes),
// matched across the ranks. Skips when /usr/bin/python3 has no torch.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/stats.h"
#include "tests/formats/kineto_fixture.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::formats {
namespace {

using namespace kineto_test;

constexpr int kSteps = 3;

bool python_has_torch() {
  return testing::run_command("/usr/bin/python3 -c 'import torch'").exit_code == 0;
}

// Records `ranks` ranks of DDP (bucket_cap_mb `cap_mb`) into `dir` and imports them; returns
// DDP's bucket count.
size_t record_and_import(Imported& run, int ranks, const std::string& cap_mb = "0.3") {
  const std::string out = run.dir.file("profiles");
  const auto recorded = testing::run_command("/usr/bin/python3 " + std::string(DPSCOPE_SOURCE_DIR) +
                                             "/tests/formats/kineto_ddp.py " + out + " " +
                                             std::to_string(ranks) + " " + std::to_string(kSteps) + " " + cap_mb);
  EXPECT_EQ(recorded.exit_code, 0) << recorded.output;
  std::vector<std::string> files;
  for (int r = 0; r < ranks; ++r) files.push_back(out + "/rank-" + std::to_string(r) + ".json");
  import_into(run, files);
  std::ifstream ddp(out + "/ddp.json");
  const nlohmann::json logged = nlohmann::json::parse(ddp);
  return logged["rebuilt_bucket_sizes"].size();
}

// Each profiled step's all-reduces are DDP's buckets 0, 1, ... in the order they began (Note
// [DDP's buckets from PyTorch's records]), and the run's plan has DDP's count, its sizes unknown:
// PyTorch 1.13's list-form traces give the gloo ops no arguments.
void expect_buckets_numbered(const std::string& path, size_t buckets) {
  trace::Reader reader(path);
  const std::vector<trace::BucketInfo> plan = reader.buckets();
  ASSERT_EQ(plan.size(), buckets) << "DDP's rebuilt_bucket_sizes has " << buckets;
  for (size_t b = 0; b < plan.size(); ++b) {
    EXPECT_EQ(plan[b].generation, 1);
    EXPECT_EQ(plan[b].index, int32_t(b));
    EXPECT_EQ(plan[b].numel, 0) << "no sizes in a list-form trace";
    EXPECT_TRUE(plan[b].params.empty());
  }
  const analysis::RunStats stats = analysis::compute_stats(reader);
  for (const analysis::RankStats& r : stats.ranks) {
    ASSERT_EQ(r.buckets.size(), buckets) << "rank " << r.rank;
    for (const analysis::BucketExposure& b : r.buckets) {
      EXPECT_GE(b.collectives, kSteps) << "rank " << r.rank << ", bucket " << b.bucket;
      EXPECT_EQ(b.bytes, trace::kNone64);
    }
  }
  // The bucket column, step by step, in the order the all-reduces began.
  std::map<std::tuple<int32_t, int32_t>, std::vector<std::pair<int64_t, int32_t>>> order;
  reader.for_each_event([&](const trace::Event& e) {
    if (e.kind == trace::EventKind::Collective && e.op == uint8_t(trace::CollectiveOp::AllReduce) &&
        e.iteration >= 0 && e.iteration < kSteps) {
      order[{e.rank, e.iteration}].emplace_back(e.begin_ns, e.bucket);
    }
    return true;
  });
  for (auto& [key, list] : order) {
    std::sort(list.begin(), list.end());
    for (size_t b = 0; b < list.size(); ++b) {
      EXPECT_EQ(list[b].second, int32_t(b)) << "rank " << std::get<0>(key) << ", step " << std::get<1>(key);
    }
  }
}

void expect_allreduce_per_bucket(int ranks, const std::string& cap_mb = "0.3", size_t at_least = 2) {
  if (!python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch (install python3-torch)";
  Imported run;
  const size_t buckets = record_and_import(run, ranks, cap_mb);
  ASSERT_GE(buckets, at_least) << "the model should make DDP build several buckets";
  expect_buckets_numbered(run.path, buckets);
  EXPECT_EQ(run.warnings.size(), size_t(ranks)) << "one warning a file: PyTorch 1.13 writes no distributedInfo";
  trace::Reader reader(run.path);
  EXPECT_EQ(reader.meta_value(std::string(trace::meta_key::kStrategy)), "ddp");
  EXPECT_EQ(reader.meta_value(std::string(trace::meta_key::kBackend)), "gloo");
  const analysis::RunStats stats = analysis::compute_stats(reader);
  ASSERT_EQ(stats.ranks.size(), size_t(ranks));
  ASSERT_EQ(stats.iterations, kSteps + 1);
  for (const analysis::RankStats& r : stats.ranks) {
    EXPECT_GT(r.compute_phases, 0) << "rank " << r.rank;
    // The last profiled step may lose its last all-reduces when the profiler stops (kineto_ddp.py).
    for (int i = 0; i < kSteps; ++i) {
      const analysis::IterationStats& it = r.iterations[size_t(i)];
      EXPECT_EQ(it.collectives[size_t(trace::CollectiveOp::AllReduce)], int64_t(buckets))
          << "rank " << r.rank << ", ProfilerStep " << i;
      EXPECT_GT(it.overlap.compute_ms, 0);
    }
  }
  int64_t matched = 0;
  for (const analysis::CollectiveMatch& m : stats.matches) matched += m.mismatch ? 0 : 1;
  EXPECT_GE(matched, int64_t(buckets) * kSteps);
}

TEST(KinetoDdp, TwoRanksOfPytorchDdpHaveAnAllReduceABucket) { expect_allreduce_per_bucket(2); }

// Each rank's profiler starts at its own zero (formats/kineto_align.h): the ranks are aligned on
// their gloo all-reduces' ends, and shifting one rank's file by a known offset moves its recovered
// offset by that shift, within its uncertainty.
TEST(KinetoDdp, ShiftingARanksFileMovesItsOffsetByTheShift) {
  if (!python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch (install python3-torch)";
  Imported run;
  record_and_import(run, 2);
  std::vector<trace::RankInfo> ranks = trace::Reader(run.path).ranks();
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(trace::Reader(run.path).meta_value(std::string(trace::meta_key::kClockAlignment)), "collective-ends");
  const trace::RankInfo before = ranks[1];
  EXPECT_GE(before.clock_uncertainty_ns, 1000);
  const std::string profiles = run.dir.file("profiles");
  const std::string shifted = run.dir.file("rank-1-shifted.json");
  const double shift_us = 123'456.5;
  const auto made = testing::run_command("/usr/bin/python3 " + std::string(DPSCOPE_SOURCE_DIR) +
                                         "/tests/formats/kineto_shift.py " + profiles + "/rank-1.json " +
                                         shifted + " 1 " + std::to_string(shift_us) + " 0 1");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  Imported again;
  import_into(again, {profiles + "/rank-0.json", shifted});
  const trace::RankInfo after = trace::Reader(again.path).ranks()[1];
  EXPECT_NEAR(static_cast<double>(after.clock_offset_ns - before.clock_offset_ns), -shift_us * 1e3,
              static_cast<double>(before.clock_uncertainty_ns))
      << "recovered " << before.clock_offset_ns << " ns, then " << after.clock_offset_ns << " ns";
  EXPECT_EQ(after.clock_uncertainty_ns, before.clock_uncertainty_ns);
}

TEST(KinetoDdp, FourRanksOfPytorchDdpHaveAnAllReduceABucket) { expect_allreduce_per_bucket(4); }

// DDP's own bucket caps: 1 MiB on 2 ranks (several buckets), 25 MiB on 4 (the model, 2.1 MB,
// fits one).
TEST(KinetoDdp, BucketsAtACapOfOneMibOnTwoRanksAreDdps) { expect_allreduce_per_bucket(2, "1", 2); }
TEST(KinetoDdp, BucketsAtACapOf25MibOnFourRanksAreDdps) { expect_allreduce_per_bucket(4, "25", 1); }

}  // namespace
}  // namespace dpscope::formats
