// FSDP2's memory against DDP's, measured by the tracking allocator in real runs of `dpscope train`
// on 4 ranks (bench/fsdp_memory.sh's model, fewer steps): FULL sharding with every Linear a group
// peaks at most 0.6 of DDP's in the steps, and what persists between steps is a quarter of
// DDP's per-parameter state, as sharding on 4 ranks says; HSDP (2 replicas of 2 ranks) peaks
// between the two and keeps half of DDP's state.
#include <gtest/gtest.h>

#include <string>

#include "analysis/stats.h"
#include "tests/test_util.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
namespace analysis = dpscope::analysis;
namespace trace = dpscope::trace;

namespace {

const std::string kModel =
    "--model mlp --hidden 1024 --layers 4 --data digits --batch-size 32 --momentum 0.9 --steps 3 "
    "--threads 1 --progress-every 0";

analysis::RunStats run_stats(const TempDir& dir, const std::string& name, const std::string& flags) {
  const auto run = run_command("OMP_NUM_THREADS=1 timeout 240 " + dpscope_bin() + " launch -n 4 --trace-dir " +
                               dir.file(name) + " -- " + dpscope_bin() + " train " + kModel + " " + flags);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  trace::Reader reader(dir.file(name) + "/run.sqlite");
  return analysis::compute_stats(reader);
}

TEST(Fsdp2Memory, FullShardPeaksAtMostSixTenthsOfDdpAndHsdpBetweenOnFourRanks) {
  TempDir dir;
  const analysis::RunStats ddp = run_stats(dir, "ddp", "--strategy ddp");
  const analysis::RunStats fsdp2 = run_stats(dir, "fsdp2", "--strategy fsdp2 --wrap-min-params 1");
  const analysis::RunStats hsdp = run_stats(
      dir, "hsdp", "--strategy fsdp2 --wrap-min-params 1 --sharding hybrid --shard-group-size 2");
  ASSERT_EQ(ddp.ranks.size(), 4u);
  ASSERT_EQ(fsdp2.ranks.size(), 4u);
  ASSERT_EQ(hsdp.ranks.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    const analysis::MemoryAtPeak& d = ddp.ranks[r].step_memory_peak;
    const analysis::MemoryAtPeak& f = fsdp2.ranks[r].step_memory_peak;
    ASSERT_GT(d.total_bytes, 0) << "rank " << r;
    EXPECT_LE(static_cast<double>(f.total_bytes), 0.6 * static_cast<double>(d.total_bytes))
        << "rank " << r << ": fsdp2 " << f.total_bytes << " B against ddp " << d.total_bytes << " B";
    // Between steps a rank keeps its rows (3,225,610 parameters: 806,403 elements of padded
    // chunks, float32), their gradients and the momentum: a quarter of DDP's parameters,
    // gradients and optimizer state.
    const analysis::MemoryAtPeak& kept = fsdp2.ranks[r].memory_after_steps;
    const double ddp_state = static_cast<double>(ddp.ranks[r].memory_after_steps.bytes(trace::MemoryCategory::Parameters));
    EXPECT_NEAR(static_cast<double>(kept.bytes(trace::MemoryCategory::Shards)), ddp_state / 4, 0.01 * ddp_state)
        << "rank " << r;
    EXPECT_NEAR(static_cast<double>(kept.bytes(trace::MemoryCategory::OptimizerState)), ddp_state / 4, 0.01 * ddp_state)
        << "rank " << r;
    // HSDP: the rows of a shard group of 2, half of DDP's state, and a peak between.
    const analysis::MemoryAtPeak& hybrid_kept = hsdp.ranks[r].memory_after_steps;
    EXPECT_NEAR(static_cast<double>(hybrid_kept.bytes(trace::MemoryCategory::Shards)), ddp_state / 2, 0.01 * ddp_state)
        << "rank " << r;
    const int64_t hybrid_peak = hsdp.ranks[r].step_memory_peak.total_bytes;
    EXPECT_GT(hybrid_peak, f.total_bytes) << "rank " << r;
    EXPECT_LT(hybrid_peak, d.total_bytes) << "rank " << r;
  }
}

}  // namespace
