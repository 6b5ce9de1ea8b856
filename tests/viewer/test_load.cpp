// Loading into the viewer's Model beyond test_core.cpp: update_model (--live) reads only the rows
// a growing file gained and ends where a fresh load does, a replaced file loads afresh, a window's
// open in two halves (the events, then the memory samples) ends where load_model does, the
// reader's bulk scans stop and pass errors through, the memory peak is the same whatever order the
// samples come in, the collectives' payloads are read, and every span finds its own event again
// (what the tooltip and Details show), also beside its twins.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "formats/synth.h"
#include "tests/test_util.h"
#include "tests/trace_event.h"
#include "trace/error.h"
#include "trace/reader.h"
#include "trace/recorder.h"
#include "trace/writer.h"
#include "viewer/analysis.h"
#include "viewer/detail_source.h"
#include "viewer/memory_labels.h"
#include "viewer/model.h"

using namespace dpscope::view;
using namespace dpscope::trace;
using namespace dpscope::formats;
using dpscope::testing::TempDir;

namespace {

// A one-rank trace written iteration by iteration: per iteration an "iteration" phase holding a
// forward phase on the main lane, an all-reduce on a comm lane and two memory samples.
class GrowingTrace {
 public:
  explicit GrowingTrace(const std::string& path) {
    RecorderOptions options;
    options.path = path;
    options.flush_on_signals = false;
    recorder_ = std::make_unique<Recorder>(options);
    iteration_ = recorder_->name("iteration");
    forward_ = recorder_->name("forward");
    comm_ = recorder_->add_lane("comm", LaneKind::Comm);
  }
  // Writes iterations [next, next + count) and flushes them into the file.
  void write(int count) {
    for (int i = next_; i < next_ + count; ++i) {
      const int64_t t = 1'000'000'000 + int64_t(i) * 1'000'000;
      recorder_->phase(0, iteration_, t, t + 900'000, i);
      recorder_->phase(0, forward_, t + 10'000, t + 400'000, i);
      Event c;
      c.kind = EventKind::Collective;
      c.lane = comm_;
      c.begin_ns = t + 500'000;
      c.end_ns = t + 800'000;
      c.op = uint8_t(CollectiveOp::AllReduce);
      c.seq = i;
      c.bytes = 4096;
      c.dtype = uint8_t(DType::Float32);
      c.iteration = i;
      recorder_->record(TraceLevel::Summary, c);
      recorder_->memory(MemoryCategory::Parameters, 1000 + i, t);
      recorder_->memory(MemoryCategory::Gradients, 2000 + i, t + 450'000);
    }
    next_ += count;
    recorder_->flush();
  }
  static constexpr int kEventsPerIteration = 3;
  static constexpr int kSamplesPerIteration = 2;

 private:
  std::unique_ptr<Recorder> recorder_;
  NameId iteration_ = 0, forward_ = 0;
  LaneId comm_ = 0;
  int next_ = 0;
};

// What expect_same_drawing compares: everything, or the events' part only (a model whose memory
// samples are still to be read, Note [Memory after the first frame]).
enum class Compared { Everything, EventsOnly };

// Everything the panels draw from must be the same in `a` and `b`.
void expect_same_drawing(const Model& a, const Model& b, Compared compared = Compared::Everything) {
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.t_begin, b.t_begin);
  EXPECT_EQ(a.t_end, b.t_end);
  EXPECT_EQ(a.iterations, b.iterations);
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    const RankData& x = a.ranks[r];
    const RankData& y = b.ranks[r];
    EXPECT_EQ(x.events, y.events);
    ASSERT_EQ(x.lanes.size(), y.lanes.size());
    for (size_t l = 0; l < x.lanes.size(); ++l) {
      EXPECT_EQ(x.lanes[l].info.name, y.lanes[l].info.name);
      EXPECT_EQ(x.lanes[l].row_start, y.lanes[l].row_start) << "lane " << l;
      EXPECT_EQ(x.lanes[l].end_max_offset, y.lanes[l].end_max_offset) << "lane " << l;
      EXPECT_EQ(x.lanes[l].disordered_end_max, y.lanes[l].disordered_end_max) << "lane " << l;
      ASSERT_EQ(x.lanes[l].spans.size(), y.lanes[l].spans.size());
      for (size_t i = 0; i < x.lanes[l].spans.size(); ++i) {
        const Span& s = x.lanes[l].spans[i];
        const Span& t = y.lanes[l].spans[i];
        EXPECT_TRUE(s.begin_ns == t.begin_ns && s.end_ns == t.end_ns && s.kind() == t.kind() &&
                    s.name() == t.name() && s.iteration() == t.iteration() && s.seq() == t.seq() &&
                    s.bucket() == t.bucket() && s.op() == t.op() && s.unit() == t.unit() &&
                    s.state() == t.state() && s.same_begin_index() == t.same_begin_index())
            << "lane " << l << " span " << i;
      }
    }
    if (compared == Compared::Everything) {
      for (size_t c = 0; c < x.memory.size(); ++c) {
        EXPECT_EQ(x.memory[c].ts, y.memory[c].ts) << "category " << c;
        EXPECT_EQ(x.memory[c].bytes, y.memory[c].bytes) << "category " << c;
        EXPECT_EQ(x.memory[c].peak, y.memory[c].peak) << "category " << c;
      }
      EXPECT_EQ(x.memory_peak_bytes, y.memory_peak_bytes);
      EXPECT_EQ(x.memory_peak_ns, y.memory_peak_ns);
      EXPECT_EQ(x.gpu_memory_peak_bytes, y.gpu_memory_peak_bytes);
      EXPECT_EQ(x.t_begin, y.t_begin);
      EXPECT_EQ(x.t_end, y.t_end);
    }
    ASSERT_EQ(x.iterations.size(), y.iterations.size());
    for (size_t i = 0; i < x.iterations.size(); ++i) {
      EXPECT_EQ(x.iterations[i].iteration, y.iterations[i].iteration);
      EXPECT_EQ(x.iterations[i].begin_ns, y.iterations[i].begin_ns);
      EXPECT_EQ(x.iterations[i].end_ns, y.iterations[i].end_ns);
    }
  }
}

// Events the timeline cannot tell apart (same times, kind, seq, iteration and bucket) on two
// ranks, on two lanes of each, and twice on the same lane; only `value` (which the viewer does
// not load) tells them apart, growing in the order they are written. On each rank's main lane,
// from t: two hooks, then the backward phase enclosing them (a parent is recorded after its
// children, and begins with them), two bucket_ready instants inside; on its comm lane two
// all-reduces of the same seq in two process groups.
class TwinsTrace {
 public:
  explicit TwinsTrace(const std::string& path) : writer_(path) {
    writer_.begin();
    writer_.add_name(kBackward, "backward");
    for (int16_t rank = 0; rank < 2; ++rank) {
      RankInfo info;
      info.rank = rank;
      writer_.put_rank(info);
      writer_.add_lane(LaneInfo{rank, kMain, "main", LaneKind::Host});
      writer_.add_lane(LaneInfo{rank, kComm, "comm", LaneKind::Comm});
    }
    writer_.commit();
  }
  // Writes the twins of every rank from t, and commits them.
  void write_twins(int64_t t) {
    writer_.begin();
    for (int16_t rank = 0; rank < 2; ++rank) {
      add(rank, kMain, EventKind::Hook, t, t + 100);
      add(rank, kMain, EventKind::Hook, t, t + 100);
      add(rank, kMain, EventKind::Phase, t, t + 300).name = kBackward;
      add(rank, kMain, EventKind::BucketReady, t + 50, t + 50);
      add(rank, kMain, EventKind::BucketReady, t + 50, t + 50);
      for (int16_t group = 0; group < 2; ++group) add(rank, kComm, EventKind::Collective, t + 120, t + 180).grp = group;
    }
    flush();
  }
  // One more hook on rank 0's main lane beginning at t (after the twins in the file).
  void write_hook(int64_t t) {
    writer_.begin();
    add(0, kMain, EventKind::Hook, t, t + 100);
    flush();
  }
  int64_t written() const { return next_value_ - 1; }

