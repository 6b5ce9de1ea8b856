// test_ddp_worker: DDP features and bad input through real ranks. Launches ddp_worker (one rank
// per process, a mode per case) under `dpscope launch` with a time limit, and checks its exit
// status, its printed results and errors, and the traces the ranks wrote.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tests/test_util.h"
#include "tests/torch_oracle.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
namespace trace = dpscope::trace;

namespace {

const std::string kWorker = std::string(DPSCOPE_BIN_DIR) + "/ddp_worker";

struct WorkerRun {
  int exit_code = -1;
  std::string output;
  double seconds = 0;
};

// `ddp_worker ARGS` on `world` ranks, tracing into `trace_dir`; never longer than 120 s.
// With `command` true, `args` is the whole command line each rank runs (through env).
WorkerRun launch(int world, const std::string& args, const std::string& trace_dir,
                 bool command = false) {
  const auto start = std::chrono::steady_clock::now();
  const auto result = run_command("timeout 120 " + dpscope_bin() + " launch -n " +
                                  std::to_string(world) + " --trace-dir " + trace_dir + " -- " +
                                  (command ? "env " + args : kWorker + " " + args));
  WorkerRun run{result.exit_code, result.output};
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

// What rank `rank` printed after "rank R: PREFIX" (the launcher prefixes "[R] "), line by line.
std::vector<std::string> lines_of(const std::string& output, int rank, const std::string& prefix) {
  std::vector<std::string> lines;
  const std::string marker = "rank " + std::to_string(rank) + ": " + prefix;
  size_t begin = 0;
  while (begin < output.size()) {
    size_t end = output.find('\n', begin);
    if (end == std::string::npos) end = output.size();
    const std::string line = output.substr(begin, end - begin);
    const size_t at = line.find(marker);
    if (at != std::string::npos) lines.push_back(line.substr(at + marker.size()));
    begin = end + 1;
  }
  return lines;
}

std::string error_of(const WorkerRun& run, int rank) {
  const auto errors = lines_of(run.output, rank, "error: ");
  return errors.empty() ? "" : errors.front();
}

// Every rank succeeded, reported a comparison with one process and ended with the same
// parameters (params_hash).
void expect_trained_alike(const WorkerRun& run, int world, int comparisons_per_rank = 1) {
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::set<std::string> hashes;
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(lines_of(run.output, r, "FAIL").size(), 0u) << run.output;
    bool finished = false;
    for (const std::string& line : lines_of(run.output, r, "")) {
      finished |= line.size() >= 12 && line.compare(line.size() - 12, 12, ": 0 failures") == 0;
    }
    EXPECT_TRUE(finished) << "rank " << r << " did not report 0 failures\n" << run.output;
    const auto hash = lines_of(run.output, r, "params_hash ");
    ASSERT_EQ(static_cast<int>(hash.size()), comparisons_per_rank) << run.output;
    hashes.insert(hash.back());
  }
  EXPECT_EQ(hashes.size(), 1u) << "ranks ended with different parameters\n" << run.output;
}

TEST(DdpWorker, ModelsThatDifferAcrossRanks) {
  TempDir dir;
  const WorkerRun run = launch(3, "mismatch", dir.file("traces"));
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_LT(run.seconds, 60) << "a mismatch must fail fast, not at a timeout";
  const std::string r0 = error_of(run, 0);
  const std::string r1 = error_of(run, 1);
  const std::string r2 = error_of(run, 2);
  // Rank 1's first layer is 17 wide instead of 16.
  EXPECT_NE(r1.find("parameter 0 (fc1.weight)"), std::string::npos) << run.output;
  EXPECT_NE(r1.find("shape [17, 8] and strides [8, 1] on rank 1"), std::string::npos) << r1;
  EXPECT_NE(r1.find("shape [16, 8] and strides [8, 1] on rank 0"), std::string::npos) << r1;
  // Rank 2 has one more parameter, registered last.
  EXPECT_NE(r2.find("parameter 6 (extra.scale)"), std::string::npos) << run.output;
  EXPECT_NE(r2.find("shape [3, 2] and strides [2, 1] on rank 2"), std::string::npos) << r2;
  EXPECT_NE(r2.find("rank 0"), std::string::npos) << r2;
  // Rank 0 does not differ from itself: it names the ranks that do.
  EXPECT_NE(r0.find("rank(s) 1, 2"), std::string::npos) << run.output;
}

void expect_unused_error(const std::string& variant) {
  TempDir dir;
  const WorkerRun run = launch(2, "unused " + variant, dir.file("traces"));
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_LT(run.seconds, 60) << "a parameter without a gradient must fail fast";
  for (int r = 0; r < 2; ++r) {
    const std::string error = error_of(run, r);
    EXPECT_NE(error.find("Expected to have finished reduction in the prior iteration"),
              std::string::npos) << run.output;
    EXPECT_NE(error.find("Parameter indices which did not receive grad for rank " +
                         std::to_string(r) + ": 6 7."), std::string::npos) << error;
    EXPECT_NE(error.find("idle.weight, idle.bias"), std::string::npos) << error;
    EXPECT_NE(error.find("find_unused_parameters"), std::string::npos) << error;
  }
}

TEST(DdpWorker, ParameterWithoutGradientCheckReductionFinished) { expect_unused_error("check"); }
TEST(DdpWorker, ParameterWithoutGradientNextForward) { expect_unused_error("forward"); }

TEST(DdpWorker, ModelWithoutParameters) {
  TempDir dir;
  const WorkerRun run = launch(2, "noparams", dir.file("traces"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (int r = 0; r < 2; ++r) {
    const auto errors = lines_of(run.output, r, "expected error ");
    ASSERT_EQ(errors.size(), 2u) << run.output;
    for (const std::string& error : errors) {
      EXPECT_NE(error.find("doesn't have any parameter that requires a gradient"), std::string::npos)
          << error;
    }
  }
}

TEST(DdpWorker, WorldSizeOneLaunched) {
  TempDir dir;
  const WorkerRun run = launch(1, "plain", dir.file("traces"));
  expect_trained_alike(run, 1);
}

TEST(DdpWorker, WorldSizeOneWithoutLauncher) {
  const auto result = run_command(
      "env -u RANK -u LOCAL_RANK -u WORLD_SIZE -u LOCAL_WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT "
      "-u DPSCOPE_TRACE_DIR timeout 120 " + kWorker + " plain");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("rank 0: plain max_abs_diff"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("rank 0: plain : 0 failures"), std::string::npos) << result.output;
}

TEST(DdpWorker, NonContiguousParameters) {
  TempDir dir;
  expect_trained_alike(launch(2, "noncontiguous", dir.file("traces")), 2, 2);
}

TEST(DdpWorker, SparseGradientsOwnBucket) {
  TempDir dir;
  const std::string traces = dir.file("traces");
  expect_trained_alike(launch(3, "sparse", traces), 3);
  for (int r = 0; r < 3; ++r) {
    trace::Reader reader(traces + "/rank" + std::to_string(r) + ".sqlite");
    const auto params = reader.params();
    ASSERT_EQ(params.size(), 5u);
    EXPECT_EQ(params[0].name, "embedding.weight");
    EXPECT_TRUE(params[0].sparse);
    std::set<int> generations;
    for (const trace::BucketInfo& bucket : reader.buckets()) {
      generations.insert(bucket.generation);
      const bool has_embedding =
          std::find(bucket.params.begin(), bucket.params.end(), 0) != bucket.params.end();
      if (has_embedding) {
        EXPECT_EQ(bucket.params, std::vector<int32_t>{0}) << "generation " << bucket.generation;
      }
    }
    EXPECT_EQ(generations, (std::set<int>{0, 1}));
  }
}

// Join: every rank ends with the last joiner's model, equal to the local simulation of PyTorch's
// semantics (the worker checks) and to PyTorch's own DDP under
// torch.distributed.algorithms.join.Join from the same initial parameters (join_oracle.py).
void join_case(const std::string& variant, double tolerance) {
  TempDir dir;
  const WorkerRun run = launch(3, "DDP_WORKER_SAVE_DIR=" + dir.path().string() + " " + kWorker +
                                      " join " + variant, dir.file("ours"), /*command=*/true);
  expect_trained_alike(run, 3);
  const std::string scripts = std::string(DPSCOPE_SOURCE_DIR) + "/tests/ddp/";
  const auto theirs = run_command("timeout 120 " + dpscope_bin() + " launch -n 3 --trace-dir " +
                                  dir.file("theirs") + " -- /usr/bin/python3 " + scripts +
                                  "join_oracle.py " + variant + " " + dir.file("init.pt") + " " +
                                  dir.file("theirs.pt"));
  ASSERT_EQ(theirs.exit_code, 0) << theirs.output;
  EXPECT_LE(dpscope::testing::max_abs_diff(dir.file("ours.pt"), dir.file("theirs.pt")), tolerance)
      << "against PyTorch's Join";
}

TEST(DdpWorker, JoinUnevenInputs) { join_case("plain", 1e-5); }
TEST(DdpWorker, JoinUnevenInputsFindUnusedParameters) { join_case("unused", 1e-5); }
TEST(DdpWorker, JoinUnevenInputsOneRankWithoutData) { join_case("zero", 1e-5); }
TEST(DdpWorker, JoinUnevenInputsFp16Hook) { join_case("fp16", 1e-4); }
TEST(DdpWorker, JoinUnevenInputsSparseGradients) {
  TempDir dir;
  expect_trained_alike(launch(3, "join sparse", dir.file("traces")), 3);
}

// Phases of `rank` named `name`, from a merged file.
std::vector<trace::Event> phases_named(trace::Reader& reader, int rank, const std::string& name) {
  const std::vector<std::string> names = reader.names();
  std::vector<trace::Event> found;
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Phase, rank)) {
    if (e.name >= 0 && static_cast<size_t>(e.name) < names.size() && names[e.name] == name) {
      found.push_back(e);
    }
  }
  return found;
}

TEST(DdpWorker, NoSyncIssuesNoCollectives) {
  TempDir dir;
  const std::string traces = dir.file("traces");
  const WorkerRun run = launch(2, "nosync", traces);
  expect_trained_alike(run, 2);
  trace::Reader reader(traces + "/run.sqlite");
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto micro = phases_named(reader, r, "nosync_micro");
    ASSERT_EQ(micro.size(), 6u) << "2 micro-steps under no_sync in each of 3 iterations";
    const auto collectives = reader.events_of_kind(trace::EventKind::Collective, r);
    // Nothing communicates under no_sync but the one-time bucket rebuild (a broadcast), which
    // PyTorch too does in the first forward after iteration 0, no_sync or not.
    for (size_t i = 0; i < micro.size(); ++i) {
      const trace::Event& phase = micro[i];
      std::vector<trace::Event> inside;
      for (const trace::Event& c : collectives) {
        if (c.enqueue_ns >= phase.begin_ns && c.enqueue_ns <= phase.end_ns) inside.push_back(c);
      }
      if (phase.iteration == 1 && i == 2) {
        ASSERT_EQ(inside.size(), 1u) << "the bucket rebuild";
        EXPECT_EQ(static_cast<trace::CollectiveOp>(inside[0].op), trace::CollectiveOp::Broadcast);
      } else {
        EXPECT_EQ(inside.size(), 0u) << "collectives in no_sync micro-step " << i % 2
                                     << " of iteration " << phase.iteration;
      }
    }
    EXPECT_EQ(lines_of(run.output, r, "nosync rebuild in iteration 1 micro-step 0").size(), 1u)
        << run.output;
    // Each synced step all-reduces every bucket of the plan in force once: iteration 0's one
    // bucket, then the rebuilt plan's.
    std::map<int, int> buckets_of_generation;
    for (const trace::BucketInfo& b : reader.buckets()) ++buckets_of_generation[b.generation];
    ASSERT_GT(buckets_of_generation[1], 1);
    std::map<int32_t, int> all_reduces;
    for (const trace::Event& c : collectives) {
      if (static_cast<trace::CollectiveOp>(c.op) == trace::CollectiveOp::AllReduce &&
          c.bucket != trace::kNone) {
        ++all_reduces[c.iteration];
      }
    }
    ASSERT_EQ(all_reduces.size(), 3u);
    for (const auto& [iteration, count] : all_reduces) {
      EXPECT_EQ(count, buckets_of_generation[iteration == 0 ? 0 : 1]) << iteration;
    }
  }
}

