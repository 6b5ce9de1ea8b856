// Loading a trace into the viewer's Model: parallel bulk reads through trace::Reader (one
// connection per thread over id ranges), then per-rank sorting into lane rows and memory series.
// Nothing here draws; nothing after load_model touches SQLite except tooltips' detail queries.
#include "viewer/model.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "trace/error.h"
#include "trace/reader.h"

namespace dpscope::view {
namespace {

using trace::EventKind;
using trace::kNone;

bool span_before(const EventSpan& a, const EventSpan& b) {
  if (a.begin_ns != b.begin_ns) return a.begin_ns < b.begin_ns;
  return a.end_ns > b.end_ns;  // the enclosing span first
}

// Spans arrive in the order they were recorded: by end, with parents after their children.
// That is nearly sorted by begin, so an insertion sort moves each parent back past its few
// children; on input that is far from sorted it gives up and falls back to std::stable_sort.
void sort_spans(std::vector<EventSpan>& spans) {
  const size_t n = spans.size();
  size_t budget = 16 * n + 1024;
  for (size_t i = 1; i < n; ++i) {
    if (!span_before(spans[i], spans[i - 1])) continue;
    EventSpan moving = spans[i];
    size_t j = i;
    while (j > 0 && span_before(moving, spans[j - 1])) {
      spans[j] = spans[j - 1];
      --j;
      if (--budget == 0) {
        spans[j] = moving;
        std::stable_sort(spans.begin(), spans.end(), span_before);
        return;
      }
    }
    spans[j] = moving;
  }
}

// A chunk of work for the reading threads: an id range of events or a rowid range of memory.
// Rows are split by rank as they are read, so that building a rank touches only its own rows.
struct Chunk {
  bool memory = false;
  int64_t first = 0, last = 0;
  std::map<int32_t, std::vector<EventSpan>> spans;             // by rank
  std::map<int32_t, std::vector<trace::MemorySample>> samples;  // by rank
};

std::vector<Chunk> make_chunks(std::pair<int64_t, int64_t> range, bool memory, int pieces) {
  std::vector<Chunk> chunks;
  const int64_t count = range.second - range.first + 1;
  if (count <= 0) return chunks;
  const int64_t step = std::max<int64_t>(1, (count + pieces - 1) / pieces);
  for (int64_t first = range.first; first <= range.second; first += step) {
    Chunk c;
    c.memory = memory;
    c.first = first;
    c.last = std::min(range.second, first + step - 1);
    chunks.push_back(std::move(c));
  }
  return chunks;
}

// Runs `work(i, t)` for i in [0, count) on `threads` threads, t being the thread's number in
// [0, threads); rethrows the first exception.
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
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

void build_memory(RankData& rank, const std::vector<Chunk>& chunks) {
  std::vector<trace::MemorySample> stacked;
  for (const Chunk& chunk : chunks) {
    auto mine = chunk.samples.find(rank.info.rank);
    if (mine == chunk.samples.end()) continue;
    for (const auto& s : mine->second) {
      const auto c = static_cast<size_t>(s.category);
      if (c >= trace::kMemoryCategoryCount) continue;
      rank.memory[c].ts.push_back(s.ts_ns);
      rank.memory[c].bytes.push_back(s.bytes);
      if (c < trace::kMemoryCategoryStacked) stacked.push_back(s);
    }
  }
  for (MemorySeries& series : rank.memory) {
    // Samples are written in time order per rank; sort only if something came out of order.
    if (!std::is_sorted(series.ts.begin(), series.ts.end())) {
      std::vector<size_t> order(series.ts.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return series.ts[a] < series.ts[b]; });
      MemorySeries sorted;
      for (size_t i : order) {
        sorted.ts.push_back(series.ts[i]);
        sorted.bytes.push_back(series.bytes[i]);
      }
      series.ts = std::move(sorted.ts);
      series.bytes = std::move(sorted.bytes);
    }
    for (int64_t b : series.bytes) series.peak = std::max(series.peak, b);
  }
  // The stacked total's peak: apply every sample of one timestamp together, as stats.h does.
  std::stable_sort(stacked.begin(), stacked.end(),
                   [](const auto& a, const auto& b) { return a.ts_ns < b.ts_ns; });
  std::array<int64_t, trace::kMemoryCategoryStacked> held{};
  int64_t total = 0;
  for (size_t i = 0; i < stacked.size(); ++i) {
    const auto c = static_cast<size_t>(stacked[i].category);
    total += stacked[i].bytes - held[c];
    held[c] = stacked[i].bytes;
    if ((i + 1 == stacked.size() || stacked[i + 1].ts_ns != stacked[i].ts_ns) &&
        total > rank.memory_peak_bytes) {
      rank.memory_peak_bytes = total;
      rank.memory_peak_ns = stacked[i].ts_ns;
    }
  }
}

// Iterations from the "iteration" phases (their seq_or_iteration is the iteration number), or
// failing those from one forward to the next.
void build_iterations(RankData& rank, trace::NameId iteration, trace::NameId forward) {
  for (const Lane& lane : rank.lanes) {
    for (const EventSpan& s : lane.spans) {
      if (s.kind == EventKind::Phase && s.name == iteration && iteration != kNone &&
          s.seq_or_iteration != kNone) {
        rank.iterations.push_back({s.seq_or_iteration, s.begin_ns, s.end_ns});
      }
    }
  }
  std::sort(rank.iterations.begin(), rank.iterations.end(),
            [](const IterationSpan& a, const IterationSpan& b) { return a.begin_ns < b.begin_ns; });
  if (!rank.iterations.empty() || forward == kNone) return;
  // No "iteration" phases: an iteration runs from one forward to the next.
  std::vector<int64_t> starts;
  for (const Lane& lane : rank.lanes) {
    for (const EventSpan& s : lane.spans) {
      if (s.kind == EventKind::Phase && s.name == forward) starts.push_back(s.begin_ns);
    }
  }
  std::sort(starts.begin(), starts.end());
  int64_t last_end = 0;
  for (const Lane& lane : rank.lanes) {
    if (!lane.end_max.empty()) last_end = std::max(last_end, lane.end_max.back());
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t end = i + 1 < starts.size() ? starts[i + 1] : last_end;
    rank.iterations.push_back({static_cast<int32_t>(i), starts[i], end});
  }
}

}  // namespace

