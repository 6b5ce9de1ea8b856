// compute_stats, stats_json and stats_text on small traces written with Writer, whose every
// number is worked out by hand in the comments (times in microseconds unless noted).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "trace/intervals.h"
#include "trace/reader.h"
#include "trace/stats.h"
#include "trace/writer.h"

namespace dpscope::trace {
namespace {

using testing::TempDir;

constexpr int64_t us(int64_t v) { return v * 1000; }

enum Names : NameId { kForward = 1, kBackward, kOptimizerStep, kIteration, kLoss, kStepMs, kSetup };

Event slice(int16_t rank, LaneId lane, EventKind kind, int64_t begin, int64_t end,
            int32_t iteration) {
  Event e;
  e.rank = rank;
  e.lane = lane;
  e.kind = kind;
  e.begin_ns = begin;
  e.end_ns = end;
  e.iteration = iteration;
  return e;
}

Event phase(int16_t rank, NameId name, int64_t begin_us, int64_t end_us, int32_t iteration) {
  Event e = slice(rank, 0, EventKind::Phase, us(begin_us), us(end_us), iteration);
  e.name = name;
  return e;
}

Event hook(int16_t rank, int32_t param, int32_t bucket, int64_t begin_us, int32_t iteration) {
  Event e = slice(rank, 2, EventKind::Hook, us(begin_us), us(begin_us + 100), iteration);
  e.param = param;
  e.bucket = bucket;
  e.value = 220;
  return e;
}

Event bucket_event(int16_t rank, EventKind kind, int32_t bucket, int64_t at_us,
                   int32_t iteration) {
  Event e = slice(rank, 2, kind, us(at_us), us(at_us), iteration);
  e.bucket = bucket;
  return e;
}

Event collective(int16_t rank, CollectiveOp op, int16_t grp, int64_t seq, int64_t bytes,
                 int64_t begin_us, int64_t end_us, int32_t iteration, int32_t bucket = kNone) {
  Event e = slice(rank, 1, EventKind::Collective, us(begin_us), us(end_us), iteration);
  e.op = static_cast<uint8_t>(op);
  e.grp = grp;
  e.seq = seq;
  e.bytes = bytes;
  e.bucket = bucket;
  e.dtype = static_cast<uint8_t>(DType::Float32);
  return e;
}

void add_names(Writer& w) {
  w.add_name(kForward, "forward");
  w.add_name(kBackward, "backward");
  w.add_name(kOptimizerStep, "optimizer_step");
  w.add_name(kIteration, "iteration");
  w.add_name(kLoss, "loss");
  w.add_name(kStepMs, "step_ms");
  w.add_name(kSetup, "broadcast_state");
}

RankInfo rank_row(int32_t rank, const std::string& status, int64_t dropped) {
  RankInfo r;
  r.rank = rank;
  r.host = "localhost";
  r.status = status;
  r.dropped_events = dropped;
  return r;
}

ParamInfo param(int32_t index, const std::string& name, std::vector<int64_t> shape, int64_t numel,
                int32_t bucket, int32_t rebuilt, int32_t unit) {
  ParamInfo p;
  p.index = index;
  p.name = name;
  p.shape = std::move(shape);
  p.numel = numel;
  p.bucket = bucket;
  p.rebuilt_bucket = rebuilt;
  p.unit = unit;
  return p;
}

BucketInfo bucket(int32_t generation, int32_t index, int64_t bytes, std::vector<int32_t> params) {
  BucketInfo b;
  b.generation = generation;
  b.index = index;
  b.bytes = bytes;
  b.numel = bytes / 4;
  b.params = std::move(params);
  b.offsets.assign(b.params.size(), 0);
  return b;
}

MemorySample sample(int32_t rank, int64_t at_us, MemoryCategory category, int64_t bytes) {
  return MemorySample{rank, us(at_us), category, bytes};
}

// Two ranks, two iterations of DDP on a 4-parameter model.
//
// rank 0 (complete): construction: phase broadcast_state [0,1000] (not compute), broadcast
//   grp 0 seq 0 [200,800] (iteration null: exposed 600).
//   it 0: iteration [1000,11000]; forward [1000,3000] backward [3000,7000] optimizer [8000,10000]
//         -> compute [1000,7000]+[8000,10000] = 8 ms. comm: allgather grp1 seq0 [1500,2000],
//         allreduce seq1 [4200,6200], seq2 [6500,7500] = 3.5 ms; exposed [7000,7500] = 0.5 ms.
//         4 hooks; a CollectiveWait [7000,7500] (not comm).
//   it 1: iteration [11000,21000]; forward [11000,13000] backward [13000,16000] optimizer
//         [18000,20000] -> compute 7 ms. comm: allreduce seq3 [14000,15000], seq4
//         [15500,17500], barrier grp1 seq1 [20500,21000] = 3.5 ms; exposed 1.5 + 0.5 = 2 ms.
//         4 hooks. Metrics: loss 2.5 / 1.25, step_ms 9.5 / 10.25 (win over the phase's 10 ms).
//   totals: compute 15, comm 0.6 + 3.5 + 3.5 = 7.6, exposed 0.6 + 0.5 + 2 = 3.1.
//   memory (with allocator_total): the stacked sum is 1000 at 0, 5000 at 2000, 4000 at 4000 and
//   7000 at 8000: the peak, with parameters 1000, gradients 2000, optimizer_state 3000 and
//   activations 1000 at that moment. Category maxima: parameters 1000, gradients 2000,
//   optimizer_state 3000, activations 4000, allocator_total 7200.
// rank 1 (interrupted (SIGINT), 3 dropped events, no metrics):
//   construction: broadcast seq 0 [300,900] (exposed 600).
//   it 0: iteration [1000,12000] -> step_ms 11 (fallback); forward [1000,4000] backward
//         [4000,9000] optimizer [10000,11000] -> compute 9. comm: allreduce seq1 [5000,8000],
//         seq2 [8500,10500] = 5; exposed [9000,10000] = 1. 3 hooks.
//   it 1 (cut short, no iteration phase -> step_ms 0): forward [12000,14000] -> compute 2;
//         broadcast seq3 [12500,13000] -> comm 0.5, exposed 0; 2 hooks; a BucketReady.
//   totals: compute 11, comm 6.1, exposed 1.6.
//   memory (no allocator_total): stacked sum at 0: 1000; 2000: 5000; 4000: gradients 3000 and
//   activations 0 together -> 4000 (never 8000); 5000: +buckets 1500 -> 5500; 6000: 2500.
//   total 5500; cuda_allocated 99999 is not stacked.
void write_known_trace(const std::string& path) {
  Writer w(path);
  w.begin();
  w.set_meta("strategy", "ddp");
  w.set_meta("backend", "gloo");
  w.set_meta("model", "toy");
  w.set_meta("world_size", "2");
  w.put_rank(rank_row(0, "complete", 0));
  w.put_rank(rank_row(1, "interrupted (SIGINT)", 3));
  for (int16_t r = 0; r < 2; ++r) {
    w.add_lane(LaneInfo{r, 0, "main", LaneKind::Host});
    w.add_lane(LaneInfo{r, 1, "gloo", LaneKind::Comm});
    w.add_lane(LaneInfo{r, 2, "autograd", LaneKind::Host});
  }
  add_names(w);

  w.add_param(param(0, "net1.weight", {10, 10}, 100, 1, 0, 1));
  w.add_param(param(1, "net1.bias", {10}, 10, 1, 0, 1));
  w.add_param(param(2, "net2.weight", {5, 10}, 50, 0, 1, 0));
  w.add_param(param(3, "net2.bias", {5}, 5, 0, kNone, kNone));
  w.add_bucket(bucket(0, 0, 220, {3, 2}));
  w.add_bucket(bucket(0, 1, 440, {1, 0}));
  w.add_bucket(bucket(1, 0, 440, {1, 0}));
  w.add_bucket(bucket(1, 1, 220, {3, 2}));
  w.add_unit(UnitInfo{0, "root", kNone, 55, 56, 28});
  w.add_unit(UnitInfo{1, "net1", 0, 110, 110, 55});

  // Rank 0; collectives deliberately out of (grp, seq) order.
  w.add_event(collective(0, CollectiveOp::Barrier, 1, 1, 0, 20500, 21000, 1));
  w.add_event(phase(0, kSetup, 0, 1000, kNone));
  w.add_event(collective(0, CollectiveOp::Broadcast, 0, 0, 660, 200, 800, kNone));
  w.add_event(phase(0, kIteration, 1000, 11000, 0));
  w.add_event(phase(0, kForward, 1000, 3000, 0));
  w.add_event(collective(0, CollectiveOp::AllGather, 1, 0, 100, 1500, 2000, 0));
  w.add_event(phase(0, kBackward, 3000, 7000, 0));
  w.add_event(hook(0, 3, 0, 3500, 0));
  w.add_event(hook(0, 2, 0, 4000, 0));
  w.add_event(bucket_event(0, EventKind::BucketReady, 0, 4100, 0));
  w.add_event(collective(0, CollectiveOp::AllReduce, 0, 1, 220, 4200, 6200, 0, 0));
  w.add_event(hook(0, 1, 1, 5000, 0));
  w.add_event(hook(0, 0, 1, 6000, 0));
  w.add_event(collective(0, CollectiveOp::AllReduce, 0, 2, 440, 6500, 7500, 0, 1));
  Event wait = slice(0, 0, EventKind::CollectiveWait, us(7000), us(7500), 0);
  wait.op = static_cast<uint8_t>(CollectiveOp::AllReduce);
  wait.seq = 2;
  w.add_event(wait);
  w.add_event(phase(0, kOptimizerStep, 8000, 10000, 0));
  w.add_event(phase(0, kIteration, 11000, 21000, 1));
  w.add_event(phase(0, kForward, 11000, 13000, 1));
  w.add_event(phase(0, kBackward, 13000, 16000, 1));
  for (int p = 0; p < 4; ++p) w.add_event(hook(0, 3 - p, p / 2, 13200 + 500 * p, 1));
  w.add_event(collective(0, CollectiveOp::AllReduce, 0, 4, 220, 15500, 17500, 1, 1));
  w.add_event(collective(0, CollectiveOp::AllReduce, 0, 3, 440, 14000, 15000, 1, 0));
  w.add_event(phase(0, kOptimizerStep, 18000, 20000, 1));
  w.add_metric(0, 0, kLoss, 2.5);
  w.add_metric(0, 0, kStepMs, 9.5);
  w.add_metric(0, 1, kLoss, 1.25);
  w.add_metric(0, 1, kStepMs, 10.25);
  w.add_memory(sample(0, 0, MemoryCategory::Parameters, 1000));
  w.add_memory(sample(0, 0, MemoryCategory::AllocatorTotal, 1500));
  w.add_memory(sample(0, 2000, MemoryCategory::Activations, 4000));
  w.add_memory(sample(0, 2000, MemoryCategory::AllocatorTotal, 5600));
  w.add_memory(sample(0, 4000, MemoryCategory::Gradients, 2000));
  w.add_memory(sample(0, 4000, MemoryCategory::Activations, 1000));
  w.add_memory(sample(0, 4000, MemoryCategory::AllocatorTotal, 4100));
  w.add_memory(sample(0, 8000, MemoryCategory::OptimizerState, 3000));
  w.add_memory(sample(0, 8000, MemoryCategory::AllocatorTotal, 7200));

  // Rank 1.
  w.add_event(phase(1, kSetup, 0, 1000, kNone));
  w.add_event(collective(1, CollectiveOp::Broadcast, 0, 0, 660, 300, 900, kNone));
  w.add_event(phase(1, kIteration, 1000, 12000, 0));
  w.add_event(phase(1, kForward, 1000, 4000, 0));
  w.add_event(phase(1, kBackward, 4000, 9000, 0));
  w.add_event(hook(1, 3, 0, 4500, 0));
  w.add_event(hook(1, 2, 0, 4800, 0));
  w.add_event(hook(1, 1, 1, 8000, 0));
  w.add_event(collective(1, CollectiveOp::AllReduce, 0, 1, 220, 5000, 8000, 0, 0));
  w.add_event(collective(1, CollectiveOp::AllReduce, 0, 2, 440, 8500, 10500, 0, 1));
  w.add_event(phase(1, kOptimizerStep, 10000, 11000, 0));
  w.add_event(phase(1, kForward, 12000, 14000, 1));
  w.add_event(collective(1, CollectiveOp::Broadcast, 0, 3, 16, 12500, 13000, 1));
  w.add_event(hook(1, 3, 1, 14200, 1));
  w.add_event(hook(1, 2, 1, 14500, 1));
  w.add_event(bucket_event(1, EventKind::BucketReady, 1, 14600, 1));
  w.add_memory(sample(1, 0, MemoryCategory::Parameters, 1000));
  w.add_memory(sample(1, 2000, MemoryCategory::Activations, 4000));
  w.add_memory(sample(1, 4000, MemoryCategory::Gradients, 3000));
  w.add_memory(sample(1, 4000, MemoryCategory::Activations, 0));
  w.add_memory(sample(1, 5000, MemoryCategory::Buckets, 1500));
  w.add_memory(sample(1, 6000, MemoryCategory::Gradients, 0));
  w.add_memory(sample(1, 7000, MemoryCategory::CudaAllocated, 99999));
  w.commit();
  w.finish();
}

RunStats known_stats(const TempDir& dir) {
  const std::string path = dir.file("known.dpscope");
  write_known_trace(path);
  Reader reader(path);
  return compute_stats(reader);
}

// Per-iteration collective counts in CollectiveOp order: broadcast, allreduce, allgather,
// reduce_scatter, barrier.
using Counts = std::array<int64_t, kCollectiveOpCount>;

TEST(stats, RunParamsBucketsUnits) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  EXPECT_EQ(s.schema_version, kSchemaVersion);
  EXPECT_EQ(s.strategy, "ddp");
  EXPECT_EQ(s.backend, "gloo");
  EXPECT_EQ(s.model, "toy");
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.iterations, 2);

