// Reading a trace file into the viewer's Model (model.h): load_model reads every event's drawing
// columns and every memory sample in parallel id ranges through trace::Reader, then builds one
// rank per thread; update_model reads only the rows a live file gained since the last read.
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "analysis/memory_peak.h"
#include "trace/error.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"
#include "viewer/model.h"
#include "viewer/model_derive.h"

namespace dpscope::view {
namespace {

using detail::build_iterations;
using detail::find_memory_peak;
using detail::set_memory_peak;
using detail::set_rank_extent;
using detail::sort_series;
using detail::summarize;

using trace::EventKind;
using trace::kNone;
constexpr size_t kCategories = trace::kMemoryCategoryCount;

// Note [Loading in two passes]
// Reading (pass 1) splits the id ranges into chunks that the threads take in turn; a chunk keeps
// its rows per rank, in id order, with a count per lane (or memory category). Building (pass 2)
// takes one rank per thread: from the counts it sizes everything once, copies the rank's rows
// from every chunk in chunk order into the thread's scratch, one vector per lane (so a lane gets
// its spans in id order, which is nearly sorted by begin: build_rows is then a near-linear
// pass), frees the chunk rows as it goes, and sorts each lane into its rows. Fresh memory is
// touched twice per span (chunk, lane) and no vector grows by doubling past its reservation:
// on a 10 M-event file page faults and copies, not sorting, were most of pass 2, and the
// scratch is reused from rank to rank so that its pages are faulted once per thread.

// One memory sample of a chunk (its rank is the RankRows it sits in).
struct Sample {
  int64_t ts = 0;
  int64_t bytes = 0;
  uint8_t category = 0;
};

// One chunk's rows of one rank, in id (rowid) order, with counts that size pass 2's storage.
struct RankRows {
  std::vector<trace::EventSpan> spans;
  std::vector<uint32_t> lane_counts;  // spans per lane id
  std::vector<Sample> samples;
  std::array<uint32_t, kCategories> category_counts{};
};

// Scratch that one building thread reuses from lane to lane and rank to rank.
struct Scratch {
  std::vector<std::vector<Span>> lanes;  // a rank's spans per lane before sorting
  std::vector<uint16_t> span_rows;
};

// A range of events.id (or of memory.rowid) for one reading thread, and what it read.
struct Chunk {
  bool memory = false;
  int64_t first = 0, last = 0;
  std::vector<RankRows> ranks;  // by rank number
};

std::vector<Chunk> make_chunks(int64_t first, int64_t last, bool memory, int pieces) {
  std::vector<Chunk> chunks;
  const int64_t count = last - first + 1;
  if (count <= 0) return chunks;
  const int64_t step = std::max<int64_t>(1, (count + pieces - 1) / pieces);
  for (int64_t from = first; from <= last; from += step) {
    Chunk c;
    c.memory = memory;
    c.first = from;
    c.last = std::min(last, from + step - 1);
    chunks.push_back(std::move(c));
  }
  return chunks;
}

// Runs `work(i, t)` for i in [0, count) on `threads` threads, t being the thread's number in
// [0, threads); the calling thread is thread 0. Rethrows the first exception.
template <class Work>
void parallel_for(size_t count, int threads, Work work) {
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&](int t) {
    for (size_t i; (i = next.fetch_add(1)) < count;) {
      try {
        work(i, t);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = count;
      }
    }
  };
  std::vector<std::thread> pool;
  const int spare = static_cast<int>(std::min<size_t>(count, size_t(std::max(threads, 1)))) - 1;
  for (int t = 1; t <= spare; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

RankRows& rows_of(Chunk& chunk, int32_t rank) {
  if (static_cast<size_t>(rank) >= chunk.ranks.size()) chunk.ranks.resize(size_t(rank) + 1);
  return chunk.ranks[static_cast<size_t>(rank)];
}

// Pass 1 for one chunk, on the thread's own Reader. `ranks_hint`: how many ranks share the rows.
void read_chunk(trace::Reader& reader, Chunk& chunk, size_t ranks_hint,
                const std::function<bool(size_t)>& advance) {
  // Interleaved ranks (a recorder's file) give each rank about 1/ranks of the chunk; reserve
  // twice that so that one doubling at most follows (a rank-major file).
  const size_t reserve = size_t(chunk.last - chunk.first + 1) * 2 / std::max<size_t>(ranks_hint, 1) + 64;
  if (chunk.memory) {
    chunk.ranks.reserve(ranks_hint);
    reader.scan_memory(chunk.first, chunk.last, [&](const trace::MemorySample* rows, size_t n) {
      for (size_t k = 0; k < n; ++k) {
        const trace::MemorySample& s = rows[k];
        const auto c = static_cast<size_t>(s.category);
        if (s.rank < 0 || c >= kCategories) continue;
        RankRows& r = rows_of(chunk, s.rank);
        if (r.samples.capacity() == 0) r.samples.reserve(reserve);
        r.samples.push_back(Sample{s.ts_ns, s.bytes, static_cast<uint8_t>(c)});
        ++r.category_counts[c];
      }
      return advance(n);
    });
    return;
  }
  chunk.ranks.reserve(ranks_hint);
  RankRows* last = nullptr;
  int32_t last_rank = kNone;
  reader.scan_event_spans(chunk.first, chunk.last, [&](const trace::EventSpan* rows, size_t n) {
    for (size_t k = 0; k < n; ++k) {
      const trace::EventSpan& s = rows[k];
      if (s.rank < 0 || s.lane < 0) continue;
      if (s.rank != last_rank) {
        last = &rows_of(chunk, s.rank);
        last_rank = s.rank;
        if (last->spans.capacity() == 0) last->spans.reserve(reserve);
      }
      last->spans.push_back(s);
      if (static_cast<size_t>(s.lane) >= last->lane_counts.size()) {
        last->lane_counts.resize(size_t(s.lane) + 1);
      }
      ++last->lane_counts[static_cast<size_t>(s.lane)];
    }
    return advance(n);
  });
}

// Pass 2's spans for one rank: adds its spans from every chunk to the lanes `rank` already has
// (none for load_model; the previous model's for update_model), sorts the lanes that got some
// into rows, and finds its iterations. Frees the chunks' spans of this rank.
void add_spans(RankData& rank, std::vector<Chunk>& chunks, Scratch& scratch, trace::NameId iteration,
               trace::NameId forward) {
  const auto number = static_cast<size_t>(rank.info.rank);
  std::vector<size_t> added;
  for (const Chunk& c : chunks) {
    if (number >= c.ranks.size()) continue;
    const RankRows& rows = c.ranks[number];
    if (rows.lane_counts.size() > added.size()) added.resize(rows.lane_counts.size());
    for (size_t l = 0; l < rows.lane_counts.size(); ++l) added[l] += rows.lane_counts[l];
  }
  if (rank.lanes.size() < added.size()) rank.lanes.resize(added.size());
  if (scratch.lanes.size() < added.size()) scratch.lanes.resize(added.size());
  for (size_t l = 0; l < added.size(); ++l) {
    scratch.lanes[l].clear();
    if (!added[l]) continue;
    // A lane that had spans (update_model) is sorted again with the new ones, which come after
    // them in the file.
    const std::vector<Span>& old = rank.lanes[l].spans;
    scratch.lanes[l].reserve(old.size() + added[l]);
    scratch.lanes[l].insert(scratch.lanes[l].end(), old.begin(), old.end());
  }
  for (Chunk& c : chunks) {
    if (number >= c.ranks.size()) continue;
    RankRows& rows = c.ranks[number];
    for (const trace::EventSpan& s : rows.spans) {
      scratch.lanes[static_cast<size_t>(s.lane)].push_back(Span::from_trace(s));
    }
    // Free as we go: the peak stays near one copy of the rows.
    std::vector<trace::EventSpan>().swap(rows.spans);
  }
  rank.events = 0;
  for (size_t l = 0; l < rank.lanes.size(); ++l) {
    Lane& lane = rank.lanes[l];
    lane.info.rank = rank.info.rank;
    lane.info.lane = static_cast<trace::LaneId>(l);
    if (lane.info.name.empty()) lane.info.name = "lane " + std::to_string(l);
    if (l < added.size() && added[l]) {
      build_rows(lane, scratch.lanes[l], scratch.span_rows, lane.spans.size());
    }
    rank.events += static_cast<int64_t>(lane.spans.size());
  }
  build_iterations(rank, iteration, forward);
}

// Pass 2's memory samples for one rank: adds its samples from every chunk to the series `rank`
// already has, orders and peaks the series that got some, and finds its memory peak. Writes the
// rank's memory fields only (Note [Memory after the first frame]). Frees the chunks' samples of
// this rank.
void add_samples(RankData& rank, std::vector<Chunk>& chunks) {
  const auto number = static_cast<size_t>(rank.info.rank);
  std::array<size_t, kCategories> added{};
  for (const Chunk& c : chunks) {
    if (number >= c.ranks.size()) continue;
    for (size_t m = 0; m < kCategories; ++m) added[m] += c.ranks[number].category_counts[m];
  }
  for (size_t m = 0; m < kCategories; ++m) {
    rank.memory[m].ts.reserve(rank.memory[m].ts.size() + added[m]);
    rank.memory[m].bytes.reserve(rank.memory[m].bytes.size() + added[m]);
  }
  // The peak is found as the samples are copied when they come in time order, as a recorder
  // writes them, and this rank had none before; otherwise from the sorted series at the end.
  bool samples_in_order = true;
  for (const MemorySeries& series : rank.memory) samples_in_order = samples_in_order && series.ts.empty();
  int64_t last_ts = INT64_MIN;
  analysis::MemoryPeakFinder peak_finder;
  for (Chunk& c : chunks) {
    if (number >= c.ranks.size()) continue;
    RankRows& rows = c.ranks[number];
    for (const Sample& s : rows.samples) {
      rank.memory[s.category].ts.push_back(s.ts);
      rank.memory[s.category].bytes.push_back(s.bytes);
      samples_in_order = samples_in_order && s.ts >= last_ts;
      last_ts = s.ts;
      if (samples_in_order) peak_finder.add(s.ts, static_cast<trace::MemoryCategory>(s.category), s.bytes);
    }
    std::vector<Sample>().swap(rows.samples);
  }
  for (size_t m = 0; m < kCategories; ++m) {
    if (!added[m]) continue;
    MemorySeries& series = rank.memory[m];
    sort_series(series);
    series.peak = 0;
    for (int64_t b : series.bytes) series.peak = std::max(series.peak, b);
  }
  if (samples_in_order) {
    set_memory_peak(rank, peak_finder.finish());
  } else {
    find_memory_peak(rank);
  }
}

// The run-wide tables, ranks and lanes of `reader`'s file into `model` (keeping the lanes'
// spans and the ranks' data `model` already has).
void read_tables(trace::Reader& reader, Model& model) {
  model.schema_version = reader.schema_version();
  model.meta = reader.meta();
  model.names = reader.names();
  model.params = reader.params();
  model.buckets = reader.buckets();
  model.units = reader.units();
  model.unit_shards = reader.unit_shards();
  for (const auto& info : reader.ranks()) {
    RankData* existing = nullptr;
    for (auto& r : model.ranks) existing = r.info.rank == info.rank ? &r : existing;
    if (!existing) {
      model.ranks.emplace_back();
      existing = &model.ranks.back();
    }
    existing->info = info;
  }
  for (const auto& lane : reader.lanes()) {
    if (lane.rank < 0 || lane.lane < 0) continue;
    RankData* r = nullptr;
    for (auto& candidate : model.ranks) r = candidate.info.rank == lane.rank ? &candidate : r;
    if (!r) {
      model.ranks.emplace_back();
      r = &model.ranks.back();
      r->info.rank = lane.rank;
    }
    if (r->lanes.size() <= static_cast<size_t>(lane.lane)) r->lanes.resize(size_t(lane.lane) + 1);
    r->lanes[static_cast<size_t>(lane.lane)].info = lane;
  }
}

// Pass 1: reads `chunks` on `threads` connections (`reader`, already open on `path`, is thread
// 0's), `progress` going from 0 to 0.8 of the load. Returns the rows read.
int64_t read_chunks(trace::Reader& reader, const std::string& path, std::vector<Chunk>& chunks,
                    size_t ranks_hint, LoadProgress* progress, int threads) {
  int64_t total_rows = 0;
  for (const Chunk& c : chunks) total_rows += c.last - c.first + 1;
  total_rows = std::max<int64_t>(1, total_rows);
  std::atomic<int64_t> rows_read{0};
  std::vector<std::unique_ptr<trace::Reader>> readers(static_cast<size_t>(threads));
  auto thread_reader = [&](int t) -> trace::Reader& {
    if (t == 0) return reader;
    auto& slot = readers[static_cast<size_t>(t)];
    if (!slot) slot = std::make_unique<trace::Reader>(path);
    return *slot;
  };
  const std::function<bool(size_t)> advance = [&](size_t rows) {
    const int64_t done = rows_read += static_cast<int64_t>(rows);
    if (progress) progress->fraction = 0.8 * double(done) / double(total_rows);
    return !(progress && progress->cancel);
  };
  parallel_for(chunks.size(), threads, [&](size_t i, int t) {
    read_chunk(thread_reader(t), chunks[i], std::max<size_t>(ranks_hint, 1), advance);
  });
  if (progress && progress->cancel) throw trace::TraceError(path + ": loading cancelled");
  return rows_read;
}

// Reads events.id in [events.first, events.last] and memory.rowid in [memory.first,
// memory.last] into `model` (which holds the tables and any earlier rows), on `threads`
// connections; `reader` (already open) is thread 0's.
void read_rows(trace::Reader& reader, Model& model, std::pair<int64_t, int64_t> events,
               std::pair<int64_t, int64_t> memory, LoadProgress* progress, int threads) {
  std::vector<Chunk> chunks = make_chunks(events.first, events.second, false, threads * 8);
  for (Chunk& c : make_chunks(memory.first, memory.second, true, threads * 4)) {
    chunks.push_back(std::move(c));
  }
  const int64_t rows_read = read_chunks(reader, model.path, chunks, model.ranks.size(), progress, threads);

  // Ranks that events or samples name but the ranks table lacks still get drawn.
  for (const Chunk& c : chunks) {
    for (size_t number = 0; number < c.ranks.size(); ++number) {
      const RankRows& rows = c.ranks[number];
      if (rows.spans.empty() && rows.samples.empty()) continue;
      if (model.rank(static_cast<int32_t>(number))) continue;
      model.ranks.emplace_back();
      model.ranks.back().info.rank = static_cast<int32_t>(number);
    }
  }
  std::sort(model.ranks.begin(), model.ranks.end(),
            [](const RankData& a, const RankData& b) { return a.info.rank < b.info.rank; });
  const detail::PhaseNames phases = detail::phase_names(model);
  std::atomic<size_t> ranks_done{0};
  std::vector<Scratch> scratch(static_cast<size_t>(threads));
  parallel_for(model.ranks.size(), threads, [&](size_t ri, int t) {
    add_spans(model.ranks[ri], chunks, scratch[static_cast<size_t>(t)], phases.iteration, phases.forward);
    add_samples(model.ranks[ri], chunks);
    if (progress) {
      progress->fraction = 0.8 + 0.2 * double(++ranks_done) / double(model.ranks.size());
    }
  });
  if (events.second >= events.first) model.events_read_to = events.second;
  if (memory.second >= memory.first) model.memory_read_to = memory.second;
  model.rows_read = rows_read;
}

// The file's (device, inode), so that update_model notices a file replaced under its name.
std::pair<uint64_t, uint64_t> file_identity(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return {0, 0};
  return {uint64_t(info.st_dev), uint64_t(info.st_ino)};
}

int default_threads(int threads) {
  if (threads > 0) return threads;
#ifdef __EMSCRIPTEN__
  return 1;  // no threads in the browser build: See Note [Background work in the browser]
#else
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
#endif
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// A model of `path` with its run tables read through `reader` (open on it), and the file's
// ranges of events.id and memory.rowid; no row read yet (events_read_to and memory_read_to say so).
struct Opened {
  std::shared_ptr<Model> model;
  std::pair<int64_t, int64_t> events, memory;
};
Opened open_model(trace::Reader& reader, const std::string& path) {
  Opened opened;
  opened.model = std::make_shared<Model>();
  Model& model = *opened.model;
  model.path = path;
  std::tie(model.file_device, model.file_inode) = file_identity(path);
  read_tables(reader, model);
  opened.events = reader.event_id_range();
  opened.memory = reader.memory_rowid_range();
  model.events_read_to = opened.events.first - 1;
  model.memory_read_to = opened.memory.first - 1;
  return opened;
}

// A load's last steps, once its rows are in: the totals and extents, the lanes' drawing order,
// the load's time since `started`, and `progress` at its end.
void finish_load(Model& model, std::chrono::steady_clock::time_point started, LoadProgress* progress) {
  summarize(model);
  arrange_lanes(model);
  model.load_ms = ms_since(started);
  if (progress) progress->fraction = 1.0;
}

}  // namespace

std::shared_ptr<const Model> load_model(const std::string& path, LoadProgress* progress,
                                        int threads) {
  const auto started = std::chrono::steady_clock::now();
  threads = default_threads(threads);
  trace::Reader reader(path);
  Opened opened = open_model(reader, path);
  read_rows(reader, *opened.model, opened.events, opened.memory, progress, threads);
  finish_load(*opened.model, started, progress);
  return opened.model;
}

FirstLoad load_events_first(const std::string& path, LoadProgress* progress, int threads) {
  const auto started = std::chrono::steady_clock::now();
  threads = default_threads(threads);
  trace::Reader reader(path);
  Opened opened = open_model(reader, path);
  const std::shared_ptr<Model>& model = opened.model;
  const auto memory = opened.memory;
  read_rows(reader, *model, opened.events, {memory.first, memory.first - 1}, progress, threads);
  FirstLoad first;
  if (memory.second >= memory.first) {
    // The samples up to here come in with memory_ready(); see Note [Memory after the first frame].
    model->memory_read_to = memory.second;
    model->memory_in = PublishedFlag(false);
    first.memory.model_ = model;
    first.memory.rows_ = memory;
    first.memory.threads_ = threads;
    first.memory.progress_ = std::make_shared<LoadProgress>();
  }
  finish_load(*model, started, progress);
  first.model = std::move(opened.model);
  return first;
}

std::shared_ptr<const Model> MemoryLoad::operator()() const {
  Model& model = *model_;
  trace::Reader reader(model.path);
  std::vector<Chunk> chunks = make_chunks(rows_.first, rows_.second, true, threads_ * 4);
  read_chunks(reader, model.path, chunks, model.ranks.size(), progress_.get(), threads_);
  // The first half drew the ranks it knew; samples of any other need a model with room for them.
  for (const Chunk& c : chunks) {
    for (size_t number = 0; number < c.ranks.size(); ++number) {
      if (!c.ranks[number].samples.empty() && !model.rank(static_cast<int32_t>(number))) {
        return load_model(model.path, progress_.get(), threads_);
      }
    }
  }
  std::atomic<size_t> ranks_done{0};
  parallel_for(model.ranks.size(), threads_, [&](size_t ri, int) {
    add_samples(model.ranks[ri], chunks);
    set_rank_extent(model.ranks[ri]);
    progress_->fraction = 0.8 + 0.2 * double(++ranks_done) / double(model.ranks.size());
  });
  model.memory_in.raise();
  return nullptr;
}

std::shared_ptr<const Model> update_model(const Model& previous, LoadProgress* progress,
                                          int threads) {
  const auto started = std::chrono::steady_clock::now();
  if (!previous.memory_ready()) {
    throw std::logic_error(previous.path + ": update_model needs the model's memory samples in; wait for its "
                           "MemoryLoad (Note [Memory after the first frame])");
  }
  threads = default_threads(threads);
  if (file_identity(previous.path) != std::make_pair(previous.file_device, previous.file_inode)) {
    return load_model(previous.path, progress, threads);
  }
  trace::Reader reader(previous.path);
  const auto events = reader.event_id_range();
  const auto memory = reader.memory_rowid_range();
  // Rows are only ever appended; fewer than before means the file was written anew.
  if (events.second < previous.events_read_to || memory.second < previous.memory_read_to) {
    return load_model(previous.path, progress, threads);
  }
  auto model = std::make_shared<Model>(previous);
  read_tables(reader, *model);
  read_rows(reader, *model, {std::max(events.first, previous.events_read_to + 1), events.second},
            {std::max(memory.first, previous.memory_read_to + 1), memory.second}, progress,
            threads);
  finish_load(*model, started, progress);
  return model;
}

}  // namespace dpscope::view
