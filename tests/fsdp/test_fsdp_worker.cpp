// FSDP's features and bad input through real ranks: sharded checkpoints resharded to another world
// size, clip_grad_norm across shards, a forward without backward, the trace of an FSDP run (units,
// shards, unit states, tagged collectives, memory by category), and the errors of bad models and
// flags — each within a time limit, so a hang fails instead of blocking the suite.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "analysis/stats.h"
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
namespace analysis = dpscope::analysis;
namespace trace = dpscope::trace;

namespace {

const std::string kWorker = std::string(DPSCOPE_BIN_DIR) + "/fsdp_worker";

dpscope::testing::CommandResult launch(int world, const std::string& args, const TempDir& dir,
                                       const std::string& traces = "traces") {
  return run_command("timeout 120 " + dpscope_bin() + " launch -n " + std::to_string(world) +
                     " --trace-dir " + dir.file(traces) + " -- " + kWorker + " " + args);
}

void reshard_case(int saved_world, int loaded_world) {
  TempDir dir;
  const auto saved = launch(saved_world, "save " + dir.file("ckpt"), dir, "save");
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  const auto loaded = launch(loaded_world, "load " + dir.file("ckpt") + " " + dir.file("loaded.pt"), dir, "load");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  EXPECT_EQ(max_abs_diff(dir.file("ckpt/full.pt"), dir.file("loaded.pt")), 0.0);
}

TEST(FsdpWorker, ShardedStateSameWorldSize) { reshard_case(2, 2); }
TEST(FsdpWorker, ShardedStateReshardedTwoToThree) { reshard_case(2, 3); }
TEST(FsdpWorker, ShardedStateReshardedFourToOne) { reshard_case(4, 1); }

TEST(FsdpWorker, ShardedStateOfAnotherModel) {
  TempDir dir;
  ASSERT_EQ(launch(2, "save " + dir.file("ckpt"), dir, "save").exit_code, 0);
  expect_error_on_every_rank(launch(2, "load_other " + dir.file("ckpt"), dir, "load"), 2,
                             "load it with the same model and wrap policy");
}

TEST(FsdpWorker, ShardedStateMissing) {
  TempDir dir;
  const auto run = launch(2, "load " + dir.file("nothing") + " " + dir.file("out.pt"), dir);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("no sharded checkpoint"), std::string::npos) << run.output;
}