  ASSERT_EQ(s.params.size(), 4u);
  EXPECT_EQ(s.params[2].name, "net2.weight");
  EXPECT_EQ(s.params[2].shape, (std::vector<int64_t>{5, 10}));
  EXPECT_EQ(s.params[3].rebuilt_bucket, kNone);

  ASSERT_EQ(s.buckets.size(), 4u);
  EXPECT_EQ(s.buckets[1].generation, 0);
  EXPECT_EQ(s.buckets[1].index, 1);
  EXPECT_EQ(s.buckets[1].params, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(s.buckets[3].generation, 1);
  EXPECT_EQ(s.buckets[3].bytes, 220);

  ASSERT_EQ(s.units.size(), 2u);
  EXPECT_EQ(s.units[0].unit.name, "root");
  EXPECT_EQ(s.units[0].params, (std::vector<int32_t>{2}));  // param 3 has no unit
  EXPECT_EQ(s.units[1].params, (std::vector<int32_t>{0, 1}));
}

TEST(stats, Iterations) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  ASSERT_EQ(s.ranks.size(), 2u);
  const auto& r0 = s.ranks[0].iterations;
  const auto& r1 = s.ranks[1].iterations;
  ASSERT_EQ(r0.size(), 2u);
  ASSERT_EQ(r1.size(), 2u);

