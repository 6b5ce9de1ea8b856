// The what-if replay (analysis/whatif.h) on a tiny hand-made DDP trace whose every ready time,
// all-reduce and wait is known, so the predicted schedule can be checked to the nanosecond; and
// the refusals of traces it cannot replay.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/stats.h"
#include "analysis/whatif.h"
#include "tests/test_util.h"
#include "trace/reader.h"
#include "trace/writer.h"

namespace dpscope::analysis {
namespace {

using namespace dpscope::trace;
using core::BucketPlan;
using core::LinkSpec;
using core::link_model_ns;

using testing::TempDir;

constexpr int64_t kUs = 1000;
constexpr int64_t kMs = 1000 * kUs;

// The trace: three float32 parameters p0 (4000 bytes), p1 (8000), p2 (4000); gradients arrive
// p2, p1, p0. Recorded limits [4000, 8000] give buckets {2} {1} {0}. All-reduces cost exactly
// 100 us + 10 ns per byte. Each iteration, relative to its start:
//   forward 0-1 ms; backward 1-2.155 ms; hooks end at 1.2 (p2), 1.6 (p1), 2.0 (p0) ms
//   all-reduces start at their bucket's ready time: b0 1.2-1.34, b1 1.6-1.78, b2 2.0-2.14 ms
//   finalize_backward 2.05-2.155: writes b0 back (15 us), b1 (30 us), waits 2.095-2.14 for b2,
//   writes it back (15 us); optimizer_step 2.3-2.8 ms; step_ms 9.
struct Spec {
  std::string strategy = "ddp";
  int iterations = 4;
  bool hooks = true;
  bool same_sizes = false;  // every parameter 4000 bytes: no bandwidth can be fitted
  bool emulated_link = false;  // recorded on an emulated 4 Gb/s, 50 us link
};

constexpr int64_t kBase = 1'000'000'000;
constexpr int64_t kIterationNs = 10 * kMs;

void write_trace(const std::string& path, const Spec& spec) {
  Writer w(path);
  w.begin();
  w.set_meta("strategy", spec.strategy);
  w.set_meta("world_size", "1");
  w.set_meta("trace_level", spec.hooks ? "full" : "summary");
  w.set_meta("config", R"({"first_bucket_bytes":4000,"bucket_cap_bytes":8000})");
  if (spec.emulated_link) {
    w.set_meta("link_gbps", "4");
    w.set_meta("link_latency_us", "50");
  }
  RankInfo rank;
  rank.status = "complete";
  w.put_rank(rank);
  w.add_lane({0, 0, "main", LaneKind::Host});
  w.add_lane({0, 1, "gloo comm", LaneKind::Comm});
  const char* names[] = {"forward", "backward", "optimizer_step", "iteration", "finalize_backward",
                         "step_ms"};
  for (NameId id = 0; id < 6; ++id) w.add_name(id, names[id]);
  const int64_t numel[] = {1000, spec.same_sizes ? 1000 : 2000, 1000};
  for (int32_t p = 0; p < 3; ++p) {
    ParamInfo info;
    info.index = p;
    info.name = "p" + std::to_string(p);
    info.shape = {numel[p]};
    info.numel = numel[p];
    info.rebuilt_bucket = 2 - p;
    w.add_param(info);
    BucketInfo bucket;
    bucket.generation = 1;
    bucket.index = 2 - p;
    bucket.bytes = numel[p] * 4;
    bucket.numel = numel[p];
    bucket.params = {p};
    bucket.offsets = {0};
    w.add_bucket(bucket);
  }
  const auto slice = [&](EventKind kind, int64_t begin, int64_t end, int32_t iteration) {
    Event e;
    e.kind = kind;
    e.begin_ns = begin;
    e.end_ns = end;
    e.iteration = iteration;
    return e;
  };
  for (int32_t i = 0; i < spec.iterations; ++i) {
    const int64_t t0 = kBase + i * kIterationNs;
    const auto phase = [&](NameId name, int64_t begin, int64_t end) {
      Event e = slice(EventKind::Phase, t0 + begin, t0 + end, i);
      e.name = name;
      w.add_event(e);
    };
    phase(3, 0, 9 * kMs);
    phase(0, 0, 1 * kMs);
    phase(1, 1 * kMs, 2155 * kUs);
    phase(4, 2050 * kUs, 2155 * kUs);
    phase(2, 2300 * kUs, 2800 * kUs);
    w.add_metric(0, i, 5, 9.0);
    const int64_t ready[] = {2000 * kUs, 1600 * kUs, 1200 * kUs};  // by parameter
    for (int32_t p = 2; p >= 0; --p) {
      if (spec.hooks) {
        Event hook = slice(EventKind::Hook, t0 + ready[p] - 50 * kUs, t0 + ready[p], i);
        hook.param = p;
        hook.bucket = 2 - p;
        w.add_event(hook);
      }
      Event c = slice(EventKind::Collective, t0 + ready[p],
                      t0 + ready[p] + 100 * kUs + numel[p] * 4 * 10, i);
      c.lane = 1;
      c.op = static_cast<uint8_t>(CollectiveOp::AllReduce);
      c.grp = 0;
      c.seq = i * 3 + (2 - p);
      c.bucket = 2 - p;
      c.bytes = numel[p] * 4;
      c.dtype = static_cast<uint8_t>(DType::Float32);
      c.enqueue_ns = c.begin_ns;
      w.add_event(c);
    }
    Event wait = slice(EventKind::CollectiveWait, t0 + 2095 * kUs, t0 + 2140 * kUs, i);
    wait.op = static_cast<uint8_t>(CollectiveOp::AllReduce);
    wait.grp = 0;
    wait.seq = i * 3 + 2;
    w.add_event(wait);
  }
  w.commit();
  w.finish();
}

struct Loaded {
  RunStats stats;
  ReplayTrace replay;
};

Loaded load(const std::string& path) {
  Reader reader(path);
  Loaded l;
  l.stats = compute_stats(reader);
  l.replay = load_replay_trace(reader, l.stats, 0);
  return l;
}

std::string refusal(const Spec& spec) {
  TempDir dir;
  write_trace(dir.file("t.sqlite"), spec);
  try {
    const Loaded l = load(dir.file("t.sqlite"));
    fit_allreduce_model(l.replay);
  } catch (const WhatifError& error) {
    return error.what();
  }
  return "(accepted)";
}

TEST(Whatif, FitsTheRecordedAllReducesExactly) {
  TempDir dir;
  write_trace(dir.file("t.sqlite"), {});
  const Loaded l = load(dir.file("t.sqlite"));
  ASSERT_EQ(l.replay.iterations.size(), 2u);  // iterations 2 and 3
  EXPECT_EQ(l.replay.arrival_order, (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(l.replay.launch_offset_ns, 0);
  const AllReduceModel model = fit_allreduce_model(l.replay);
  EXPECT_EQ(model.samples, 6);
  EXPECT_NEAR(model.intercept_ns, 100 * kUs, 1e-3);
  EXPECT_NEAR(model.ns_per_byte, 10, 1e-9);
  EXPECT_NEAR(model.fit_error_pct, 0, 1e-9);
  EXPECT_EQ(model.duration_ns(8000), 180 * kUs);
}

TEST(Whatif, TheRecordedSettingsReplayAsRecorded) {
  TempDir dir;
  write_trace(dir.file("t.sqlite"), {});
  const Loaded l = load(dir.file("t.sqlite"));
  ASSERT_TRUE(l.replay.recorded_limits);
  const BucketPlan plan = plan_for(l.replay, *l.replay.recorded_limits);
  EXPECT_EQ(plan.buckets, l.replay.recorded_plan.buckets);
  EXPECT_EQ(plan.buckets, (std::vector<std::vector<int64_t>>{{2}, {1}, {0}}));
  const Prediction p = predict(l.replay, plan, fit_allreduce_model(l.replay));
  ASSERT_EQ(p.iterations.size(), 2u);
  const IterationPrediction& it = p.iterations[0];
  EXPECT_EQ(it.tail_end_ns, kBase + 2 * kIterationNs + 2155 * kUs);
  EXPECT_DOUBLE_EQ(p.predicted_step_ms, 9.0);
  EXPECT_DOUBLE_EQ(p.measured_step_ms, 9.0);
  // Exposed: only the wait for b2, 2.095-2.14 ms; the same as compute_stats measures.
  EXPECT_NEAR(p.measured_exposed_comm_ms, 0.045, 1e-9);
  EXPECT_NEAR(p.predicted_exposed_comm_ms, 0.045, 1e-9);
  EXPECT_NEAR(it.predicted.comm_ms, it.measured.comm_ms, 1e-9);
  EXPECT_NEAR(it.predicted.compute_ms, it.measured.compute_ms, 1e-9);
}

TEST(Whatif, ALargerCapGivesTheHandComputedSchedule) {
  TempDir dir;
  write_trace(dir.file("t.sqlite"), {});
  const Loaded l = load(dir.file("t.sqlite"));
  // Limits [4000, 16000]: p2 fills the first bucket; p1 and p0 (12000 bytes) share the second.
  const BucketPlan plan = plan_for(l.replay, BucketLimits{4000, 16000});
  ASSERT_EQ(plan.buckets, (std::vector<std::vector<int64_t>>{{2}, {1, 0}}));
  const Prediction p = predict(l.replay, plan, fit_allreduce_model(l.replay));
  EXPECT_EQ(p.bucket_bytes, (std::vector<int64_t>{4000, 12000}));
  const int64_t t0 = kBase + 2 * kIterationNs;
  const IterationPrediction& it = p.iterations[0];
  ASSERT_EQ(it.buckets.size(), 2u);
  EXPECT_EQ(it.buckets[0].start_ns, t0 + 1200 * kUs);
  EXPECT_EQ(it.buckets[0].end_ns, t0 + 1340 * kUs);
  EXPECT_EQ(it.buckets[1].ready_ns, t0 + 2000 * kUs);  // p0's hook
  EXPECT_EQ(it.buckets[1].start_ns, t0 + 2000 * kUs);
  EXPECT_EQ(it.buckets[1].end_ns, t0 + 2220 * kUs);   // 100 us + 12000 * 10 ns
  // Tail from 2.05: b0 written back (60 us * 4000/16000 = 15 us), wait for b1 2.065-2.22,
  // b1 written back (45 us): ends at 2.265 ms, 110 us after the recorded 2.155.
  ASSERT_EQ(it.predicted_waits.size(), 1u);
  EXPECT_EQ(it.predicted_waits[0].begin_ns, t0 + 2065 * kUs);
  EXPECT_EQ(it.predicted_waits[0].end_ns, t0 + 2220 * kUs);
  EXPECT_EQ(it.tail_end_ns, t0 + 2265 * kUs);
  EXPECT_NEAR(it.predicted_step_ms, 9.110, 1e-9);
  // comm 1.2-1.34 and 2.0-2.22 (360 us); hidden: 1.2-1.34 and 2.0-2.065 (205 us).
  EXPECT_NEAR(it.predicted.comm_ms, 0.360, 1e-9);
  EXPECT_NEAR(it.predicted.exposed_comm_ms, 0.155, 1e-9);
  EXPECT_NEAR(p.predicted_exposed_comm_ms, 0.155, 1e-9);
}

TEST(Whatif, TheRingModelOfALinkReplacesTheFit) {
  TempDir dir;
  write_trace(dir.file("t.sqlite"), {});
  const Loaded l = load(dir.file("t.sqlite"));
  // One all-reduce costing 1 ms flat: every bucket waits for the previous one.
  const AllReduceModel model = link_allreduce_model(4, 50, 1 * kMs, 0);
  const Prediction p = predict(l.replay, l.replay.recorded_plan, model);
  const IterationPrediction& it = p.iterations[0];
  const int64_t t0 = kBase + 2 * kIterationNs;
  EXPECT_EQ(it.buckets[0].end_ns, t0 + 2200 * kUs);
  EXPECT_EQ(it.buckets[1].start_ns, t0 + 2200 * kUs);  // queued behind b0 on the link
  EXPECT_EQ(it.buckets[2].end_ns, t0 + 4200 * kUs);
  EXPECT_EQ(it.tail_end_ns, t0 + 4200 * kUs + 15 * kUs);
}

// --link-gbps costs a collective with the link's ring model: the line through its cost at 0 bytes
// and at 1 GiB, which a ring's cost is.
TEST(Whatif, TheLinkModelIsTheRingModelOfEachOp) {
  const LinkSpec link{4, 50};
  for (const CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::ReduceScatter}) {
    const AllReduceModel model = link_collective_model(op, link, 4);
    EXPECT_EQ(model.source, AllReduceModel::Source::Link);
    EXPECT_EQ(model.link_gbps, 4);
    EXPECT_EQ(model.link_latency_us, 50);
    for (const int64_t bytes : {int64_t{0}, int64_t{4000}, int64_t{1} << 20, int64_t{3} << 30}) {
      EXPECT_NEAR(double(model.duration_ns(bytes)), double(link_model_ns(op, bytes, 4, link)), 1)
          << to_string(op) << " " << bytes;
    }
  }
}

TEST(Whatif, RefusesTracesItCannotReplay) {
  Spec fsdp;
  fsdp.strategy = "fsdp";
  EXPECT_NE(refusal(fsdp).find("an FSDP trace has no DDP bucket plan to replay"),
            std::string::npos);
  Spec summary;
  summary.hooks = false;
  EXPECT_NE(refusal(summary).find("trace level summary"), std::string::npos) << refusal(summary);
  Spec short_run;
  short_run.iterations = 2;
  EXPECT_NE(refusal(short_run).find("no steady iterations"), std::string::npos);
  Spec same;
  same.same_sizes = true;
  const std::string message = refusal(same);
  EXPECT_NE(message.find("cannot be told apart"), std::string::npos) << message;
  EXPECT_NE(message.find("--link-gbps"), std::string::npos) << message;
  EXPECT_NE(message.find("t.sqlite"), std::string::npos) << message;
  // Recorded on an emulated link, the fix names that link's numbers.
  same.emulated_link = true;
  const std::string on_link = refusal(same);
  EXPECT_NE(on_link.find("pass --link-gbps 4 --link-latency-us 50 (the emulated link it was recorded on)"),
            std::string::npos)
      << on_link;
}

}  // namespace
}  // namespace dpscope::analysis