 private:
  static constexpr NameId kBackward = 0;
  static constexpr LaneId kMain = 0, kComm = 1;
  Event& add(int16_t rank, LaneId lane, EventKind kind, int64_t begin, int64_t end) {
    Event e = dpscope::testing::trace_event(rank, lane, kind, begin, end, 0);
    if (kind == EventKind::Hook || kind == EventKind::BucketReady) e.bucket = 0;
    if (kind == EventKind::Collective) {
      e.op = uint8_t(CollectiveOp::AllReduce);
      e.seq = 5;
    }
    e.value = next_value_++;
    pending_.push_back(e);
    return pending_.back();
  }
  void flush() {
    for (const Event& e : pending_) writer_.add_event(e);
    pending_.clear();
    writer_.commit();
  }
  Writer writer_;
  std::vector<Event> pending_;
  int64_t next_value_ = 1;
};

// What the tooltip and Details show for each span of `model` is that span's own event: one of
// its rank, lane, kind and times, a different one for every span, and spans that begin together
// on a lane in the file's order. `events`: how many the file holds.
void expect_each_span_shows_its_own_event(const Model& model, int64_t events) {
  DetailSource details(model.path);
  std::set<int64_t> shown;
  std::map<std::tuple<size_t, size_t, int64_t>, std::map<uint32_t, int64_t>> by_begin;
  for (size_t ri = 0; ri < model.ranks.size(); ++ri) {
    const RankData& rank = model.ranks[ri];
    for (size_t li = 0; li < rank.lanes.size(); ++li) {
      const Lane& lane = rank.lanes[li];
      for (size_t i = 0; i < lane.spans.size(); ++i) {
        const Span& s = lane.spans[i];
        const Event* e = details.event(model, {int32_t(ri), int32_t(li), int64_t(i)});
        ASSERT_NE(e, nullptr) << "rank " << ri << " lane " << li << " span " << i;
        EXPECT_EQ(e->rank, rank.info.rank);
        EXPECT_EQ(e->lane, lane.info.lane);
        EXPECT_EQ(e->kind, s.kind());
        EXPECT_EQ(e->begin_ns, s.begin_ns);
        EXPECT_EQ(e->end_ns, s.end_ns);
        EXPECT_TRUE(shown.insert(e->value).second) << "two spans show the event of value " << e->value;
        by_begin[{ri, li, s.begin_ns}][s.same_begin_index()] = e->value;
      }
    }
  }
  EXPECT_EQ(int64_t(shown.size()), events);
  for (const auto& [place, values] : by_begin) {
    int64_t previous = 0;
    for (const auto& [index, value] : values) {
      EXPECT_GT(value, previous) << "twins at " << std::get<2>(place) << " out of file order";
      previous = value;
    }
  }
}

// A `dpscope synth` trace of `events` events on `ranks` ranks in `dir`; its path.
std::string synth_trace(const TempDir& dir, int64_t events, int ranks) {
  SynthOptions options;
  options.events = events;
  options.ranks = ranks;
  options.out = dir.file("synth.sqlite");
  synthesize(options);
  return options.out;
}

}  // namespace