TEST(FsdpWorker, ClipGradNormAcrossShards) {
  TempDir dir;
  const auto run = launch(3, "clip", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  for (int r = 0; r < 3; ++r) {  // each rank checked its norm against the reference's
    EXPECT_NE(run.output.find("rank " + std::to_string(r) + ": norm "), std::string::npos) << run.output;
  }
}

TEST(FsdpWorker, ModuleWithoutParameters) {
  TempDir dir;
  expect_error_on_every_rank(launch(2, "noparams", dir), 2, "has no parameters");
}

TEST(FsdpWorker, ModelsThatDifferAcrossRanks) {
  TempDir dir;
  expect_error_on_every_rank(launch(2, "mismatch", dir), 2,
                             "FullyShardedDataParallel model verification failed");
}

TEST(FsdpWorker, Fp16OnCpu) {
  TempDir dir;
  expect_error_on_every_rank(launch(2, "fp16", dir), 2, "use --mixed-precision bf16 on the CPU");
}

TEST(FsdpWorker, ForwardWithoutBackwardThenTrainAndEvaluate) {
  TempDir dir;
  const auto run = launch(2, "forward_only", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
}

// ---- `dpscope train --strategy fsdp`: the trace and the flags.

dpscope::testing::CommandResult train(int world, const std::string& args, const TempDir& dir) {
  return run_command("timeout 120 " + dpscope_bin() + " launch -n " + std::to_string(world) +
                     " --trace-dir " + dir.file("traces") + " -- " + dpscope_bin() +
                     " train --threads 1 --progress-every 0 --steps 3 --batch-size 16 --samples 256 " +
                     args);
}

TEST(FsdpTrain, TraceContentTwoRanks) {
  TempDir dir;
  const int world = 2;
  const auto run = train(world, "--model mlp --hidden 33 --momentum 0.9 --strategy fsdp "
                                "--wrap-min-params 100 --backward-prefetch pre", dir);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("fsdp (full, 4 units)"), std::string::npos) << run.output;
  trace::Reader reader(dir.file("traces/run.sqlite"));
  EXPECT_EQ(reader.meta_value("strategy"), "fsdp");

  // Units innermost first, the root last and empty (every Linear is a unit of its own).
  const auto units = reader.units();
  ASSERT_EQ(units.size(), 4u);
  const std::vector<std::string> names = {"fc0", "fc1", "fc2", "root"};
  const std::vector<int64_t> numels = {64 * 33 + 33, 33 * 33 + 33, 33 * 10 + 10, 0};
  for (size_t u = 0; u < units.size(); ++u) {
    EXPECT_EQ(units[u].name, names[u]);
    EXPECT_EQ(units[u].numel, numels[u]);
    EXPECT_EQ(units[u].padded_numel % world, 0);
    EXPECT_EQ(units[u].shard_numel * world, units[u].padded_numel);
    EXPECT_EQ(units[u].parent, u + 1 < units.size() ? 3 : trace::kNone);
  }
  // Each rank's shard: consecutive ranges covering the padded vector; real elements add up.
  std::map<int32_t, std::vector<trace::UnitShard>> shards;
  for (const auto& s : reader.unit_shards()) shards[s.unit].push_back(s);
  for (size_t u = 0; u < units.size(); ++u) {
    ASSERT_EQ(shards[static_cast<int32_t>(u)].size(), static_cast<size_t>(world));
    int64_t real = 0;
    for (int r = 0; r < world; ++r) {
      const auto& s = shards[static_cast<int32_t>(u)][static_cast<size_t>(r)];
      EXPECT_EQ(s.shard_begin, r * units[u].shard_numel);
      EXPECT_EQ(s.shard_end, (r + 1) * units[u].shard_numel);
      real += s.real_numel;
    }
    EXPECT_EQ(real, units[u].numel);
  }
  for (const auto& p : reader.params()) EXPECT_NE(p.unit, trace::kNone) << p.name;

  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    std::set<int> states;
    for (const auto& e : reader.events_of_kind(trace::EventKind::UnitState, r)) {
      states.insert(e.op);
      EXPECT_NE(e.unit, trace::kNone);
      EXPECT_GE(e.end_ns, e.begin_ns);
    }
    EXPECT_EQ(states, (std::set<int>{0, 1, 2})) << "gathering, full and reducing slices";
    int gathers = 0, prefetched = 0, backward = 0, bucketed = 0, reduce_scatters = 0;
    for (const auto& e : reader.events_of_kind(trace::EventKind::Collective, r)) {
      if (e.iteration != 1) continue;
      if (e.op == static_cast<uint8_t>(trace::CollectiveOp::AllGather)) {
        ++gathers;
        EXPECT_NE(e.unit, trace::kNone);
        if (e.flags & trace::kFlagPrefetch) ++prefetched;
        if (e.flags & trace::kFlagBackward) ++backward;
      }
      if (e.op == static_cast<uint8_t>(trace::CollectiveOp::ReduceScatter)) {
        ++reduce_scatters;
        if (e.flags & trace::kFlagBucketed) ++bucketed;
      }
    }
    // Forward gathers fc0, fc1, fc2 (freed after each); backward gathers them again — fc2 when
    // its backward begins, fc1 and fc0 prefetched (BACKWARD_PRE).
    EXPECT_EQ(gathers, 6);
    EXPECT_EQ(backward, 3);
    EXPECT_EQ(prefetched, 2);
    // All three gradients fit the 1 MiB bucket: one reduce-scatter, at the end of backward.
    EXPECT_EQ(reduce_scatters, 1);
    EXPECT_EQ(bucketed, 1);
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
  EXPECT_NE(stats.output.find("\"strategy\":\"fsdp\""), std::string::npos) << stats.output;
  EXPECT_NE(stats.output.find("\"name\":\"fc1\""), std::string::npos);
}

// The evaluation after the last step (--eval-fraction) gathers every unit again, with gradients
// off: its all-gathers and unit states belong to no iteration, inside an `evaluation` phase, so
// the last step counts only its own (Note [Work outside iterations]); and the steps' memory peak
// lies inside the steps although the evaluation forwards 128 rows at once against a step's 16.
TEST(FsdpTrain, EvaluationAfterTheStepsIsNoIterationsWork) {
  TempDir dir;
  const int world = 2;
  const auto run = train(world, "--model mlp --hidden 33 --strategy fsdp --wrap-min-params 100 "
                                "--eval-fraction 0.5", dir);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string path = dir.file("traces/run.sqlite");
  trace::Reader reader(path);
  const std::vector<std::string> names = reader.names();
  std::map<int32_t, std::pair<int64_t, int64_t>> steps_and_evaluation;  // by rank: their ends
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    int64_t evaluation_begin = -1, evaluation_end = -1, last_iteration_end = -1;
    for (const auto& e : reader.events_of_kind(trace::EventKind::Phase, r)) {
      const std::string& name = names.at(static_cast<size_t>(e.name));
      if (name == trace::kPhaseEvaluation) {
        EXPECT_EQ(e.iteration, trace::kNone);
        evaluation_begin = e.begin_ns;
        evaluation_end = e.end_ns;
      }
      if (name == trace::kPhaseIteration) last_iteration_end = std::max(last_iteration_end, e.end_ns);
    }
    ASSERT_GT(evaluation_begin, 0) << "no evaluation phase";
    EXPECT_GE(evaluation_begin, last_iteration_end);
    steps_and_evaluation[r] = {last_iteration_end, evaluation_begin};
    std::map<int32_t, int> gathers;  // by iteration
    for (const auto& e : reader.events_of_kind(trace::EventKind::Collective, r)) {
      if (e.op != static_cast<uint8_t>(trace::CollectiveOp::AllGather)) continue;
      ++gathers[e.iteration];
      const bool in_evaluation = e.begin_ns >= evaluation_begin && e.end_ns <= evaluation_end;
      EXPECT_EQ(e.iteration == trace::kNone, in_evaluation) << "all-gather seq " << e.seq;
    }
    EXPECT_EQ(gathers[2], gathers[1]) << "the last step has a step's gathers, no more";
    EXPECT_EQ(gathers[trace::kNone], 3) << "the evaluation gathers fc0, fc1 and fc2 once";
    for (const auto& e : reader.events_of_kind(trace::EventKind::UnitState, r)) {
      EXPECT_EQ(e.iteration == trace::kNone, e.begin_ns >= evaluation_begin) << "unit " << e.unit;
    }
  }
  const analysis::RunStats stats = analysis::compute_stats(reader);
  for (const analysis::RankStats& rank : stats.ranks) {
    SCOPED_TRACE("rank " + std::to_string(rank.rank));
    const auto [steps_end, evaluation_begin] = steps_and_evaluation.at(rank.rank);
    ASSERT_TRUE(rank.step_memory_peak.found());
    EXPECT_LE(rank.step_memory_peak.ts_ns, steps_end);
    EXPECT_GE(rank.memory_peak.ts_ns, evaluation_begin) << "the run peaks in the evaluation";
    EXPECT_GT(rank.memory_peak.total_bytes, rank.step_memory_peak.total_bytes);
    EXPECT_EQ(rank.iterations.size(), 3u);
  }
}

