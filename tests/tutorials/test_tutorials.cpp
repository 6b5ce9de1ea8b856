// test_tutorials: the DDP and FSDP tutorials run to completion on 2 ranks under `dpscope launch`
// with few steps, and what each claims holds in the traces it wrote: one all-reduce per bucket
// (04), the rebuilt plan and gradient views (05), the used-parameter map (06), no all-reduce in
// no_sync micro-steps (07), half the bytes with fp16 (08), FSDP's gathers and reduce-scatters per
// unit (10), nesting and SHARD_GRAD_OP (11), ZeRO-3 < ZeRO-2 < DDP in peak memory (12), 95 % on
// the held-out digits with DDP and FSDP (15), a clear exit without a GPU (16), the slow rank
// named and paid for by every rank (17), and a what-if prediction checked by a real run (18);
// 04, 05, 11, 12 and 18 also with the GPT-shaped model (--model gpt).
// Tutorials 01, 02, 09, 13 and 14 have test files of their own (test_tutorial_<topic>.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "tests/tutorials/tutorial_checks.h"
#include "trace/vocabulary.h"

using namespace dpscope::testing::tutorial;
using dpscope::testing::TempDir;

namespace {


TEST(Tutorials, ToyDdp03ConstructionAndOneIteration) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-03-toy-ddp", "--steps 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Different random weights before DDP, rank 0's everywhere after its broadcast.
  EXPECT_NE(run.output.find("sum |weights|                      rank 0"), std::string::npos) << run.output;
  const std::regex after_broadcast("2\\. After DDP's constructor[^\\n]*\\n[^\\n]*equal on every rank");
  EXPECT_TRUE(std::regex_search(run.output, after_broadcast)) << run.output;

  const analysis::RunStats stats = stats_of(run.trace_dir + "/run.sqlite");
  ASSERT_EQ(stats.ranks.size(), 2u);
  ASSERT_EQ(stats.params.size(), 4u);  // net1.weight, net1.bias, net2.weight, net2.bias
  const auto buckets = plan(stats, 0);
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].bytes, 165 * 4);
  for (const auto& rank : stats.ranks) {
    int64_t construction_broadcasts = 0;
    for (const auto& c : rank.collectives) {
      construction_broadcasts += c.iteration == trace::kNone && c.op == trace::CollectiveOp::Broadcast;
    }
    EXPECT_GE(construction_broadcasts, 2) << "model verification and state broadcast, rank " << rank.rank;
    ASSERT_EQ(rank.iterations.size(), 2u);
    EXPECT_EQ(rank.iterations[0].hooks, 4) << "one hook per parameter, rank " << rank.rank;
    EXPECT_EQ(all_reduces(rank, 0), 1) << "one bucket, one all-reduce, rank " << rank.rank;
    EXPECT_EQ(all_reduce_bytes(rank, 0), 660);
  }
}

TEST(Tutorials, Bucketing04OneAllReducePerBucketForEachCap) {
  TempDir dir;
  // On the link its README runs it on: the tutorial's own process groups queue on it.
  const TutorialRun run = launch(dir, "tutorial-04-bucketing", "--steps 3 --caps 25,4,1",
                                 "--link-gbps 2 --link-latency-us 50");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("on an emulated link of 2 Gb/s and 50 us"), std::string::npos) << run.output;
  std::map<std::string, size_t> buckets_of_cap;
  for (const std::string cap : {"cap-25mb", "cap-4mb", "cap-1mb"}) {
    const analysis::RunStats stats = stats_of(run.trace_dir + "/" + cap + "/run.sqlite");
    EXPECT_EQ(stats.link_gbps, 2) << cap;
    EXPECT_EQ(stats.link_latency_us, 50) << cap;
    // See Note [The first iteration's buckets]: one bucket, then the cap's plan.
    EXPECT_EQ(plan(stats, 0).size(), 1u) << cap;
    buckets_of_cap[cap] = plan(stats, 1).size();
    ASSERT_EQ(stats.iterations, 3) << cap;
    for (const auto& rank : stats.ranks) {
      for (int32_t it = 0; it < stats.iterations; ++it) {
        // The plan in force: the initial one in iteration 0, the rebuilt one afterwards.
        const size_t in_force = plan(stats, it == 0 ? 0 : 1).size();
        EXPECT_EQ(all_reduces(rank, it), static_cast<int64_t>(in_force))
            << cap << ", rank " << rank.rank << ", iteration " << it;
      }
    }
  }
  EXPECT_EQ(buckets_of_cap["cap-25mb"], 2u);
  EXPECT_EQ(buckets_of_cap["cap-4mb"], 3u);
  EXPECT_EQ(buckets_of_cap["cap-1mb"], 8u);
  EXPECT_NE(run.output.find("Why reverse order"), std::string::npos) << run.output;
}

// With the GPT-shaped model (README, "With a model shaped like the ones people train"): 54
// tensors; at a 0.25 MiB cap the rebuilt plan has 10 buckets, the first 1 MiB one holding the head
// and the last block, each MLP weight with its bias alone, the embeddings in the last.
TEST(Tutorials, Bucketing04GptPlanFollowsTheBlocks) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-04-bucketing", "--model gpt --caps 0.25 --steps 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const analysis::RunStats stats = stats_of(run.trace_dir + "/cap-0.25mb/run.sqlite");
  ASSERT_EQ(stats.params.size(), 54u);
  const auto rebuilt = plan(stats, 1);
  ASSERT_EQ(rebuilt.size(), 10u);
  EXPECT_GE(rebuilt[0].bytes, 1 << 20);
  EXPECT_TRUE(holds(stats, rebuilt[0], "lm_head.")) << run.output;
  EXPECT_TRUE(holds(stats, rebuilt[0], "block3.")) << run.output;
  ASSERT_EQ(rebuilt[1].params.size(), 2u);
  EXPECT_EQ(param_name(stats, rebuilt[1].params[0]), "block2.mlp_fc.bias");
  EXPECT_EQ(param_name(stats, rebuilt[1].params[1]), "block2.mlp_fc.weight");
  EXPECT_TRUE(holds(stats, rebuilt.back(), "wte.")) << run.output;
  EXPECT_TRUE(holds(stats, rebuilt.back(), "wpe.")) << run.output;
  for (const auto& rank : stats.ranks) EXPECT_EQ(all_reduces(rank, 1), 10) << "rank " << rank.rank;
}