TEST(ViewerDetails, EverySpanShowsItsOwnEventBesideTwinsOnOtherRanksLanesAndItsOwnLane) {
  TempDir dir;
  const std::string path = dir.file("twins.sqlite");
  TwinsTrace trace(path);
  trace.write_twins(1000);
  const auto model = load_model(path);
  ASSERT_EQ(model->events, trace.written());
  expect_each_span_shows_its_own_event(*model, trace.written());
}

// update_model numbers the new rows after the ones it had, as a fresh load does.
TEST(ViewerDetails, ANewEventBeginningBesideLoadedOnesShowsItsOwnAfterAnUpdate) {
  TempDir dir;
  const std::string path = dir.file("twins.sqlite");
  TwinsTrace trace(path);
  trace.write_twins(1000);
  const auto first = load_model(path);
  trace.write_hook(1000);
  trace.write_twins(5000);
  const auto updated = update_model(*first);
  ASSERT_EQ(updated->events, trace.written());
  expect_same_drawing(*updated, *load_model(path));
  expect_each_span_shows_its_own_event(*updated, trace.written());
}

TEST(ViewerLoad, UpdateReadsOnlyTheNewRowsOfAGrowingFile) {
  TempDir dir;
  const std::string path = dir.file("live.sqlite");
  GrowingTrace trace(path);
  trace.write(10);
  auto first = load_model(path);
  EXPECT_EQ(first->events, 10 * GrowingTrace::kEventsPerIteration);
  EXPECT_EQ(first->rows_read,
            10 * (GrowingTrace::kEventsPerIteration + GrowingTrace::kSamplesPerIteration));

  trace.write(15);
  auto updated = update_model(*first);
  EXPECT_EQ(updated->rows_read,
            15 * (GrowingTrace::kEventsPerIteration + GrowingTrace::kSamplesPerIteration));
  EXPECT_EQ(updated->events, 25 * GrowingTrace::kEventsPerIteration);
  EXPECT_EQ(updated->iterations, 25);
  expect_same_drawing(*updated, *load_model(path));
  // The previous model is untouched: the viewer may still be drawing it.
  EXPECT_EQ(first->events, 10 * GrowingTrace::kEventsPerIteration);

  // Nothing new: nothing read, the same picture.
  auto again = update_model(*updated);
  EXPECT_EQ(again->rows_read, 0);
  expect_same_drawing(*again, *updated);

  trace.write(1);
  auto one_more = update_model(*again);
  EXPECT_EQ(one_more->rows_read, GrowingTrace::kEventsPerIteration + GrowingTrace::kSamplesPerIteration);
  expect_same_drawing(*one_more, *load_model(path));
}

