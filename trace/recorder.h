// Recorder: the engine's only way to write a trace. Call sites copy an Event into a buffer of
// their own thread (no lock, no I/O); one writer thread drains every buffer into the rank's
// SQLite file in batched transactions. See Note [Recorder buffers] in recorder.cpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "trace/clock.h"
#include "trace/flush_guard.h"
#include "trace/records.h"
#include "trace/schema.h"
#include "trace/vocabulary.h"

namespace dpscope::trace {

class Writer;
class ThreadBuffer;

struct RecorderOptions {
  std::string path;  // the rank's trace file; replaced if it exists
  int32_t rank = 0;
  int32_t local_rank = 0;
  std::string device = "cpu";
  TraceLevel level = TraceLevel::Full;
  // How long the writer thread sleeps between drains when nobody asks it to flush.
  std::chrono::milliseconds flush_interval{20};
  // Bound on the events held in buffers (all threads). Past it a recording thread wakes the
  // writer and waits up to max_wait_when_full; only then are events dropped, and counted.
  size_t max_buffered_bytes = size_t{512} << 20;
  std::chrono::milliseconds max_wait_when_full{500};
  // Close the file on SIGINT/SIGTERM, std::terminate and exit() (see flush_guard.h).
  bool flush_on_signals = true;
};

// Thread-safety: every method may be called from any thread. The record functions are the hot
// path: lock-free, allocation-free except once per 4096 events of a thread. Setup functions
// (name, add_lane, set_meta, add_param, ...) take a mutex; call them outside hot loops and
// keep the ids they return.
class Recorder final : public FlushTarget {
 public:
  // Creates the trace file (throws TraceError naming the path if it cannot) and starts the
  // writer thread. With level Off no file is created and every call is a no-op.
  explicit Recorder(RecorderOptions options);
  // Closes as RankStatus::Complete if close() was not called.
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // ---- Hot path. Each costs one branch when its level is not being recorded.
  bool enabled(TraceLevel needed) const {
    return level_.load(std::memory_order_relaxed) >= static_cast<uint8_t>(needed);
  }
  void record(TraceLevel needed, const Event& event) {
    if (enabled(needed)) push(event);
  }
  // A phase slice (forward, backward, optimizer_step, iteration, construction steps): Summary.
  // The Stamp form carries the recording thread's CPU time as well (Note [Thread CPU time]):
  // the engine records with it, through stamp_for(); the nanosecond form records the wall
  // clock alone (synthesized and test traces).
  void phase(LaneId lane, NameId name, Stamp begin, Stamp end, int32_t iteration);
  void phase(LaneId lane, NameId name, int64_t begin_ns, int64_t end_ns, int32_t iteration) {
    phase(lane, name, Stamp{begin_ns}, Stamp{end_ns}, iteration);
  }
  // A gradient hook firing: Full. fill_bytes is the bucket's fill level after this gradient.
  // Its end carries the thread's CPU time (the gradient's ready moment on the cluster clock),
  // its begin the wall clock only: see Note [Thread CPU time]. Read `end` with stamp_now() only
  // when enabled(TraceLevel::Full): the CPU clock is a system call.
  void hook(LaneId lane, int64_t begin_ns, Stamp end, int32_t iteration, int32_t param,
            int32_t bucket, int64_t fill_bytes);
  void hook(LaneId lane, int64_t begin_ns, int64_t end_ns, int32_t iteration, int32_t param,
            int32_t bucket, int64_t fill_bytes) {
    hook(lane, begin_ns, Stamp{end_ns}, iteration, param, bucket, fill_bytes);
  }
  // A bucket instant (BucketReady, BucketLaunch, BucketDone): Full. Wall clock only, as hooks.
  void bucket_event(EventKind kind, LaneId lane, int64_t ts_ns, int32_t iteration,
                    int32_t bucket, int64_t seq = kNone64);
  // An FSDP unit's (FSDP1's unit, FSDP2's fully_shard group's) state from begin_ns to end_ns
  // (gathering, full, reducing): Summary. Nothing is recorded for a state that never began
  // (begin_ns <= 0); an end before the begin is taken as the begin.
  void unit_state(LaneId lane, int32_t unit, UnitState state, int64_t begin_ns, int64_t end_ns,
                  int32_t iteration);
  // The bytes `category` holds from now on: Full.
  void memory(MemoryCategory category, int64_t bytes, int64_t ts_ns = now_ns());
  // A per-iteration metric (loss, step_ms, ...): Summary.
  void metric(int32_t iteration, NameId name, double value);