  EXPECT_EQ(r0[0].iteration, 0);
  EXPECT_EQ(r0[1].iteration, 1);
  EXPECT_EQ(r0[0].hooks, 4);
  EXPECT_EQ(r0[1].hooks, 4);
  EXPECT_EQ(r1[0].hooks, 3);
  EXPECT_EQ(r1[1].hooks, 2);

  EXPECT_EQ(r0[0].step_ms, 9.5);   // metric, not the 10 ms phase
  EXPECT_EQ(r0[1].step_ms, 10.25);
  EXPECT_EQ(r1[0].step_ms, 11.0);  // the iteration phase
  EXPECT_EQ(r1[1].step_ms, 0.0);   // neither
  EXPECT_EQ(r0[0].loss, 2.5);
  EXPECT_EQ(r0[1].loss, 1.25);
  EXPECT_FALSE(r1[0].loss.has_value());
  EXPECT_FALSE(r1[1].loss.has_value());

  EXPECT_EQ(r0[0].collectives, (Counts{0, 2, 1, 0, 0}));
  EXPECT_EQ(r0[1].collectives, (Counts{0, 2, 0, 0, 1}));
  EXPECT_EQ(r1[0].collectives, (Counts{0, 2, 0, 0, 0}));
  EXPECT_EQ(r1[1].collectives, (Counts{1, 0, 0, 0, 0}));
}

// A wait inside a phase is not compute: backward [0,10] ms with the caller waiting [8,10] for an
// all-reduce that ran [6,9] leaves compute [0,8] and the all-reduce's last millisecond exposed.
TEST(stats, WaitInsidePhaseIsExposedCommunication) {
  TempDir dir;
  const std::string path = dir.file("wait.dpscope");
  {
    Writer w(path);
    w.begin();
    w.put_rank(rank_row(0, "complete", 0));
    w.add_lane(LaneInfo{0, 0, "main", LaneKind::Host});
    w.add_lane(LaneInfo{0, 1, "gloo", LaneKind::Comm});
    add_names(w);
    w.add_event(phase(0, kBackward, 0, 10000, 0));
    w.add_event(collective(0, CollectiveOp::AllReduce, 0, 0, 400, 6000, 9000, 0));
    w.add_event(slice(0, 0, EventKind::CollectiveWait, us(8000), us(10000), 0));
    w.commit();
    w.finish();
  }
  Reader reader(path);
  const RunStats s = compute_stats(reader);
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks[0].overlap.compute_ms, 8.0);
  EXPECT_EQ(s.ranks[0].overlap.comm_ms, 3.0);
  EXPECT_EQ(s.ranks[0].overlap.exposed_comm_ms, 1.0);
  ASSERT_EQ(s.ranks[0].iterations.size(), 1u);
  EXPECT_EQ(s.ranks[0].iterations[0].overlap.exposed_comm_ms, 1.0);
}

