// HSDP (`dpscope train --strategy fsdp2 --sharding hybrid --shard-group-size N`, and FSDP1's
// HYBRID_SHARD with --strategy fsdp): the final parameters against DDP's on the same ranks
// (1e-5), on one machine and (FSDP2) across two network-namespace hosts; the trace's shard and
// replicate groups (names, collectives per group per step, meta) through `dpscope stats` and the
// cluster clock; and the bad options refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "analysis/cluster_clock.h"
#include "analysis/stats.h"
#include "tests/test_util.h"
#include "tests/torch_oracle.h"
#include "tests/two_hosts.h"
#include "trace/reader.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::max_abs_diffs;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
using dpscope::testing::train_for_comparison;
using dpscope::testing::TwoHosts;
namespace trace = dpscope::trace;
namespace core = dpscope::core;
namespace analysis = dpscope::analysis;

namespace {

// Both runs from the same seed; our DDP equals PyTorch's own DDP (tests/ddp), so HSDP equal to it
// is HSDP equal to PyTorch's DDP.
// `relative_tolerance` (bf16): the largest difference allowed as a fraction of how far training
// moved the parameters; 0: an absolute 1e-5.
void compare_with_ddp(int world, const std::string& model, const std::string& hsdp,
                      const std::string& strategy = "fsdp2", double relative_tolerance = 0) {
  TempDir dir;
  train_for_comparison(world, model, dir.path().string(), "hsdp",
                       "--strategy " + strategy + " --sharding hybrid " + hsdp + " --save-init " +
                           dir.file("init.pt"));
  train_for_comparison(world, model, dir.path().string(), "ddp", "--strategy ddp");
  const std::vector<double> diffs = max_abs_diffs({{dir.file("hsdp.pt"), dir.file("init.pt")},
                                                   {dir.file("hsdp.pt"), dir.file("ddp.pt")}});
  std::printf("%d ranks, %s, %s %s: moved %.3g, max |hsdp - ddp| %.3g\n", world, strategy.c_str(),
              model.c_str(), hsdp.c_str(), diffs[0], diffs[1]);
  EXPECT_GT(diffs[0], 1e-3) << "training did not move the parameters; the comparison proves nothing";
  EXPECT_LE(diffs[1], relative_tolerance > 0 ? relative_tolerance * diffs[0] : 1e-5) << "against our DDP";
}

// hidden 10: fc0.weight [10, 64], fc1 and fc2 [10, 10]: over a shard group of 2, chunks of 5; over
// 3 (6 ranks would be 2 x 3) too many ranks for 2 cores. A group per Linear.
const std::string kMlp10 = "--model mlp --hidden 10 --momentum 0.9";
const std::string kEveryLayer = "--wrap-min-params 100";

TEST(HsdpVsDdp, TwoReplicasOfTwoRanks) { compare_with_ddp(4, kMlp10, kEveryLayer + " --shard-group-size 2"); }
// hidden 3 over 2 ranks: chunks of 2 and 1 rows, the rows uneven in every parameter.
TEST(HsdpVsDdp, TwoReplicasOfTwoRanksUnevenRowsKept) {
  compare_with_ddp(4, "--model mlp --hidden 3 --momentum 0.9",
                   "--wrap-min-params 10 --shard-group-size 2 --reshard-after-forward false");
}
// One replica of four ranks, resharded after forward to pairs of ranks within it: FSDP's result.
TEST(HsdpVsDdp, OneReplicaOfFourRanksReshardToTwo) {
  compare_with_ddp(4, kMlp10, kEveryLayer + " --shard-group-size 4 --reshard-after-forward 2");
}
// Shard groups of one rank: nothing sharded, every gradient all-reduced across the four replicas.
TEST(HsdpVsDdp, FourReplicasOfOneRank) { compare_with_ddp(4, kMlp10, kEveryLayer + " --shard-group-size 1"); }
// Gradient accumulation: the unsharded gradients summed under no_sync, reduced once in two steps.
TEST(HsdpVsDdp, TwoReplicasOfTwoRanksGradAccum) {
  compare_with_ddp(4, kMlp10 + " --grad-accum 2", kEveryLayer + " --shard-group-size 2");
}
// bf16 compute and reduction (both steps in bf16), within 6% as tests/fsdp2/test_fsdp2_vs_ddp holds
// FSDP2's own; measured 1.8%.
TEST(HsdpVsDdp, Bf16TwoReplicasOfTwoRanks) {
  compare_with_ddp(4, kMlp10, kEveryLayer + " --shard-group-size 2 --mixed-precision bf16", "fsdp2", 0.06);
}
TEST(HsdpVsDdp, CnnTwoReplicasOfTwoRanks) {
  compare_with_ddp(4, "--model cnn --data digits --momentum 0.9", "--wrap-min-params 200 --shard-group-size 2");
}

// FSDP1's HYBRID_SHARD: flat parameters sharded over the shard group, reduce-scattered there
// (through the bucketer, or not), then all-reduced across the replicas.
TEST(HybridShardVsDdp, Fsdp1TwoReplicasOfTwoRanks) {
  compare_with_ddp(4, kMlp10, kEveryLayer + " --shard-group-size 2", "fsdp");
}
TEST(HybridShardVsDdp, Fsdp1TwoReplicasOfTwoRanksUnbucketedGradAccum) {
  compare_with_ddp(4, kMlp10 + " --grad-accum 2", kEveryLayer + " --shard-group-size 2 --reduce-bucket-mb 0",
                   "fsdp");
}
TEST(HybridShardVsDdp, Fsdp1FourReplicasOfOneRank) {
  compare_with_ddp(4, kMlp10, kEveryLayer + " --shard-group-size 1", "fsdp");
}

// Two hosts (network namespaces over a veth pair) of two ranks each, a shard group a host: the
// all-gathers and reduce-scatters stay on each host, the all-reduces cross the link.
TEST(HsdpTwoHosts, TwoHostsOfTwoRanksEqualDdp) {
  TwoHosts hosts;
  if (!hosts.ready()) GTEST_SKIP() << "ip netns is not available here: " << hosts.error();
  TempDir dir;
  const std::string flags = "train --threads 1 --progress-every 0 --steps 8 --batch-size 16 "
                            "--lr 0.05 --samples 256 " + kMlp10;
  auto node = [&](const std::string& ns, int node_rank) {
    const std::string n = std::to_string(node_rank);
    return "ip netns exec " + ns + " timeout 300 " + dpscope_bin() +
           " launch -n 2 --nnodes 2 --node-rank " + n +
           " --master-addr 10.77.0.1 --master-port 29557 --trace-dir " + dir.file("traces") + " -- " +
           dpscope_bin() + " " + flags + " --strategy fsdp2 --sharding hybrid --shard-group-size 2 " +
           kEveryLayer + " --save-final " + dir.file("hsdp.pt") + " > " + dir.file("node" + n + ".txt") +
           " 2>&1; echo $? > " + dir.file("status" + n);
  };
  run_command("(" + node(hosts.a(), 0) + ") & (" + node(hosts.b(), 1) + ") & wait");
  for (int node_rank : {0, 1}) {
    const std::string n = std::to_string(node_rank);
    ASSERT_EQ(run_command("cat " + dir.file("status" + n)).output, "0\n")
        << run_command("cat " + dir.file("node" + n + ".txt")).output;
  }
  train_for_comparison(4, kMlp10, dir.path().string(), "ddp", "--strategy ddp");
  const double diff = max_abs_diffs({{dir.file("hsdp.pt"), dir.file("ddp.pt")}})[0];
  std::printf("two hosts x 2 ranks: max |hsdp - ddp| %.3g\n", diff);
  EXPECT_LE(diff, 1e-5);
  // Host B's ranks: their shard group is host B's, their replicate groups reach host A.
  trace::Reader node1(dir.file("traces") + "/run-node1.sqlite");
  std::string lanes;
  for (const auto& lane : node1.lanes()) lanes += lane.name + "\n";
  for (const char* group : {"(shard #1: ranks 2-3)", "(replicate #0: ranks 0,2)", "(replicate #1: ranks 1,3)"}) {
    EXPECT_NE(lanes.find(group), std::string::npos) << "lanes of host B:\n" << lanes;
  }
}

// ---- The trace ------------------------------------------------------------------------------

// Three groups (fc0, fc1, fc2) and the root's, which holds nothing: per step and rank, 3 forward
// and 3 backward all-gathers and 3 reduce-scatters in the shard group, 3 all-reduces in the
// replicate group, nothing else in either.
TEST(HsdpTrace, GroupsCollectivesMetaStatsAndClusterClock) {
  TempDir dir;
  const int steps = 4;
  const auto run = run_command(
      "timeout 300 " + dpscope_bin() + " launch -n 4 --trace-dir " + dir.file("t") + " -- " +
      dpscope_bin() + " train --threads 1 --progress-every 0 --steps " + std::to_string(steps) +
      " " + kMlp10 + " " + kEveryLayer + " --strategy fsdp2 --sharding hybrid --shard-group-size 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("HSDP: 2 replicas of 2 ranks"), std::string::npos) << run.output;
  const std::string file = dir.file("t/run.sqlite");
  trace::Reader reader(file);
  const auto meta = reader.meta();
  EXPECT_EQ(meta.at(std::string(trace::meta_key::kFsdpSharding)), "hybrid");
  EXPECT_EQ(meta.at(std::string(trace::meta_key::kFsdpShardGroupSize)), "2");

  std::map<std::pair<int32_t, int32_t>, std::string> lane_names;
  for (const auto& lane : reader.lanes()) lane_names[{lane.rank, lane.lane}] = lane.name;
  for (int rank = 0; rank < 4; ++rank) {
    const int shard_grp = 20000 + rank / 2, replicate_grp = 24000 + rank % 2;
    const std::string shard_name = rank < 2 ? "shard #0: ranks 0-1" : "shard #1: ranks 2-3";
    const std::string replicate_name = rank % 2 ? "replicate #1: ranks 1,3" : "replicate #0: ranks 0,2";
    // (group, op) -> count, per iteration
    std::map<int32_t, std::map<std::pair<int32_t, uint8_t>, int>> counts;
    for (const auto& e : reader.events_of_kind(trace::EventKind::Collective, rank)) {
      if (e.iteration == trace::kNone) continue;
      ++counts[e.iteration][{e.grp, e.op}];
      const std::string& lane = lane_names[{rank, e.lane}];
      const std::string& expected = e.grp == shard_grp ? shard_name : replicate_name;
      EXPECT_NE(lane.find("(" + expected + ")"), std::string::npos)
          << "rank " << rank << ": a collective of group " << e.grp << " ran on lane '" << lane << "'";
    }
    ASSERT_EQ(counts.size(), size_t(steps)) << "rank " << rank;
    for (const auto& [iteration, per_group] : counts) {
      const std::map<std::pair<int32_t, uint8_t>, int> expected{
          {{shard_grp, uint8_t(trace::CollectiveOp::AllGather)}, 6},
          {{shard_grp, uint8_t(trace::CollectiveOp::ReduceScatter)}, 3},
          {{replicate_grp, uint8_t(trace::CollectiveOp::AllReduce)}, 3}};
      EXPECT_EQ(per_group, expected) << "rank " << rank << " iteration " << iteration;
    }
  }

  // Stats: every collective matched among its group's ranks; the groups' traffic by the ring
  // model: per step a shard rank sends one all-gather's (N-1)/N x 870 floats twice and a
  // reduce-scatter's once, a replicate rank 2(R-1)/R x 435 floats (its rows) in all-reduces.
  const analysis::RunStats stats = analysis::compute_stats(reader);
  EXPECT_EQ(stats.mismatches, 0);
  std::map<int32_t, const analysis::GroupTraffic*> groups;
  for (const auto& g : stats.groups) groups[g.grp] = &g;
  ASSERT_TRUE(groups.count(20001) && groups.count(24001));
  EXPECT_EQ(groups[20001]->name, "shard #1: ranks 2-3");
  EXPECT_EQ(groups[20001]->ranks, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(groups[24001]->name, "replicate #1: ranks 1,3");
  EXPECT_EQ(groups[24001]->ranks, (std::vector<int32_t>{1, 3}));
  const double params_bytes = 870 * 4;  // 650 + 110 + 110 floats
  EXPECT_DOUBLE_EQ(groups[20001]->wire_bytes_per_step, 3 * params_bytes / 2);
  EXPECT_DOUBLE_EQ(groups[24001]->wire_bytes_per_step, 2.0 * 1 / 2 * params_bytes / 2);
  const auto text = run_command(dpscope_bin() + " stats " + file);
  EXPECT_NE(text.output.find("group 24001 'replicate #1: ranks 1,3'"), std::string::npos) << text.output;
  const auto json = run_command(dpscope_bin() + " stats --json " + file);
  EXPECT_NE(json.output.find("\"name\":\"shard #0: ranks 0-1\""), std::string::npos) << json.output;

  // The cluster clock: a group's collective goes on the link when the last rank of that group
  // has issued it, and only that group's ranks take part.
  const analysis::ClusterClockRun cluster = analysis::cluster_clock(reader, file, core::LinkSpec{1, 50});
  EXPECT_EQ(cluster.timeline.unmatched_waits, 0);
  std::map<analysis::CollectiveKey, std::vector<int32_t>> takers;
  std::map<analysis::CollectiveKey, int64_t> last_issue;
  for (const auto& [rank, spans] : cluster.rank_collectives) {
    for (const auto& [key, span] : spans) {
      takers[key].push_back(rank);
      last_issue[key] = std::max(last_issue[key], span.issue_ns);
    }
  }
  int subgroup_collectives = 0;
  for (const auto& [key, ranks] : takers) {
    if (key.first == 0) continue;
    ++subgroup_collectives;
    const int index = key.first >= 24000 ? key.first - 24000 : key.first - 20000;
    const std::vector<int32_t> members = key.first >= 24000 ? std::vector<int32_t>{index, index + 2}
                                                            : std::vector<int32_t>{2 * index, 2 * index + 1};
    EXPECT_EQ(ranks, members) << "group " << key.first << " seq " << key.second;
    EXPECT_GE(cluster.timeline.collectives.at(key).begin_ns, last_issue[key]);
  }
  EXPECT_GE(subgroup_collectives, 4 * steps * 12 / 2) << "each group's collectives, once each";
  EXPECT_EQ(analysis::compute_stats(reader, cluster).mismatches, 0);
}

// The ring model's bytes a rank sends (docs/communication.md): S = 4000 bytes over 4 ranks.
TEST(HsdpTrace, RingWireBytes) {
  using trace::CollectiveOp;
  EXPECT_EQ(analysis::ring_wire_bytes(CollectiveOp::AllReduce, 4000, 4), 6000);      // 2(n-1)/n S
  EXPECT_EQ(analysis::ring_wire_bytes(CollectiveOp::ReduceScatter, 4000, 4), 3000);  // (n-1)/n S
  EXPECT_EQ(analysis::ring_wire_bytes(CollectiveOp::AllGather, 1000, 4), 3000);      // (n-1) S/n
  EXPECT_EQ(analysis::ring_wire_bytes(CollectiveOp::Broadcast, 4000, 4), 4000);
  EXPECT_EQ(analysis::ring_wire_bytes(CollectiveOp::Barrier, 0, 4), 0);
  EXPECT_EQ(analysis::ring_wire_bytes(CollectiveOp::AllReduce, 4000, 1), 0);
}

// FSDP1's HYBRID_SHARD: per step and rank, each unit with parameters (fc0, fc1, fc2) all-gathers
// in its shard group in forward and again in backward and reduce-scatters there (unbucketed),
// and its shard is all-reduced in the replicate group.
TEST(HsdpTrace, Fsdp1HybridShardGroups) {
  TempDir dir;
  const auto run = run_command(
      "timeout 300 " + dpscope_bin() + " launch -n 4 --trace-dir " + dir.file("t") + " -- " +
      dpscope_bin() + " train --threads 1 --progress-every 0 --steps 3 " + kMlp10 + " " + kEveryLayer +
      " --strategy fsdp --sharding hybrid --shard-group-size 2 --reduce-bucket-mb 0");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  trace::Reader reader(dir.file("t/run.sqlite"));
  EXPECT_EQ(reader.meta().at(std::string(trace::meta_key::kFsdpSharding)), "hybrid");
  EXPECT_EQ(reader.meta().at(std::string(trace::meta_key::kFsdpShardGroupSize)), "2");
  for (int rank = 0; rank < 4; ++rank) {
    const int shard_grp = 20000 + rank / 2, replicate_grp = 24000 + rank % 2;
    std::map<int32_t, std::map<std::pair<int32_t, uint8_t>, int>> counts;
    for (const auto& e : reader.events_of_kind(trace::EventKind::Collective, rank)) {
      if (e.iteration != trace::kNone) ++counts[e.iteration][{e.grp, e.op}];
    }
    ASSERT_EQ(counts.size(), 3u) << "rank " << rank;
    for (const auto& [iteration, per_group] : counts) {
      const std::map<std::pair<int32_t, uint8_t>, int> expected{
          {{shard_grp, uint8_t(trace::CollectiveOp::AllGather)}, 6},
          {{shard_grp, uint8_t(trace::CollectiveOp::ReduceScatter)}, 3},
          {{replicate_grp, uint8_t(trace::CollectiveOp::AllReduce)}, 3}};
      EXPECT_EQ(per_group, expected) << "rank " << rank << " iteration " << iteration;
    }
  }
  EXPECT_EQ(analysis::compute_stats(reader).mismatches, 0);
  // The what-if replays it, the replicate all-reduces on their own link (Note [FSDP what-if replay]).
  const auto whatif = run_command(dpscope_bin() + " whatif " + dir.file("t/run.sqlite") +
                                  " --backward-prefetch post");
  EXPECT_EQ(whatif.exit_code, 0) << whatif.output;
}

// One replica (N = W): the replicate groups have one rank each and issue nothing, so every
// collective of the trace matches (a group seen on one rank would not).
TEST(HsdpTrace, OneReplicaIssuesNoReplicateCollectives) {
  for (const char* strategy : {"fsdp2", "fsdp"}) {
    TempDir dir;
    const auto run = run_command(
        "timeout 300 " + dpscope_bin() + " launch -n 4 --trace-dir " + dir.file("t") + " -- " +
        dpscope_bin() + " train --threads 1 --progress-every 0 --steps 2 " + kMlp10 + " " +
        kEveryLayer + " --strategy " + strategy + " --sharding hybrid --shard-group-size 4");
    ASSERT_EQ(run.exit_code, 0) << run.output;
    trace::Reader reader(dir.file("t/run.sqlite"));
    for (const auto& e : reader.events_of_kind(trace::EventKind::Collective)) {
      EXPECT_LT(e.grp, 24000) << strategy << ": rank " << e.rank << " ran a collective in its replicate group";
    }
    EXPECT_EQ(analysis::compute_stats(reader).mismatches, 0) << strategy;
  }
}

// ---- Bad options ----------------------------------------------------------------------------

dpscope::testing::CommandResult train_with(int world, const std::string& flags, const TempDir& dir) {
  return run_command("timeout 120 " + dpscope_bin() + " launch -n " + std::to_string(world) +
                     " --trace-dir " + dir.file("t") + " -- " + dpscope_bin() +
                     " train --threads 1 --progress-every 0 --steps 1 --model mlp --hidden 10 " + flags);
}

void expect_refused(int world, const std::string& flags, const std::string& message) {
  TempDir dir;
  const auto run = train_with(world, flags, dir);
  EXPECT_NE(run.exit_code, 0) << flags;
  EXPECT_NE(run.output.find(message), std::string::npos) << flags << "\n" << run.output;
}

TEST(HsdpOptions, ShardGroupSizeNotDividingTheWorldIsRefused) {
  expect_refused(4, "--strategy fsdp2 --sharding hybrid --shard-group-size 3",
                 "--shard-group-size 3: HSDP shards each parameter over groups of N ranks and "
                 "replicates it across world / N such groups, so N must divide the world size 4; "
                 "give one of 1, 2, 4");
}

TEST(HsdpOptions, ShardGroupSizeLargerThanTheWorldIsRefused) {
  expect_refused(2, "--strategy fsdp2 --sharding hybrid --shard-group-size 4",
                 "--shard-group-size 4: HSDP shards each parameter");
}

TEST(HsdpOptions, ShardGroupSizeBelowOneIsRefused) {
  expect_refused(1, "--strategy fsdp2 --sharding hybrid --shard-group-size 0",
                 "--shard-group-size 0: give N >= 1, a divisor of the world size");
}

TEST(HsdpOptions, HybridWithoutShardGroupSizeIsRefused) {
  expect_refused(1, "--strategy fsdp2 --sharding hybrid",
                 "--sharding hybrid needs --shard-group-size N");
}

TEST(HsdpOptions, ShardGroupSizeWithoutHybridIsRefused) {
  expect_refused(1, "--strategy fsdp2 --shard-group-size 1",
                 "--shard-group-size is HSDP's: add --sharding hybrid");
  expect_refused(1, "--strategy ddp --shard-group-size 1", "--shard-group-size is HSDP's");
}

TEST(HsdpOptions, HybridIsFsdpsAndNoShardIsRefused) {
  expect_refused(1, "--strategy ddp --sharding hybrid --shard-group-size 1",
                 "--sharding hybrid (HSDP) is FSDP's: use --strategy fsdp2 or fsdp");
  expect_refused(4, "--strategy fsdp --sharding hybrid --shard-group-size 3",
                 "--shard-group-size 3: HSDP shards each parameter");
  expect_refused(1, "--strategy fsdp2 --sharding no_shard",
                 "--sharding no_shard: FSDP2 always shards; use --strategy ddp");
}

// reshard_after_forward's int form divides the shard group's size, not the world's (PyTorch's
// _get_post_forward_mesh_info checks it against the shard mesh).
TEST(HsdpOptions, ReshardAfterForwardMustDivideTheShardGroup) {
  expect_refused(4, "--strategy fsdp2 --sharding hybrid --shard-group-size 2 --reshard-after-forward 4",
                 "reshard_after_forward 4: the int form is the size of the group parameters are "
                 "resharded to after forward, and must be a factor of the size of the group they "
                 "are sharded over (the world, or HSDP's shard group) 2 (1..2)");
}

}  // namespace