  // ---- Setup (mutex; not for hot loops).
  // Interns a name once; the id is valid for this recorder's file.
  NameId name(std::string_view text);
  // A new lane of this rank. Lane 0, "main" (Host), exists from the start.
  LaneId add_lane(std::string_view name, LaneKind kind);
  void set_meta(std::string_view key, std::string_view value);
  // Offset from this rank's steady clock to rank 0's, added to every timestamp written, and how
  // far it may be off (written into the ranks table).
  void set_clock_offset(int64_t offset_ns, int64_t uncertainty_ns = 0);
  void add_param(const ParamInfo& param);
  void add_bucket(const BucketInfo& bucket);
  void add_unit(const UnitInfo& unit);
  void add_unit_shard(const UnitShard& shard);

  // ---- Lifetime.
  // Blocks until every event recorded before the call is committed to the file.
  void flush();
  // Drains everything, records `status` in the ranks table, finishes the file. Idempotent;
  // recording afterwards is a no-op. Prints a warning on stderr if events were dropped.
  void close(std::string_view status = to_string(RankStatus::Complete)) override;

  // ---- State.
  int32_t rank() const { return options_.rank; }
  const std::string& path() const { return options_.path; }
  TraceLevel level() const { return options_.level; }
  int64_t dropped_events() const;
  int64_t written_events() const { return written_.load(std::memory_order_relaxed); }
  // Non-empty once the writer failed (disk full, file removed); tracing then stopped.
  std::string failure() const;

 private:
  friend class ThreadBuffer;
  void push(const Event& event);
  ThreadBuffer* attach_thread();
  // Wakes the writer thread now (a recording thread's buffers are full).
  void request_drain();
  void enqueue(std::function<void(Writer&)> op);
  void writer_loop();
  size_t drain(Writer& writer);
  void write_event(Writer& writer, Event event);
  RankInfo rank_row(std::string_view status) const;

  RecorderOptions options_;
  const uint64_t id_;  // tells this recorder from earlier ones in a thread's cached slot
  std::atomic<uint8_t> level_;
  std::atomic<int64_t> clock_offset_ns_{0};
  std::atomic<int64_t> clock_uncertainty_ns_{0};
  int64_t start_ns_ = 0;

  // Buffers: the list only grows, a thread's buffer outlives the thread (nothing is lost).
  mutable std::mutex buffers_mutex_;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers_;
  std::atomic<int64_t> buffered_bytes_{0};

  // Setup operations waiting for the writer thread, in order.
  std::mutex setup_mutex_;
  std::vector<std::function<void(Writer&)>> pending_;
  std::unordered_map<std::string, NameId> names_;
  LaneId next_lane_ = 1;

  // Writer thread and flush handshake.
  std::unique_ptr<Writer> writer_;
  std::thread writer_thread_;
  mutable std::mutex wake_mutex_;
  std::condition_variable wake_;
  std::condition_variable flushed_cv_;
  uint64_t flush_requested_ = 0;
  uint64_t flush_done_ = 0;
  bool stop_ = false;
  std::atomic<bool> drain_requested_{false};
  std::atomic<int64_t> written_{0};
  std::string failure_;