TEST(Tutorials, BucketRebuild05RebuiltPlanAndGradientViews) {
  TempDir dir;
  // On the link its README runs it on, so that the all-reduces take a cluster's time.
  const TutorialRun run = launch(dir, "tutorial-05-bucket-rebuild", "--steps 3",
                                 "--link-gbps 2 --link-latency-us 50");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string copy_path = run.trace_dir + "/gradient-copy/run.sqlite";
  const analysis::RunStats copy = stats_of(copy_path);
  const analysis::RunStats guess = stats_of(run.trace_dir + "/by-size-guess/run.sqlite");
  // Iteration 0: one bucket (PyTorch >= 1.12), or the guess by size (PyTorch <= 1.11).
  const auto initial = plan(copy, 0);
  ASSERT_EQ(initial.size(), 1u);
  EXPECT_EQ(initial.front().params.size(), copy.params.size());
  const auto guessed = plan(guess, 0);
  const auto rebuilt = plan(copy, 1);
  ASSERT_EQ(guessed.size(), 7u);
  ASSERT_EQ(rebuilt.size(), 7u);
  EXPECT_EQ(plan(guess, 1).size(), rebuilt.size()) << "the rebuild does not depend on the guess";
  // layer7 runs first in forward, so its gradients come last: the guess (reversed registration
  // order) puts it in bucket 0, the rebuilt plan (arrival order) in the last.
  EXPECT_TRUE(holds(guess, guessed.front(), "layer7."));
  EXPECT_TRUE(holds(copy, rebuilt.front(), "layer0."));
  EXPECT_TRUE(holds(copy, rebuilt.back(), "layer7."));

  // Iteration 0: every all-reduce is sent after the last gradient, with either plan (the README's
  // "sent after" column: 7 for the guess, 1 for one bucket); rebuilt, only the last bucket's.
  for (const auto& [path, initial_buckets] :
       {std::pair{copy_path, size_t{1}},
        std::pair{run.trace_dir + "/by-size-guess/run.sqlite", guessed.size()}}) {
    trace::Reader reader(path);
    std::map<int32_t, int64_t> last_hook, bucket0_launch, sent_after;
    for (const auto& hook : reader.events_of_kind(trace::EventKind::Hook, 0)) {
      last_hook[hook.iteration] = std::max(last_hook[hook.iteration], hook.begin_ns);
    }
    for (const auto& launch : reader.events_of_kind(trace::EventKind::BucketLaunch, 0)) {
      if (launch.bucket == 0) bucket0_launch[launch.iteration] = launch.begin_ns;
      sent_after[launch.iteration] += launch.begin_ns >= last_hook.at(launch.iteration);
    }
    EXPECT_GE(bucket0_launch.at(0), last_hook.at(0)) << path;
    EXPECT_EQ(sent_after.at(0), static_cast<int64_t>(initial_buckets)) << path;
    for (const int32_t it : {1, 2}) {
      EXPECT_LT(bucket0_launch.at(it), last_hook.at(it)) << path << ", iteration " << it;
      EXPECT_EQ(sent_after.at(it), 1) << path << ", iteration " << it;
    }
  }
  EXPECT_NE(run.output.find("by-size guess (<= 1.11)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("one bucket (>= 1.12)"), std::string::npos) << run.output;

  // gradient_as_bucket_view: no separate gradient memory, so gradients and buckets together
  // take less. (Not the total peak: under load the sampled total can peak at construction, the
  // same in both runs.)
  const analysis::RunStats view = stats_of(run.trace_dir + "/gradient-view/run.sqlite");
  for (int r = 0; r < 2; ++r) {
    const auto& with_copy = copy.ranks.at(r);
    const auto& with_view = view.ranks.at(r);
    EXPECT_GT(peak_of(with_copy, trace::MemoryCategory::Gradients), 6 << 20) << "rank " << r;
    EXPECT_EQ(peak_of(with_view, trace::MemoryCategory::Gradients), 0) << "rank " << r;
    EXPECT_LT(peak_of(with_view, trace::MemoryCategory::Buckets),
              peak_of(with_copy, trace::MemoryCategory::Gradients) +
                  peak_of(with_copy, trace::MemoryCategory::Buckets))
        << "rank " << r;
  }
  EXPECT_NE(run.output.find("each a view of its bucket at the bucket's offset"), std::string::npos)
      << run.output;
  // The printed memory is the trace's: rank 0's peak in the steps, as `dpscope stats` has it.
  const std::vector<double> copy_row = numbers_on(run.output, "default (copy into bucket)");
  const std::vector<double> view_row = numbers_on(run.output, "gradient_as_bucket_view ");
  ASSERT_EQ(copy_row.size(), 4u) << run.output;  // "[0]", gradients, buckets, total (MiB)
  ASSERT_EQ(view_row.size(), 4u) << run.output;
  EXPECT_NEAR(copy_row[3], mib(copy.ranks.at(0).step_memory_peak.total_bytes), 0.006) << run.output;
  EXPECT_NEAR(view_row[3], mib(view.ranks.at(0).step_memory_peak.total_bytes), 0.006) << run.output;
  for (const analysis::RunStats* stats : {&copy, &view}) expect_little_other(*stats);
}

// With the GPT-shaped model (README, "With a model shaped like the ones people train"): iteration
// 0's one bucket of 54 tensors is rebuilt into 4 of 18, 14, 18 and 4 tensors — the first limit's
// 1 MiB from the head to block2.mlp_proj, the embeddings closing the last — and the guess, right
// for a GPT, sends its bucket 0 during iteration 0's backward where one bucket waits for its end.
TEST(Tutorials, BucketRebuild05GptRebuiltPlanCutsTheBlocks) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-05-bucket-rebuild", "--model gpt --steps 2",
                                 "--link-gbps 0.5 --link-latency-us 50");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string copy_path = run.trace_dir + "/gradient-copy/run.sqlite";
  const std::string guess_path = run.trace_dir + "/by-size-guess/run.sqlite";
  const analysis::RunStats copy = stats_of(copy_path);
  ASSERT_EQ(copy.params.size(), 54u);
  const auto initial = plan(copy, 0);
  ASSERT_EQ(initial.size(), 1u);
  EXPECT_EQ(initial.front().params.size(), 54u);
  const auto rebuilt = plan(copy, 1);
  std::vector<size_t> tensors;
  for (const auto& bucket : rebuilt) tensors.push_back(bucket.params.size());
  ASSERT_EQ(tensors, (std::vector<size_t>{18, 14, 18, 4})) << run.output;
  EXPECT_GE(rebuilt.front().bytes, 1 << 20);
  EXPECT_EQ(param_name(copy, rebuilt.front().params.front()), "lm_head.bias");
  EXPECT_EQ(param_name(copy, rebuilt.front().params.back()), "block2.mlp_proj.weight");
  EXPECT_EQ(param_name(copy, rebuilt.back().params.back()), "wte.weight");
  for (const std::string line : {"1.05 MiB  18 tensors  lm_head ln_f block3 block2.mlp_proj",
                                 "76.5 KiB   4 tensors  block0.ln_1 wpe wte", "A block is 774.5 KiB",
                                 "54 gradients in 4 storages (4 buckets)"}) {
    EXPECT_NE(run.output.find(line), std::string::npos) << line << "\n" << run.output;
  }
  // The guess: backward's order, its first limit on the embeddings and block0, the head's
  // remainder in bucket 0.
  const analysis::RunStats guess = stats_of(guess_path);
  const auto guessed = plan(guess, 0);
  ASSERT_EQ(guessed.size(), 4u);
  EXPECT_EQ(guessed.front().params.size(), 5u);
  EXPECT_TRUE(holds(guess, guessed.front(), "lm_head."));
  EXPECT_TRUE(holds(guess, guessed.back(), "wte."));
  EXPECT_TRUE(holds(guess, guessed.back(), "block0."));
  // Within each run: when bucket 0 left against the last gradient of rank 0's backward.
  const auto bucket0_before_last_gradient = [](const std::string& path, int32_t iteration) {
    trace::Reader reader(path);
    int64_t last_hook = 0, bucket0_launch = 0;
    for (const auto& hook : reader.events_of_kind(trace::EventKind::Hook, 0)) {
      if (hook.iteration == iteration) last_hook = std::max(last_hook, hook.begin_ns);
    }
    for (const auto& launch : reader.events_of_kind(trace::EventKind::BucketLaunch, 0)) {
      if (launch.iteration == iteration && launch.bucket == 0) bucket0_launch = launch.begin_ns;
    }
    return bucket0_launch < last_hook;
  };
  EXPECT_FALSE(bucket0_before_last_gradient(copy_path, 0)) << "one bucket waits for the end";
  EXPECT_TRUE(bucket0_before_last_gradient(guess_path, 0)) << "the guess is right for a GPT";
  EXPECT_TRUE(bucket0_before_last_gradient(copy_path, 1)) << "rebuilt";
}

