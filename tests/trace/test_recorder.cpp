// The Recorder under load and at its edges: many threads recording while the writer drains,
// bounded buffers (waiting, then counted drops), trace levels, live reading, threads that exit;
// and the clock offsets, the recorder's as it writes and the writer's applied afterwards.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include "tests/test_util.h"
#include "trace/error.h"
#include "trace/reader.h"
#include "trace/recorder.h"
#include "trace/writer.h"

using namespace dpscope::trace;
using dpscope::testing::TempDir;

namespace {

Event numbered(int32_t thread, int64_t i) {
  Event e;
  e.kind = EventKind::Mark;
  e.begin_ns = e.end_ns = now_ns();
  e.param = thread;
  e.value = i;
  return e;
}

}  // namespace

TEST(Recorder, EightThreadsWhileTheWriterDrains) {
  TempDir dir;
  const std::string path = dir.file("rank0.sqlite");
  constexpr int kThreads = 8;
  constexpr int64_t kPerThread = 60000;
  {
    RecorderOptions options;
    options.path = path;
    options.flush_interval = std::chrono::milliseconds(1);
    Recorder recorder(options);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&recorder, t] {
        for (int64_t i = 0; i < kPerThread; ++i) recorder.record(TraceLevel::Full, numbered(t, i));
      });
    }
    for (auto& thread : threads) thread.join();
    recorder.close();
    EXPECT_EQ(recorder.dropped_events(), 0);
    EXPECT_EQ(recorder.written_events(), kThreads * kPerThread);
  }
  Reader reader(path);
  ASSERT_EQ(reader.event_count(), kThreads * kPerThread);
  // In insertion (id) order, each thread's values must be 0, 1, 2, ... with none missing.
  std::map<int32_t, int64_t> next;
  int64_t bad = 0;
  // for_each_event orders by (rank, lane, begin_ns, id); begin_ns per thread is monotonic.
  reader.for_each_event([&](const Event& e) {
    if (e.value != next[e.param]) ++bad;
    next[e.param] = e.value + 1;
    return true;
  });
  EXPECT_EQ(bad, 0);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kPerThread) << "thread " << t;
  auto ranks = reader.ranks();
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].status, "complete");
  EXPECT_EQ(ranks[0].events, kThreads * kPerThread);
  EXPECT_EQ(ranks[0].dropped_events, 0);
}

TEST(Recorder, FullBuffersMakeTheRecorderWaitNotDrop) {
  TempDir dir;
  const std::string path = dir.file("rank0.sqlite");
  constexpr int64_t kEvents = 300000;
  RecorderOptions options;
  options.path = path;
  options.flush_interval = std::chrono::seconds(10);  // only a full buffer wakes the writer
  options.max_buffered_bytes = 3 * 4096 * sizeof(Event);
  options.max_wait_when_full = std::chrono::seconds(10);
  Recorder recorder(options);
  for (int64_t i = 0; i < kEvents; ++i) recorder.record(TraceLevel::Full, numbered(0, i));
  recorder.close();
  EXPECT_EQ(recorder.dropped_events(), 0);
  Reader reader(path);
  EXPECT_EQ(reader.event_count(), kEvents);
}

TEST(Recorder, DropsAreCountedAndRecorded) {
  TempDir dir;
  const std::string path = dir.file("rank0.sqlite");
  constexpr int64_t kEvents = 200000;
  RecorderOptions options;
  options.path = path;
  options.flush_interval = std::chrono::seconds(10);
  options.max_buffered_bytes = 1;  // nothing beyond the first chunk
  options.max_wait_when_full = std::chrono::milliseconds(0);
  Recorder recorder(options);
  for (int64_t i = 0; i < kEvents; ++i) recorder.record(TraceLevel::Full, numbered(0, i));
  recorder.close();
  const int64_t dropped = recorder.dropped_events();
  EXPECT_GT(dropped, 0);
  Reader reader(path);
  EXPECT_EQ(reader.event_count() + dropped, kEvents) << "every event is written or counted";
  EXPECT_EQ(reader.ranks()[0].dropped_events, dropped);
}

TEST(Recorder, LevelOffCreatesNothingAndRecordsNothing) {
  TempDir dir;
  const std::string path = dir.file("off.sqlite");
  RecorderOptions options;
  options.path = path;
  options.level = TraceLevel::Off;
  Recorder recorder(options);
  EXPECT_FALSE(recorder.enabled(TraceLevel::Summary));
  recorder.record(TraceLevel::Summary, numbered(0, 0));
  recorder.phase(0, recorder.name("forward"), 1, 2, 0);
  recorder.memory(MemoryCategory::Parameters, 10);
  recorder.flush();
  recorder.close();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Recorder, SummaryLevelKeepsPhasesAndDropsHooks) {
  TempDir dir;
  const std::string path = dir.file("summary.sqlite");
  {
    RecorderOptions options;
    options.path = path;
    options.level = TraceLevel::Summary;
    Recorder recorder(options);
    const NameId forward = recorder.name("forward");
    recorder.phase(0, forward, 100, 200, 0);
    recorder.hook(0, 150, 160, 0, 3, 1, 64);
    recorder.bucket_event(EventKind::BucketReady, 0, 170, 0, 1);
    recorder.memory(MemoryCategory::Gradients, 64, 170);
    recorder.metric(0, recorder.name("loss"), 2.5);
  }
  Reader reader(path);
  auto events = reader.events_of_kind(EventKind::Phase);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(reader.names()[events[0].name], "forward");
  EXPECT_TRUE(reader.events_of_kind(EventKind::Hook).empty());
  EXPECT_TRUE(reader.events_of_kind(EventKind::BucketReady).empty());
  EXPECT_TRUE(reader.memory().empty());
  ASSERT_EQ(reader.metrics().size(), 1u);
  EXPECT_EQ(reader.metrics()[0].name, "loss");
  EXPECT_DOUBLE_EQ(reader.metrics()[0].value, 2.5);
}