  std::mutex close_mutex_;
  bool closed_ = false;
};

// Now on both clocks when `recorder` records `needed`; else the wall clock alone, without the
// system call that reading the CPU clock is (clock.h). A null recorder records nothing.
inline Stamp stamp_for(const Recorder* recorder, TraceLevel needed) {
  return recorder && recorder->enabled(needed) ? stamp_now() : Stamp{now_ns()};
}

// Records a phase slice from construction to destruction, with the thread's CPU time at both
// ends. Costs one branch when off; a null recorder records nothing.
class ScopedPhase {
 public:
  ScopedPhase(Recorder& recorder, LaneId lane, NameId name, int32_t iteration)
      : ScopedPhase(&recorder, lane, name, iteration) {}
  ScopedPhase(Recorder* recorder, LaneId lane, NameId name, int32_t iteration)
      : recorder_(recorder && recorder->enabled(TraceLevel::Summary) ? recorder : nullptr),
        lane_(lane), name_(name), iteration_(iteration),
        begin_(recorder_ ? stamp_now() : Stamp{}) {}
  // Interns `name` first (a setup call: for phases that happen once, like construction steps).
  ScopedPhase(Recorder* recorder, LaneId lane, std::string_view name, int32_t iteration)
      : ScopedPhase(recorder, lane, recorder ? recorder->name(name) : kNone, iteration) {}
  ~ScopedPhase() {
    if (recorder_) recorder_->phase(lane_, name_, begin_, stamp_now(), iteration_);
  }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  Recorder* recorder_;
  LaneId lane_;
  NameId name_;
  int32_t iteration_;
  Stamp begin_;
};

// ---- Inline hot-path helpers -------------------------------------------------------------

inline void Recorder::phase(LaneId lane, NameId name, Stamp begin, Stamp end,
                            int32_t iteration) {
  if (!enabled(TraceLevel::Summary)) return;
  Event e;
  e.kind = EventKind::Phase;
  e.lane = lane;
  e.name = name;
  e.begin_ns = begin.wall_ns;
  e.end_ns = end.wall_ns;
  e.cpu_begin_ns = begin.cpu_ns;
  e.cpu_end_ns = end.cpu_ns;
  e.iteration = iteration;
  push(e);
}

inline void Recorder::hook(LaneId lane, int64_t begin_ns, Stamp end, int32_t iteration,
                           int32_t param, int32_t bucket, int64_t fill_bytes) {
  if (!enabled(TraceLevel::Full)) return;
  Event e;
  e.kind = EventKind::Hook;
  e.lane = lane;
  e.begin_ns = begin_ns;
  e.end_ns = end.wall_ns;
  e.cpu_end_ns = end.cpu_ns;
  e.iteration = iteration;
  e.param = param;
  e.bucket = bucket;
  e.value = fill_bytes;
  push(e);
}

inline void Recorder::bucket_event(EventKind kind, LaneId lane, int64_t ts_ns, int32_t iteration,
                                   int32_t bucket, int64_t seq) {
  if (!enabled(TraceLevel::Full)) return;
  Event e;
  e.kind = kind;
  e.lane = lane;
  e.begin_ns = e.end_ns = ts_ns;
  e.iteration = iteration;
  e.bucket = bucket;
  e.seq = seq;
  push(e);
}

inline void Recorder::unit_state(LaneId lane, int32_t unit, UnitState state, int64_t begin_ns,
                                 int64_t end_ns, int32_t iteration) {
  if (!enabled(TraceLevel::Summary) || begin_ns <= 0) return;
  Event e;
  e.kind = EventKind::UnitState;
  e.lane = lane;
  e.begin_ns = begin_ns;
  e.end_ns = std::max(begin_ns, end_ns);
  e.iteration = iteration;
  e.unit = unit;
  e.op = static_cast<uint8_t>(state);
  push(e);
}

// Buffer records that are not events: memory samples and metrics travel through the same
// per-thread buffers, tagged with kinds outside EventKind, and go to their own tables.
namespace detail {
inline constexpr auto kMemoryRecord = static_cast<EventKind>(0xF0);  // op = category
inline constexpr auto kMetricRecord = static_cast<EventKind>(0xF1);  // value = double bits
}  // namespace detail

inline void Recorder::memory(MemoryCategory category, int64_t bytes, int64_t ts_ns) {
  if (!enabled(TraceLevel::Full)) return;
  Event e;
  e.kind = detail::kMemoryRecord;
  e.op = static_cast<uint8_t>(category);
  e.begin_ns = e.end_ns = ts_ns;
  e.bytes = bytes;
  push(e);
}

}  // namespace dpscope::trace