TEST(stats, Overlap) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  const RankStats& r0 = s.ranks[0];
  const RankStats& r1 = s.ranks[1];
  EXPECT_EQ(r0.overlap.compute_ms, 15.0);
  EXPECT_EQ(r0.overlap.comm_ms, 7.6);
  EXPECT_EQ(r0.overlap.exposed_comm_ms, 3.1);
  EXPECT_EQ(r0.iterations[0].overlap.compute_ms, 8.0);
  EXPECT_EQ(r0.iterations[0].overlap.comm_ms, 3.5);
  EXPECT_EQ(r0.iterations[0].overlap.exposed_comm_ms, 0.5);
  EXPECT_EQ(r0.iterations[1].overlap.compute_ms, 7.0);
  EXPECT_EQ(r0.iterations[1].overlap.comm_ms, 3.5);
  EXPECT_EQ(r0.iterations[1].overlap.exposed_comm_ms, 2.0);

  EXPECT_EQ(r1.overlap.compute_ms, 11.0);
  EXPECT_EQ(r1.overlap.comm_ms, 6.1);
  EXPECT_EQ(r1.overlap.exposed_comm_ms, 1.6);
  EXPECT_EQ(r1.iterations[0].overlap.compute_ms, 9.0);
  EXPECT_EQ(r1.iterations[0].overlap.comm_ms, 5.0);
  EXPECT_EQ(r1.iterations[0].overlap.exposed_comm_ms, 1.0);
  EXPECT_EQ(r1.iterations[1].overlap.compute_ms, 2.0);
  EXPECT_EQ(r1.iterations[1].overlap.comm_ms, 0.5);
  EXPECT_EQ(r1.iterations[1].overlap.exposed_comm_ms, 0.0);
}

TEST(stats, CollectivesInGroupSequenceOrder) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  struct Expected {
    int32_t grp;
    int64_t seq;
    CollectiveOp op;
    int64_t bytes;
    int32_t iteration;
  };
  const std::vector<Expected> expected = {
      {0, 0, CollectiveOp::Broadcast, 660, kNone}, {0, 1, CollectiveOp::AllReduce, 220, 0},
      {0, 2, CollectiveOp::AllReduce, 440, 0},     {0, 3, CollectiveOp::AllReduce, 440, 1},
      {0, 4, CollectiveOp::AllReduce, 220, 1},     {1, 0, CollectiveOp::AllGather, 100, 0},
      {1, 1, CollectiveOp::Barrier, 0, 1}};
  const auto& got = s.ranks[0].collectives;
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].grp, expected[i].grp);
    EXPECT_EQ(got[i].seq, expected[i].seq);
    EXPECT_EQ(got[i].op, expected[i].op);
    EXPECT_EQ(got[i].bytes, expected[i].bytes);
    EXPECT_EQ(got[i].iteration, expected[i].iteration);
  }
  EXPECT_EQ(s.ranks[1].collectives.size(), 4u);
}

using P = std::vector<std::pair<MemoryCategory, int64_t>>;
P pairs(const std::vector<CategoryBytes>& list) {
  P out;
  for (const CategoryBytes& c : list) out.emplace_back(c.category, c.bytes);
  return out;
}

TEST(stats, MemoryAtThePeak) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  const MemoryAtPeak& p0 = s.ranks[0].memory_peak;
  EXPECT_EQ(p0.total_bytes, 7000);
  EXPECT_EQ(p0.ts_ns, us(8000));
  EXPECT_EQ(pairs(p0.categories), (P{{MemoryCategory::Parameters, 1000},
                                     {MemoryCategory::Gradients, 2000},
                                     {MemoryCategory::OptimizerState, 3000},
                                     {MemoryCategory::Activations, 1000}}));
  EXPECT_EQ(pairs(s.ranks[0].category_max), (P{{MemoryCategory::Parameters, 1000},
                                               {MemoryCategory::Gradients, 2000},
                                               {MemoryCategory::OptimizerState, 3000},
                                               {MemoryCategory::Activations, 4000},
                                               {MemoryCategory::AllocatorTotal, 7200}}));
  const MemoryAtPeak& p1 = s.ranks[1].memory_peak;
  EXPECT_EQ(p1.total_bytes, 5500);
  EXPECT_EQ(p1.ts_ns, us(5000));
  EXPECT_EQ(pairs(p1.categories), (P{{MemoryCategory::Parameters, 1000},
                                     {MemoryCategory::Gradients, 3000},
                                     {MemoryCategory::Buckets, 1500},
                                     {MemoryCategory::Activations, 0}}));
  EXPECT_EQ(pairs(s.ranks[1].category_max), (P{{MemoryCategory::Parameters, 1000},
                                               {MemoryCategory::Gradients, 3000},
                                               {MemoryCategory::Buckets, 1500},
                                               {MemoryCategory::Activations, 4000},
                                               {MemoryCategory::CudaAllocated, 99999}}));
}

// Memory after the steps: every stacked category's last value up to the end of the rank's last
// iteration (rank 0's is at 21 ms; its last samples are at 8 ms), allocator and CUDA read-outs left
// out; none for a rank without iterations.
TEST(stats, MemoryAfterTheSteps) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  const MemoryAtPeak& after = s.ranks[0].memory_after_steps;
  ASSERT_TRUE(after.found());
  EXPECT_EQ(after.ts_ns, us(8000));
  EXPECT_EQ(after.total_bytes, 7000);
  EXPECT_EQ(pairs(after.categories), (P{{MemoryCategory::Parameters, 1000},
                                        {MemoryCategory::Gradients, 2000},
                                        {MemoryCategory::OptimizerState, 3000},
                                        {MemoryCategory::Activations, 1000}}));
  const auto j = nlohmann::json::parse(stats_json(s));
  EXPECT_EQ(j["ranks"][0]["memory_after_steps_bytes"]["total"], 7000);
  EXPECT_EQ(j["ranks"][0]["memory_after_steps_bytes"]["optimizer_state"], 3000);
  EXPECT_NE(stats_text(s).find("memory after the steps 0.01 MiB; at that moment (MiB): parameters 0.00"),
            std::string::npos)
      << stats_text(s);
}

// The categories at the peak add up to the peak, on every rank, in the run and in the steps.
TEST(stats, CategoriesAtThePeakSumToTheTotal) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  for (const RankStats& r : s.ranks) {
    for (const MemoryAtPeak* peak : {&r.memory_peak, &r.step_memory_peak}) {
      ASSERT_TRUE(peak->found()) << "rank " << r.rank;
      int64_t sum = 0;
      for (const CategoryBytes& c : peak->categories) sum += c.bytes;
      EXPECT_EQ(sum, peak->total_bytes) << "rank " << r.rank;
    }
  }
}