TEST(Tutorials, UnusedParameters06UsedParameterMapEveryIteration) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-06-unused-parameters", "--steps 4");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("DdpError: Expected to have finished reduction in the prior iteration"),
            std::string::npos) << run.output;
  EXPECT_NE(run.output.find("did not receive grad for rank 0: head_b.weight, head_b.bias"),
            std::string::npos) << run.output;

  const analysis::RunStats stats = stats_of(run.trace_dir + "/run.sqlite");
  const size_t buckets = plan(stats, 0).size();
  ASSERT_EQ(stats.params.size(), 6u);
  EXPECT_TRUE(plan(stats, 1).empty()) << "find_unused_parameters never rebuilds the buckets";
  ASSERT_EQ(stats.iterations, 4);
  int64_t skipped = 0;
  for (const auto& rank : stats.ranks) {
    for (int32_t it = 0; it < stats.iterations; ++it) {
      // One all-reduce per bucket, then the used-parameter map: one int32 per parameter.
      EXPECT_EQ(all_reduces(rank, it), static_cast<int64_t>(buckets) + 1) << "rank " << rank.rank << ", iteration " << it;
      int64_t map_all_reduces = 0;
      for (const auto& c : rank.collectives) {
        map_all_reduces += c.iteration == it && c.op == trace::CollectiveOp::AllReduce && c.bytes == 6 * 4;
      }
      EXPECT_EQ(map_all_reduces, 1) << "rank " << rank.rank << ", iteration " << it;
      const int64_t hooks = rank.iterations.at(it).hooks;
      EXPECT_TRUE(hooks == 4 || hooks == 6) << hooks;
      skipped += hooks == 4;
    }
  }
  EXPECT_GT(skipped, 0) << "with seed 0 some rank skips head_b in the first steps";
}

TEST(Tutorials, NoSync07NoAllReduceInNoSyncMicroSteps) {
  TempDir dir;
  // On the link its README runs it on, where the all-reduces' time is the lesson.
  const TutorialRun run = launch(dir, "tutorial-07-no-sync", "--steps 3 --accumulate 4",
                                 "--link-gbps 1 --link-latency-us 50");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string no_sync_path = run.trace_dir + "/no-sync/run.sqlite";
  const analysis::RunStats no_sync = stats_of(no_sync_path);
  trace::Reader reader(no_sync_path);
  const std::vector<std::string> names = reader.names();
  for (int rank = 0; rank < 2; ++rank) {
    std::map<int32_t, std::vector<int64_t>> backward_begins;
    for (const auto& e : reader.events_of_kind(trace::EventKind::Phase, rank)) {
      if (names.at(e.name) == trace::kPhaseBackward) backward_begins[e.iteration].push_back(e.begin_ns);
    }
    ASSERT_EQ(backward_begins.size(), 3u);
    for (const auto& c : reader.events_of_kind(trace::EventKind::Collective, rank)) {
      // Construction's all-reduce (model verification) belongs to no iteration.
      if (c.op != static_cast<uint8_t>(trace::CollectiveOp::AllReduce) || c.iteration == trace::kNone) continue;
      auto begins = backward_begins.at(c.iteration);
      ASSERT_EQ(begins.size(), 4u) << "4 micro-steps per optimizer step";
      std::sort(begins.begin(), begins.end());
      EXPECT_GE(c.begin_ns, begins.back())
          << "rank " << rank << ": all-reduce #" << c.seq << " began during a no_sync micro-step";
    }
    for (int32_t it = 0; it < 3; ++it) {
      EXPECT_EQ(all_reduces(no_sync.ranks.at(rank), it), 1) << "one bucket, synced once per step";
    }
  }
  // Synchronising every micro-step sends four times as much, for the same result.
  const analysis::RunStats every = stats_of(run.trace_dir + "/sync-every-micro-step/run.sqlite");
  int64_t every_bytes = 0, no_sync_bytes = 0;
  for (int32_t it = 0; it < every.iterations; ++it) every_bytes += all_reduce_bytes(every.ranks.at(0), it);
  for (int32_t it = 0; it < no_sync.iterations; ++it) no_sync_bytes += all_reduce_bytes(no_sync.ranks.at(0), it);
  EXPECT_EQ(every_bytes, 4 * no_sync_bytes);
  EXPECT_LT(last_number_on(run.output, "   no-sync "), 1e-5) << run.output;
  // The printed communication per optimizer step ("[0]", all-reduces, bytes, comm ms, ...): each
  // all-reduce of the 332 KiB bucket is held at least to the link's time, 2 (50 us + 166 KiB at
  // 1 Gb/s) = 2.82 ms, so four of them take at least 11.28 ms and one at least 2.82 ms. (How
  // much more depends on the other rank's arrival: the README's figures, not a test's.)
  const std::vector<double> every_row = numbers_on(run.output, "   sync-every-micro-step ");
  const std::vector<double> no_sync_row = numbers_on(run.output, "   no-sync ");
  ASSERT_EQ(every_row.size(), 5u) << run.output;
  ASSERT_EQ(no_sync_row.size(), 5u) << run.output;
  EXPECT_GE(every_row[3], 4 * 2.82 - 0.05) << run.output;
  EXPECT_GE(no_sync_row[3], 2.82 - 0.05) << run.output;
  EXPECT_LT(last_number_on(run.output, "   sync-every-micro-step "), 1e-5) << run.output;
}