TEST(ViewerLoad, UpdateOfAFileWrittenAnewLoadsItAfresh) {
  TempDir dir;
  const std::string path = dir.file("run.sqlite");
  std::shared_ptr<const Model> first;
  {
    GrowingTrace trace(path);
    trace.write(10);
    first = load_model(path);
  }
  GrowingTrace rewritten(path);  // replaces the file, as a new training run would
  rewritten.write(4);
  auto updated = update_model(*first);
  EXPECT_EQ(updated->events, 4 * GrowingTrace::kEventsPerIteration);
  EXPECT_EQ(updated->rows_read,
            4 * (GrowingTrace::kEventsPerIteration + GrowingTrace::kSamplesPerIteration));
  expect_same_drawing(*updated, *load_model(path));
}

TEST(ViewerLoad, OneThreadAndManyThreadsLoadTheSameModel) {
  TempDir dir;
  SynthOptions options;
  options.events = 30000;
  options.ranks = 3;
  options.out = dir.file("synth.sqlite");
  options.layers = 4;
  options.hidden = 256;
  synthesize(options);
  expect_same_drawing(*load_model(options.out, nullptr, 1), *load_model(options.out, nullptr, 5));
}

// The memory peak is found while the samples are copied when the file holds them in time order
// (a recorder's), and from the sorted series otherwise: the same samples in either order give the
// same series and the same peak, ties of one timestamp included.
TEST(ViewerLoad, MemorySamplesOutOfTimeOrderGiveThePeakInOrderOnesGive) {
  TempDir dir;
  std::vector<MemorySample> samples;
  for (int64_t step = 0; step < 200; ++step) {
    const int64_t ts = 1000 + 10 * (step / 2);  // two steps share each timestamp
    samples.push_back({0, ts, MemoryCategory::Parameters, 4 << 20});
    samples.push_back({0, ts, MemoryCategory::Activations, (step % 37) << 20});
    samples.push_back({0, ts, MemoryCategory::Gradients, (step % 23) << 20});
    samples.push_back({1, ts + 3, MemoryCategory::Activations, (step % 29) << 20});
  }
  const auto write = [&](const std::string& path, const std::vector<MemorySample>& rows) {
    Writer w(path);
    w.begin();
    for (int32_t rank = 0; rank < 2; ++rank) {
      RankInfo info;
      info.rank = rank;
      info.status = "complete";
      w.put_rank(info);
    }
    for (const MemorySample& sample : rows) w.add_memory(sample);
    w.commit();
    w.finish();
    return load_model(path);
  };
  // Two moments' samples (steps 10-11 and 100-101) trade places, each keeping its own order.
  std::vector<MemorySample> shuffled = samples;
  std::swap_ranges(shuffled.begin() + 40, shuffled.begin() + 48, shuffled.begin() + 400);
  const auto in_order = write(dir.file("in-order.sqlite"), samples);
  const auto out_of_order = write(dir.file("out-of-order.sqlite"), shuffled);
  expect_same_drawing(*in_order, *out_of_order);
  ASSERT_EQ(in_order->ranks.size(), 2u);
  // At each moment the second step's samples win: the peak is the largest of their sums.
  int64_t peak = 0;
  for (int64_t step = 1; step < 200; step += 2) peak = std::max(peak, (4 + step % 37 + step % 23) << 20);
  EXPECT_EQ(in_order->ranks[0].memory_peak_bytes, peak);
  EXPECT_EQ(out_of_order->ranks[0].memory_peak_bytes, peak);
  EXPECT_EQ(out_of_order->ranks[1].memory_peak_bytes, int64_t{28} << 20);
}