TEST(MemoryPeakFinder, WindowKeepsEarlierValuesAndAllocatorOnlyFallsBack) {
  MemoryPeakFinder steps(100);
  steps.add(0, MemoryCategory::Parameters, 5000);  // construction: outside the window
  steps.add(0, MemoryCategory::Activations, 9000);
  steps.add(50, MemoryCategory::Activations, 0);
  steps.add(150, MemoryCategory::Activations, 700);
  steps.add(150, MemoryCategory::Gradients, 300);
  steps.add(200, MemoryCategory::Activations, 100);
  const MemoryAtPeak peak = steps.finish();
  EXPECT_EQ(peak.total_bytes, 6000);
  EXPECT_EQ(peak.ts_ns, 150);
  EXPECT_EQ(peak.bytes(MemoryCategory::Parameters), 5000);
  EXPECT_EQ(peak.bytes(MemoryCategory::Activations), 700);

  MemoryPeakFinder allocator_only;
  allocator_only.add(10, MemoryCategory::AllocatorTotal, 40);
  allocator_only.add(20, MemoryCategory::AllocatorTotal, 90);
  allocator_only.add(30, MemoryCategory::AllocatorTotal, 60);
  const MemoryAtPeak fallback = allocator_only.finish();
  EXPECT_EQ(fallback.total_bytes, 90);
  EXPECT_EQ(fallback.ts_ns, 20);
  EXPECT_TRUE(fallback.categories.empty());

  EXPECT_FALSE(MemoryPeakFinder().finish().found());
}

TEST(stats, RankStatus) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  EXPECT_EQ(s.ranks[0].status, "complete");
  EXPECT_EQ(s.ranks[0].dropped_events, 0);
  EXPECT_TRUE(s.ranks[0].complete());
  EXPECT_EQ(s.ranks[1].status, "interrupted (SIGINT)");
  EXPECT_EQ(s.ranks[1].dropped_events, 3);
  EXPECT_FALSE(s.ranks[1].complete());
}

std::vector<std::string> keys(const nlohmann::ordered_json& object) {
  std::vector<std::string> out;
  for (const auto& item : object.items()) out.push_back(item.key());
  return out;
}
using Keys = std::vector<std::string>;

TEST(statsJson, ContractKeysInOrder) {
  TempDir dir;
  const std::string text = stats_json(known_stats(dir));
  EXPECT_EQ(text.find('\n'), std::string::npos);
  const auto j = nlohmann::ordered_json::parse(text);
  EXPECT_EQ(keys(j), (Keys{"schema_version", "run", "params", "buckets", "units",
                           "collective_matching", "stragglers", "ranks"}));
  EXPECT_EQ(keys(j["run"]),
            (Keys{"strategy", "backend", "world_size", "iterations", "model", "link"}));
  EXPECT_EQ(keys(j["collective_matching"]),
            (Keys{"collectives", "mismatches", "max_skew_ms", "mismatched", "straggler_threshold_ms"}));
  EXPECT_EQ(keys(j["params"][0]), (Keys{"index", "name", "shape", "numel", "dtype", "bucket",
                                        "rebuilt_bucket", "unit"}));
  EXPECT_EQ(keys(j["buckets"][0]), (Keys{"generation", "index", "bytes", "params"}));
  EXPECT_EQ(keys(j["units"][0]),
            (Keys{"index", "name", "numel", "padded_numel", "shard_numel", "params"}));
  const auto& rank = j["ranks"][1];
  EXPECT_EQ(keys(rank), (Keys{"rank", "iterations", "collectives", "peak_memory_bytes",
                              "step_peak_memory_bytes", "memory_after_steps_bytes", "category_max_bytes", "overlap",
                              "clock_uncertainty_ms", "wait_ms", "transfer_ms", "buckets"}));
  EXPECT_EQ(keys(rank["iterations"][0]),
            (Keys{"iteration", "hooks", "step_ms", "loss", "collectives", "overlap", "wait_ms", "transfer_ms"}));
  EXPECT_EQ(keys(rank["iterations"][0]["collectives"]),
            (Keys{"allreduce", "broadcast", "allgather", "reduce_scatter", "barrier"}));
  EXPECT_EQ(keys(rank["collectives"][0]), (Keys{"seq", "kind", "bytes", "iteration"}));
  EXPECT_EQ(keys(rank["peak_memory_bytes"]),
            (Keys{"total", "ts_ns", "parameters", "gradients", "buckets", "activations"}));
  EXPECT_EQ(keys(rank["category_max_bytes"]),
            (Keys{"parameters", "gradients", "buckets", "activations", "cuda_allocated"}));
  EXPECT_EQ(keys(rank["overlap"]),
            (Keys{"compute_ms", "comm_ms", "overlap_ms", "exposed_comm_ms"}));
}