TEST(Tutorials, CommHooks08Fp16HalvesTheBytes) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-08-comm-hooks", "--steps 3 --powersgd-start 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const analysis::RunStats plain = stats_of(run.trace_dir + "/allreduce/run.sqlite");
  const analysis::RunStats fp16 = stats_of(run.trace_dir + "/fp16/run.sqlite");
  const analysis::RunStats powersgd = stats_of(run.trace_dir + "/powersgd/run.sqlite");
  for (int rank = 0; rank < 2; ++rank) {
    for (int32_t it = 0; it < 3; ++it) {
      const int64_t full = all_reduce_bytes(plain.ranks.at(rank), it);
      EXPECT_GT(full, 2 << 20);
      EXPECT_EQ(2 * all_reduce_bytes(fp16.ranks.at(rank), it), full) << "rank " << rank << ", iteration " << it;
      const int64_t compressed = all_reduce_bytes(powersgd.ranks.at(rank), it);
      if (it < 2) {
        EXPECT_EQ(compressed, full) << "PowerSGD all-reduces plainly before its start iteration";
      } else {
        EXPECT_LT(compressed * 20, full) << "PowerSGD's rank-1 factors are far smaller than the matrices";
      }
    }
  }
  trace::Reader reader(run.trace_dir + "/fp16/run.sqlite");
  for (const auto& c : reader.events_of_kind(trace::EventKind::Collective)) {
    if (c.op == static_cast<uint8_t>(trace::CollectiveOp::AllReduce) && c.iteration != trace::kNone) {
      EXPECT_EQ(c.dtype, static_cast<uint8_t>(trace::DType::Float16));
    }
  }
}

// Tutorial 10 claims, for its MLP of 4 units (fc0, fc1, fc2 and the root holding fc3) under
// FULL_SHARD: 4 forward all-gathers and 3 backward ones (the root is never freed), one
// reduce-scatter per unit without a bucket, fewer (bucketed) with one; shards that tile each
// padded flat parameter.
TEST(Tutorials, FsdpBasics10GathersAndReduceScattersPerUnit) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-10-fsdp-basics", "--steps 3");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  trace::Reader per_unit(run.trace_dir + "/per-unit/run.sqlite");
  const auto units = per_unit.units();
  ASSERT_EQ(units.size(), 4u);
  for (const auto& unit : units) {
    int64_t covered = 0;
    for (const auto& shard : per_unit.unit_shards()) {
      if (shard.unit != unit.index) continue;
      EXPECT_EQ(shard.shard_begin, covered) << "unit " << unit.index;
      EXPECT_EQ(shard.shard_end - shard.shard_begin, unit.shard_numel) << "unit " << unit.index;
      covered = shard.shard_end;
    }
    EXPECT_EQ(covered, unit.padded_numel) << "unit " << unit.index;
  }
  trace::Reader bucketed(run.trace_dir + "/bucketed/run.sqlite");
  for (int rank = 0; rank < 2; ++rank) {
    for (int32_t it = 0; it < 3; ++it) {
      const auto gathers = collectives_with(per_unit, rank, it, trace::CollectiveOp::AllGather);
      const auto backward = collectives_with(per_unit, rank, it, trace::CollectiveOp::AllGather, trace::kFlagBackward);
      EXPECT_EQ(gathers, 7) << "rank " << rank << ", iteration " << it;
      EXPECT_EQ(backward, 3) << "rank " << rank << ", iteration " << it;
      EXPECT_EQ(collectives_with(per_unit, rank, it, trace::CollectiveOp::ReduceScatter), 4);
      EXPECT_EQ(collectives_with(per_unit, rank, it, trace::CollectiveOp::ReduceScatter, trace::kFlagBucketed), 0);
      EXPECT_EQ(collectives_with(per_unit, rank, it, trace::CollectiveOp::AllReduce), 0);
      const auto reductions = collectives_with(bucketed, rank, it, trace::CollectiveOp::ReduceScatter);
      EXPECT_GE(reductions, 1);
      EXPECT_LT(reductions, 4) << "the bucket joins the small gradients, rank " << rank << ", iteration " << it;
      EXPECT_EQ(collectives_with(bucketed, rank, it, trace::CollectiveOp::ReduceScatter, trace::kFlagBucketed),
                reductions);
      EXPECT_EQ(collectives_with(bucketed, rank, it, trace::CollectiveOp::AllGather), 7);
    }
    // Once backward's order is known (iteration 1 on), BACKWARD_PRE prefetches every backward gather.
    EXPECT_EQ(collectives_with(per_unit, rank, 2, trace::CollectiveOp::AllGather, trace::kFlagPrefetch), 3);
  }
  EXPECT_NE(run.output.find("Why these counts (4 units"), std::string::npos) << run.output;

  // The README's bytes on the wire: in a ring of n = 2, a rank sends (n-1) x its shard for an
  // all-gather (the trace's bytes: one rank's shard) and (n-1)/n of a reduce-scatter's full
  // gradient; DDP's all-reduce of the same model sends 2(n-1)/n x S. FULL_SHARD: 1.49x.
  const analysis::RunStats stats = stats_of(run.trace_dir + "/per-unit/run.sqlite");
  int64_t model_bytes = 0;
  for (const auto& unit : units) model_bytes += unit.numel * 4;
  double fsdp_sent = 0;
  for (const analysis::CollectiveStats& c : stats.ranks.at(0).collectives) {
    if (c.iteration != 2) continue;
    if (c.op == trace::CollectiveOp::AllGather) fsdp_sent += double(c.bytes);
    if (c.op == trace::CollectiveOp::ReduceScatter) fsdp_sent += double(c.bytes) / 2;
  }
  EXPECT_EQ(model_bytes, 603176);
  EXPECT_NEAR(fsdp_sent, 899624, 1) << "900 KB a step";
  EXPECT_NEAR(fsdp_sent / double(model_bytes), 1.49, 0.005) << "about 1.5x DDP's bytes";
}