// Note [Memory after the first frame]: a window's open reads the events, shows them, and reads
// the memory samples after. The first half is load_model's model but for the memory fields, which
// it leaves empty and not ready (the graph's labels wait); the second fills them in and publishes
// them, and the two halves give load_model's model.
TEST(ViewerLoad, EventsFirstThenTheMemorySamplesGiveLoadModelsModel) {
  TempDir dir;
  const std::string path = synth_trace(dir, 30000, 3);
  const auto whole = load_model(path);
  LoadProgress progress;
  FirstLoad first = load_events_first(path, &progress, 2);
  EXPECT_EQ(progress.fraction, 1.0);
  ASSERT_TRUE(first.memory.valid());
  ASSERT_FALSE(first.model->memory_ready());
  EXPECT_TRUE(whole->memory_ready());
  expect_same_drawing(*first.model, *whole, Compared::EventsOnly);
  for (const RankData& rank : first.model->ranks) {
    for (const MemorySeries& series : rank.memory) EXPECT_TRUE(series.ts.empty());
    const MemoryGraphLabels labels = memory_graph_labels(*first.model, rank, nullptr, false);
    EXPECT_EQ(labels.peak, "") << "rank " << rank.info.rank;
  }
  EXPECT_EQ(first.model->memory_read_to, whole->memory_read_to);

  EXPECT_EQ(first.memory(), nullptr);
  EXPECT_TRUE(first.model->memory_ready());
  EXPECT_EQ(first.memory.fraction(), 1.0);
  expect_same_drawing(*first.model, *whole);
  for (const RankData& rank : first.model->ranks) {
    EXPECT_GT(rank.memory_peak_bytes, 0);
    EXPECT_EQ(memory_graph_labels(*first.model, rank, nullptr, false).peak.rfind("peak ", 0), 0u);
  }
  // A model that is ready carries that into its copies (update_model, the cluster clock's).
  EXPECT_TRUE(Model(*first.model).memory_ready());
  EXPECT_NO_THROW(update_model(*first.model));
}

// One rank-0 hook from 1000 to 2000 ns and `samples`, written to `path`.
void write_hook_and_samples(const std::string& path, const std::vector<MemorySample>& samples) {
  Writer w(path);
  w.begin();
  RankInfo info;
  info.rank = 0;
  w.put_rank(info);
  w.add_lane(LaneInfo{0, 0, "main", LaneKind::Host});
  w.add_event(dpscope::testing::trace_event(0, 0, EventKind::Hook, 1000, 2000, 0));
  for (const MemorySample& sample : samples) w.add_memory(sample);
  w.commit();
  w.finish();
}

// A rank's extent takes in its samples when they come: a sample after its last event ends it.
TEST(ViewerLoad, TheSecondHalfExtendsARankBySamplesAfterItsEvents) {
  TempDir dir;
  const std::string path = dir.file("late.sqlite");
  write_hook_and_samples(path, {{0, 1500, MemoryCategory::Parameters, 4096}, {0, 2500, MemoryCategory::Parameters, 0}});
  FirstLoad first = load_events_first(path, nullptr, 1);
  ASSERT_EQ(first.model->ranks.size(), 1u);
  EXPECT_EQ(first.memory(), nullptr);
  EXPECT_EQ(first.model->ranks[0].t_begin, 1000);
  EXPECT_EQ(first.model->ranks[0].t_end, 2500);
  EXPECT_EQ(first.model->t_end, 2000);  // the run's range is its events'
  expect_same_drawing(*first.model, *load_model(path));
}

// A file with memory samples of a rank that neither its ranks table nor its events name: the first
// half has no place for them, so the second hands back load_model's complete model instead and
// leaves the first half's memory down. A file without samples is ready at once.
TEST(ViewerLoad, SamplesOfARankTheEventsNeverNamedGiveACompleteModel) {
  TempDir dir;
  const std::string path = dir.file("stray.sqlite");
  write_hook_and_samples(path, {{0, 1500, MemoryCategory::Parameters, 4096}, {3, 1600, MemoryCategory::Gradients, 8192}});
  FirstLoad first = load_events_first(path, nullptr, 1);
  ASSERT_EQ(first.model->ranks.size(), 1u);
  ASSERT_TRUE(first.memory.valid());
  const std::shared_ptr<const Model> complete = first.memory();
  ASSERT_NE(complete, nullptr);
  EXPECT_FALSE(first.model->memory_ready());
  EXPECT_TRUE(complete->memory_ready());
  ASSERT_EQ(complete->ranks.size(), 2u);
  EXPECT_EQ(complete->ranks[1].info.rank, 3);
  EXPECT_EQ(complete->ranks[1].memory_peak_bytes, 8192);
  expect_same_drawing(*complete, *load_model(path));

  const std::string bare = dir.file("bare.sqlite");
  write_hook_and_samples(bare, {});
  FirstLoad without = load_events_first(bare, nullptr, 1);
  EXPECT_FALSE(without.memory.valid());
  EXPECT_TRUE(without.model->memory_ready());
  expect_same_drawing(*without.model, *load_model(bare));
}