// The stacked categories against the tracking allocator's own running total (allocator_total),
// which the allocator keeps apart from the categories' counters: at every moment the sampler
// wrote the total, the categories' last values add up to it, but for the few moments another
// thread (Gloo's) allocated between the sampler's reads (in 4 traces, 7 of 490 such moments,
// each by one small buffer); and the stacked peak is the total's peak. A category that kept
// bytes after their free, or counted a retagged storage twice, breaks both.
void expect_categories_add_up_to_the_allocators_total(const std::vector<trace::MemorySample>& samples) {
  std::map<trace::MemoryCategory, int64_t> last;
  int moments = 0, equal = 0;
  int64_t stacked_peak = 0, total_peak = 0;
  for (const trace::MemorySample& s : samples) {
    if (s.category != trace::MemoryCategory::AllocatorTotal) {
      last[s.category] = s.bytes;
      continue;
    }
    int64_t stacked = 0;
    for (const auto& [category, bytes] : last) stacked += trace::is_stacked(category) ? bytes : 0;
    ++moments;
    equal += stacked == s.bytes;
    stacked_peak = std::max(stacked_peak, stacked);
    total_peak = std::max(total_peak, s.bytes);
  }
  ASSERT_GT(moments, 5);
  EXPECT_GE(equal, moments - std::max(2, moments / 10)) << equal << " of " << moments << " moments add up";
  EXPECT_NEAR(double(stacked_peak), double(total_peak), 0.01 * double(total_peak));
}