TEST(FsdpTrain, WrapPolicyThatWrapsNothing) {
  TempDir dir;
  const auto run = train(2, "--model mlp --hidden 33 --strategy fsdp --wrap-min-params 100000000", dir);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("fsdp (full, 1 unit)"), std::string::npos) << run.output;
}

TEST(FsdpTrain, WorldSizeOneRunsNoShard) {
  TempDir dir;
  const auto run = run_command("timeout 120 " + dpscope_bin() + " train --threads 1 --progress-every 0 "
                               "--steps 3 --strategy fsdp --wrap-min-params 100 --trace " +
                               dir.file("one.sqlite"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("fsdp (no_shard, "), std::string::npos) << run.output;
}

TEST(FsdpTrain, BadFlagsNameTheFix) {
  TempDir dir;
  const std::string base = "timeout 60 " + dpscope_bin() + " train --steps 1 --trace-level off --strategy fsdp ";
  const std::map<std::string, std::string> cases = {
      {"--comm-hook fp16", "--comm-hook is a DDP option"},
      {"--find-unused-parameters", "--find-unused-parameters is a DDP option"},
      {"--wrap-min-params -3", "--wrap-min-params must be 0"},
      {"--limit-all-gathers -1", "--limit-all-gathers must be 0"},
      {"--mixed-precision fp16", "use --mixed-precision bf16 on the CPU"},
      {"--sharding zero3", "--sharding"},
  };
  for (const auto& [flags, message] : cases) {
    const auto run = run_command(base + flags);
    EXPECT_NE(run.exit_code, 0) << flags;
    EXPECT_NE(run.output.find(message), std::string::npos) << flags << ":\n" << run.output;
    EXPECT_EQ(run.output.find("frame #"), std::string::npos) << "no C++ stack in the message";
  }
}

}  // namespace
