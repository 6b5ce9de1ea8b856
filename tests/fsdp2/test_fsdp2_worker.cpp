// FSDP2's features through real ranks (fsdp2_worker): the sharded state dict, sharded checkpoints
// resharded to another world size (and another model's or FSDP1's refused), clip_grad_norm across
// shards, explicit prefetching; and `dpscope train --strategy fsdp2` — its trace (groups as units,
// tagged collectives, copy phases, memory by category, `dpscope stats`), `--explicit-prefetch` and
// `--cpu-offload` — each within a time limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "tests/torch_oracle.h"
#include "tests/worker_checks.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::expect_error_on_every_rank;
using dpscope::testing::max_abs_diff;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
namespace trace = dpscope::trace;

namespace {

const std::string kWorker = std::string(DPSCOPE_BIN_DIR) + "/fsdp2_worker";

dpscope::testing::CommandResult launch(int world, const std::string& mode, const TempDir& dir,
                                       const std::string& traces = "traces",
                                       const std::string& worker = kWorker) {
  return run_command("timeout 120 " + dpscope_bin() + " launch -n " + std::to_string(world) +
                     " --trace-dir " + dir.file(traces) + " -- " + worker + " " + mode);
}

// `dpscope train --strategy fsdp2` on 3 ranks, the mlp of hidden 10 on a group per Linear with
// `flags`; rank 0 writes the final parameters to DIR/NAME.pt and the trace goes to DIR/NAME.
dpscope::testing::CommandResult train_three_ranks(const TempDir& dir, const std::string& name,
                                                  const std::string& flags) {
  return run_command("timeout 120 " + dpscope_bin() + " launch -n 3 --trace-dir " + dir.file(name) +
                     " -- " + dpscope_bin() + " train --threads 1 --progress-every 0 --steps 3 "
                     "--batch-size 16 --samples 256 --model mlp --hidden 10 --momentum 0.9 "
                     "--strategy fsdp2 --wrap-min-params 100 --save-final " + dir.file(name + ".pt") +
                     " " + flags);
}

// A sharded checkpoint written by `saved_world` ranks, loaded by `loaded_world`: the full state
// after loading equals the one saved, to the bit.
void reshard_case(int saved_world, int loaded_world, const std::string& save_mode = "save") {
  TempDir dir;
  const auto saved = launch(saved_world, save_mode + " " + dir.file("ckpt"), dir, "save");
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  EXPECT_NE(saved.output.find("rank 0: saved with 0 collectives"), std::string::npos) << saved.output;
  const auto loaded = launch(loaded_world, "load " + dir.file("ckpt") + " " + dir.file("loaded.pt"), dir, "load");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  EXPECT_EQ(loaded.output.find("FAIL"), std::string::npos) << loaded.output;
  EXPECT_EQ(max_abs_diff(dir.file("ckpt/full.pt"), dir.file("loaded.pt")), 0.0);
}

TEST(Fsdp2Worker, ShardedStateDictHoldsEachRanksRowsFourRanks) {
  TempDir dir;
  const auto run = launch(4, "sharded", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  // fc0.weight is [10, 64]: rows 0-3, 3-6, 6-9 and 9-10.
  EXPECT_NE(run.output.find("rank 3: fc0.weight rows [9, 10) of 10"), std::string::npos) << run.output;
}

TEST(Fsdp2Worker, ShardedStateDictUnevenRowsThreeRanks) {
  TempDir dir;
  const auto run = launch(3, "sharded", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 2: fc0.bias rows [8, 10) of 10"), std::string::npos) << run.output;
}

TEST(Fsdp2Worker, ShardedStateDictWithAnEmptyChunkFourRanks) {
  TempDir dir;
  const auto run = launch(4, "sharded 3", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 3: fc0.weight rows [3, 3) of 3"), std::string::npos) << run.output;
}

// Rows of 10 split 5/5 and then 4/4/2 (3, 3, 3 and 1 on 4 ranks): every saved piece lands in
// another place.
TEST(Fsdp2Worker, ShardedCheckpointSameWorldSize) { reshard_case(2, 2); }
TEST(Fsdp2Worker, ShardedCheckpointReshardedTwoToThree) { reshard_case(2, 3); }
TEST(Fsdp2Worker, ShardedCheckpointReshardedFourToOne) { reshard_case(4, 1); }

// HSDP on 2 x 2: both replicas write the rows of their shard group; loading reads each row once.
TEST(Fsdp2Worker, ShardedCheckpointOfHsdpLoadsOnTwoRanks) { reshard_case(4, 2, "save_hsdp"); }

TEST(Fsdp2Worker, ShardedCheckpointOfAnotherModelIsRefused) {
  TempDir dir;
  ASSERT_EQ(launch(2, "save " + dir.file("ckpt"), dir, "save").exit_code, 0);
  expect_error_on_every_rank(launch(2, "load_other " + dir.file("ckpt"), dir, "load"), 2,
                             "load it into the model that wrote it");
}

TEST(Fsdp2Worker, Fsdp1CheckpointIsRefusedByName) {
  TempDir dir;
  const std::string fsdp1 = std::string(DPSCOPE_BIN_DIR) + "/fsdp_worker";
  ASSERT_EQ(launch(2, "save " + dir.file("ckpt"), dir, "save", fsdp1).exit_code, 0);
  expect_error_on_every_rank(launch(2, "load_other " + dir.file("ckpt"), dir, "load"), 2,
                             "was not written by FSDP2");
}

TEST(Fsdp2Worker, ClipGradNormAcrossShards) {
  TempDir dir;
  const auto run = launch(3, "clip", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(run.output.find("rank " + std::to_string(r) + ": norm "), std::string::npos) << run.output;
  }
}

TEST(Fsdp2Worker, ExplicitPrefetchTrainsToTheSameBits) {
  TempDir dir;
  const auto run = launch(3, "prefetch", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 2: prefetch 6 parameters equal"), std::string::npos) << run.output;
}

// Per rank, what iteration 1 of a 3-step run with every Linear a group records.
struct IterationCounts {
  int gathers = 0, backward_gathers = 0, prefetched = 0, forward_prefetched = 0, reduce_scatters = 0;
  std::map<std::string, int> phases;
};

IterationCounts count_iteration(trace::Reader& reader, int rank, int iteration) {
  IterationCounts counts;
  for (const auto& e : reader.events_of_kind(trace::EventKind::Collective, rank)) {
    if (e.iteration != iteration) continue;
    if (e.op == static_cast<uint8_t>(trace::CollectiveOp::AllGather)) {
      ++counts.gathers;
      EXPECT_NE(e.unit, trace::kNone);
      if (e.flags & trace::kFlagBackward) ++counts.backward_gathers;
      if (e.flags & trace::kFlagPrefetch) ++counts.prefetched;
      if ((e.flags & trace::kFlagPrefetch) && !(e.flags & trace::kFlagBackward)) ++counts.forward_prefetched;
    }
    if (e.op == static_cast<uint8_t>(trace::CollectiveOp::ReduceScatter)) ++counts.reduce_scatters;
  }
  const std::vector<std::string> names = reader.names();
  for (const auto& e : reader.events_of_kind(trace::EventKind::Phase, rank)) {
    if (e.iteration == iteration) ++counts.phases[names.at(static_cast<size_t>(e.name))];
  }
  return counts;
}

TEST(Fsdp2Train, TraceContentTwoRanks) {
  TempDir dir;
  const int world = 2;
  const auto run = run_command(
      "timeout 120 " + dpscope_bin() + " launch -n 2 --trace-dir " + dir.file("traces") + " -- " +
      dpscope_bin() + " train --threads 1 --progress-every 0 --steps 3 --batch-size 16 --samples 256 "
      "--model mlp --hidden 33 --momentum 0.9 --strategy fsdp2 --wrap-min-params 100");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("fsdp2 (4 fully_shard groups, reshard_after_forward true)"),
            std::string::npos) << run.output;
  trace::Reader reader(dir.file("traces/run.sqlite"));
  EXPECT_EQ(reader.meta_value("strategy"), "fsdp2");
  EXPECT_EQ(reader.meta_value("fsdp2.reshard_after_forward"), "true");

  // Groups innermost first, the root last and empty; a rank's part of a group's buffer is the sum
  // of its parameters' padded chunks: fc0 [33, 64] and [33] in chunks of 17 rows.
  const auto units = reader.units();
  ASSERT_EQ(units.size(), 4u);
  const std::vector<std::string> names = {"fc0", "fc1", "fc2", "root"};
  for (size_t u = 0; u < units.size(); ++u) {
    EXPECT_EQ(units[u].name, names[u]);
    EXPECT_EQ(units[u].parent, u + 1 < units.size() ? 3 : trace::kNone);
  }
  EXPECT_EQ(units[0].numel, 64 * 33 + 33);
  EXPECT_EQ(units[0].shard_numel, 17 * 64 + 17);
  EXPECT_EQ(units[0].padded_numel, world * units[0].shard_numel);
  for (const auto& p : reader.params()) EXPECT_NE(p.unit, trace::kNone) << p.name;

  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    std::set<int> states;
    for (const auto& e : reader.events_of_kind(trace::EventKind::UnitState, r)) states.insert(e.op);
    EXPECT_EQ(states, (std::set<int>{0, 1, 2})) << "gathering, full and reducing slices";
    const IterationCounts counts = count_iteration(reader, r, 1);
    // Forward gathers fc0, fc1 and fc2, resharding each; backward gathers them again: fc2 in its
    // own pre-backward (its output is the model's, whose hooks run fc2's first, so the root's
    // prefetch finds it gathered), fc1 and fc0 prefetched by the group after them in forward.
    EXPECT_EQ(counts.gathers, 6);
    EXPECT_EQ(counts.backward_gathers, 3);
    EXPECT_EQ(counts.prefetched, 2);
    EXPECT_EQ(counts.reduce_scatters, 3) << "one a group with gradients";
    EXPECT_EQ(counts.phases.count("fsdp2.all_gather_copy_in") ? counts.phases.at("fsdp2.all_gather_copy_in") : 0, 6);
    EXPECT_EQ(counts.phases.count("fsdp2.all_gather_copy_out") ? counts.phases.at("fsdp2.all_gather_copy_out") : 0, 6);
    EXPECT_EQ(counts.phases.count("fsdp2.reduce_scatter_copy_in") ? counts.phases.at("fsdp2.reduce_scatter_copy_in") : 0, 3);
    std::set<trace::MemoryCategory> seen;
    for (const auto& m : reader.memory(r)) {
      if (m.bytes > 0) seen.insert(m.category);
    }
    for (auto category : {trace::MemoryCategory::Shards, trace::MemoryCategory::FullParameters,
                          trace::MemoryCategory::FullGradients, trace::MemoryCategory::GradientShards,
                          trace::MemoryCategory::OptimizerState, trace::MemoryCategory::Activations}) {
      EXPECT_TRUE(seen.count(category)) << trace::to_string(category);
    }
  }

  const auto stats = run_command(dpscope_bin() + " stats --json " + dir.file("traces/run.sqlite"));
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_NE(stats.output.find("\"strategy\":\"fsdp2\""), std::string::npos) << stats.output;
  EXPECT_NE(stats.output.find("\"name\":\"fc1\""), std::string::npos);
  const auto text = run_command(dpscope_bin() + " stats " + dir.file("traces/run.sqlite"));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("strategy fsdp2"), std::string::npos) << text.output;
}

// The first end of `unit`'s `full` state in `iteration` on `rank`: its post-forward reshard.
int64_t forward_full_end(trace::Reader& reader, int rank, int iteration, int unit) {
  for (const auto& e : reader.events_of_kind(trace::EventKind::UnitState, rank)) {
    if (e.iteration == iteration && e.unit == unit && e.op == static_cast<uint8_t>(trace::UnitState::Full)) {
      return e.end_ns;
    }
  }
  return -1;
}

// When `unit`'s forward all-gather of `iteration` on `rank` was issued.
int64_t forward_gather_issue(trace::Reader& reader, int rank, int iteration, int unit) {
  for (const auto& e : reader.events_of_kind(trace::EventKind::Collective, rank)) {
    if (e.iteration == iteration && e.unit == unit && !(e.flags & trace::kFlagBackward) &&
        e.op == static_cast<uint8_t>(trace::CollectiveOp::AllGather)) {
      return e.enqueue_ns != trace::kNone64 ? e.enqueue_ns : e.begin_ns;
    }
  }
  return -1;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// --explicit-prefetch 2 (PyTorch's FSDP2 example's --explicit-prefetching): the same collectives
// in another issue order, so the final parameters are the implicit run's bit for bit; each group
// after the first is gathered by a forward prefetch, issued before the group ahead of it is
// resharded after its forward, where the implicit run issues it only after.
TEST(Fsdp2Train, ExplicitPrefetchFlagTrainsToTheSameBitsGatheringEarlier) {
  TempDir dir;
  const auto train = [&](const std::string& name, const std::string& flags) {
    return train_three_ranks(dir, name, "--layers 3 " + flags);
  };
  const auto implicit = train("implicit", "");
  ASSERT_EQ(implicit.exit_code, 0) << implicit.output;
  const auto explicit_run = train("explicit", "--explicit-prefetch 2");
  ASSERT_EQ(explicit_run.exit_code, 0) << explicit_run.output;
  EXPECT_NE(explicit_run.output.find("reshard_after_forward true, explicit prefetch 2)"), std::string::npos)
      << explicit_run.output;
  const std::string a = file_bytes(dir.file("implicit.pt")), b = file_bytes(dir.file("explicit.pt"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "the final parameters differ";

  trace::Reader implicit_trace(dir.file("implicit/run.sqlite")), explicit_trace(dir.file("explicit/run.sqlite"));
  EXPECT_NE(explicit_trace.meta_value("config").find("\"explicit_prefetch\":2"), std::string::npos);
  int groups = 0;
  for (const auto& u : explicit_trace.units()) groups += u.numel > 0 ? 1 : 0;
  ASSERT_GE(groups, 3);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const IterationCounts before = count_iteration(implicit_trace, r, 1), after = count_iteration(explicit_trace, r, 1);
    EXPECT_EQ(after.gathers, before.gathers) << "the same all-gathers";
    EXPECT_EQ(before.forward_prefetched, 0);
    EXPECT_EQ(after.forward_prefetched, groups - 1) << "every group after the first prefetched in forward";
    for (int unit = 1; unit < groups; ++unit) {
      ASSERT_GT(forward_gather_issue(explicit_trace, r, 1, unit), 0) << "unit " << unit;
      ASSERT_GT(forward_full_end(implicit_trace, r, 1, unit - 1), 0) << "unit " << unit - 1;
      EXPECT_GT(forward_gather_issue(implicit_trace, r, 1, unit), forward_full_end(implicit_trace, r, 1, unit - 1))
          << "implicit: unit " << unit << " gathered after unit " << unit - 1 << " resharded";
      EXPECT_LT(forward_gather_issue(explicit_trace, r, 1, unit), forward_full_end(explicit_trace, r, 1, unit - 1))
          << "explicit: unit " << unit << " gathered before unit " << unit - 1 << " resharded";
    }
  }
}

// The largest sample of `category` on `rank`.
int64_t largest(trace::Reader& reader, int rank, trace::MemoryCategory category) {
  int64_t most = 0;
  for (const auto& m : reader.memory(rank)) {
    if (m.category == category) most = std::max(most, m.bytes);
  }
  return most;
}

// --cpu-offload (CPUOffloadPolicy, Note [FSDP2 CPU offload]) on the CPU: the host is the compute
// device, so the copies stay in host memory and training, the collectives and the memory by
// category are the run without offload's; the config records the policy.
TEST(Fsdp2Train, CpuOffloadTrainsToTheSameBitsWithTheSameMemory) {
  TempDir dir;
  const auto train = [&](const std::string& name, const std::string& flags) {
    return train_three_ranks(dir, name, flags);
  };
  const auto plain = train("plain", "");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto offloaded = train("offload", "--cpu-offload");
  ASSERT_EQ(offloaded.exit_code, 0) << offloaded.output;
  EXPECT_NE(offloaded.output.find("reshard_after_forward true, offload cpu)"), std::string::npos) << offloaded.output;
  const std::string a = file_bytes(dir.file("plain.pt")), b = file_bytes(dir.file("offload.pt"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "the final parameters differ";
  trace::Reader plain_trace(dir.file("plain/run.sqlite")), offload_trace(dir.file("offload/run.sqlite"));
  EXPECT_NE(offload_trace.meta_value("config").find("\"cpu_offload\":true"), std::string::npos);
  EXPECT_NE(plain_trace.meta_value("config").find("\"cpu_offload\":false"), std::string::npos);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const IterationCounts before = count_iteration(plain_trace, r, 1), after = count_iteration(offload_trace, r, 1);
    EXPECT_EQ(after.gathers, before.gathers);
    EXPECT_EQ(after.reduce_scatters, before.reduce_scatters);
    for (auto category : {trace::MemoryCategory::Shards, trace::MemoryCategory::GradientShards,
                          trace::MemoryCategory::OptimizerState, trace::MemoryCategory::FullParameters}) {
      EXPECT_GT(largest(offload_trace, r, category), 0) << trace::to_string(category);
      EXPECT_EQ(largest(offload_trace, r, category), largest(plain_trace, r, category)) << trace::to_string(category);
    }
  }
}

// Keeping the parameters after forward: backward gathers nothing.
TEST(Fsdp2Train, KeepAfterForwardGathersOnlyInForward) {
  TempDir dir;
  const auto run = run_command(
      "timeout 120 " + dpscope_bin() + " launch -n 2 --trace-dir " + dir.file("traces") + " -- " +
      dpscope_bin() + " train --threads 1 --progress-every 0 --steps 3 --batch-size 16 --samples 256 "
      "--model mlp --hidden 33 --strategy fsdp2 --wrap-min-params 100 --reshard-after-forward false");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  trace::Reader reader(dir.file("traces/run.sqlite"));
  for (int r = 0; r < 2; ++r) {
    const IterationCounts counts = count_iteration(reader, r, 1);
    EXPECT_EQ(counts.gathers, 3) << "rank " << r;
    EXPECT_EQ(counts.backward_gathers, 0) << "rank " << r;
    EXPECT_EQ(counts.reduce_scatters, 3) << "rank " << r;
  }
}

// reshard_after_forward 2 on 4 ranks: forward all-gathers in the world group, backward within
// each pair of ranks (a group of its own, Note [Resharding to a smaller group]).
TEST(Fsdp2Train, ReshardToGroupsOfTwoGathersWithinThemInBackward) {
  TempDir dir;
  const auto run = run_command(
      "timeout 120 " + dpscope_bin() + " launch -n 4 --trace-dir " + dir.file("traces") + " -- " +
      dpscope_bin() + " train --threads 1 --progress-every 0 --steps 3 --batch-size 16 --samples 256 "
      "--model mlp --hidden 33 --strategy fsdp2 --wrap-min-params 100 --reshard-after-forward 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  trace::Reader reader(dir.file("traces/run.sqlite"));
  EXPECT_EQ(reader.meta_value("fsdp2.reshard_after_forward"), "2");
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    int forward = 0, backward = 0;
    std::set<int> backward_groups;
    for (const auto& e : reader.events_of_kind(trace::EventKind::Collective, r)) {
      if (e.iteration != 1 || e.op != static_cast<uint8_t>(trace::CollectiveOp::AllGather)) continue;
      if (e.flags & trace::kFlagBackward) {
        ++backward;
        backward_groups.insert(e.grp);
      } else {
        ++forward;
        EXPECT_EQ(e.grp, 0) << "a forward all-gather in the world group";
      }
    }
    EXPECT_EQ(forward, 3);
    EXPECT_EQ(backward, 3);
    ASSERT_EQ(backward_groups.size(), 1u);
    EXPECT_NE(*backward_groups.begin(), 0) << "backward gathers within the pair";
  }
}

}  // namespace