// Tutorial 11 claims, from the traces: nested FULL_SHARD holds fewer full-parameter bytes at its
// peak than one root unit (the whole model), and SHARD_GRAD_OP gathers each unit once per
// iteration where FULL_SHARD gathers the nested units again for backward.
TEST(Tutorials, NestingPrefetch11NestedHoldsLessAndGradOpGathersLess) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-11-fsdp-nesting-prefetch", "--steps 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const analysis::RunStats root_only = stats_of(run.trace_dir + "/root-only/run.sqlite");
  const analysis::RunStats nested = stats_of(run.trace_dir + "/nested/run.sqlite");
  trace::Reader nested_reader(run.trace_dir + "/nested/run.sqlite");
  trace::Reader grad_op(run.trace_dir + "/grad-op/run.sqlite");
  ASSERT_EQ(root_only.units.size(), 1u);
  ASSERT_GT(nested.units.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_LT(peak_of(nested.ranks.at(r), trace::MemoryCategory::FullParameters),
              peak_of(root_only.ranks.at(r), trace::MemoryCategory::FullParameters)) << "rank " << r;
    for (int32_t it = 0; it < 2; ++it) {
      const auto full_shard_gathers = collectives_with(nested_reader, r, it, trace::CollectiveOp::AllGather);
      const auto grad_op_gathers = collectives_with(grad_op, r, it, trace::CollectiveOp::AllGather);
      EXPECT_EQ(grad_op_gathers, static_cast<int64_t>(nested.units.size())) << "rank " << r << ", iteration " << it;
      EXPECT_LT(grad_op_gathers, full_shard_gathers) << "rank " << r << ", iteration " << it;
    }
  }
  for (const std::string part : {"prefetch-post", "prefetch-none"}) {
    EXPECT_TRUE(std::filesystem::exists(run.trace_dir + "/" + part + "/run.sqlite")) << part;
  }
  for (const analysis::RunStats* stats : {&root_only, &nested}) expect_little_other(*stats);
}

// With the GPT-shaped model (README, "a unit per block"): 5 units (4 blocks and the root); nested
// FULL_SHARD gathers each block twice and holds at most two blocks and the root full, root-only the
// whole model; activations are most of the peak.
TEST(Tutorials, NestingPrefetch11GptUnitPerBlock) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-11-fsdp-nesting-prefetch", "--model gpt --steps 3");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  trace::Reader nested_reader(run.trace_dir + "/nested/run.sqlite");
  const auto units = nested_reader.units();
  ASSERT_EQ(units.size(), 5u);
  int64_t block_elements = 0;
  for (const auto& unit : units) {
    if (unit.name.rfind("block", 0) == 0) block_elements = std::max(block_elements, unit.numel);
  }
  EXPECT_GT(block_elements, 100000);
  EXPECT_EQ(collectives_with(nested_reader, 0, 2, trace::CollectiveOp::AllGather), 9);
  const analysis::RunStats nested = stats_of(run.trace_dir + "/nested/run.sqlite");
  const analysis::RunStats root_only = stats_of(run.trace_dir + "/root-only/run.sqlite");
  const int64_t model_bytes = peak_of(root_only.ranks.at(0), trace::MemoryCategory::FullParameters);
  EXPECT_LE(peak_of(nested.ranks.at(0), trace::MemoryCategory::FullParameters),
            2 * 4 * block_elements + model_bytes / 8);
  EXPECT_LT(peak_of(nested.ranks.at(0), trace::MemoryCategory::FullParameters), model_bytes);
  const analysis::MemoryAtPeak& peak = nested.ranks.at(0).step_memory_peak;
  EXPECT_GT(peak.bytes(trace::MemoryCategory::Activations), peak.total_bytes / 2);
}