TEST(DdpWorker, TraceContentThreeRanks) {
  TempDir dir;
  const std::string traces = dir.file("traces");
  const int world = 3;
  const WorkerRun run = launch(world, "trace", traces);
  expect_trained_alike(run, world);
  trace::Reader merged(traces + "/run.sqlite");
  std::vector<trace::BucketInfo> rank0_buckets;
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    trace::Reader reader(traces + "/rank" + std::to_string(r) + ".sqlite");
    // Tables: both plans, the same on every rank; every parameter in both.
    const std::vector<trace::BucketInfo> buckets = reader.buckets();
    if (r == 0) rank0_buckets = buckets;
    ASSERT_EQ(buckets.size(), rank0_buckets.size());
    std::map<int, std::vector<trace::BucketInfo>> plans;
    for (size_t i = 0; i < buckets.size(); ++i) {
      EXPECT_EQ(buckets[i].generation, rank0_buckets[i].generation);
      EXPECT_EQ(buckets[i].index, rank0_buckets[i].index);
      EXPECT_EQ(buckets[i].bytes, rank0_buckets[i].bytes);
      EXPECT_EQ(buckets[i].params, rank0_buckets[i].params);
      EXPECT_EQ(buckets[i].offsets, rank0_buckets[i].offsets);
      plans[buckets[i].generation].push_back(buckets[i]);
    }
    ASSERT_EQ(plans.size(), 2u) << "generation 0 and the rebuilt generation 1";
    ASSERT_EQ(plans[0].size(), 1u) << "iteration 0 in one bucket: Note [The first iteration's buckets]";
    ASSERT_GE(plans[1].size(), 3u) << "the small cap makes several rebuilt buckets";
    const auto params = reader.params();
    ASSERT_EQ(params.size(), 8u);
    for (const trace::ParamInfo& p : params) {
      EXPECT_NE(p.bucket, trace::kNone) << p.name;
      EXPECT_NE(p.rebuilt_bucket, trace::kNone) << p.name;
    }

    // Construction phases, before any iteration.
    for (const char* name : {"ddp.verify_model", "ddp.broadcast_state", "ddp.assign_buckets"}) {
      const auto found = phases_named(merged, r, name);
      ASSERT_EQ(found.size(), 1u) << name;
      EXPECT_EQ(found[0].iteration, trace::kNone) << name;
    }

    const auto hooks = merged.events_of_kind(trace::EventKind::Hook, r);
    const auto ready = merged.events_of_kind(trace::EventKind::BucketReady, r);
    const auto launches = merged.events_of_kind(trace::EventKind::BucketLaunch, r);
    const auto done = merged.events_of_kind(trace::EventKind::BucketDone, r);
    const auto collectives = merged.events_of_kind(trace::EventKind::Collective, r);
    for (int it = 0; it < 3; ++it) {
      SCOPED_TRACE("iteration " + std::to_string(it));
      const std::vector<trace::BucketInfo>& plan = plans[it == 0 ? 0 : 1];
      std::map<int32_t, int32_t> bucket_of;
      for (const auto& bucket : plan) {
        for (int32_t p : bucket.params) bucket_of[p] = bucket.index;
      }
      // One hook per parameter, in its bucket, the fill growing to the bucket's bytes.
      std::map<int32_t, std::vector<int64_t>> fills;
      std::set<int32_t> hooked;
      for (const trace::Event& e : hooks) {  // ordered by begin
        if (e.iteration != it) continue;
        EXPECT_TRUE(hooked.insert(e.param).second) << "param " << e.param << " hooked twice";
        EXPECT_EQ(e.bucket, bucket_of[e.param]) << "param " << e.param;
        fills[e.bucket].push_back(e.value);
      }
      EXPECT_EQ(hooked.size(), params.size());
      for (const auto& bucket : plan) {
        const auto& f = fills[bucket.index];
        ASSERT_EQ(f.size(), bucket.params.size()) << "bucket " << bucket.index;
        EXPECT_TRUE(std::is_sorted(f.begin(), f.end()) &&
                    std::adjacent_find(f.begin(), f.end()) == f.end())
            << "bucket " << bucket.index << ": the fill level must grow";
        EXPECT_EQ(f.back(), bucket.bytes) << "bucket " << bucket.index;
      }
      // Ready, launch, done: one per bucket; launches and dones in bucket order; a launch's seq
      // is its all-reduce's.
      auto of_iteration = [it](const std::vector<trace::Event>& events) {
        std::vector<trace::Event> kept;
        for (const trace::Event& e : events) {
          if (e.iteration == it) kept.push_back(e);
        }
        return kept;
      };
      const auto its_ready = of_iteration(ready);
      const auto its_launches = of_iteration(launches);
      const auto its_done = of_iteration(done);
      ASSERT_EQ(its_ready.size(), plan.size());
      ASSERT_EQ(its_launches.size(), plan.size());
      ASSERT_EQ(its_done.size(), plan.size());
      std::set<int32_t> ready_buckets;
      for (const auto& e : its_ready) ready_buckets.insert(e.bucket);
      EXPECT_EQ(ready_buckets.size(), plan.size());
      for (size_t b = 0; b < plan.size(); ++b) {
        EXPECT_EQ(its_launches[b].bucket, static_cast<int32_t>(b)) << "launch order";
        EXPECT_EQ(its_done[b].bucket, static_cast<int32_t>(b)) << "done order";
        int matches = 0;
        for (const trace::Event& c : collectives) {
          if (c.iteration == it && c.bucket == static_cast<int32_t>(b)) {
            ++matches;
            EXPECT_EQ(static_cast<trace::CollectiveOp>(c.op), trace::CollectiveOp::AllReduce);
            EXPECT_EQ(c.seq, its_launches[b].seq) << "bucket " << b;
            EXPECT_EQ(c.bytes, plan[b].bytes) << "bucket " << b;
          }
        }
        EXPECT_EQ(matches, 1) << "bucket " << b;
      }
      for (const std::string_view name : {trace::kPhaseForward, trace::kPhaseBackward,
                                          trace::kPhaseOptimizerStep, trace::kPhaseIteration}) {
        int count = 0;
        for (const auto& e : phases_named(merged, r, std::string(name))) count += e.iteration == it;
        EXPECT_EQ(count, 1) << name;
      }
    }

    // Memory by category.
    std::map<trace::MemoryCategory, int64_t> peak;
    for (const trace::MemorySample& s : merged.memory(r)) {
      peak[s.category] = std::max(peak[s.category], s.bytes);
    }
    expect_categories_add_up_to_the_allocators_total(merged.memory(r));
    for (const auto category :
         {trace::MemoryCategory::Parameters, trace::MemoryCategory::Gradients,
          trace::MemoryCategory::Buckets, trace::MemoryCategory::Activations,
          trace::MemoryCategory::OptimizerState, trace::MemoryCategory::AllocatorTotal}) {
      EXPECT_GT(peak[category], 0) << "memory category " << static_cast<int>(category);
    }
  }
}