int64_t MemorySeries::at(int64_t t, size_t* hint) const {
  if (ts.empty() || t < ts.front()) return 0;
  size_t i = hint ? std::min(*hint, ts.size() - 1) : 0;
  if (ts[i] > t) i = 0;
  // Gallop forward from the hint, then binary search the bracket.
  size_t step = 1, hi = i + 1;
  while (hi < ts.size() && ts[hi] <= t) {
    i = hi;
    hi = i + step;
    step *= 2;
  }
  hi = std::min(hi, ts.size());
  i = static_cast<size_t>(std::upper_bound(ts.begin() + static_cast<std::ptrdiff_t>(i),
                                           ts.begin() + static_cast<std::ptrdiff_t>(hi), t) -
                          ts.begin()) - 1;
  if (hint) *hint = i;
  return bytes[i];
}

int32_t RankData::iteration_at(int64_t t) const {
  auto it = std::upper_bound(iterations.begin(), iterations.end(), t,
                             [](int64_t t, const IterationSpan& s) { return t < s.begin_ns; });
  if (it == iterations.begin()) return kNone;
  --it;
  return t <= it->end_ns ? it->iteration : kNone;
}

const IterationSpan* RankData::find_iteration(int32_t iteration) const {
  for (const auto& s : iterations) {
    if (s.iteration == iteration) return &s;
  }
  return nullptr;
}

const std::string& Model::name(trace::NameId id) const {
  static const std::string empty;
  return id >= 0 && static_cast<size_t>(id) < names.size() ? names[static_cast<size_t>(id)] : empty;
}

std::string Model::meta_value(const std::string& key, const std::string& fallback) const {
  auto it = meta.find(key);
  return it == meta.end() ? fallback : it->second;
}

const RankData* Model::rank(int32_t rank) const {
  for (const auto& r : ranks) {
    if (r.info.rank == rank) return &r;
  }
  return nullptr;
}

std::string span_label(const Model& model, const EventSpan& span) {
  switch (span.kind) {
    case EventKind::Phase:
    case EventKind::Mark: {
      const std::string& n = model.name(span.name);
      return n.empty() ? std::string(trace::to_string(span.kind)) : n;
    }
    case EventKind::Collective:
      return span.op < trace::kCollectiveOpCount
                 ? std::string(trace::to_string(static_cast<trace::CollectiveOp>(span.op)))
                 : "collective";
    case EventKind::CollectiveWait:
      return span.op < trace::kCollectiveOpCount
                 ? "wait " + std::string(trace::to_string(static_cast<trace::CollectiveOp>(span.op)))
                 : "wait";
    case EventKind::UnitState:
      return span.op < trace::kUnitStateCount
                 ? std::string(trace::to_string(static_cast<trace::UnitState>(span.op)))
                 : "unit_state";
    default:
      return std::string(trace::to_string(span.kind));
  }
}