// The window draws the events while the samples are read on another thread: reading the model's
// other fields meanwhile, and its memory fields once memory_ready() says so, races with nothing
// (scripts/test-sanitizers tsan runs this test).
TEST(ViewerLoad, TheModelIsReadWhileItsSamplesArrive) {
  TempDir dir;
  const std::string path = synth_trace(dir, 20000, 2);
  FirstLoad first = load_events_first(path, nullptr, 2);
  ASSERT_TRUE(first.memory.valid());
  std::thread reading([&] { EXPECT_EQ(first.memory(), nullptr); });
  const Model& model = *first.model;
  int64_t passes = 0, spans = 0, peaks = 0;
  for (bool ready = false; !ready; ++passes) {
    ready = model.memory_ready();
    for (const RankData& rank : model.ranks) {
      for (const Lane& lane : rank.lanes) spans += int64_t(lane.spans.size()) + lane.rows();
      spans += int64_t(rank.iterations.size());
      const MemoryGraphLabels labels = memory_graph_labels(model, rank, nullptr, false);
      if (!ready) continue;
      peaks += rank.memory_peak_bytes > 0 && rank.t_end > rank.t_begin && !labels.peak.empty();
      for (const MemorySeries& series : rank.memory) spans += int64_t(series.ts.size());
    }
  }
  reading.join();
  EXPECT_GT(passes, 0);
  EXPECT_GT(spans, 0);
  EXPECT_EQ(peaks, 2);
}

// Closing the window while the samples are read stops the read: it throws, and the model's memory
// stays down, so nothing reads half-written series.
TEST(ViewerLoad, ACancelledMemoryReadThrowsAndLeavesTheMemoryDown) {
  TempDir dir;
  const std::string path = synth_trace(dir, 20000, 2);
  FirstLoad first = load_events_first(path, nullptr, 1);
  ASSERT_TRUE(first.memory.valid());
  first.memory.cancel();
  EXPECT_THROW(first.memory(), TraceError);
  EXPECT_FALSE(first.model->memory_ready());
}

TEST(ViewerLoad, ReaderBulkScansStopEarlyAndPassExceptionsThrough) {
  TempDir dir;
  const std::string path = synth_trace(dir, 20000, 2);
  Reader reader(path);
  const auto ids = reader.event_id_range();
  ASSERT_GT(ids.second - ids.first, 10000);

  size_t seen = 0, batches = 0;
  reader.scan_event_spans(ids.first, ids.second, [&](const EventSpan*, size_t n) {
    seen += n;
    return ++batches < 2;
  });
  EXPECT_EQ(batches, 2u);
  EXPECT_LT(seen, size_t(ids.second - ids.first + 1));

  EXPECT_THROW(reader.scan_event_spans(ids.first, ids.second,
                                       [](const EventSpan*, size_t) -> bool {
                                         throw std::runtime_error("from the callback");
                                       }),
               std::runtime_error);
  // A scan started inside another one on the same Reader is refused with a TraceError.
  EXPECT_THROW(reader.scan_event_spans(ids.first, ids.second,
                                       [&](const EventSpan*, size_t) {
                                         reader.scan_memory(0, 10, [](const MemorySample*, size_t) { return true; });
                                         return true;
                                       }),
               TraceError);

  // After all that the Reader still scans everything, in id order.
  int64_t rows = 0;
  reader.scan_event_spans(ids.first, ids.second, [&](const EventSpan*, size_t n) {
    rows += int64_t(n);
    return true;
  });
  EXPECT_EQ(rows, reader.event_count());
  const auto memory = reader.memory_rowid_range();
  int64_t samples = 0;
  reader.scan_memory(memory.first, memory.second, [&](const MemorySample*, size_t n) {
    samples += int64_t(n);
    return true;
  });
  EXPECT_EQ(samples, int64_t(reader.memory().size()));
}