TEST(DdpWorker, CoalescedBroadcastManyChunks) {
  TempDir dir;
  const WorkerRun run = launch(3, "broadcast", dir.file("traces"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(lines_of(run.output, r, "broadcast root").size(), 8u) << run.output;
  }
}

TEST(DdpWorker, StaticGraphSharedWeight) {
  TempDir dir;
  expect_trained_alike(launch(2, "static shared", dir.file("traces")), 2);
}

// PyTorch keeps the first iteration's used-parameter map under static_graph and zeroes it only
// with find_unused_parameters: zeroed here too, every later iteration took every parameter for
// unused and averaged nothing.
TEST(DdpWorker, StaticGraphWithALayerNeverUsed) {
  TempDir dir;
  expect_trained_alike(launch(2, "static unused", dir.file("traces")), 2);
}

TEST(DdpWorker, StaticGraphThatChanges) {
  TempDir dir;
  const WorkerRun run = launch(2, "static changing", dir.file("traces"));
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_LT(run.seconds, 60);
  for (int r = 0; r < 2; ++r) {
    const std::string error = error_of(run, r);
    EXPECT_NE(error.find("Expected to have finished reduction"), std::string::npos) << run.output;
    EXPECT_NE(error.find("static_graph"), std::string::npos) << error;
    EXPECT_NE(error.find("side.weight, side.bias"), std::string::npos) << error;
  }
}

}  // namespace
