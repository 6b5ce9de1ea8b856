// The cluster clock's replay (Note [Cluster clock]) on hand-built programs and traces with
// answers worked out by hand: two ranks and three buckets queued on the link, a straggler, an
// FSDP prefetch, a collective one rank never issued, and the same answers however slow this
// machine's wall clock was; then a recorded trace read into programs, a step the machine
// interrupted taken at its pieces' least (Note [Steady compute]), and the refusals.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/cluster_clock.h"
#include "tests/test_util.h"
#include "trace/merge.h"
#include "trace/reader.h"
#include "trace/recorder.h"
#include "trace/vocabulary.h"

using namespace dpscope;
using analysis::ClusterClockError;
using analysis::CollectiveKey;
using core::LinkSpec;
using analysis::PointKind;
using analysis::RankProgram;
using analysis::ThreadPoint;
using dpscope::testing::TempDir;

namespace {

// 8 Gb/s moves a byte a nanosecond; no latency: a 2-rank all-reduce of S bytes takes S ns
// (2 (n-1) S/(nB)), an all-gather of a share of S bytes S ns ((n-1) S/B).
const LinkSpec kByteANanosecond{8, 0};

CollectiveKey c(int64_t seq) { return {0, seq}; }

// Builds a program from (CPU time, kind, collective) steps; the wall clock runs `slowdown` times
// the CPU clock plus a gap after each point, as on a busy machine.
struct ProgramWriter {
  RankProgram program;
  int64_t slowdown = 1;
  int64_t gap = 0;
  int64_t extra_wall = 0;
  ProgramWriter(int32_t rank, int64_t slowdown = 1, int64_t gap = 0) : slowdown(slowdown), gap(gap) {
    program.rank = rank;
  }
  ProgramWriter& at(int64_t cpu, PointKind kind, CollectiveKey key = {trace::kNone, trace::kNone64}) {
    program.points.push_back(ThreadPoint{cpu * slowdown + extra_wall, cpu, kind, key});
    extra_wall += gap;
    return *this;
  }
  ProgramWriter& issue(int64_t cpu, CollectiveKey key, int64_t bytes,
                       trace::CollectiveOp op = trace::CollectiveOp::AllReduce) {
    program.collectives[key] = analysis::IssuedCollective{op, bytes};
    return at(cpu, PointKind::Issue, key);
  }
  // A wait: it begins at `cpu`, and (asleep) ends with the CPU clock where it was, `wall` later.
  ProgramWriter& wait(int64_t cpu, CollectiveKey key, int64_t wall = 5000) {
    at(cpu, PointKind::WaitBegin, key);
    extra_wall += wall;
    return at(cpu, PointKind::WaitEnd, key);
  }
};

// DDP's backward on one rank: three buckets issued at CPU 100, 300 and 500 during backward,
// waited for in finalize from CPU 600, then 50 of compute.
RankProgram three_buckets(int32_t rank, int64_t slowdown, int64_t gap) {
  ProgramWriter w(rank, slowdown, gap);
  w.at(0, PointKind::Compute).issue(100, c(1), 1000).issue(300, c(2), 1000).issue(500, c(3), 1000);
  w.wait(600, c(1)).wait(600, c(2)).wait(600, c(3)).at(650, PointKind::Compute);
  return w.program;
}

}  // namespace

TEST(ClusterClock, ThreeBucketsQueueOnTheLinkAndFinalizeWaitsForTheLast) {
  const auto timeline = analysis::replay_programs({three_buckets(0, 1, 0), three_buckets(1, 1, 0)},
                                                  kByteANanosecond);
  // Bucket 1 starts when issued (100) and takes 1000 ns; 2 and 3 queue behind it on the link.
  EXPECT_EQ(timeline.collectives.at(c(1)).begin_ns, 100);
  EXPECT_EQ(timeline.collectives.at(c(1)).end_ns, 1100);
  EXPECT_EQ(timeline.collectives.at(c(2)).begin_ns, 1100);
  EXPECT_EQ(timeline.collectives.at(c(3)).begin_ns, 2100);
  EXPECT_EQ(timeline.collectives.at(c(3)).end_ns, 3100);
  // The program's points: begin, 3 issues, 3 waits (begin, end), and the last compute.
  const std::vector<int64_t> expected{0, 100, 300, 500, 600, 1100, 1100, 2100, 2100, 3100, 3150};
  EXPECT_EQ(timeline.point_ns.at(0), expected);
  EXPECT_EQ(timeline.point_ns.at(1), expected);
  EXPECT_EQ(timeline.unmatched_waits, 0);
}

