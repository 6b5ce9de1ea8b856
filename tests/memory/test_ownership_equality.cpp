// Ownership accounting against the tracking allocator, through real ranks: on the CPU every owned
// category of every sample is within 1 % of the run's peak of the tracking allocator's category
// at the same sample, in DDP, FSDP1 (its three sharding strategies), FSDP2 (reshard true, false
// and N) and ZeRO-1 runs, with mixed precision, CPU offload, gradient as bucket view and no_sync
// accumulation; the categories add up to the allocator's total at every sample; and on the meta
// device the same model and strategy give the same bytes per owned category as on the CPU
// (Note [Ownership accounting]).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
using dpscope::trace::MemoryCategory;

namespace {

const std::string kWorker = std::string(DPSCOPE_BIN_DIR) + "/ownership_worker";

bool owned_category(MemoryCategory category) {
  return dpscope::trace::is_stacked(category) && category != MemoryCategory::Activations &&
         category != MemoryCategory::Other;
}

// Every rank's samples of `path`: at each sampled moment the stacked categories (each holding its
// value until its next sample) add up to allocator_total, and activations are not negative.
void expect_categories_add_up(const std::string& path, int ranks) {
  dpscope::trace::Reader reader(path);
  for (int rank = 0; rank < ranks; ++rank) {
    std::map<int64_t, std::map<MemoryCategory, int64_t>> by_time;
    for (const auto& s : reader.memory(rank)) by_time[s.ts_ns][s.category] = s.bytes;
    ASSERT_FALSE(by_time.empty()) << path << " rank " << rank << " has no memory samples";
    std::map<MemoryCategory, int64_t> held;
    for (const auto& [ts, samples] : by_time) {
      for (const auto& [category, bytes] : samples) held[category] = bytes;
      if (!samples.count(MemoryCategory::AllocatorTotal)) continue;
      int64_t stacked = 0;
      for (const auto& [category, bytes] : held) stacked += dpscope::trace::is_stacked(category) ? bytes : 0;
      EXPECT_EQ(stacked, held.at(MemoryCategory::AllocatorTotal)) << path << " rank " << rank << " at " << ts;
      EXPECT_GE(held[MemoryCategory::Activations], 0) << path << " rank " << rank << " at " << ts;
    }
  }
}

// `dpscope train ARGS --memory-accounting ownership` on 2 ranks: the largest difference from
// tracking it prints is within 1 % of the peak on both ranks, the categories add up, and stats
// names the accounting.
void expect_train_equal(const std::string& args) {
  TempDir dir;
  const std::string trace_dir = dir.file("run");
  const auto result = run_command(
      "timeout 120 " + dpscope_bin() + " launch -n 2 --trace-dir " + trace_dir + " -- " + dpscope_bin() +
      " train --model mlp --hidden 64 --steps 3 --momentum 0.9 --threads 1 --progress-every 0 "
      "--memory-accounting ownership " + args);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::regex line(R"(\[(\d)\] memory_accounting ownership: largest difference from tracking ([0-9.]+) % of the peak)");
  int ranks = 0;
  for (std::sregex_iterator it(result.output.begin(), result.output.end(), line), end; it != end; ++it) {
    ++ranks;
    EXPECT_LE(std::stod((*it)[2]), 1.0) << args << ": rank " << (*it)[1] << "\n" << result.output;
  }
  EXPECT_EQ(ranks, 2) << result.output;
  expect_categories_add_up(trace_dir + "/run.sqlite", 2);
  const auto stats = run_command(dpscope_bin() + " stats --json " + trace_dir + "/run.sqlite");
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_EQ(nlohmann::json::parse(stats.output)["run"]["memory_accounting"], "ownership");
}

TEST(OwnershipEquality, Ddp) { expect_train_equal(""); }
TEST(OwnershipEquality, DdpGradientAsBucketView) { expect_train_equal("--gradient-as-bucket-view"); }
TEST(OwnershipEquality, DdpNoSyncAccumulation) { expect_train_equal("--grad-accum 2"); }
TEST(OwnershipEquality, FsdpFullShard) { expect_train_equal("--strategy fsdp --wrap-min-params 1000"); }
TEST(OwnershipEquality, FsdpShardGradOp) {
  expect_train_equal("--strategy fsdp --wrap-min-params 1000 --sharding grad_op");
}
TEST(OwnershipEquality, FsdpNoShard) { expect_train_equal("--strategy fsdp --wrap-min-params 1000 --sharding no_shard"); }
TEST(OwnershipEquality, FsdpMixedPrecision) {
  expect_train_equal("--strategy fsdp --wrap-min-params 1000 --mixed-precision bf16");
}
TEST(OwnershipEquality, FsdpCpuOffloadAndNoSync) {
  expect_train_equal("--strategy fsdp --wrap-min-params 1000 --cpu-offload --grad-accum 2");
}
TEST(OwnershipEquality, Fsdp2ReshardTrue) { expect_train_equal("--strategy fsdp2 --wrap-min-params 1000"); }
TEST(OwnershipEquality, Fsdp2ReshardFalse) {
  expect_train_equal("--strategy fsdp2 --wrap-min-params 1000 --reshard-after-forward false");
}
TEST(OwnershipEquality, Fsdp2ReshardToGroupsAndMixedPrecision) {
  expect_train_equal("--strategy fsdp2 --wrap-min-params 1000 --reshard-after-forward 1 --mixed-precision bf16");
}
TEST(OwnershipEquality, Fsdp2CpuOffloadAndNoSync) {
  expect_train_equal("--strategy fsdp2 --wrap-min-params 1000 --cpu-offload --grad-accum 2");
}

// On the CPU without the flag: tracking, as before.
TEST(OwnershipEquality, TheCpuDefaultIsTracking) {
  TempDir dir;
  const std::string trace = dir.file("t.sqlite");
  const auto result = run_command("timeout 60 " + dpscope_bin() + " train --model mlp --hidden 32 --steps 2 "
                                  "--threads 1 --progress-every 0 --trace " + trace);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output.find("memory_accounting"), std::string::npos) << result.output;
  const auto stats = run_command(dpscope_bin() + " stats --json " + trace);
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_EQ(nlohmann::json::parse(stats.output)["run"]["memory_accounting"], "tracking");
}

