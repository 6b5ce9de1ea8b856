// bench_trace: the trace store's quality bars (docs/design.md): BM_Record* is the hot-path cost of
// recording one event through the Recorder (target <= 100 ns), BM_Ingest* the rate at which
// events reach SQLite (target >= 1 M events/s, reported as items_per_second).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <array>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "trace/recorder.h"
#include "trace/writer.h"

namespace {

using namespace dpscope::trace;

// Every trace file goes into one directory under $TMPDIR, removed at exit.
class BenchDir {
 public:
  BenchDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "dpscope-bench-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) {
      throw std::runtime_error("cannot create a directory in $TMPDIR");
    }
    path_ = pattern;
  }
  ~BenchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

BenchDir& bench_dir() {
  static BenchDir dir;
  return dir;
}

// Removes a trace file and the WAL/SHM files SQLite keeps beside it.
void remove_trace(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

std::unique_ptr<Recorder> make_recorder(TraceLevel level, const std::string& path) {
  RecorderOptions options;
  options.path = path;
  options.level = level;
  // Room for every event a BM_Record run makes, so the producer never waits: the benchmark
  // measures the push, not back-pressure. Drops are checked after the run.
  options.max_buffered_bytes = size_t{4} << 30;
  options.flush_on_signals = false;
  return std::make_unique<Recorder>(options);
}

// The events a DDP backward pass records most, in the proportions it records them: hooks, then
// the bucket instants and the collective of each bucket. Ingest benchmarks cycle through them.
std::array<Event, 8> event_mix() {
  std::array<Event, 8> mix;
  for (int i = 0; i < 4; ++i) {
    Event& hook = mix[static_cast<size_t>(i)];
    hook.kind = EventKind::Hook;
    hook.iteration = 7;
    hook.param = 20 - i;
    hook.bucket = 1;
    hook.value = (i + 1) * 4194304;
  }
  mix[4].kind = EventKind::BucketReady;
  mix[5].kind = EventKind::BucketLaunch;
  mix[5].seq = 42;
  for (size_t i : {4, 5}) {
    mix[i].iteration = 7;
    mix[i].bucket = 1;
  }
  Event& collective = mix[6];
  collective.kind = EventKind::Collective;
  collective.lane = 1;
  collective.iteration = 7;
  collective.op = static_cast<uint8_t>(CollectiveOp::AllReduce);
  collective.grp = 0;
  collective.seq = 42;
  collective.bytes = 16777216;
  collective.dtype = static_cast<uint8_t>(DType::Float32);
  Event& phase = mix[7];
  phase.kind = EventKind::Phase;
  phase.name = 1;
  phase.iteration = 7;
  return mix;
}

// ---- BM_Record*: the hot path ---------------------------------------------------------------

// Shared by the threads of one run: thread 0 creates it before the timed loop and closes it
// after; Google Benchmark holds every thread at a barrier on entering and leaving the loop.
std::unique_ptr<Recorder> g_recorder;

// One hook firing per iteration at level Full, the writer thread draining into SQLite at the
// same time. The reported time is CPU time per event, averaged over the recording threads; it
// includes the chunk allocation every 4096 events, since the producers outrun the writer.
void BM_Record(benchmark::State& state) {
  if (state.thread_index() == 0) {
    g_recorder = make_recorder(TraceLevel::Full, bench_dir().file("record.db"));
  }
  const int32_t param = state.thread_index();
  int64_t t = 0;
  for (auto _ : state) {
    g_recorder->hook(0, t, t + 100, 3, param, 1, t);
    ++t;
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    const int64_t dropped = g_recorder->dropped_events();
    g_recorder->close();
    g_recorder.reset();
    remove_trace(bench_dir().file("record.db"));
    if (dropped) state.SkipWithError("events were dropped; the measurement includes back-pressure");
  }
}
// A fixed count per thread bounds the buffered memory (96 B an event) and the drain at close.
BENCHMARK(BM_Record)->Iterations(1 << 20)->Threads(1);
BENCHMARK(BM_Record)->Iterations(1 << 19)->Threads(4);

// A phase with both clocks (Note [Thread CPU time]), as the engine records each phase: two
// readings of the thread's CPU clock, a system call each, and the record. What a step's phases,
// collective issues and waits cost, not its hooks.
void BM_RecordPhaseWithCpuTime(benchmark::State& state) {
  auto recorder = make_recorder(TraceLevel::Full, bench_dir().file("phase.db"));
  const NameId name = recorder->name("forward");
  for (auto _ : state) {
    const Stamp begin = stamp_now();
    recorder->phase(0, name, begin, stamp_now(), 3);
  }
  state.SetItemsProcessed(state.iterations());
  recorder->close();
  recorder.reset();
  remove_trace(bench_dir().file("phase.db"));
}
BENCHMARK(BM_RecordPhaseWithCpuTime)->Iterations(1 << 18);

// Tracing off: what every call site costs in a run without tracing (one branch).
void BM_RecordOff(benchmark::State& state) {
  auto recorder = make_recorder(TraceLevel::Off, "");
  int64_t t = 0;
  for (auto _ : state) {
    recorder->hook(0, t, t + 100, 3, 5, 1, t);
    benchmark::DoNotOptimize(t);
    ++t;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordOff);

// ---- BM_Ingest*: events per second into SQLite -----------------------------------------------

constexpr int64_t kIngestBatch = 100000;

// Writer::add_event alone, kIngestBatch events per transaction (what the recorder's writer
// thread and synth do).
void BM_IngestWriter(benchmark::State& state) {
  const std::string path = bench_dir().file("ingest_writer.db");
  const auto mix = event_mix();
  {
    Writer writer(path);
    int64_t t = 0;
    for (auto _ : state) {
      writer.begin();
      for (int64_t i = 0; i < kIngestBatch; ++i, ++t) {
        Event e = mix[static_cast<size_t>(t) & 7];
        e.begin_ns = t * 1000;
        e.end_ns = e.begin_ns + 500;
        writer.add_event(e);
      }
      writer.commit();
    }
  }
  remove_trace(path);
  state.SetItemsProcessed(state.iterations() * kIngestBatch);
}
BENCHMARK(BM_IngestWriter)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

// The recorder end to end: record kIngestBatch events on this thread, then flush() until the
// writer thread has committed them. Wall time, since the writer thread does the work.
void BM_IngestRecorder(benchmark::State& state) {
  const std::string path = bench_dir().file("ingest_recorder.db");
  const auto mix = event_mix();
  auto recorder = make_recorder(TraceLevel::Full, path);
  int64_t t = 0;
  for (auto _ : state) {
    for (int64_t i = 0; i < kIngestBatch; ++i, ++t) {
      Event e = mix[static_cast<size_t>(t) & 7];
      e.begin_ns = t * 1000;
      e.end_ns = e.begin_ns + 500;
      recorder->record(TraceLevel::Full, e);
    }
    recorder->flush();
  }
  state.SetItemsProcessed(state.iterations() * kIngestBatch);
  if (recorder->dropped_events()) state.SkipWithError("events were dropped");
  recorder->close();
  recorder.reset();
  remove_trace(path);
}
BENCHMARK(BM_IngestRecorder)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
