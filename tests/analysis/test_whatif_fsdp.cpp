// The FSDP what-if replay (analysis/whatif_fsdp.h) on a tiny hand-made FSDP trace whose every compute
// interval, all-gather, reduce-scatter and wait is known, so each predicted schedule can be
// checked to the microsecond against one worked out by hand; and the refusals.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/stats.h"
#include "analysis/whatif_fsdp.h"
#include "tests/test_util.h"
#include "trace/reader.h"
#include "trace/writer.h"

namespace dpscope::analysis {
namespace {

using namespace dpscope::trace;

using testing::TempDir;

constexpr int64_t kUs = 1000;
constexpr int64_t kMs = 1000 * kUs;
constexpr int64_t kBase = 1'000'000'000;
constexpr int64_t kIterationNs = 10 * kMs;

// Two units, u0 (all-gather of 1000 bytes, reduce-scatter of 2000) and u1 (2000, 4000), on
// 2 ranks; all-gathers cost 100 us + 100 ns a byte (u0 200 us, u1 300 us), reduce-scatters 50 us
// + 50 ns a byte (u0 150 us, u1 250 us). Recorded with backward prefetch pre, no limits. Each
// iteration, in us from its start (step 5 ms):
//   forward 0-2000:    u0 gathered 100-300 (waited), computes 300-1000; u1 gathered 1000-1300
//                      (waited), computes 1300-2000
//   backward 2100-4600: u1 gathered 2200-2500 (waited); pre prefetches u0's gather 2500-2700;
//                      u1 computes 2500-3500, its post-backward at 3500 issues its reduce-scatter
//                      3500-3750; u0 needs its gather at 3600 (done: no wait), computes 3600-4400,
//                      reduce-scatter 4400-4550; the final callback waits 4500-4550
//   optimizer_step 4700-5000
struct Spec {
  std::string strategy = "fsdp";
  int iterations = 4;
  bool unit_states = true;
  std::string sharding = "full";
  // Forward prefetch of u1 issued at 150 us, before u0's gather is waited for (200-300): two
  // all-gathers in flight (not what the engine does; it exercises the limit).
  bool early_forward_prefetch = false;
  // The process group of the reduce-scatters (and their waits): another than the all-gathers'
  // puts them on a link of their own, as HSDP's shard and replicate groups are.
  int16_t reduce_group = 0;
};

void write_trace(const std::string& path, const Spec& spec) {
  Writer w(path);
  w.begin();
  w.set_meta("strategy", spec.strategy);
  w.set_meta("world_size", "2");
  w.set_meta("trace_level", "summary");
  w.set_meta("fsdp.sharding", spec.sharding);
  w.set_meta("config", R"({"backward_prefetch":"pre","limit_all_gathers":0,"forward_prefetch":false,)"
                       R"("limit_reduce_scatters":0,"mixed_precision":"none","cpu_offload":false,"grad_accum":1})");
  RankInfo rank;
  rank.status = "complete";
  w.put_rank(rank);
  w.add_lane({0, 0, "main", LaneKind::Host});
  w.add_lane({0, 1, "gloo comm", LaneKind::Comm});
  w.add_lane({0, 2, "unit 0 u0", LaneKind::Unit});
  w.add_lane({0, 3, "unit 1 u1", LaneKind::Unit});
  const char* names[] = {"forward", "backward", "optimizer_step", "iteration"};
  for (NameId id = 0; id < 4; ++id) w.add_name(id, names[id]);
  w.add_unit({0, "u0", kNone, 500, 500, 250});
  w.add_unit({1, "u1", kNone, 1000, 1000, 500});
  for (int32_t i = 0; i < spec.iterations; ++i) {
    const int64_t t0 = kBase + i * kIterationNs;
    const auto event = [&](EventKind kind, int64_t begin_us, int64_t end_us) {
      Event e;
      e.kind = kind;
      e.begin_ns = t0 + begin_us * kUs;
      e.end_ns = t0 + end_us * kUs;
      e.iteration = i;
      return e;
    };
    const auto phase = [&](NameId name, int64_t begin_us, int64_t end_us) {
      Event e = event(EventKind::Phase, begin_us, end_us);
      e.name = name;
      w.add_event(e);
    };
    phase(3, 0, 5000);
    phase(0, 0, 2000);
    phase(1, 2100, 4600);
    phase(2, 4700, 5000);
    int64_t seq = i * 6;
    const auto collective = [&](CollectiveOp op, int32_t unit, int64_t bytes, uint8_t flags,
                                int64_t enqueue_us, int64_t begin_us, int64_t end_us) {
      Event c = event(EventKind::Collective, begin_us, end_us);
      c.lane = 1;
      c.op = static_cast<uint8_t>(op);
      c.unit = unit;
      c.bytes = bytes;
      c.flags = flags;
      c.grp = op == CollectiveOp::ReduceScatter ? spec.reduce_group : 0;
      c.seq = seq++;
      c.dtype = static_cast<uint8_t>(DType::Float32);
      c.enqueue_ns = t0 + enqueue_us * kUs;
      w.add_event(c);
      return c.seq;
    };
    const auto wait = [&](CollectiveOp op, int64_t of_seq, int64_t begin_us, int64_t end_us) {
      Event e = event(EventKind::CollectiveWait, begin_us, end_us);
      e.op = static_cast<uint8_t>(op);
      e.grp = op == CollectiveOp::ReduceScatter ? spec.reduce_group : 0;
      e.seq = of_seq;
      w.add_event(e);
    };
    const auto state = [&](int32_t unit, UnitState s, int64_t begin_us, int64_t end_us) {
      if (!spec.unit_states) return;
      Event e = event(EventKind::UnitState, begin_us, end_us);
      e.lane = 2 + unit;
      e.unit = unit;
      e.op = static_cast<uint8_t>(s);
      w.add_event(e);
    };
    constexpr auto kGather = CollectiveOp::AllGather;
    constexpr auto kReduce = CollectiveOp::ReduceScatter;
    const uint8_t backward = kFlagBackward;
    const uint8_t prefetch = kFlagPrefetch;
    // Forward.
    const int64_t u0_forward_gather = collective(kGather, 0, 1000, 0, 100, 100, 300);
    if (spec.early_forward_prefetch) {
      const int64_t u1_forward_gather = collective(kGather, 1, 2000, prefetch, 150, 300, 600);
      wait(kGather, u0_forward_gather, 200, 300);
      wait(kGather, u1_forward_gather, 1000, 1000);
    } else {
      wait(kGather, u0_forward_gather, 100, 300);
      wait(kGather, collective(kGather, 1, 2000, 0, 1000, 1000, 1300), 1000, 1300);
    }
    state(0, UnitState::Full, 300, 1000);
    state(1, UnitState::Full, 1300, 2000);
    // Backward.
    wait(kGather, collective(kGather, 1, 2000, backward, 2200, 2200, 2500), 2200, 2500);
    const int64_t u0_gather = collective(kGather, 0, 1000, backward | prefetch, 2500, 2500, 2700);
    state(1, UnitState::Full, 2500, 3500);
    const int64_t u1_reduce = collective(kReduce, 1, 4000, backward, 3500, 3500, 3750);
    wait(kGather, u0_gather, 3600, 3600);
    state(0, UnitState::Full, 3600, 4400);
    const int64_t u0_reduce = collective(kReduce, 0, 2000, backward, 4400, 4400, 4550);
    wait(kReduce, u1_reduce, 4500, 4500);
    wait(kReduce, u0_reduce, 4500, 4550);
  }
  w.commit();
  w.finish();
}

struct Loaded {
  RunStats stats;
  FsdpReplayTrace replay;
};

Loaded load(const std::string& path) {
  Reader reader(path);
  Loaded l;
  l.stats = compute_stats(reader);
  l.replay = load_fsdp_replay_trace(reader, l.stats, 0);
  return l;
}

std::string refusal(const Spec& spec) {
  TempDir dir;
  write_trace(dir.file("t.sqlite"), spec);
  try {
    load(dir.file("t.sqlite"));
  } catch (const WhatifError& error) {
    return error.what();
  }
  return "(accepted)";
}

// (start, end) of each predicted collective in issue order, in us from the iteration's start.
std::vector<std::pair<int64_t, int64_t>> schedule_us(const FsdpIterationPrediction& it) {
  const int64_t t0 = kBase + it.iteration * kIterationNs;
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const FsdpScheduledCollective& c : it.collectives) {
    out.push_back({(c.start_ns - t0) / kUs, (c.end_ns - t0) / kUs});
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> waits_us(const FsdpIterationPrediction& it) {
  const int64_t t0 = kBase + it.iteration * kIterationNs;
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const Interval& w : it.waits) out.push_back({(w.begin_ns - t0) / kUs, (w.end_ns - t0) / kUs});
  return out;
}

using Schedule = std::vector<std::pair<int64_t, int64_t>>;

TEST(WhatifFsdp, ReadsTheRecordedSettingsAndFitsEachOpExactly) {
  TempDir dir;
  write_trace(dir.file("t.sqlite"), {});
  const Loaded l = load(dir.file("t.sqlite"));
  EXPECT_EQ(l.replay.recorded.settings.backward_prefetch, trace::BackwardPrefetch::Pre);
  EXPECT_EQ(l.replay.recorded.settings.limit_all_gathers, 0);
  EXPECT_EQ(l.replay.recorded.sharding, trace::ShardingStrategy::FullShard);
  ASSERT_EQ(l.replay.iterations.size(), 2u);
  EXPECT_EQ(l.replay.launch_offset_ns, 0);
  const FsdpCostModel model = fit_fsdp_cost_model(l.replay);
  EXPECT_NEAR(model.all_gather.intercept_ns, 100 * kUs, 1);
  EXPECT_NEAR(model.all_gather.ns_per_byte, 100, 1e-6);
  EXPECT_NEAR(model.reduce_scatter.intercept_ns, 50 * kUs, 1);
  EXPECT_NEAR(model.reduce_scatter.ns_per_byte, 50, 1e-6);
  EXPECT_NEAR(model.all_gather.fit_error_pct, 0, 1e-6);
}

TEST(WhatifFsdp, ReadsTheShardingInEffect) {
  TempDir dir;
  Spec grad_op;
  grad_op.sharding = "grad_op";
  write_trace(dir.file("t.sqlite"), grad_op);
  EXPECT_EQ(load(dir.file("t.sqlite")).replay.recorded.sharding, trace::ShardingStrategy::ShardGradOp);
}

TEST(WhatifFsdp, TheRecordedSettingsReproduceTheRecordedStep) {
  TempDir dir;
  write_trace(dir.file("t.sqlite"), {});
  const Loaded l = load(dir.file("t.sqlite"));
  const FsdpPrediction p = predict_fsdp(l.replay, l.replay.recorded.settings, fit_fsdp_cost_model(l.replay));
  EXPECT_DOUBLE_EQ(p.measured_step_ms, 5.0);
  EXPECT_DOUBLE_EQ(p.predicted_step_ms, 5.0);
  for (const FsdpIterationPrediction& it : p.iterations) {
    EXPECT_EQ(schedule_us(it), (Schedule{{100, 300}, {1000, 1300}, {2200, 2500}, {2500, 2700},
                                         {3500, 3750}, {4400, 4550}}));
    EXPECT_EQ(waits_us(it), (Schedule{{100, 300}, {1000, 1300}, {2200, 2500}, {4500, 4550}}));
    EXPECT_TRUE(it.collectives[3].prefetch);
    // The same slices as recorded, so the same figures as compute_stats.
    EXPECT_NEAR(it.predicted.compute_ms, it.measured.compute_ms, 1e-9);
    EXPECT_NEAR(it.predicted.comm_ms, it.measured.comm_ms, 1e-9);
    EXPECT_NEAR(it.predicted.exposed_comm_ms, it.measured.exposed_comm_ms, 1e-9);
  }
  EXPECT_NEAR(p.predicted_exposed_comm_ms, p.measured_exposed_comm_ms, 1e-9);
}

TEST(WhatifFsdp, PrefetchNoneAndPostGiveTheHandComputedSchedules) {
  TempDir dir;
  write_trace(dir.file("t.sqlite"), {});
  const Loaded l = load(dir.file("t.sqlite"));
  const FsdpCostModel model = fit_fsdp_cost_model(l.replay);
  // none: u0's gather is issued when u0 needs it (3600), queues behind u1's reduce-scatter
  // (until 3750) and ends at 3950; everything after moves 350 us later.
  const FsdpPrediction none = predict_fsdp(l.replay, {trace::BackwardPrefetch::None, 0}, model);
  EXPECT_DOUBLE_EQ(none.predicted_step_ms, 5.35);
  EXPECT_EQ(schedule_us(none.iterations[0]), (Schedule{{100, 300}, {1000, 1300}, {2200, 2500},
                                                       {3500, 3750}, {3750, 3950}, {4750, 4900}}));
  EXPECT_EQ(waits_us(none.iterations[0]),
            (Schedule{{100, 300}, {1000, 1300}, {2200, 2500}, {3600, 3950}, {4850, 4900}}));
  EXPECT_FALSE(none.iterations[0].collectives[4].prefetch);
  // post: u0's gather goes at u1's post-backward (3500-3700), before u1's reduce-scatter
  // (3700-3950); u0 waits 3600-3700; its reduce-scatter 4500-4650.
  const FsdpPrediction post = predict_fsdp(l.replay, {trace::BackwardPrefetch::Post, 0}, model);
  EXPECT_DOUBLE_EQ(post.predicted_step_ms, 5.1);
  EXPECT_EQ(schedule_us(post.iterations[0]), (Schedule{{100, 300}, {1000, 1300}, {2200, 2500},
                                                       {3500, 3700}, {3700, 3950}, {4500, 4650}}));
  EXPECT_EQ(waits_us(post.iterations[0]),
            (Schedule{{100, 300}, {1000, 1300}, {2200, 2500}, {3600, 3700}, {4600, 4650}}));
  EXPECT_GE(none.predicted_step_ms, post.predicted_step_ms);
  EXPECT_GE(post.predicted_step_ms, predict_fsdp(l.replay, {trace::BackwardPrefetch::Pre, 0}, model).predicted_step_ms);
}

// With the reduce-scatters on a group of their own, prefetch none's u0 gather (issued at 3600)
// no longer queues behind u1's reduce-scatter (3500-3750): it runs 3600-3800, and everything
// after moves 200 us later, not 350.
TEST(WhatifFsdp, EachProcessGroupQueuesOnItsOwnLink) {
  TempDir dir;
  Spec spec;
  spec.reduce_group = 1;
  write_trace(dir.file("t.sqlite"), spec);
  const Loaded l = load(dir.file("t.sqlite"));
  const FsdpPrediction none = predict_fsdp(l.replay, {trace::BackwardPrefetch::None, 0}, fit_fsdp_cost_model(l.replay));
  EXPECT_DOUBLE_EQ(none.predicted_step_ms, 5.2);
  EXPECT_EQ(schedule_us(none.iterations[0]), (Schedule{{100, 300}, {1000, 1300}, {2200, 2500},
                                                       {3500, 3750}, {3600, 3800}, {4600, 4750}}));
  EXPECT_EQ(waits_us(none.iterations[0]),
            (Schedule{{100, 300}, {1000, 1300}, {2200, 2500}, {3600, 3800}, {4700, 4750}}));
}

TEST(WhatifFsdp, TheAllGatherLimitIsObeyed) {
  TempDir dir;
  Spec spec;
  spec.early_forward_prefetch = true;
  write_trace(dir.file("t.sqlite"), spec);
  const Loaded l = load(dir.file("t.sqlite"));
  const FsdpCostModel model = fit_fsdp_cost_model(l.replay);
  // No limit: u1's forward gather is issued at 150 us, queues behind u0's (until 300).
  const FsdpPrediction free = predict_fsdp(l.replay, {trace::BackwardPrefetch::Pre, 0}, model);
  EXPECT_EQ(free.max_gathers_in_flight, 2);
  EXPECT_EQ(schedule_us(free.iterations[0])[1], (std::pair<int64_t, int64_t>{300, 600}));
  // Limit 1: issuing u1's gather at 150 first waits for u0's (150-300), then issues it at 300;
  // the main thread's work after it moves 100 us later (its recorded wait 200-300 is gone).
  const FsdpPrediction limited = predict_fsdp(l.replay, {trace::BackwardPrefetch::Pre, 1}, model);
  EXPECT_EQ(limited.max_gathers_in_flight, 1);
  const FsdpIterationPrediction& it = limited.iterations[0];
  EXPECT_EQ(it.collectives[1].issue_ns - (kBase + it.iteration * kIterationNs), 300 * kUs);
  EXPECT_EQ(waits_us(it).front(), (std::pair<int64_t, int64_t>{150, 300}));
  EXPECT_GT(limited.predicted_step_ms, free.predicted_step_ms);
  // A limit of 2 does not bind.
  EXPECT_DOUBLE_EQ(predict_fsdp(l.replay, {trace::BackwardPrefetch::Pre, 2}, model).predicted_step_ms,
                   free.predicted_step_ms);
}

TEST(WhatifFsdp, ParsesPrefetchModes) {
  EXPECT_EQ(trace::parse_mode(trace::kBackwardPrefetches, "post"), trace::BackwardPrefetch::Post);
  EXPECT_EQ(trace::parse_mode(trace::kBackwardPrefetches, "none"), trace::BackwardPrefetch::None);
  EXPECT_FALSE(trace::parse_mode(trace::kBackwardPrefetches, "PRE").has_value());
  EXPECT_EQ(to_string(trace::BackwardPrefetch::Pre), "pre");
}

TEST(WhatifFsdp, RefusesWhatItCannotReplay) {
  Spec ddp;
  ddp.strategy = "ddp";
  EXPECT_NE(refusal(ddp).find("not an FSDP trace"), std::string::npos) << refusal(ddp);
  Spec no_states;
  no_states.unit_states = false;
  EXPECT_NE(refusal(no_states).find("no unit state events"), std::string::npos) << refusal(no_states);
  Spec short_run;
  short_run.iterations = 2;
  EXPECT_NE(refusal(short_run).find("no steady iterations"), std::string::npos) << refusal(short_run);
  Spec no_shard;
  no_shard.sharding = "no_shard";
  EXPECT_NE(refusal(no_shard).find("--sharding full"), std::string::npos) << refusal(no_shard);
  EXPECT_NE(refusal(no_shard).find("t.sqlite"), std::string::npos);
}

}  // namespace
}  // namespace dpscope::analysis