TEST(ClusterClock, TheSameProgramOnABusyMachineGivesTheSameTimeline) {
  const auto idle = analysis::replay_programs({three_buckets(0, 1, 0), three_buckets(1, 1, 0)},
                                              kByteANanosecond);
  // Rank 0 ran 3 times slower than its CPU time, rank 1 7 times with gaps where it was preempted:
  // the wall clocks differ, the CPU clocks do not, and nor does the cluster clock.
  const auto busy = analysis::replay_programs({three_buckets(0, 3, 40), three_buckets(1, 7, 900)},
                                              kByteANanosecond);
  EXPECT_EQ(busy.point_ns, idle.point_ns);
  EXPECT_EQ(busy.collectives.at(c(3)).end_ns, idle.collectives.at(c(3)).end_ns);
}

TEST(ClusterClock, AStragglersSleepDelaysEveryRanksCollective) {
  // Rank 1 sleeps 2000 ns of wall time (--straggler's delay) before it issues; rank 0 issues at
  // once and waits: the collective starts when rank 1 issues it, 2000 + 10 later.
  ProgramWriter fast(0);
  fast.at(0, PointKind::Compute).issue(10, c(1), 400).wait(10, c(1)).at(20, PointKind::Compute);
  ProgramWriter slow(1);
  slow.at(0, PointKind::Compute).at(0, PointKind::SleepBegin);
  slow.extra_wall += 2000;
  slow.at(0, PointKind::SleepEnd).issue(10, c(1), 400).wait(10, c(1)).at(20, PointKind::Compute);
  const auto timeline = analysis::replay_programs({fast.program, slow.program}, kByteANanosecond);
  EXPECT_EQ(timeline.collectives.at(c(1)).begin_ns, 2010);
  EXPECT_EQ(timeline.collectives.at(c(1)).end_ns, 2410);
  // Rank 0's wait (begun at 10) ends with the collective; then 10 ns of compute.
  EXPECT_EQ(timeline.point_ns.at(0), (std::vector<int64_t>{0, 10, 10, 2410, 2420}));
  EXPECT_EQ(timeline.point_ns.at(1), (std::vector<int64_t>{0, 0, 2000, 2010, 2010, 2410, 2420}));
}

TEST(ClusterClock, AnFsdpPrefetchHidesTheNextGatherBehindCompute) {
  // Unit 0's all-gather (share 300 B: 300 ns) is waited for at once; unit 1's is prefetched as
  // unit 0's forward begins (CPU 0), so it runs on the link during unit 0's 500 ns of compute and
  // its wait at CPU 500 ends at once.
  const auto forward = [](int32_t rank) {
    ProgramWriter w(rank);
    w.issue(0, c(1), 300, trace::CollectiveOp::AllGather).wait(0, c(1));
    w.issue(0, c(2), 300, trace::CollectiveOp::AllGather);
    w.at(500, PointKind::Compute).wait(500, c(2)).at(900, PointKind::Compute);
    return w.program;
  };
  const auto timeline = analysis::replay_programs({forward(0), forward(1)}, kByteANanosecond);
  EXPECT_EQ(timeline.collectives.at(c(1)).end_ns, 300);
  EXPECT_EQ(timeline.collectives.at(c(2)).begin_ns, 300);
  EXPECT_EQ(timeline.collectives.at(c(2)).end_ns, 600);
  // Unit 0 computes from 300 to 800; unit 1's gather ended at 600: its wait costs nothing.
  EXPECT_EQ(timeline.point_ns.at(0), (std::vector<int64_t>{0, 0, 300, 300, 800, 800, 800, 1200}));
}

TEST(ClusterClock, ACollectiveOneRankNeverIssuedTakesItsRecordedWait) {
  // Rank 1's trace lost collective 1 (it failed before issuing it): rank 0's wait for it takes
  // its recorded 5000 ns of wall time, and collective 2, queued behind it on rank 0's NIC, still
  // runs.
  ProgramWriter a(0);
  a.at(0, PointKind::Compute).issue(10, c(1), 100).wait(10, c(1)).issue(20, c(2), 100).wait(20, c(2));
  ProgramWriter b(1);
  b.at(0, PointKind::Compute).issue(20, c(2), 100).wait(20, c(2));
  const auto timeline = analysis::replay_programs({a.program, b.program}, kByteANanosecond);
  EXPECT_EQ(timeline.unmatched_waits, 1);
  EXPECT_EQ(timeline.collectives.count(c(1)), 0u);
  // Rank 0: wait 1 from 10 to 5010, issues 2 at 5020; rank 1 issued it at 20: it starts at 5020.
  EXPECT_EQ(timeline.collectives.at(c(2)).begin_ns, 5020);
  EXPECT_EQ(timeline.point_ns.at(1).back(), 5120);
}

