// The traces behind tests/analysis/test_stats_*.cpp: event, sample and table-row builders, the
// known two-rank DDP trace whose every figure is worked out by hand below, and stats_of_trace,
// which writes a trace and reads its stats. Times in microseconds unless noted.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "analysis/stats.h"
#include "tests/test_util.h"
#include "tests/trace_event.h"
#include "trace/reader.h"
#include "trace/writer.h"

namespace dpscope::analysis::stats_fixture {

using namespace dpscope::trace;


using testing::TempDir;

constexpr int64_t us(int64_t v) { return v * 1000; }

inline constexpr NameId kForward = 1, kBackward = 2, kOptimizerStep = 3, kIteration = 4,
    kLoss = 5, kStepMs = 6, kSetup = 7;

using testing::trace_event;

inline Event phase(int16_t rank, NameId name, int64_t begin_us, int64_t end_us,
                   int32_t iteration) {
  Event e = trace_event(rank, 0, EventKind::Phase, us(begin_us), us(end_us), iteration);
  e.name = name;
  return e;
}

inline Event hook(int16_t rank, int32_t param, int32_t bucket, int64_t begin_us,
                  int32_t iteration) {
  Event e = trace_event(rank, 2, EventKind::Hook, us(begin_us), us(begin_us + 100), iteration);
  e.param = param;
  e.bucket = bucket;
  e.value = 220;
  return e;
}

inline Event bucket_event(int16_t rank, EventKind kind, int32_t bucket, int64_t at_us,
                          int32_t iteration) {
  Event e = trace_event(rank, 2, kind, us(at_us), us(at_us), iteration);
  e.bucket = bucket;
  return e;
}

inline Event collective(int16_t rank, CollectiveOp op, int16_t grp, int64_t seq, int64_t bytes,
                        int64_t begin_us, int64_t end_us, int32_t iteration,
                        int32_t bucket = kNone) {
  Event e = trace_event(rank, 1, EventKind::Collective, us(begin_us), us(end_us), iteration);
  e.op = static_cast<uint8_t>(op);
  e.grp = grp;
  e.seq = seq;
  e.bytes = bytes;
  e.bucket = bucket;
  e.dtype = static_cast<uint8_t>(DType::Float32);
  return e;
}

inline void add_names(Writer& w) {
  w.add_name(kForward, "forward");
  w.add_name(kBackward, "backward");
  w.add_name(kOptimizerStep, "optimizer_step");
  w.add_name(kIteration, "iteration");
  w.add_name(kLoss, "loss");
  w.add_name(kStepMs, "step_ms");
  w.add_name(kSetup, "broadcast_state");
}

inline RankInfo rank_row(int32_t rank, const std::string& status, int64_t dropped) {
  RankInfo r;
  r.rank = rank;
  r.host = "localhost";
  r.status = status;
  r.dropped_events = dropped;
  return r;
}

inline ParamInfo param(int32_t index, const std::string& name, std::vector<int64_t> shape,
                       int64_t numel, int32_t bucket, int32_t rebuilt, int32_t unit) {
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

inline BucketInfo bucket(int32_t generation, int32_t index, int64_t bytes,
                         std::vector<int32_t> params) {
  BucketInfo b;
  b.generation = generation;
  b.index = index;
  b.bytes = bytes;
  b.numel = bytes / 4;
  b.params = std::move(params);
  b.offsets.assign(b.params.size(), 0);
  return b;
}

inline MemorySample sample(int32_t rank, int64_t at_us, MemoryCategory category, int64_t bytes) {
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
inline void fill_known_trace(Writer& w) {
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
  Event wait = trace_event(0, 0, EventKind::CollectiveWait, us(7000), us(7500), 0);
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
}

// Writes dir/name with `fill` between the writer's begin() and commit(), and reads its stats.
inline RunStats stats_of_trace(const TempDir& dir, const std::string& name,
                               const std::function<void(Writer&)>& fill) {
  const std::string path = dir.file(name);
  {
    Writer w(path);
    w.begin();
    fill(w);
    w.commit();
    w.finish();
  }
  Reader reader(path);
  return compute_stats(reader);
}

inline RunStats known_stats(const TempDir& dir) {
  return stats_of_trace(dir, "known.dpscope", fill_known_trace);
}

// Per-iteration collective counts in CollectiveOp order: broadcast, allreduce, allgather,
// reduce_scatter, barrier.
using Counts = std::array<int64_t, kCollectiveOpCount>;

}  // namespace dpscope::analysis::stats_fixture
