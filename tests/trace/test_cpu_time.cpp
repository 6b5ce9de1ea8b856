// The thread CPU times of Note [Thread CPU time] through the store: the Stamp form of a phase
// writes them, the nanosecond forms and hooks leave them NULL, clock alignment leaves them as read,
// merge keeps them, and files of schema version 3 (no such columns) still read and merge.
#include <gtest/gtest.h>


#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tests/sqlite_edit.h"
#include "tests/test_util.h"
#include "trace/clock.h"
#include "trace/merge.h"
#include "trace/reader.h"
#include "trace/recorder.h"

using namespace dpscope::trace;
using dpscope::testing::exec_sql;
using dpscope::testing::TempDir;

namespace {

// A rank file with a phase and a collective with CPU times 1000 + their wall time, a phase and
// a hook with the wall clock alone, a hook with its end's CPU time, and a bucket instant (which
// never carries CPU times), recorded with a clock offset of 50.
void record_rank(const std::string& path, int32_t rank) {
  RecorderOptions options;
  options.path = path;
  options.rank = rank;
  Recorder recorder(options);
  recorder.set_clock_offset(50);
  const auto at = [](int64_t wall) { return Stamp{wall, 1000 + wall}; };
  recorder.phase(0, recorder.name("backward"), at(100), at(400), 0);
  recorder.phase(0, recorder.name("synthesized"), int64_t{500}, int64_t{600}, 0);
  recorder.hook(0, 150, 160, 0, 2, 0, 64);
  recorder.hook(0, 162, at(165), 0, 1, 0, 128);
  recorder.bucket_event(EventKind::BucketLaunch, 0, 170, 0, 0, 7);
  Event collective;
  collective.kind = EventKind::Collective;
  collective.op = static_cast<uint8_t>(CollectiveOp::AllReduce);
  collective.enqueue_ns = 170;
  collective.cpu_begin_ns = 1170;
  collective.begin_ns = 175;
  collective.end_ns = 300;
  recorder.record(TraceLevel::Summary, collective);
}

void expect_cpu_times(Reader& reader, int32_t rank) {
  const std::vector<Event> phases = reader.events_of_kind(EventKind::Phase, rank);
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0].begin_ns, 150);  // aligned by the offset ...
  EXPECT_EQ(phases[0].cpu_begin_ns, 1100);  // ... which a thread's CPU clock does not take
  EXPECT_EQ(phases[0].cpu_end_ns, 1400);
  EXPECT_EQ(phases[1].cpu_begin_ns, kNone64);
  EXPECT_EQ(phases[1].cpu_end_ns, kNone64);
  const std::vector<Event> launches = reader.events_of_kind(EventKind::BucketLaunch, rank);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].cpu_begin_ns, kNone64);
  EXPECT_EQ(launches[0].cpu_end_ns, kNone64);
  const std::vector<Event> hooks = reader.events_of_kind(EventKind::Hook, rank);
  ASSERT_EQ(hooks.size(), 2u);
  EXPECT_EQ(hooks[0].cpu_begin_ns, kNone64);
  EXPECT_EQ(hooks[0].cpu_end_ns, kNone64);
  EXPECT_EQ(hooks[1].end_ns, 215);
  EXPECT_EQ(hooks[1].cpu_begin_ns, kNone64);  // a hook reads its end's CPU time only
  EXPECT_EQ(hooks[1].cpu_end_ns, 1165);
  const std::vector<Event> collectives = reader.events_of_kind(EventKind::Collective, rank);
  ASSERT_EQ(collectives.size(), 1u);
  EXPECT_EQ(collectives[0].enqueue_ns, 220);
  EXPECT_EQ(collectives[0].cpu_begin_ns, 1170);
  EXPECT_EQ(collectives[0].cpu_end_ns, kNone64);
}

}  // namespace

TEST(CpuTime, RecordedWrittenAndReadBackAsRecorded) {
  TempDir dir;
  record_rank(dir.file("rank0.sqlite"), 0);
  Reader reader(dir.file("rank0.sqlite"));
  EXPECT_EQ(reader.schema_version(), kSchemaVersion);  // thread CPU times came in version 4
  expect_cpu_times(reader, 0);
}

TEST(CpuTime, MergeKeepsThem) {
  TempDir dir;
  record_rank(dir.file("rank0.sqlite"), 0);
  record_rank(dir.file("rank1.sqlite"), 1);
  merge_traces({dir.file("rank0.sqlite"), dir.file("rank1.sqlite")}, dir.file("run.sqlite"));
  Reader reader(dir.file("run.sqlite"));
  expect_cpu_times(reader, 0);
  expect_cpu_times(reader, 1);
}

TEST(CpuTime, AVersionThreeFileReadsAndMergesWithoutThem) {
  TempDir dir;
  for (int rank : {0, 1}) {
    const std::string path = dir.file("rank" + std::to_string(rank) + ".sqlite");
    record_rank(path, rank);
    exec_sql(path, "DROP VIEW events_named; ALTER TABLE events DROP COLUMN cpu_begin_ns;"
                   " ALTER TABLE events DROP COLUMN cpu_end_ns; PRAGMA user_version = 3");
  }
  merge_traces({dir.file("rank0.sqlite"), dir.file("rank1.sqlite")}, dir.file("run.sqlite"));
  for (const std::string name : {"rank0.sqlite", "run.sqlite"}) {
    Reader reader(dir.file(name));
    const std::vector<Event> events = reader.events_of_kind(EventKind::Phase, 0);
    ASSERT_EQ(events.size(), 2u) << name;
    EXPECT_EQ(events[0].begin_ns, 150) << name;
    EXPECT_EQ(events[0].cpu_begin_ns, kNone64) << name;
    EXPECT_EQ(events[0].cpu_end_ns, kNone64) << name;
  }
}

TEST(CpuTime, TheThreadClockCountsComputeNotSleep) {
  const Stamp begin = stamp_now();
  ASSERT_NE(begin.cpu_ns, kNone64);
  volatile uint64_t spin = 0;
  while (now_ns() - begin.wall_ns < 20'000'000) spin = spin + 1;  // 20 ms of compute
  const Stamp computed = stamp_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  const Stamp slept = stamp_now();
  // Computing, the thread's clock runs with the wall clock (or slower, when preempted); asleep,
  // it stands still. Neither runs ahead of the wall clock.
  EXPECT_GT(computed.cpu_ns - begin.cpu_ns, 0);
  EXPECT_LE(computed.cpu_ns - begin.cpu_ns, computed.wall_ns - begin.wall_ns + 100'000);
  EXPECT_LT(slept.cpu_ns - computed.cpu_ns, 5'000'000) << "40 ms asleep counted as compute";
}