void build_rows(Lane& lane) {
  std::vector<EventSpan>& spans = lane.spans;
  sort_spans(spans);
  // Depth of each span: how many spans enclose it; instants go to their own row.
  std::vector<uint16_t> depth(spans.size());
  std::vector<int64_t> open_ends;
  uint16_t deepest = 0;
  bool instants = false, slices = false;
  for (size_t i = 0; i < spans.size(); ++i) {
    const EventSpan& s = spans[i];
    if (s.begin_ns == s.end_ns) {
      depth[i] = 0xffff;
      instants = true;
      continue;
    }
    while (!open_ends.empty() && open_ends.back() <= s.begin_ns) open_ends.pop_back();
    depth[i] = static_cast<uint16_t>(std::min<size_t>(open_ends.size(), 0xfffe));
    deepest = std::max<uint16_t>(deepest, depth[i]);
    slices = true;
    open_ends.push_back(s.end_ns);
  }
  const size_t slice_rows = slices ? size_t{deepest} + 1 : 0;
  const size_t rows = slice_rows + (instants ? 1 : 0);
  // Counting sort by row keeps each row in begin order.
  std::vector<uint32_t> start(rows + 1, 0);
  auto row_of = [&](uint16_t d) { return d == 0xffff ? slice_rows : size_t{d}; };
  for (uint16_t d : depth) ++start[row_of(d) + 1];
  for (size_t r = 0; r < rows; ++r) start[r + 1] += start[r];
  std::vector<EventSpan> sorted(spans.size());
  std::vector<uint32_t> fill(start.begin(), start.end() - 1);
  for (size_t i = 0; i < spans.size(); ++i) sorted[fill[row_of(depth[i])]++] = spans[i];
  spans = std::move(sorted);
  lane.row_start = std::move(start);
  lane.has_instant_row = instants;
  lane.end_max.resize(spans.size());
  for (int r = 0; r < lane.rows(); ++r) {
    int64_t running = INT64_MIN;
    for (size_t i = lane.row_begin(r); i < lane.row_end(r); ++i) {
      running = std::max(running, spans[i].end_ns);
      lane.end_max[i] = running;
    }
  }
}