// Tutorial 12 claims that ZeRO-3 holds less at its peak than ZeRO-2, and ZeRO-2 less than DDP
// (the allocator's peaks it prints), and that SHARD_GRAD_OP keeps more full parameters at once
// than FULL_SHARD (the traces' peak of full_parameters).
TEST(Tutorials, ZeroStages12FullShardBelowShardGradOpBelowDdp) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-12-zero-stages", "--steps 3", "--link-gbps 4 --link-latency-us 50");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Communication per step: "[0]", collectives, sent MiB, link ms, comm ms, exposed ms, sent of
  // DDP's.
  // FULL_SHARD sends 1.5 times DDP's bytes (two all-gathers and a reduce-scatter against one
  // all-reduce), SHARD_GRAD_OP as much as DDP; the link's own time follows the bytes.
  const auto table = run.output.find("Communication per step");
  ASSERT_NE(table, std::string::npos) << run.output;
  const std::string communication = run.output.substr(table);
  const std::vector<double> ddp_comm = numbers_on(communication, "   DDP ");
  const std::vector<double> grad_op_comm = numbers_on(communication, "   SHARD_GRAD_OP ");
  const std::vector<double> full_comm = numbers_on(communication, "   FULL_SHARD ");
  ASSERT_EQ(ddp_comm.size(), 7u) << run.output;
  ASSERT_EQ(grad_op_comm.size(), 7u) << run.output;
  ASSERT_EQ(full_comm.size(), 7u) << run.output;
  EXPECT_NEAR(grad_op_comm[6], 1.0, 0.02) << run.output;
  EXPECT_NEAR(full_comm[6], 1.5, 0.02) << run.output;
  EXPECT_NEAR(full_comm[3] / ddp_comm[3], 1.5, 0.1) << "link ms: " << run.output;
  const std::vector<double> peaks = numbers_on(run.output, "peak (total)");
  ASSERT_EQ(peaks.size(), 5u) << run.output;  // "[0]" and DDP, DDP (view), SHARD_GRAD_OP, FULL_SHARD
  EXPECT_LT(peaks[4], peaks[3]) << run.output;
  EXPECT_LT(peaks[3], peaks[1]) << run.output;
  const analysis::RunStats grad_op = stats_of(run.trace_dir + "/grad-op/run.sqlite");
  const analysis::RunStats full = stats_of(run.trace_dir + "/full-shard/run.sqlite");
  const analysis::RunStats ddp = stats_of(run.trace_dir + "/ddp/run.sqlite");
  const analysis::RunStats ddp_view = stats_of(run.trace_dir + "/ddp-bucket-view/run.sqlite");
  // gradient_as_bucket_view saves DDP's gradient copy, the model's bytes, between steps; its peak
  // is lower too (the rebuild after iteration 0 holds the old buckets and the new for a moment).
  int64_t model_bytes = 0;
  for (const auto& p : ddp.params) model_bytes += 4 * p.numel;
  EXPECT_LT(peaks[2], peaks[1]) << run.output;
  EXPECT_EQ(ddp.ranks.at(0).memory_after_steps.total_bytes - ddp_view.ranks.at(0).memory_after_steps.total_bytes,
            model_bytes);
  // SHARD_GRAD_OP's parameters (shards and full ones) at its peak are more than DDP's.
  const analysis::MemoryAtPeak& grad_op_peak = grad_op.ranks.at(0).step_memory_peak;
  EXPECT_GT(grad_op_peak.bytes(trace::MemoryCategory::Shards) + grad_op_peak.bytes(trace::MemoryCategory::FullParameters),
            model_bytes);
  for (int r = 0; r < 2; ++r) {
    EXPECT_LT(peak_of(full.ranks.at(r), trace::MemoryCategory::FullParameters),
              peak_of(grad_op.ranks.at(r), trace::MemoryCategory::FullParameters)) << "rank " << r;
    EXPECT_EQ(peak_of(full.ranks.at(r), trace::MemoryCategory::Buckets), 0) << "no reduce-scatter bucket";
    EXPECT_EQ(peak_of(ddp.ranks.at(r), trace::MemoryCategory::Shards), 0);
  }
  EXPECT_NE(run.output.find("ZeRO-1"), std::string::npos) << run.output;
  // The printed peaks are the traces': rank 0's peak in the steps, as `dpscope stats` has it.
  EXPECT_NEAR(peaks[1], mib(ddp.ranks.at(0).step_memory_peak.total_bytes), 0.006) << run.output;
  EXPECT_NEAR(peaks[2], mib(ddp_view.ranks.at(0).step_memory_peak.total_bytes), 0.006) << run.output;
  EXPECT_NEAR(peaks[3], mib(grad_op.ranks.at(0).step_memory_peak.total_bytes), 0.006) << run.output;
  EXPECT_NEAR(peaks[4], mib(full.ranks.at(0).step_memory_peak.total_bytes), 0.006) << run.output;
  for (const analysis::RunStats* stats : {&ddp, &ddp_view, &grad_op, &full}) expect_little_other(*stats);
}

// With the GPT-shaped model (README, "a unit per block"): 5 units, each padded on its own (the
// root's 30,807 elements to 30,808), 411,948 elements of shards per rank; at the peak FULL_SHARD
// holds the root and one block full, SHARD_GRAD_OP every unit, DDP four copies of the model, and
// activations are most of it; FULL_SHARD's root is gathered once: 9 all-gathers, 1.48 x DDP's bytes.
TEST(Tutorials, ZeroStages12GptUnitsPaddedOneByOne) {
  TempDir dir;
  const TutorialRun run =
      launch(dir, "tutorial-12-zero-stages", "--model gpt --steps 3", "--link-gbps 4 --link-latency-us 50");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const analysis::RunStats ddp = stats_of(run.trace_dir + "/ddp/run.sqlite");
  const analysis::RunStats grad_op = stats_of(run.trace_dir + "/grad-op/run.sqlite");
  const analysis::RunStats full = stats_of(run.trace_dir + "/full-shard/run.sqlite");
  ASSERT_EQ(full.units.size(), 5u);
  int64_t shard_elements = 0, padded_elements = 0;
  for (const auto& u : full.units) {
    const bool root = u.unit.name == "root";
    EXPECT_EQ(u.unit.numel, root ? 30807 : 198272) << u.unit.name;
    EXPECT_EQ(u.unit.padded_numel, root ? 30808 : 198272) << u.unit.name;
    shard_elements += u.unit.shard_numel;
    padded_elements += u.unit.padded_numel;
  }
  EXPECT_EQ(shard_elements, 411948);
  const std::vector<double> shards_line = numbers_on(run.output, "Each rank's shards:");
  ASSERT_GE(shards_line.size(), 2u) << run.output;  // "[0]", elements, MiB, padding
  EXPECT_EQ(shards_line[1], 411948) << run.output;

  const int64_t model_bytes = 3295580;  // 823,895 float32 parameters
  const analysis::MemoryAtPeak& ddp_peak = ddp.ranks.at(0).step_memory_peak;
  for (const auto category : {trace::MemoryCategory::Parameters, trace::MemoryCategory::Gradients,
                              trace::MemoryCategory::Buckets, trace::MemoryCategory::OptimizerState}) {
    EXPECT_EQ(ddp_peak.bytes(category), model_bytes) << static_cast<int>(category);
  }
  EXPECT_GT(ddp_peak.bytes(trace::MemoryCategory::Activations), ddp_peak.total_bytes / 2);
  for (const analysis::RunStats* fsdp : {&grad_op, &full}) {
    const analysis::MemoryAtPeak& peak = fsdp->ranks.at(0).step_memory_peak;
    EXPECT_EQ(peak.bytes(trace::MemoryCategory::Shards), 4 * shard_elements) << fsdp->path;
    EXPECT_EQ(peak.bytes(trace::MemoryCategory::OptimizerState), 4 * shard_elements) << fsdp->path;
  }
  EXPECT_EQ(grad_op.ranks.at(0).step_memory_peak.bytes(trace::MemoryCategory::FullParameters), 4 * padded_elements);
  EXPECT_EQ(full.ranks.at(0).step_memory_peak.bytes(trace::MemoryCategory::FullParameters), 4 * (30808 + 198272))
      << "the root and one block";
  const std::vector<double> peaks = numbers_on(run.output, "peak (total)");
  ASSERT_EQ(peaks.size(), 5u) << run.output;  // "[0]" and DDP, DDP (view), SHARD_GRAD_OP, FULL_SHARD
  EXPECT_LT(peaks[4], peaks[3]) << run.output;
  EXPECT_LT(peaks[3], peaks[1]) << run.output;
  EXPECT_NEAR(peaks[4], mib(full.ranks.at(0).step_memory_peak.total_bytes), 0.006) << run.output;

  trace::Reader full_reader(run.trace_dir + "/full-shard/run.sqlite");
  trace::Reader grad_op_reader(run.trace_dir + "/grad-op/run.sqlite");
  EXPECT_EQ(collectives_with(full_reader, 0, 2, trace::CollectiveOp::AllGather), 9);
  EXPECT_EQ(collectives_with(full_reader, 0, 2, trace::CollectiveOp::ReduceScatter), 5);
  EXPECT_EQ(collectives_with(grad_op_reader, 0, 2, trace::CollectiveOp::AllGather), 5);
  const auto table = run.output.find("Communication per step");
  ASSERT_NE(table, std::string::npos) << run.output;
  const std::vector<double> full_comm = numbers_on(run.output.substr(table), "   FULL_SHARD ");
  ASSERT_EQ(full_comm.size(), 7u) << run.output;  // "[0]", collectives, sent, link ms, comm ms, of DDP's
  EXPECT_EQ(full_comm[1], 14) << run.output;
  EXPECT_NEAR(full_comm[6], 1.48, 0.001) << run.output;
}

