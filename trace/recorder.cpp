// Recorder: per-thread event buffers, the writer thread that drains them into SQLite, and the
// close protocol (see recorder.h).
#include "trace/recorder.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "trace/error.h"
#include "trace/flush_guard.h"
#include "trace/vocabulary.h"
#include "trace/writer.h"

namespace dpscope::trace {

// Note [Recorder buffers]
// Each recording thread owns one ThreadBuffer: a singly linked list of fixed-size chunks that
// only that thread appends to and only the writer thread consumes (single producer, single
// consumer). The producer writes an event into its tail chunk and then publishes the new count
// with a release store; the consumer reads the count with an acquire load, so every event it
// sees is complete. A chunk is linked (release) before any event in it is published, so the
// consumer always finds `next` set when it steps past the end of a chunk. A consumed chunk is
// handed back through a one-slot `spare` exchange, so a steady-state thread allocates nothing.
// The bytes of all live chunks are bounded by RecorderOptions::max_buffered_bytes: at the bound
// the producer wakes the writer and waits; only after max_wait_when_full does it drop, counting
// every dropped event (ranks.dropped_events). Buffers belong to the Recorder, not the thread, so
// the events of a thread that exits are still written.

namespace {

struct Chunk {
  static constexpr size_t kEvents = 4096;
  Event events[kEvents];
  std::atomic<Chunk*> next{nullptr};
};

std::atomic<uint64_t> g_next_recorder_id{1};

// One slot per thread: the last recorder the thread recorded into and its buffer there.
struct ThreadSlot {
  uint64_t recorder_id = 0;
  ThreadBuffer* buffer = nullptr;
};
thread_local ThreadSlot t_slot;

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof(buffer) - 1) != 0) return "unknown";
  return buffer;
}

}  // namespace

class ThreadBuffer {
 public:
  explicit ThreadBuffer(Recorder& recorder)
      : recorder_(recorder), owner_(std::this_thread::get_id()) {
    tail_ = head_ = allocate();
  }
  ~ThreadBuffer() {
    Chunk* chunk = head_;
    while (chunk) {
      Chunk* next = chunk->next.load(std::memory_order_relaxed);
      delete chunk;
      chunk = next;
    }
    delete spare_.load(std::memory_order_relaxed);
  }

  // Producer side: only the owning thread.
  void push(const Event& event) {
    size_t slot = produced_ % Chunk::kEvents;
    if (slot == 0 && produced_ != 0) {
      Chunk* chunk = next_chunk();
      if (!chunk) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      tail_->next.store(chunk, std::memory_order_release);
      tail_ = chunk;
    }
    tail_->events[slot] = event;
    ++produced_;
    published_.store(produced_, std::memory_order_release);
  }

  // Consumer side: only the writer thread. Calls `sink` for every published event.
  template <typename Sink>
  size_t drain(Sink&& sink) {
    const uint64_t available = published_.load(std::memory_order_acquire);
    size_t count = 0;
    while (consumed_ < available) {
      size_t slot = consumed_ % Chunk::kEvents;
      if (slot == 0 && consumed_ != 0) {
        Chunk* next = head_->next.load(std::memory_order_acquire);
        recycle(head_);
        head_ = next;
      }
      sink(head_->events[slot]);
      ++consumed_;
      ++count;
    }
    return count;
  }

  int64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  std::thread::id owner() const { return owner_; }

 private:
  Chunk* allocate() {
    recorder_.buffered_bytes_.fetch_add(sizeof(Chunk), std::memory_order_relaxed);
    return new Chunk;
  }

  void recycle(Chunk* chunk) {
    chunk->next.store(nullptr, std::memory_order_relaxed);
    Chunk* previous = spare_.exchange(chunk, std::memory_order_acq_rel);
    if (previous) {
      recorder_.buffered_bytes_.fetch_sub(sizeof(Chunk), std::memory_order_relaxed);
      delete previous;
    }
  }