TEST(statsJson, Values) {
  TempDir dir;
  const auto j = nlohmann::json::parse(stats_json(known_stats(dir)));
  EXPECT_EQ(j["schema_version"], kSchemaVersion);
  EXPECT_EQ(j["run"], (nlohmann::json{{"strategy", "ddp"}, {"backend", "gloo"}, {"world_size", 2},
                                      {"iterations", 2}, {"model", "toy"}, {"link", nullptr}}));
  EXPECT_EQ(j["params"][0], (nlohmann::json{{"index", 0}, {"name", "net1.weight"},
                                            {"shape", {10, 10}}, {"numel", 100},
                                            {"dtype", "float32"}, {"bucket", 1},
                                            {"rebuilt_bucket", 0}, {"unit", 1}}));
  EXPECT_TRUE(j["params"][3]["rebuilt_bucket"].is_null());
  EXPECT_TRUE(j["params"][3]["unit"].is_null());
  EXPECT_EQ(j["buckets"][2],
            (nlohmann::json{{"generation", 1}, {"index", 0}, {"bytes", 440}, {"params", {1, 0}}}));
  EXPECT_EQ(j["units"][1], (nlohmann::json{{"index", 1}, {"name", "net1"}, {"numel", 110},
                                           {"padded_numel", 110}, {"shard_numel", 55},
                                           {"params", {0, 1}}}));

  const auto& r0 = j["ranks"][0];
  EXPECT_EQ(r0["rank"], 0);
  EXPECT_EQ(r0["iterations"][1],
            (nlohmann::json{{"iteration", 1}, {"hooks", 4}, {"step_ms", 10.25}, {"loss", 1.25},
                            {"collectives", {{"allreduce", 2}, {"broadcast", 0}, {"allgather", 0},
                                             {"reduce_scatter", 0}, {"barrier", 1}}},
                            {"overlap", {{"compute_ms", 7.0}, {"comm_ms", 3.5}, {"overlap_ms", 1.5},
                                         {"exposed_comm_ms", 2.0}}},
                            // seq 3 and 4 do not match across the ranks: no split.
                            {"wait_ms", 0.0},
                            {"transfer_ms", 0.0}}));
  // Iteration 0: seq 1 [4200, 6200] waits for rank 1's begin at 5000 (0.8 ms), then transfers
  // 1.2 ms; seq 2 [6500, 7500] ends before rank 1 begins it at 8500: all 1 ms of it waiting.
  EXPECT_DOUBLE_EQ(r0["iterations"][0]["wait_ms"].get<double>(), 1.8);
  EXPECT_DOUBLE_EQ(r0["iterations"][0]["transfer_ms"].get<double>(), 1.2);
  EXPECT_EQ(r0["collectives"][0],
            (nlohmann::json{{"seq", 0}, {"kind", "broadcast"}, {"bytes", 660},
                            {"iteration", nullptr}}));
  EXPECT_EQ(r0["collectives"][5],
            (nlohmann::json{{"seq", 0}, {"kind", "allgather"}, {"bytes", 100}, {"iteration", 0}}));
  EXPECT_EQ(r0["peak_memory_bytes"],
            (nlohmann::json{{"total", 7000}, {"ts_ns", us(8000)}, {"parameters", 1000},
                            {"gradients", 2000}, {"optimizer_state", 3000},
                            {"activations", 1000}}));
  EXPECT_EQ(r0["category_max_bytes"],
            (nlohmann::json{{"parameters", 1000}, {"gradients", 2000}, {"optimizer_state", 3000},
                            {"activations", 4000}, {"allocator_total", 7200}}));
  EXPECT_EQ(r0["overlap"]["compute_ms"], 15.0);
  EXPECT_EQ(r0["overlap"]["comm_ms"], 7.6);
  EXPECT_NEAR(r0["overlap"]["overlap_ms"].get<double>(), 4.5, 1e-9);
  EXPECT_EQ(r0["overlap"]["exposed_comm_ms"], 3.1);
  const auto& r1 = j["ranks"][1];
  EXPECT_TRUE(r1["iterations"][0]["loss"].is_null());
  EXPECT_EQ(r1["iterations"][0]["step_ms"], 11.0);
  EXPECT_EQ(r1["peak_memory_bytes"]["total"], 5500);
}