// Tutorial 15 claims a real training: the CNN reaches 95 % on the held-out last 20 % of the digits
// with DDP and with FSDP, and records the accuracy and the loss of every step in each trace.
TEST(Tutorials, RealTrainingReaches95PercentWithDdpAndFsdp) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-15-real-training", "");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const std::string part : {"ddp", "fsdp"}) {
    trace::Reader reader(run.trace_dir + "/" + part + "/run.sqlite");
    double accuracy = -1;
    int64_t losses = 0;
    for (const trace::Metric& metric : reader.metrics(0)) {
      if (metric.name == "accuracy") accuracy = metric.value;
      if (metric.name == trace::kMetricLoss) ++losses;
    }
    EXPECT_GE(accuracy, 0.95) << part << "\n" << run.output;
    EXPECT_EQ(losses, 300) << part;
    const analysis::RunStats stats = stats_of(run.trace_dir + "/" + part + "/run.sqlite");
    EXPECT_EQ(stats.strategy_recorded, part);
    // FSDP: conv1, conv2 and fc are units of their own; the root keeps bn1.
    if (part == "fsdp") {
      EXPECT_EQ(stats.units.size(), 4u);
    }
    // The README's broadcasts: DDP sends bn1's buffers every iteration, one message per dtype
    // (128 B of float32 running statistics, 8 B of int64 num_batches_tracked); FSDP none.
    for (const int32_t it : {2, 150}) {
      std::vector<std::pair<int64_t, int>> broadcasts;  // (bytes, dtype)
      for (const analysis::CollectiveStats& c : stats.ranks.at(0).collectives) {
        if (c.iteration == it && c.op == trace::CollectiveOp::Broadcast) broadcasts.emplace_back(c.bytes, c.dtype);
      }
      std::sort(broadcasts.begin(), broadcasts.end());
      const std::vector<std::pair<int64_t, int>> expected =
          part == "ddp" ? std::vector<std::pair<int64_t, int>>{{8, int(trace::DType::Int64)}, {128, int(trace::DType::Float32)}}
                        : std::vector<std::pair<int64_t, int>>{};
      EXPECT_EQ(broadcasts, expected) << part << ", iteration " << it;
    }
  }
  EXPECT_NE(run.output.find("DDP   loss"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("FSDP  loss"), std::string::npos) << run.output;
}

}  // namespace

namespace {

// Tutorial 17 claims that one slow rank slows every rank by about its delay, that the others
// spend the delay waiting at their all-reduces while it waits for nobody, and that the analysis
// names it (Note [Stragglers]); the even run names nobody. Run as its README runs it, on an
// emulated link, so all of it is read on the cluster clock (Note [The lesson's clock]): the
// delay (a sleep) keeps its wall time there, and the ranks' compute is their CPU time, which a
// busy machine does not hand to one rank more than the other.
TEST(Tutorials, Stragglers17EveryRankPaysTheDelayAndTheSlowOneIsNamed) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-17-stragglers", "--steps 6 --delays-ms 0 30",
                                 "--link-gbps 1 --link-latency-us 50");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const analysis::RunStats even = stats_of(run.trace_dir + "/even/run.sqlite");
  EXPECT_EQ(even.clock.clock, analysis::Clock::Cluster);
  const analysis::RunStats slow = stats_of(run.trace_dir + "/slow-30ms/run.sqlite");
  // On the measured clock a busy machine could serve one rank last every step and the even run
  // named it; on the cluster clock nobody (tried with two busy loops beside the suite's tests).
  EXPECT_TRUE(even.stragglers.stragglers.empty()) << analysis::stragglers_text(even.stragglers);
  ASSERT_EQ(slow.stragglers.stragglers.size(), 1u) << analysis::stragglers_text(slow.stragglers);
  EXPECT_EQ(slow.stragglers.stragglers[0].rank, 1) << "the last rank by default";
  EXPECT_NEAR(slow.stragglers.stragglers[0].late_ms, 30.0, 6.0);
  // Every rank's step holds the 30 ms, the fast rank's too.
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NEAR(analysis::step_summary(slow.ranks.at(size_t(rank))).median_ms,
                analysis::step_summary(even.ranks.at(size_t(rank))).median_ms + 30.0, 5.0)
        << "rank " << rank << " pays the delay too";
  }
  EXPECT_GT(analysis::wait_per_step(slow.ranks.at(0)).first, 25.0) << "rank 0 waits for rank 1";
  EXPECT_LT(analysis::wait_per_step(slow.ranks.at(1)).first, 5.0) << "rank 1 waits for nobody";
  EXPECT_NE(run.output.find("rank 1 arrives last in 4 of 4 steps"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("<- last"), std::string::npos) << run.output;
}