TEST(ClusterClock, AProgramOutOfOrderIsRefused) {
  ProgramWriter w(0);
  w.at(100, PointKind::Compute).at(50, PointKind::Compute);
  try {
    analysis::replay_programs({w.program}, kByteANanosecond);
    FAIL() << "accepted";
  } catch (const ClusterClockError& error) {
    EXPECT_NE(std::string(error.what()).find("rank 0: point 1 comes before"), std::string::npos) << error.what();
  }
}

// ---- A recorded trace --------------------------------------------------------------------

namespace {

// Two ranks of a run of `iterations` iterations, each: forward (CPU 1 ms), backward with one
// bucket of 500,000 bytes issued half way, finalize's wait (2.5 ms of wall time asleep),
// optimizer (0.2 ms); an iteration phase around all. Rank r's wall clock runs (r + 2) times its
// CPU clock, and its transfer took 3 ms: neither counts on the cluster clock. `link`: record the
// run's emulated link (8 Gb/s, 1 ns). Rank 0's forward of iteration `slow_iteration` takes
// 0.5 ms of CPU time more, as when the machine interrupts it.
void record_run(const TempDir& dir, bool link, const std::string& device = "cpu", int32_t iterations = 3,
                int32_t slow_iteration = -1) {
  std::vector<std::string> files;
  for (int32_t rank = 0; rank < 2; ++rank) {
    files.push_back(dir.file("rank" + std::to_string(rank) + ".sqlite"));
    trace::RecorderOptions options;
    options.path = files.back();
    options.rank = rank;
    trace::Recorder recorder(options);
    const trace::LaneId comm = recorder.add_lane("gloo", trace::LaneKind::Comm);
    recorder.set_meta(trace::meta_key::kDevice, device);
    recorder.set_meta(trace::meta_key::kIntraOpThreads, "1");
    if (link) {
      recorder.set_meta(trace::meta_key::kLinkGbps, "8");
      recorder.set_meta(trace::meta_key::kLinkLatencyUs, "0.001");
    }
    const int64_t slow = rank + 2;
    int64_t asleep = 0;    // the wall time spent in waits so far
    int64_t step_cpu = 0;  // the CPU clock where the iteration begins
    const auto stamp = [&](int64_t cpu) { return trace::Stamp{1'000'000 + cpu * slow + asleep, cpu}; };
    for (int32_t it = 0; it < iterations; ++it) {
      // The CPU time `x` into an undisturbed iteration; a disturbed forward pushes what follows.
      const int64_t lost = rank == 0 && it == slow_iteration ? 500'000 : 0;
      const auto cpu = [&](int64_t x) { return step_cpu + x + (x >= 1'000'000 ? lost : 0); };
      const trace::Stamp iteration_begin = stamp(cpu(0));
      recorder.phase(0, recorder.name(trace::kPhaseForward), stamp(cpu(0)), stamp(cpu(1'000'000)), it);
      const trace::Stamp backward_begin = stamp(cpu(1'000'000));
      trace::Event issued;
      issued.kind = trace::EventKind::Collective;
      issued.lane = comm;
      issued.op = static_cast<uint8_t>(trace::CollectiveOp::AllReduce);
      issued.grp = 0;
      issued.seq = it;
      issued.bytes = 500'000;
      issued.iteration = it;
      issued.enqueue_ns = stamp(cpu(1'500'000)).wall_ns;
      issued.cpu_begin_ns = cpu(1'500'000);
      issued.begin_ns = issued.enqueue_ns;
      issued.end_ns = issued.begin_ns + 3'000'000;
      recorder.record(trace::TraceLevel::Summary, issued);
      // A gradient hook preempted for 3 ms before it returned: its end carries its CPU time.
      const int64_t hook_begin = stamp(cpu(1'600'000)).wall_ns;
      asleep += 3'000'000;
      recorder.hook(0, hook_begin, stamp(cpu(1'700'000)), it, 0, 0, 64);
      trace::Event wait;
      wait.kind = trace::EventKind::CollectiveWait;
      wait.op = issued.op;
      wait.grp = 0;
      wait.seq = it;
      wait.iteration = it;
      wait.begin_ns = stamp(cpu(2'000'000)).wall_ns;
      asleep += 2'500'000;
      wait.end_ns = stamp(cpu(2'000'000)).wall_ns;
      wait.cpu_begin_ns = wait.cpu_end_ns = cpu(2'000'000);
      recorder.record(trace::TraceLevel::Summary, wait);
      recorder.phase(0, recorder.name(trace::kPhaseBackward), backward_begin, stamp(cpu(2'000'000)), it);
      recorder.phase(0, recorder.name(trace::kPhaseOptimizerStep), stamp(cpu(2'000'000)),
                     stamp(cpu(2'200'000)), it);
      recorder.phase(0, recorder.name(trace::kPhaseIteration), iteration_begin, stamp(cpu(2'200'000)), it);
      step_cpu = cpu(2'200'000);
    }
  }
  trace::merge_traces(files, dir.file("run.sqlite"));
}

}  // namespace