std::shared_ptr<const Model> load_model(const std::string& path, LoadProgress* progress,
                                        int threads) {
  const auto started = std::chrono::steady_clock::now();
  if (threads <= 0) {
    threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  }
  auto model = std::make_shared<Model>();
  model->path = path;
  trace::Reader reader(path);
  model->schema_version = reader.schema_version();
  model->meta = reader.meta();
  model->names = reader.names();
  model->params = reader.params();
  model->buckets = reader.buckets();
  model->units = reader.units();
  model->unit_shards = reader.unit_shards();
  const auto event_ids = reader.event_id_range();
  const auto memory_ids = reader.memory_rowid_range();

  for (const auto& info : reader.ranks()) {
    RankData r;
    r.info = info;
    model->ranks.push_back(std::move(r));
  }
  auto rank_slot = [&](int32_t rank) -> RankData& {
    for (auto& r : model->ranks) {
      if (r.info.rank == rank) return r;
    }
    RankData r;
    r.info.rank = rank;
    model->ranks.push_back(std::move(r));
    return model->ranks.back();
  };
  for (const auto& lane : reader.lanes()) {
    RankData& r = rank_slot(lane.rank);
    if (r.lanes.size() <= static_cast<size_t>(lane.lane)) r.lanes.resize(size_t(lane.lane) + 1);
    r.lanes[static_cast<size_t>(lane.lane)].info = lane;
  }

  // Read: events and memory in id ranges, plus the iteration phases, on `threads` connections.
  std::vector<Chunk> chunks = make_chunks(event_ids, false, threads * 8);
  for (Chunk& c : make_chunks(memory_ids, true, threads * 4)) chunks.push_back(std::move(c));
  const int64_t total_rows = std::max<int64_t>(1, (event_ids.second - event_ids.first + 1) +
                                                      (memory_ids.second - memory_ids.first + 1));
  std::atomic<int64_t> rows_read{0};
  // One connection per thread (trace::Reader is not shared across threads); thread 0 uses the
  // one that validated the file.
  std::vector<std::unique_ptr<trace::Reader>> readers(static_cast<size_t>(threads));
  auto thread_reader = [&](int t) -> trace::Reader& {
    if (t == 0) return reader;
    auto& slot = readers[static_cast<size_t>(t)];
    if (!slot) slot = std::make_unique<trace::Reader>(path);
    return *slot;
  };
  auto advance = [&](size_t rows) {
    const int64_t done = rows_read += static_cast<int64_t>(rows);
    if (progress) progress->fraction = 0.8 * double(done) / double(total_rows);
    return !(progress && progress->cancel);
  };
  parallel_for(chunks.size(), threads, [&](size_t i, int t) {
    Chunk& c = chunks[i];
    trace::Reader& r = thread_reader(t);
    if (c.memory) {
      r.scan_memory(c.first, c.last, [&](const trace::MemorySample* rows, size_t n) {
        for (size_t k = 0; k < n; ++k) c.samples[rows[k].rank].push_back(rows[k]);
        return advance(n);
      });
    } else {
      std::vector<EventSpan>* last = nullptr;
      int32_t last_rank = kNone;
      r.scan_event_spans(c.first, c.last, [&](const EventSpan* rows, size_t n) {
        for (size_t k = 0; k < n; ++k) {
          if (rows[k].rank != last_rank) {
            last_rank = rows[k].rank;
            last = &c.spans[last_rank];
          }
          last->push_back(rows[k]);
        }
        return advance(n);
      });
    }
  });
  if (progress && progress->cancel) throw trace::TraceError(path + ": loading cancelled");
  // Ranks and lanes that events name but the tables lack still get drawn.
  for (const Chunk& c : chunks) {
    for (const auto& [rank, spans] : c.spans) {
      RankData& r = rank_slot(rank);
      for (const EventSpan& s : spans) {
        if (r.lanes.size() <= static_cast<size_t>(s.lane)) r.lanes.resize(size_t(s.lane) + 1);
      }
    }
  }
  std::sort(model->ranks.begin(), model->ranks.end(),
            [](const RankData& a, const RankData& b) { return a.info.rank < b.info.rank; });
  trace::NameId forward = kNone, iteration = kNone;
  for (size_t id = 0; id < model->names.size(); ++id) {
    if (model->names[id] == "forward") forward = static_cast<trace::NameId>(id);
    if (model->names[id] == "iteration") iteration = static_cast<trace::NameId>(id);
  }

  // Build: per rank, gather its spans into lanes (in id order), sort them into rows.
  std::atomic<size_t> ranks_done{0};
  parallel_for(model->ranks.size(), threads, [&](size_t ri, int) {
    RankData& r = model->ranks[ri];
    std::vector<size_t> counts(r.lanes.size(), 0);
    for (const Chunk& c : chunks) {
      auto mine = c.spans.find(r.info.rank);
      if (mine == c.spans.end()) continue;
      for (const EventSpan& s : mine->second) ++counts[static_cast<size_t>(s.lane)];
    }
    for (size_t l = 0; l < r.lanes.size(); ++l) {
      Lane& lane = r.lanes[l];
      lane.info.rank = r.info.rank;
      lane.info.lane = static_cast<trace::LaneId>(l);
      if (lane.info.name.empty()) lane.info.name = "lane " + std::to_string(l);
      lane.spans.reserve(counts[l]);
      r.events += static_cast<int64_t>(counts[l]);
    }
    for (Chunk& c : chunks) {
      auto mine = c.spans.find(r.info.rank);
      if (mine == c.spans.end()) continue;
      for (const EventSpan& s : mine->second) r.lanes[static_cast<size_t>(s.lane)].spans.push_back(s);
      std::vector<EventSpan>().swap(mine->second);  // free as we go: the peak stays near 1x
    }
    for (Lane& lane : r.lanes) build_rows(lane);
    build_memory(r, chunks);
    build_iterations(r, iteration, forward);
    if (progress) {
      progress->fraction = 0.8 + 0.2 * double(++ranks_done) / double(model->ranks.size());
    }
  });

  bool any = false;
  for (const RankData& r : model->ranks) {
    model->events += r.events;
    for (const Lane& lane : r.lanes) {
      for (int row = 0; row < lane.rows(); ++row) {
        if (lane.row_begin(row) == lane.row_end(row)) continue;
        const int64_t first = lane.spans[lane.row_begin(row)].begin_ns;
        const int64_t last = lane.end_max[lane.row_end(row) - 1];
        model->t_begin = any ? std::min(model->t_begin, first) : first;
        model->t_end = any ? std::max(model->t_end, last) : last;
        any = true;
      }
    }
    for (const auto& it : r.iterations) {
      model->iterations = std::max(model->iterations, it.iteration + 1);
    }
  }
  model->load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
          .count();
  if (progress) progress->fraction = 1.0;
  return model;
}

}  // namespace dpscope::view