// Tutorial 18 claims that caps below the tensors' size make one plan (the same prediction), that
// the recorded cap's prediction is the recorded step, that one bucket costs more than the
// recorded plan (nothing overlaps), and that the checked cap is trained for real, the prediction
// within 10 % of it idle (15 % here, below). All on the cluster clock (Note [The lesson's
// clock]), where the suite's neighbours move the steps little; bench/whatif.sh holds the
// measured clock to 15 % on an idle machine.
TEST(Tutorials, Whatif18PredictsFromTheTraceAndChecksOneCap) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-18-whatif", "--steps 10", "--link-gbps 4 --link-latency-us 50");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto row = [&](const std::string& cap) { return numbers_on(run.output, "   " + cap + "        "); };
  const std::vector<double> small = row("0.25"), recorded = row("   1"), four = row("   4");
  ASSERT_GE(small.size(), 5u) << run.output;  // [0], cap, buckets, step, exposed
  ASSERT_GE(recorded.size(), 5u) << run.output;
  ASSERT_GE(four.size(), 5u) << run.output;
  EXPECT_EQ(small[3], recorded[3]) << "the same plan, the same prediction";
  EXPECT_EQ(four[3], recorded[3]);
  const analysis::RunStats stats = stats_of(run.trace_dir + "/cap-1mb/run.sqlite");
  EXPECT_NEAR(recorded[3], analysis::step_summary(stats.ranks.at(0)).median_ms,
              0.15 * analysis::step_summary(stats.ranks.at(0)).median_ms)
      << "the recorded cap predicts the recorded step";
  const std::regex checked(R"(cap ([0-9.]+) MiB: predicted ([0-9.]+) ms, the real run on the cluster clock ([0-9.]+) ms)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.output, m, checked)) << run.output;
  const double predicted = std::stod(m[2]), real = std::stod(m[3]);
  const std::vector<double> checked_row = row(std::string(6 - m[1].str().size(), ' ') + m[1].str());
  ASSERT_GE(checked_row.size(), 5u) << run.output;
  EXPECT_EQ(checked_row[2], 1) << "the cap that differs most is one bucket";
  EXPECT_EQ(checked_row[3], predicted) << "the check quotes the table's prediction";
  EXPECT_GT(predicted, recorded[3]) << "one bucket overlaps nothing, so its step is longer";
  EXPECT_GT(checked_row[4], recorded[4]) << "and more of its communication is exposed";
  // Measured: -3.1 % idle, +2.7 % beside two busy loops (before hooks carried their CPU time and
  // a bucket waited for its last rank: -6.3 %, -9.8 %, and -10.5 % beside two busy loops and the
  // rest of the suite). The real one-bucket run computes a few per cent faster or slower than the
  // recorded 1 MiB run it is predicted from (its forward and optimizer too, the same work): this
  // VM's speed drifts, and its 8.7 MB transfer, really made on this machine, takes memory
  // bandwidth from the ranks' compute, which the cluster clock does not model
  // (docs/cluster-clock.md, "What it leaves out").
  EXPECT_NEAR(predicted, real, 0.15 * real) << "the what-if lands within 15 % of the real run\n" << run.output;
  EXPECT_NE(run.output.find("cluster clock ms"), std::string::npos) << "both clocks, labelled\n" << run.output;
  EXPECT_NE(run.output.find("measured (this machine) ms"), std::string::npos) << run.output;
  EXPECT_TRUE(std::filesystem::exists(run.trace_dir + "/cap-" + m[1].str() + "mb/run.sqlite"));
}

// With the GPT-shaped model (README, "With a model shaped like the ones people train"): its 54
// tensors of many sizes make a plan of their own for each of 0.25, 1 and 4 MiB (13, 4 and 1
// buckets); the smaller the cap, the less communication the prediction leaves exposed; the cap
// whose prediction differs most is trained for real.
TEST(Tutorials, Whatif18GptEveryCapItsOwnPlan) {
  TempDir dir;
  const TutorialRun run =
      launch(dir, "tutorial-18-whatif", "--model gpt --steps 10", "--link-gbps 0.5 --link-latency-us 50");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // A row, as rank 0 prints it under the launcher: the cap right-aligned in 8 columns.
  const auto row = [&](const std::string& cap) {
    return numbers_on(run.output, "[0]   " + std::string(8 - cap.size(), ' ') + cap + " ");
  };
  const std::vector<double> small = row("0.25"), recorded = row("1"), four = row("4");
  ASSERT_GE(small.size(), 5u) << run.output;  // [0], cap, buckets, step, exposed
  ASSERT_GE(recorded.size(), 5u) << run.output;
  ASSERT_GE(four.size(), 5u) << run.output;
  EXPECT_EQ(small[2], 13) << run.output;
  EXPECT_EQ(recorded[2], 4) << run.output;
  EXPECT_EQ(four[2], 1) << run.output;
  EXPECT_LT(small[4], recorded[4]) << "a smaller last bucket: less exposed";
  EXPECT_LT(recorded[4], four[4]) << "one bucket overlaps nothing";
  const analysis::RunStats stats = stats_of(run.trace_dir + "/cap-1mb/run.sqlite");
  ASSERT_EQ(stats.params.size(), 54u);
  EXPECT_EQ(plan(stats, 1).size(), 4u) << "the recorded plan is the table's";
  EXPECT_NEAR(recorded[3], analysis::step_summary(stats.ranks.at(0)).median_ms,
              0.15 * analysis::step_summary(stats.ranks.at(0)).median_ms)
      << "the recorded cap predicts the recorded step";
  // The cap checked for real is the one whose prediction differs most from the recorded step:
  // one bucket on an idle machine (the README's), on a loaded one it can be 0.25 MiB.
  const std::regex checked(R"(cap ([0-9.]+) MiB: predicted ([0-9.]+) ms, the real run on the cluster clock ([0-9.]+) ms)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.output, m, checked)) << run.output;
  const std::vector<double> checked_row = row(m[1].str());
  ASSERT_GE(checked_row.size(), 5u) << run.output;
  EXPECT_EQ(checked_row[3], std::stod(m[2])) << "the check quotes the table's prediction";
  const double recorded_step = analysis::step_summary(stats.ranks.at(0)).median_ms;
  for (const std::string cap : {"0.25", "1", "4", "25", "100"}) {
    EXPECT_LE(std::abs(row(cap).at(3) - recorded_step), std::abs(checked_row[3] - recorded_step) + 0.01)
        << "cap " << cap << " differs more than the checked one\n" << run.output;
  }
  EXPECT_TRUE(std::filesystem::exists(run.trace_dir + "/cap-" + m[1].str() + "mb/run.sqlite"));
}

// Tutorial 16 claims that without a GPU it says so — that the build is CPU-only — and exits 0.
// (This build is CPU-only; a CUDA build would train on its devices instead.)
TEST(Tutorials, Gpus16SaysSoAndExitsZeroWithoutCuda) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-16-gpus", "--steps 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("no GPU to run on (this build is CPU-only"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("over NCCL instead of Gloo"), std::string::npos) << run.output;
  EXPECT_FALSE(std::filesystem::exists(run.trace_dir + "/ddp/run.sqlite")) << "no training without a GPU";
}

}  // namespace