TEST(ClusterClock, ARecordedRunOnItsEmulatedLink) {
  TempDir dir;
  record_run(dir, true);
  trace::Reader reader(dir.file("run.sqlite"));
  const analysis::ClusterClockRun run = analysis::cluster_clock(reader, dir.file("run.sqlite"), std::nullopt);
  EXPECT_TRUE(run.link_from_trace);
  EXPECT_DOUBLE_EQ(run.link.gbps, 8);
  EXPECT_TRUE(run.warnings.empty());
  // Each iteration on the cluster clock: 1 ms forward, 1 ms backward with the bucket issued half
  // way (its all-reduce of 500,000 B on 2 ranks takes 500,000 + 2 ns, ending 0.000002 ms after
  // backward's compute), then 0.2 ms of optimizer: 2.200002 ms, the same on both ranks although
  // rank 1's wall clock ran 1.5 times rank 0's.
  for (int32_t rank : {0, 1}) {
    ASSERT_EQ(run.iterations.at(rank).size(), 3u);
    for (const auto& [iteration, span] : run.iterations.at(rank)) {
      EXPECT_EQ(span.end_ns - span.begin_ns, 2'200'002) << "rank " << rank << " iteration " << iteration;
    }
    ASSERT_TRUE(run.steady_step_ms(rank).has_value());
    EXPECT_NEAR(*run.steady_step_ms(rank), 2.200002, 1e-9);
  }
  EXPECT_EQ(run.timeline.collectives.at({0, 1}).end_ns - run.timeline.collectives.at({0, 1}).begin_ns, 500'002);
  // The hook ends 1.7 ms of CPU time into its iteration, its 3 ms of preemption left out (placed
  // by wall time between the issue and the wait around it, it ended about 1.96 ms in).
  const std::vector<trace::Event> hooks = reader.events_of_kind(trace::EventKind::Hook);
  ASSERT_EQ(hooks.size(), 6u);
  for (const trace::Event& hook : hooks) {
    const trace::Event placed = run.to_cluster(hook);
    EXPECT_EQ(placed.end_ns - run.iterations.at(hook.rank).at(hook.iteration).begin_ns, 1'700'000)
        << "rank " << hook.rank << " iteration " << hook.iteration;
  }
}

TEST(ClusterClock, AStepTheMachineInterruptedTakesItsPiecesAtTheirLeast) {
  // Six iterations; rank 0's forward of iteration 3 took 0.5 ms of CPU time more (Note [Steady
  // compute]). Steady: every steady step (iterations 2 to 5) takes each piece at the least it
  // took in those steps, 2.200002 ms on both ranks. Recorded: iteration 3 is 0.5 ms longer on
  // both ranks, rank 1 waiting for rank 0's all-reduce.
  TempDir dir;
  record_run(dir, true, "cpu", 6, 3);
  trace::Reader reader(dir.file("run.sqlite"));
  const auto steady = analysis::cluster_clock(reader, dir.file("run.sqlite"), std::nullopt);
  const auto recorded = analysis::cluster_clock(reader, dir.file("run.sqlite"), std::nullopt,
                                                analysis::ComputeTime::Recorded);
  EXPECT_EQ(steady.compute, analysis::ComputeTime::Steady);
  EXPECT_EQ(recorded.compute, analysis::ComputeTime::Recorded);
  for (int32_t rank : {0, 1}) {
    for (int32_t it = 2; it < 6; ++it) {
      const analysis::ClusterSpan s = steady.iterations.at(rank).at(it);
      const analysis::ClusterSpan r = recorded.iterations.at(rank).at(it);
      EXPECT_EQ(s.end_ns - s.begin_ns, 2'200'002) << "steady, rank " << rank << " iteration " << it;
      // Rank 1 meets rank 0's late all-reduce 0.5 ms into its finalize wait.
      EXPECT_EQ(r.end_ns - r.begin_ns, it == 3 ? 2'700'002 : 2'200'002) << "recorded, rank " << rank << " iteration " << it;
    }
  }
}

TEST(ClusterClock, SteadyComputeKeepsWarmUpGapsAndRareShapes) {
  // One rank, six steps of the shape begin, issue, end with pieces (begin->issue, issue->end);
  // step 4 has an extra point, a shape of its own. Steps 0 and 1 warm up.
  RankProgram program;
  program.rank = 0;
  std::vector<analysis::StepWall> steps;
  int64_t cpu = 0;
  const auto point = [&](PointKind kind, uint32_t site, int64_t piece, CollectiveKey key = {trace::kNone, trace::kNone64}) {
    cpu += piece;
    program.points.push_back(ThreadPoint{cpu * 3, cpu, kind, key, site});
  };
  const std::vector<std::pair<int64_t, int64_t>> pieces{{90, 900}, {80, 800}, {12, 25}, {10, 20}, {11, 30}, {14, 22}};
  for (int32_t it = 0; it < 6; ++it) {
    point(PointKind::Compute, 1, 7);  // the gap since the last step
    const int64_t begin = cpu * 3;
    point(PointKind::Issue, 2, pieces[size_t(it)].first, c(it));
    if (it == 4) point(PointKind::Compute, 9, 5);
    point(PointKind::Compute, 3, pieces[size_t(it)].second);
    program.collectives[c(it)] = analysis::IssuedCollective{trace::CollectiveOp::AllReduce, 8};
    steps.push_back(analysis::StepWall{it, begin, cpu * 3});
  }
  const std::vector<ThreadPoint> before = program.points;
  // Steps 2, 3 and 5 share a shape: three steady steps, enough to compare.
  EXPECT_EQ(analysis::steady_compute(program, steps), 3);
  ASSERT_EQ(program.points.size(), before.size());
  std::vector<int64_t> piece;
  for (size_t i = 0; i < program.points.size(); ++i) {
    EXPECT_EQ(program.points[i].wall_ns, before[i].wall_ns);
    EXPECT_EQ(program.points[i].kind, before[i].kind);
    piece.push_back(program.points[i].cpu_ns - (i ? program.points[i - 1].cpu_ns : 0));
  }
  // Per step: gap, issue piece, [extra,] end piece. A step begins at its gap's point, so the gap
  // (from the step before) keeps its time; the pieces inside a steady step of the common shape
  // take their least: issue 10 (of 12, 10, 14), end 20 (of 25, 20, 22). Warm-up steps and step
  // 4, alone in its shape, keep theirs.
  const std::vector<int64_t> expected{7, 90, 900, 7, 80, 800, 7, 10, 20, 7, 10, 20, 7, 11, 5, 30, 7, 10, 20};
  EXPECT_EQ(piece, expected);
}

TEST(ClusterClock, RefusalsNameTheFix) {
  TempDir dir;
  record_run(dir, false);
  const auto refused = [&](const std::string& path, const std::optional<LinkSpec>& link) {
    trace::Reader reader(path);
    try {
      analysis::cluster_clock(reader, path, link);
    } catch (const ClusterClockError& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused(dir.file("run.sqlite"), std::nullopt).find("give one (--link-gbps 4 --link-latency-us 50)"),
            std::string::npos);
  // With a link given, the same run replays.
  trace::Reader reader(dir.file("run.sqlite"));
  const auto given = analysis::cluster_clock(reader, dir.file("run.sqlite"), LinkSpec{8, 0.001});
  EXPECT_FALSE(given.link_from_trace);
  EXPECT_EQ(given.iterations.at(0).at(2).end_ns - given.iterations.at(0).at(2).begin_ns, 2'200'002);

  TempDir gpu;
  record_run(gpu, true, "cuda");
  EXPECT_NE(refused(gpu.file("run.sqlite"), std::nullopt).find("its measured clock is already the cluster's"),
            std::string::npos);
}