// Per rank, each change of an owned category in `dir`'s rank files in time order, "category=bytes".
std::vector<std::vector<std::string>> owned_changes(const std::string& dir) {
  std::vector<std::vector<std::string>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    dpscope::trace::Reader reader(dir + "/rank" + std::to_string(rank) + ".sqlite");
    std::map<int64_t, std::map<MemoryCategory, int64_t>> by_time;
    for (const auto& s : reader.memory(rank)) {
      if (owned_category(s.category)) by_time[s.ts_ns][s.category] = s.bytes;
    }
    std::vector<std::string> changes;
    for (const auto& [ts, samples] : by_time) {
      for (const auto& [category, bytes] : samples) {
        changes.push_back(std::string(dpscope::trace::to_string(category)) + "=" + std::to_string(bytes));
      }
    }
    ranks.push_back(changes);
  }
  return ranks;
}

// ownership_worker STRATEGY on 2 ranks: on the CPU within 1 % of tracking (printed per category),
// and on meta the same owned bytes, change by change.
void expect_meta_as_cpu(const std::string& strategy) {
  TempDir dir;
  const std::string trace_dir = dir.file("traces");
  const auto result = run_command("mkdir -p " + trace_dir + "/cpu " + trace_dir + "/meta && timeout 120 " +
                                  dpscope_bin() + " launch -n 2 --trace-dir " + dir.file("launch") + " -- " +
                                  kWorker + " " + strategy + " " + trace_dir);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::regex line(R"(rank (\d): difference (\w+) (\d+) of (\d+))");
  int lines = 0;
  for (std::sregex_iterator it(result.output.begin(), result.output.end(), line), end; it != end; ++it) {
    ++lines;
    EXPECT_LE(std::stod((*it)[3]), 0.01 * std::stod((*it)[4])) << strategy << " " << (*it)[2] << "\n" << result.output;
  }
  EXPECT_EQ(lines, 2 * 9) << result.output;
  const auto cpu = owned_changes(trace_dir + "/cpu");
  const auto meta = owned_changes(trace_dir + "/meta");
  for (size_t rank = 0; rank < cpu.size(); ++rank) {
    EXPECT_FALSE(cpu[rank].empty());
    EXPECT_EQ(cpu[rank], meta[rank]) << strategy << " rank " << rank;
  }
}

TEST(OwnershipOnMeta, Ddp) { expect_meta_as_cpu("ddp"); }
TEST(OwnershipOnMeta, DdpGradientAsBucketView) { expect_meta_as_cpu("ddp_view"); }
TEST(OwnershipOnMeta, DdpNoSyncAccumulation) { expect_meta_as_cpu("ddp_accum"); }
TEST(OwnershipOnMeta, FsdpFullShard) { expect_meta_as_cpu("fsdp_full"); }
TEST(OwnershipOnMeta, FsdpShardGradOp) { expect_meta_as_cpu("fsdp_grad_op"); }
TEST(OwnershipOnMeta, FsdpNoShard) { expect_meta_as_cpu("fsdp_no_shard"); }
TEST(OwnershipOnMeta, FsdpMixedPrecision) { expect_meta_as_cpu("fsdp_bf16"); }
TEST(OwnershipOnMeta, Fsdp2) { expect_meta_as_cpu("fsdp2"); }
TEST(OwnershipOnMeta, Fsdp2ReshardFalse) { expect_meta_as_cpu("fsdp2_keep"); }
TEST(OwnershipOnMeta, Fsdp2ReshardToGroups) { expect_meta_as_cpu("fsdp2_groups"); }
TEST(OwnershipOnMeta, Fsdp2MixedPrecision) { expect_meta_as_cpu("fsdp2_bf16"); }
TEST(OwnershipOnMeta, Zero1) { expect_meta_as_cpu("zero1"); }

}  // namespace