TEST(Recorder, FlushMakesEventsVisibleToALiveReader) {
  TempDir dir;
  const std::string path = dir.file("live.sqlite");
  RecorderOptions options;
  options.path = path;
  options.flush_interval = std::chrono::seconds(10);
  Recorder recorder(options);
  for (int64_t i = 0; i < 100; ++i) recorder.record(TraceLevel::Full, numbered(0, i));
  recorder.flush();
  {
    Reader live(path);
    EXPECT_EQ(live.event_count(), 100);
    EXPECT_EQ(live.ranks()[0].status, "running");
  }
  for (int64_t i = 100; i < 250; ++i) recorder.record(TraceLevel::Full, numbered(0, i));
  recorder.flush();
  Reader live(path);
  EXPECT_EQ(live.event_count(), 250);
}

TEST(Recorder, EventsOfExitedThreadsAreWritten) {
  TempDir dir;
  const std::string path = dir.file("exited.sqlite");
  RecorderOptions options;
  options.path = path;
  Recorder recorder(options);
  for (int t = 0; t < 16; ++t) {
    std::thread([&recorder, t] {
      for (int64_t i = 0; i < 5000; ++i) recorder.record(TraceLevel::Full, numbered(t, i));
    }).join();
  }
  recorder.close();
  Reader reader(path);
  EXPECT_EQ(reader.event_count(), 16 * 5000);
}

TEST(Recorder, ClockOffsetAlignsEveryTimestamp) {
  TempDir dir;
  const std::string path = dir.file("offset.sqlite");
  {
    RecorderOptions options;
    options.path = path;
    options.rank = 3;
    Recorder recorder(options);
    recorder.set_clock_offset(1000);
    Event e;
    e.kind = EventKind::Collective;
    e.op = static_cast<uint8_t>(CollectiveOp::AllReduce);
    e.enqueue_ns = 5;
    e.begin_ns = 10;
    e.end_ns = 20;
    recorder.record(TraceLevel::Summary, e);
    recorder.memory(MemoryCategory::Buckets, 4096, 30);
  }
  Reader reader(path);
  auto events = reader.events_of_kind(EventKind::Collective);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rank, 3);
  EXPECT_EQ(events[0].enqueue_ns, 1005);
  EXPECT_EQ(events[0].begin_ns, 1010);
  EXPECT_EQ(events[0].end_ns, 1020);
  ASSERT_EQ(reader.memory().size(), 1u);
  EXPECT_EQ(reader.memory()[0].ts_ns, 1030);
  EXPECT_EQ(reader.ranks()[0].clock_offset_ns, 1000);
}

// A writer that learns the ranks' clock offsets only after writing their rows (`dpscope import`)
// shifts each rank's events and memory samples by that rank's own offset: rank 1 by +1000 ns,
// rank 2 by -300 ns, rank 0 (the reference) not at all.
TEST(Writer, ClockOffsetsAppliedAfterTheRowsShiftEachRankByItsOwn) {
  TempDir dir;
  const std::string path = dir.file("imported.sqlite");
  const int64_t offsets[] = {0, 1000, -300};
  {
    Writer writer(path);
    writer.begin();
    for (int32_t rank = 0; rank < 3; ++rank) {
      RankInfo info;
      info.rank = rank;
      info.status = "complete";
      info.clock_offset_ns = offsets[rank];
      writer.put_rank(info);
      writer.add_lane(LaneInfo{rank, 0, "main", LaneKind::Host});
      Event e;
      e.kind = EventKind::Collective;
      e.rank = static_cast<int16_t>(rank);
      e.op = static_cast<uint8_t>(CollectiveOp::AllReduce);
      e.enqueue_ns = 5000;
      e.begin_ns = 10000;
      e.end_ns = 20000;
      writer.add_event(e);
      writer.add_memory(MemorySample{rank, 30000, MemoryCategory::Buckets, 4096});
    }
    writer.commit();
    writer.apply_clock_offsets();
    writer.finish();
  }
  Reader reader(path);
  for (int32_t rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const auto events = reader.events_of_kind(EventKind::Collective, rank);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].enqueue_ns, 5000 + offsets[rank]);
    EXPECT_EQ(events[0].begin_ns, 10000 + offsets[rank]);
    EXPECT_EQ(events[0].end_ns, 20000 + offsets[rank]);
    const auto memory = reader.memory(rank);
    ASSERT_EQ(memory.size(), 1u);
    EXPECT_EQ(memory[0].ts_ns, 30000 + offsets[rank]);
  }
}

TEST(Recorder, TwoRecordersInOneThread) {
  TempDir dir;
  RecorderOptions a_options, b_options;
  a_options.path = dir.file("a.sqlite");
  b_options.path = dir.file("b.sqlite");
  b_options.rank = 1;
  {
    Recorder a(a_options), b(b_options);
    for (int64_t i = 0; i < 1000; ++i) {
      a.record(TraceLevel::Full, numbered(0, i));
      b.record(TraceLevel::Full, numbered(1, i));
      b.record(TraceLevel::Full, numbered(1, i));
    }
  }
  EXPECT_EQ(Reader(a_options.path).event_count(), 1000);
  EXPECT_EQ(Reader(b_options.path).event_count(), 2000);
}

TEST(Recorder, UnwritablePathNamesTheFile) {
  RecorderOptions options;
  options.path = "/nonexistent-dir/rank0.sqlite";
  try {
    Recorder recorder(options);
    FAIL() << "expected a TraceError";
  } catch (const TraceError& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent-dir/rank0.sqlite"), std::string::npos)
        << error.what();
  }
}