  // A chunk for the producer: the spare if there is one, a new one within the bound, else
  // wait for the writer (once per burst) and finally give up (nullptr: drop).
  Chunk* next_chunk() {
    if (Chunk* spare = spare_.exchange(nullptr, std::memory_order_acq_rel)) {
      dropping_ = false;
      return spare;
    }
    const auto limit = static_cast<int64_t>(recorder_.options_.max_buffered_bytes);
    auto within_bound = [&] {
      return recorder_.buffered_bytes_.load(std::memory_order_relaxed) + int64_t{sizeof(Chunk)} <=
             limit;
    };
    if (!within_bound() && !dropping_) {
      const auto deadline = std::chrono::steady_clock::now() + recorder_.options_.max_wait_when_full;
      while (!within_bound() && std::chrono::steady_clock::now() < deadline) {
        recorder_.request_drain();
        if (Chunk* spare = spare_.exchange(nullptr, std::memory_order_acq_rel)) return spare;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    if (!within_bound()) {
      dropping_ = true;
      recorder_.request_drain();
      return nullptr;
    }
    dropping_ = false;
    return allocate();
  }

  Recorder& recorder_;
  const std::thread::id owner_;
  // Producer-owned.
  Chunk* tail_ = nullptr;
  uint64_t produced_ = 0;
  bool dropping_ = false;
  // Shared.
  std::atomic<uint64_t> published_{0};
  std::atomic<Chunk*> spare_{nullptr};
  std::atomic<int64_t> dropped_{0};
  // Consumer-owned.
  Chunk* head_ = nullptr;
  uint64_t consumed_ = 0;
};

Recorder::Recorder(RecorderOptions options)
    : options_(std::move(options)),
      id_(g_next_recorder_id.fetch_add(1)),
      level_(static_cast<uint8_t>(options_.level)),
      start_ns_(now_ns()) {
  if (options_.level == TraceLevel::Off) {
    closed_ = true;
    return;
  }
  if (options_.path.empty()) {
    throw TraceError("rank " + std::to_string(options_.rank) +
                     ": no trace path given (set --trace PATH or --trace-level off)");
  }
  // Before the file exists: creating it may already pass a file-size limit (see flush_guard.h).
  if (options_.flush_on_signals) install_flush_guards();
  try {
    writer_ = std::make_unique<Writer>(options_.path);
    writer_->set_meta(meta_key::kTraceLevel, to_string(options_.level));
    writer_->put_rank(rank_row(to_string(RankStatus::Running)));
    writer_->add_lane(LaneInfo{options_.rank, 0, "main", LaneKind::Host});
  } catch (const TraceError&) {
    // A file that never got its schema (a full disk) would read as a damaged trace: remove it.
    writer_.reset();
    std::error_code ignored;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::filesystem::remove(options_.path + suffix, ignored);
    }
    throw;
  }
  writer_thread_ = std::thread([this] { writer_loop(); });
  register_recorder(this);
}

Recorder::~Recorder() {
  unregister_recorder(this);
  close(to_string(RankStatus::Complete));
}

void Recorder::push(const Event& event) {
  ThreadSlot& slot = t_slot;
  ThreadBuffer* buffer = slot.recorder_id == id_ ? slot.buffer : attach_thread();
  buffer->push(event);
}

// The slow path of push(): this thread last recorded into another recorder (or never).
// A thread that comes back finds its old buffer, so its events stay in order.
ThreadBuffer* Recorder::attach_thread() {
  std::lock_guard<std::mutex> lock(buffers_mutex_);
  ThreadBuffer* buffer = nullptr;
  for (auto& candidate : buffers_) {
    if (candidate->owner() == std::this_thread::get_id()) buffer = candidate.get();
  }
  if (!buffer) {
    buffers_.push_back(std::make_unique<ThreadBuffer>(*this));
    buffer = buffers_.back().get();
  }
  t_slot = ThreadSlot{id_, buffer};
  return buffer;
}

void Recorder::request_drain() {
  drain_requested_.store(true, std::memory_order_relaxed);
  wake_.notify_one();
}

void Recorder::metric(int32_t iteration, NameId name, double value) {
  if (!enabled(TraceLevel::Summary)) return;
  Event e;
  e.kind = detail::kMetricRecord;
  e.begin_ns = e.end_ns = now_ns();
  e.iteration = iteration;
  e.name = name;
  std::memcpy(&e.value, &value, sizeof(value));
  push(e);
}

// ---- Setup ---------------------------------------------------------------------------------

void Recorder::enqueue(std::function<void(Writer&)> op) {
  if (options_.level == TraceLevel::Off) return;
  std::lock_guard<std::mutex> lock(setup_mutex_);
  pending_.push_back(std::move(op));
}

NameId Recorder::name(std::string_view text) {
  std::lock_guard<std::mutex> lock(setup_mutex_);
  auto [it, inserted] = names_.emplace(std::string(text), static_cast<NameId>(names_.size() + 1));
  if (inserted && options_.level != TraceLevel::Off) {
    pending_.push_back([id = it->second, name = it->first](Writer& w) { w.add_name(id, name); });
  }
  return it->second;
}

LaneId Recorder::add_lane(std::string_view name, LaneKind kind) {
  std::lock_guard<std::mutex> lock(setup_mutex_);
  LaneId lane = next_lane_++;
  if (options_.level != TraceLevel::Off) {
    pending_.push_back([info = LaneInfo{options_.rank, lane, std::string(name), kind}](Writer& w) {
      w.add_lane(info);
    });
  }
  return lane;
}

void Recorder::set_meta(std::string_view key, std::string_view value) {
  enqueue([k = std::string(key), v = std::string(value)](Writer& w) { w.set_meta(k, v); });
}

void Recorder::set_clock_offset(int64_t offset_ns, int64_t uncertainty_ns) {
  clock_offset_ns_.store(offset_ns, std::memory_order_relaxed);
  clock_uncertainty_ns_.store(uncertainty_ns, std::memory_order_relaxed);
  enqueue([this](Writer& w) { w.put_rank(rank_row(to_string(RankStatus::Running))); });
}

void Recorder::add_param(const ParamInfo& param) {
  enqueue([param](Writer& w) { w.add_param(param); });
}
void Recorder::add_bucket(const BucketInfo& bucket) {
  enqueue([bucket](Writer& w) { w.add_bucket(bucket); });
}
void Recorder::add_unit(const UnitInfo& unit) {
  enqueue([unit](Writer& w) { w.add_unit(unit); });
}
void Recorder::add_unit_shard(const UnitShard& shard) {
  enqueue([shard](Writer& w) { w.add_unit_shard(shard); });
}

// ---- Writer thread -------------------------------------------------------------------------

RankInfo Recorder::rank_row(std::string_view status) const {
  RankInfo row;
  row.rank = options_.rank;
  row.host = host_name();
  row.pid = ::getpid();
  row.local_rank = options_.local_rank;
  row.device = options_.device;
  row.clock_offset_ns = clock_offset_ns_.load(std::memory_order_relaxed);
  row.clock_uncertainty_ns = clock_uncertainty_ns_.load(std::memory_order_relaxed);
  row.start_ns = start_ns_ + row.clock_offset_ns;
  row.end_ns = now_ns() + row.clock_offset_ns;
  row.events = written_.load(std::memory_order_relaxed);
  row.dropped_events = dropped_events();
  row.status = std::string(status);
  return row;
}

void Recorder::write_event(Writer& writer, Event e) {
  const int64_t offset = clock_offset_ns_.load(std::memory_order_relaxed);
  e.rank = static_cast<int16_t>(options_.rank);
  e.begin_ns += offset;
  e.end_ns += offset;
  if (e.kind == detail::kMemoryRecord) {
    writer.add_memory(MemorySample{options_.rank, e.begin_ns, static_cast<MemoryCategory>(e.op),
                                   e.bytes});
  } else if (e.kind == detail::kMetricRecord) {
    double value;
    std::memcpy(&value, &e.value, sizeof(value));
    writer.add_metric(options_.rank, e.iteration, e.name, value);
  } else {
    if (e.enqueue_ns != kNone64) e.enqueue_ns += offset;
    writer.add_event(e);
    written_.fetch_add(1, std::memory_order_relaxed);
  }
}

// One drain: pending setup first (names before the events that use them), then every buffer.
// Commits every kBatch rows so a transaction stays bounded during a burst.
size_t Recorder::drain(Writer& writer) {
  constexpr size_t kBatch = 200000;
  std::vector<std::function<void(Writer&)>> setup;
  {
    std::lock_guard<std::mutex> lock(setup_mutex_);
    setup.swap(pending_);
  }
  std::vector<ThreadBuffer*> buffers;
  {
    std::lock_guard<std::mutex> lock(buffers_mutex_);
    for (auto& buffer : buffers_) buffers.push_back(buffer.get());
  }
  size_t total = 0, in_transaction = 0;
  writer.begin();
  for (auto& op : setup) op(writer);
  for (ThreadBuffer* buffer : buffers) {
    total += buffer->drain([&](const Event& e) {
      write_event(writer, e);
      if (++in_transaction == kBatch) {
        writer.commit();
        writer.begin();
        in_transaction = 0;
      }
    });
  }
  writer.commit();
  return total;
}

void Recorder::writer_loop() {
  for (;;) {
    uint64_t requested;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(wake_mutex_);
      wake_.wait_for(lock, options_.flush_interval, [&] {
        return stop_ || flush_requested_ > flush_done_ ||
               drain_requested_.load(std::memory_order_relaxed);
      });
      drain_requested_.store(false, std::memory_order_relaxed);
      requested = flush_requested_;
      stopping = stop_;
    }
    try {
      drain(*writer_);
    } catch (const std::exception& error) {
      // Tracing stops; the training goes on. See failure().
      level_.store(static_cast<uint8_t>(TraceLevel::Off), std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(wake_mutex_);
      if (failure_.empty()) {
        failure_ = error.what();
        std::cerr << "dpscope: tracing stopped on rank " << options_.rank << ": " << failure_
                  << "\n";
      }
    }
    {
      std::lock_guard<std::mutex> lock(wake_mutex_);
      flush_done_ = requested;
    }
    flushed_cv_.notify_all();
    if (stopping) return;
  }
}

void Recorder::flush() {
  if (options_.level == TraceLevel::Off) return;
  std::unique_lock<std::mutex> lock(wake_mutex_);
  if (stop_) return;
  uint64_t ticket = ++flush_requested_;
  wake_.notify_one();
  flushed_cv_.wait(lock, [&] { return flush_done_ >= ticket || stop_; });
}

void Recorder::close(std::string_view status) {
  std::lock_guard<std::mutex> close_lock(close_mutex_);
  if (closed_) return;
  closed_ = true;
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  if (writer_thread_.joinable()) writer_thread_.join();
  level_.store(static_cast<uint8_t>(TraceLevel::Off), std::memory_order_relaxed);
  // Events pushed while the writer thread stopped: drain once more on this thread.
  try {
    if (failure().empty()) {
      drain(*writer_);
      writer_->put_rank(rank_row(status));
      writer_->finish();
    }
  } catch (const std::exception& error) {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    if (failure_.empty()) failure_ = error.what();
    std::cerr << "dpscope: could not finish the trace of rank " << options_.rank << " ("
              << options_.path << "): " << error.what() << "\n";
  }
  writer_.reset();
  if (int64_t dropped = dropped_events()) {
    std::cerr << "dpscope: warning: rank " << options_.rank << " dropped " << dropped
              << " trace events (buffers full); raise RecorderOptions::max_buffered_bytes. "
              << "The count is in " << options_.path << " (ranks.dropped_events).\n";
  }
}

int64_t Recorder::dropped_events() const {
  std::lock_guard<std::mutex> lock(buffers_mutex_);
  int64_t total = 0;
  for (const auto& buffer : buffers_) total += buffer->dropped();
  return total;
}

std::string Recorder::failure() const {
  std::lock_guard<std::mutex> lock(wake_mutex_);
  return failure_;
}

}  // namespace dpscope::trace