TEST(statsText, ReportAndWarnings) {
  TempDir dir;
  const std::string text = stats_text(known_stats(dir));
  EXPECT_NE(text.find("run: strategy ddp, backend gloo, model toy, world size 2, 2 iterations"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("WARNING: rank 1 dropped 3 events"), std::string::npos) << text;
  EXPECT_NE(text.find("WARNING: rank 1 did not finish: status \"interrupted (SIGINT)\""),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("WARNING: rank 0"), std::string::npos) << text;
  EXPECT_NE(text.find("buckets (generation 0: initial plan, 1: rebuilt)"), std::string::npos);
  EXPECT_NE(text.find("units:"), std::string::npos);
  EXPECT_NE(text.find("overlap: compute 15.000 ms, comm 7.600 ms, hidden 4.500 ms, exposed comm "
                      "3.100 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("peak memory 0.01 MiB; at that moment (MiB): parameters 0.00"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("     1     10.250     1.2500      4"), std::string::npos) << text;
  // rank 0: 9.5 and 10.25; rank 1: only iteration 0 has a step time. Two iterations are too
  // few to leave out the first two (Note [Steady steps]).
  EXPECT_NE(text.find("step_ms over 2 iterations from 0: median 9.875, min 9.500, max 10.250"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("step_ms over 1 iterations from 0: median 11.000"), std::string::npos) << text;
}

// A rank whose writer died leaves status 'running'; the report says so.
TEST(statsText, WriterDiedWarning) {
  TempDir dir;
  const std::string path = dir.file("running.dpscope");
  {
    Writer w(path);
    w.put_rank(rank_row(0, "complete", 0));
    w.put_rank(rank_row(1, "running", 0));
    w.finish();
  }
  Reader reader(path);
  const std::string text = stats_text(compute_stats(reader));
  EXPECT_NE(text.find("WARNING: rank 1 did not finish: status \"running\""), std::string::npos)
      << text;
  EXPECT_EQ(text.find("WARNING: rank 0"), std::string::npos) << text;
}

// Iterations count every event kind and metric; world_size falls back to the ranks table.
TEST(stats, IterationsFromAnyEventOrMetric) {
  TempDir dir;
  const auto stats_of = [&](const std::string& name, auto&& fill) {
    const std::string path = dir.file(name);
    {
      Writer w(path);
      w.begin();
      for (int32_t r = 0; r < 3; ++r) w.put_rank(rank_row(r, "complete", 0));
      fill(w);
      w.commit();
      w.finish();
    }
    Reader reader(path);
    return compute_stats(reader);
  };
  const RunStats empty = stats_of("empty.dpscope", [](Writer&) {});
  EXPECT_EQ(empty.iterations, 0);
  EXPECT_EQ(empty.world_size, 3);
  ASSERT_EQ(empty.ranks.size(), 3u);
  EXPECT_TRUE(empty.ranks[2].iterations.empty());
  EXPECT_FALSE(empty.ranks[2].memory_peak.found());
  EXPECT_FALSE(empty.ranks[2].step_memory_peak.found());
  EXPECT_FALSE(empty.ranks[2].memory_after_steps.found());
  EXPECT_TRUE(empty.ranks[2].category_max.empty());
  const auto j = nlohmann::json::parse(stats_json(empty));
  EXPECT_EQ(j["ranks"][0]["peak_memory_bytes"], (nlohmann::json{{"total", 0}}));
  EXPECT_EQ(j["run"]["strategy"], "");

  const RunStats marked = stats_of("mark.dpscope", [](Writer& w) {
    w.add_event(slice(2, 0, EventKind::Mark, us(5), us(5), 4));
  });
  EXPECT_EQ(marked.iterations, 5);
  ASSERT_EQ(marked.ranks[0].iterations.size(), 5u);
  EXPECT_EQ(marked.ranks[0].iterations[4].iteration, 4);
  EXPECT_EQ(marked.ranks[0].iterations[4].hooks, 0);

  const RunStats measured = stats_of("metric.dpscope", [](Writer& w) {
    w.set_meta("world_size", "8");
    w.add_name(kStepMs, "step_ms");
    w.add_metric(1, 2, kStepMs, 7.0);
  });
  EXPECT_EQ(measured.iterations, 3);
  EXPECT_EQ(measured.world_size, 8);
  EXPECT_EQ(measured.ranks[1].iterations[2].step_ms, 7.0);
  EXPECT_EQ(measured.ranks[0].iterations[2].step_ms, 0.0);
}

// Long runs show their first and last iterations; the JSON keeps them all.
// A run on a GPU samples the CUDA caching allocator; the categories count host memory only, and
// the report says where the GPU's memory is (docs/gpu.md).
TEST(statsText, GpuMemoryFromTheCudaCachingAllocator) {
  TempDir dir;
  const std::string path = dir.file("gpu.dpscope");
  {
    Writer w(path);
    w.begin();
    w.put_rank(rank_row(0, "complete", 0));
    w.add_memory(sample(0, 0, MemoryCategory::Data, 1 << 20));
    w.add_memory(sample(0, 0, MemoryCategory::CudaAllocated, 64 << 20));
    w.add_memory(sample(0, 0, MemoryCategory::CudaReserved, 80 << 20));
    w.add_memory(sample(0, 10, MemoryCategory::CudaAllocated, 66 << 20));
    w.add_memory(sample(0, 10, MemoryCategory::CudaReserved, 80 << 20));
    w.commit();
    w.finish();
  }
  Reader reader(path);
  const RunStats s = compute_stats(reader);
  ASSERT_TRUE(s.ranks[0].sampled_gpu_memory());
  EXPECT_EQ(s.ranks[0].largest(MemoryCategory::CudaAllocated), 66 << 20);
  EXPECT_EQ(s.ranks[0].largest(MemoryCategory::Parameters), 0);
  const std::string text = stats_text(s);
  EXPECT_NE(text.find("GPU memory (CUDA caching allocator): largest cuda_allocated 66.00 MiB, "
                      "cuda_reserved 80.00 MiB; the memory above is the host's only"),
            std::string::npos)
      << text;
}

// In the known run only rank 1 sampled cuda_allocated: only its section has the line.
TEST(statsText, GpuMemoryLineOnlyForRanksThatSampledIt) {
  TempDir dir;
  const std::string text = stats_text(known_stats(dir));
  const size_t rank1 = text.find("\nrank 1");
  ASSERT_NE(rank1, std::string::npos) << text;
  EXPECT_GT(text.find("GPU memory"), rank1) << text;
  EXPECT_NE(text.find("GPU memory"), std::string::npos) << text;
}

TEST(statsText, LongRunsElided) {
  TempDir dir;
  const std::string path = dir.file("long.dpscope");
  {
    Writer w(path);
    w.begin();
    w.put_rank(rank_row(0, "complete", 0));
    w.add_name(kIteration, "iteration");
    for (int i = 0; i < 100; ++i) w.add_event(phase(0, kIteration, i * 10, i * 10 + 5, i));
    w.commit();
    w.finish();
  }
  Reader reader(path);
  const RunStats s = compute_stats(reader);
  const std::string text = stats_text(s);
  EXPECT_NE(text.find("... 80 more iterations"), std::string::npos) << text;
  EXPECT_NE(text.find("step_ms over 98 iterations from 2: median 0.005"), std::string::npos) << text;
  EXPECT_NE(text.find("     9      0.005"), std::string::npos) << text;
  EXPECT_EQ(text.find("    10      0.005"), std::string::npos) << text;
  EXPECT_NE(text.find("    99      0.005"), std::string::npos) << text;
  EXPECT_EQ(nlohmann::json::parse(stats_json(s))["ranks"][0]["iterations"].size(), 100u);
}

}  // namespace
}  // namespace dpscope::trace

namespace dpscope::trace {
namespace {

// PyTorch DDP's logging data from phases, the first BucketLaunch and finalize_backward.
// it 0: forward [0,1000] backward [1000,5000] launch 2000 finalize [4500,6000]
//       -> forward 1, backward compute 3.5, backward comm 4, overlap 2.5 (ms).
// it 1 (two micro-steps; the last forward and backward count): forwards [10000,11000] and
//       [12000,12500], backwards from 11000 and 12500, launch 13000, finalize [14000,14500]
//       -> 0.5, 1.5, 1.5, 1.0.   it 2: no finalize -> not averaged.
TEST(stats, DdpLoggingData) {
  TempDir dir;
  const std::string path = dir.file("ddp.sqlite");
  {
    Writer w(path);
    w.begin();
    w.put_rank(rank_row(0, "complete", 0));
    w.add_lane(LaneInfo{0, 0, "main", LaneKind::Host});
    w.add_name(kForward, "forward");
    w.add_name(kBackward, "backward");
    w.add_name(kSetup, "finalize_backward");
    for (const Event& e : {phase(0, kForward, 0, 1000, 0), phase(0, kBackward, 1000, 5000, 0),
                           bucket_event(0, EventKind::BucketLaunch, 0, 2000, 0),
                           phase(0, kSetup, 4500, 6000, 0),
                           phase(0, kForward, 10000, 11000, 1), phase(0, kBackward, 11000, 12000, 1),
                           phase(0, kForward, 12000, 12500, 1), phase(0, kBackward, 12500, 14000, 1),
                           bucket_event(0, EventKind::BucketLaunch, 1, 13000, 1),
                           bucket_event(0, EventKind::BucketLaunch, 0, 13500, 1),
                           phase(0, kSetup, 14000, 14500, 1),
                           phase(0, kForward, 20000, 21000, 2)}) {
      w.add_event(e);
    }
    w.commit();
  }
  Reader reader(path);
  const RunStats s = compute_stats(reader);
  ASSERT_TRUE(s.ranks[0].ddp.has_value());
  const DdpTimings& d = *s.ranks[0].ddp;
  EXPECT_EQ(d.iterations, 2);
  EXPECT_DOUBLE_EQ(d.forward_compute_ms, 0.75);
  EXPECT_DOUBLE_EQ(d.backward_compute_ms, 2.5);
  EXPECT_DOUBLE_EQ(d.backward_comm_ms, 2.75);
  EXPECT_DOUBLE_EQ(d.backward_compute_comm_overlap_ms, 1.75);
  EXPECT_NE(stats_text(s).find("ddp logging (avg over 2 iterations): forward compute 0.750 ms"),
            std::string::npos)
      << stats_text(s);
}


CollectiveStats on_rank(int64_t seq, CollectiveOp op, int64_t bytes, DType dtype, int64_t begin_ns) {
  CollectiveStats c;
  c.grp = 0;
  c.seq = seq;
  c.op = op;
  c.bytes = bytes;
  c.dtype = static_cast<uint8_t>(dtype);
  c.begin_ns = begin_ns;
  c.end_ns = begin_ns + 10;
  return c;
}

TEST(CollectiveMatching, BytesDtypeOpAndMissingRanksAreMismatchesSkewIsTheBeginSpread) {
  const auto ar = CollectiveOp::AllReduce;
  std::vector<std::vector<CollectiveStats>> by_rank = {
      {on_rank(0, ar, 4096, DType::Float32, 100), on_rank(1, ar, 4096, DType::Float32, 200),
       on_rank(2, ar, 4096, DType::Float32, 300), on_rank(3, ar, 64, DType::Float32, 400),
       on_rank(4, ar, 8, DType::Float32, 500)},
      {on_rank(0, ar, 4096, DType::Float32, 130), on_rank(1, ar, 2048, DType::Float32, 200),
       on_rank(2, ar, 4096, DType::Float16, 300),
       on_rank(3, CollectiveOp::Broadcast, 64, DType::Float32, 400)},
  };
  const auto matches = match_collectives({0, 1}, by_rank, 2);
  ASSERT_EQ(matches.size(), 5u);
  EXPECT_FALSE(matches[0].mismatch);
  EXPECT_EQ(matches[0].skew_ns, 30);
  EXPECT_EQ(matches[0].ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(matches[1].mismatch);
  EXPECT_NE(matches[1].why.find("rank 1 ran allreduce of 2.0 KiB float32"), std::string::npos) << matches[1].why;
  EXPECT_TRUE(matches[2].mismatch);
  EXPECT_NE(matches[2].why.find("float16"), std::string::npos) << matches[2].why;
  EXPECT_TRUE(matches[3].mismatch);
  EXPECT_NE(matches[3].why.find("broadcast"), std::string::npos) << matches[3].why;
  EXPECT_TRUE(matches[4].mismatch);
  EXPECT_EQ(matches[4].why, "ran on 1 of 2 ranks");
}

TEST(stats, MatchesAndBucketExposureOfTheKnownTrace) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  // Rank 1 stopped early: its last collectives are not on rank 0, rank 0's not on it.
  EXPECT_GT(s.matches.size(), 0u);
  int64_t mismatches = 0;
  for (const CollectiveMatch& m : s.matches) mismatches += m.mismatch;
  EXPECT_EQ(mismatches, s.mismatches);
  for (const RankStats& r : s.ranks) {
    double comm = 0, exposed = 0;
    for (const BucketExposure& b : r.buckets) {
      comm += b.comm_ms;
      exposed += b.exposed_comm_ms;
      EXPECT_LE(b.exposed_comm_ms, b.comm_ms + 1e-9);
    }
    EXPECT_LE(exposed, r.overlap.exposed_comm_ms + 1e-9) << "rank " << r.rank;
  }
}

// Bad input is analysed without a crash and the report says what is missing: a rank with no
// phases (compute unknown), one with no collectives, a rank whose writer died (status running),
// a file of one rank.
TEST(statsText, MissingPartsAreSaid) {
  TempDir dir;
  const std::string path = dir.file("partial.dpscope");
  {
    Writer w(path);
    w.begin();
    add_names(w);
    w.put_rank(rank_row(0, "complete", 0));
    w.put_rank(rank_row(1, "running", 0));
    // Rank 0: collectives but no phases. Rank 1: a phase but no collectives.
    w.add_event(collective(0, CollectiveOp::AllReduce, 0, 0, 64, 0, 10, 0));
    w.add_event(phase(1, kForward, 0, 5, 0));
    w.commit();
    w.finish();
  }
  Reader reader(path);
  const RunStats s = compute_stats(reader);
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.ranks[0].compute_phases, 0);
  EXPECT_EQ(s.ranks[1].compute_phases, 1);
  EXPECT_EQ(s.mismatches, 1);  // rank 1 never ran seq 0
  const std::string text = stats_text(s);
  EXPECT_NE(text.find("no forward, backward or optimizer_step phases recorded: compute, overlap and "
                      "exposed comm below are unknown"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("no collectives recorded"), std::string::npos) << text;
  EXPECT_NE(text.find("WARNING: rank 1 did not finish"), std::string::npos) << text;
  EXPECT_NE(text.find("ran on 1 of 2 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("peak memory: no memory samples"), std::string::npos) << text;
  EXPECT_NO_THROW(nlohmann::json::parse(stats_json(s)));

  const std::string single = dir.file("single.dpscope");
  {
    Writer w(single);
    w.begin();
    add_names(w);
    w.put_rank(rank_row(0, "complete", 0));
    w.add_event(phase(0, kForward, 0, 5, 0));
    w.commit();
    w.finish();
  }
  Reader one(single);
  const RunStats alone = compute_stats(one);
  EXPECT_TRUE(alone.matches.empty());
  EXPECT_EQ(alone.ranks.at(0).overlap.compute_ms, 0.005);
  EXPECT_NE(stats_text(alone).find("no collectives recorded"), std::string::npos);
}

TEST(IntervalSet, UnionIntersectionDifferenceAndCoverage) {
  const IntervalSet a = IntervalSet::union_of({{0, 10}, {5, 20}, {30, 40}, {50, 50}});
  EXPECT_EQ(a.intervals().size(), 2u);
  EXPECT_EQ(a.length(), 30);
  const IntervalSet b = IntervalSet::union_of({{15, 35}});
  EXPECT_EQ(a.intersection_length(b), 10);
  const IntervalSet d = a.minus(b);
  EXPECT_EQ(d.length(), 20);
  ASSERT_EQ(d.intervals().size(), 2u);
  EXPECT_EQ(d.intervals()[0].end_ns, 15);
  EXPECT_EQ(d.intervals()[1].begin_ns, 35);
  EXPECT_EQ(a.covered(8, 32), 14);
  EXPECT_EQ(a.covered(20, 30), 0);
}

}  // namespace
}  // namespace dpscope::trace
