// The viewer's in-memory picture of one trace file: every event's drawing columns sorted into
// per-lane rows, memory step series, iteration spans and the run tables, built once at load so
// that drawing a frame never touches SQLite. See Note [Lane rows] for the layout the panels rely on.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trace/records.h"
#include "trace/schema.h"
#include "trace/vocabulary.h"
#include "viewer/lane_order.h"
#include "viewer/packed_column.h"
#include "viewer/span.h"

namespace dpscope::view {

// Note [Lane rows]
// A lane's spans are nested (iteration > backward > hook), so a lane is drawn as rows, plus one
// row of instants (begin == end: bucket ready/launch/done, marks) at the bottom. Each span takes
// the lowest row that is free at its begin and lies below every span enclosing it: on a thread's
// lane that is its nesting depth. A communication lane's spans may overlap without nesting (two
// Gloo collectives in flight, Note [Gloo overlap]); they take a second row only while they
// overlap, so a long run of overlaps never staircases down the lane. Lane::spans holds the rows
// one after the other; inside a row spans are sorted by begin_ns and do not overlap (but for a
// malformed lane's last row, model.cpp's kMaxSliceRows). end_max(row, i) is the largest end_ns of
// the spans of i's row up to and including i: it never decreases within a row, so the first
// span visible at time t is a binary search away (lod.h, first_visible). In a row whose spans do
// not overlap (every row but a malformed one, Note [Sparse end_max]) it is span i's own end_ns,
// so only the other rows keep it. model.cpp builds this; lod.cpp, view_timeline.cpp,
// view_find.cpp and analysis.cpp read it.
//
// Note [Sparse end_max]
// A row's spans that do not overlap end in the order they begin, so their running maximum of
// end_ns is their end_ns. Keeping it for every span anyway cost 8 bytes an event, 80 MB of a
// 10 M-event trace (bench/README.md, "Viewer"); now only a row whose ends fall somewhere (the
// capped last row of a malformed lane, or spans that end before they begin) keeps its running
// maximum, in Lane::disordered_end_max.
struct Lane {
  // end_max_offset of a row whose ends are in order (Note [Sparse end_max]).
  static constexpr uint32_t kEndsInOrder = UINT32_MAX;

  trace::LaneInfo info;
  std::vector<Span> spans;         // rows one after another, see Note [Lane rows]
  std::vector<uint32_t> row_start; // row r is spans[row_start[r], row_start[r + 1])
  // Per row: where its running maxima of end_ns begin in disordered_end_max, or kEndsInOrder.
  std::vector<uint32_t> end_max_offset;
  std::vector<int64_t> disordered_end_max;  // the running maxima of the rows that need them
  bool has_instant_row = false;    // the last row holds the lane's instants
  int64_t longest_ns = 0;          // the longest span's duration (bounds range queries)

  int rows() const { return row_start.empty() ? 0 : static_cast<int>(row_start.size()) - 1; }
  size_t row_begin(int row) const { return row_start[static_cast<size_t>(row)]; }
  size_t row_end(int row) const { return row_start[static_cast<size_t>(row) + 1]; }
  // The largest end_ns of the spans of `row` up to and including span i, which lies in `row`.
  int64_t end_max(int row, size_t i) const {
    const uint32_t offset = end_max_offset[static_cast<size_t>(row)];
    return offset == kEndsInOrder ? spans[i].end_ns : disordered_end_max[offset + (i - row_begin(row))];
  }
};

// The bytes one memory category holds over time: bytes[i] from ts[i] until ts[i + 1]. Both
// columns packed (See Note [Packed memory series]).
struct MemorySeries {
  PackedColumn ts;
  PackedColumn bytes;
  int64_t peak = 0;
  // The bytes held at time t (0 before the first sample). `hint` is an index to start the
  // search from (pass the previous answer's index when walking forward in time); updated.
  int64_t at(int64_t t, size_t* hint) const;
};

// One iteration of one rank: its "iteration" phase (or the span from its forward to the next).
struct IterationSpan {
  int32_t iteration = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

struct RankData {
  trace::RankInfo info;
  std::vector<Lane> lanes;  // in lane id order
  // The lanes with spans in drawing order, each with its label; GPU first for a profiler trace's
  // rank (Note [GPU first], lane_order.h).
  std::vector<DrawnLane> drawn_lanes;
  LaneArrangement arrangement = LaneArrangement::AsRecorded;
  // The memory fields (memory, the three peaks and the extent t_begin/t_end) are read only once
  // the model's memory_ready() (Note [Memory after the first frame]).
  std::array<MemorySeries, trace::kMemoryCategoryCount> memory;
  // Memory at the peak as analysis/memory_peak.h defines it (what `dpscope stats` calls the peak).
  int64_t memory_peak_bytes = 0;
  int64_t memory_peak_ns = 0;     // when it was reached
  // The largest cuda_allocated sample, -1 when the rank sampled none (it trained on the CPU). On
  // a GPU the stacked categories count host memory only (analysis::RankStats::sampled_gpu_memory).
  int64_t gpu_memory_peak_bytes = -1;
  std::vector<IterationSpan> iterations;  // by begin_ns
  int64_t events = 0;
  // The rank's extent: the earliest begin and the latest end of its events and memory samples
  // (both 0 without any). Its memory graph is drawn, and hovered, inside it only.
  int64_t t_begin = 0, t_end = 0;
  // The iteration whose span holds time t, or kNone (construction, between iterations).
  int32_t iteration_at(int64_t t) const;
  const IterationSpan* find_iteration(int32_t iteration) const;
};

// Note [Memory after the first frame]
// A window opens a trace on its timeline before its memory graphs. The memory samples are 43 % of
// a dpscope trace's rows and a third of its load (bench/README.md, "Viewer"), and nothing of the
// first frame but the graphs needs them. So the window's open (load_events_first) reads the
// events and hands over a Model whose memory_ready() is false, and a background thread reads the
// samples right after (MemoryLoad) while the timeline is drawn and the analysis, which reads the
// file itself, runs. Until memory_ready(), each rank's memory fields (RankData::memory,
// memory_peak_bytes, memory_peak_ns, gpu_memory_peak_bytes and the extent t_begin, t_end) are
// being written by that thread and nothing else of the model is: every reader checks
// memory_ready() first. The graph says "reading memory samples", the peak's marker and labels
// wait, and the cluster clock, whose replay maps the samples, starts its build after. MemoryLoad
// sets the flag with release order once the fields are written and memory_ready() reads it with
// acquire order, so a thread that sees it true sees the finished series. load_model reads both
// at once and returns a ready model: the CLI, the tests, --live (whose updates copy the model)
// and the models made from a ready one never see the flag down.

// A flag that one thread raises once it has written what the flag guards, read by any thread
// (release and acquire order); copyable, so that Model is.
class PublishedFlag {
 public:
  explicit PublishedFlag(bool raised) : raised_(raised) {}
  PublishedFlag(const PublishedFlag& other) : raised_(other.raised()) {}
  PublishedFlag& operator=(const PublishedFlag& other) {
    raised_.store(other.raised(), std::memory_order_release);
    return *this;
  }
  bool raised() const { return raised_.load(std::memory_order_acquire); }
  void raise() { raised_.store(true, std::memory_order_release); }

 private:
  std::atomic<bool> raised_;
};

// A whole trace, immutable once loaded. Thread-safety: const after load_model returns, so any
// thread may read it; the viewer shares it through std::shared_ptr<const Model>. A model from
// load_events_first is so too, but for its ranks' memory fields until memory_ready() (Note
// [Memory after the first frame]).
struct Model {
  std::string path;
  int schema_version = 0;
  std::map<std::string, std::string> meta;
  std::vector<std::string> names;  // by NameId
  std::vector<trace::ParamInfo> params;
  std::vector<trace::BucketInfo> buckets;  // by (generation, index)
  std::vector<trace::UnitInfo> units;
  std::vector<trace::UnitShard> unit_shards;
  std::vector<RankData> ranks;  // by rank
  int64_t t_begin = 0;          // earliest begin of any event (0 without events)
  int64_t t_end = 0;            // latest end
  int64_t events = 0;
  int32_t iterations = 0;       // 1 + the largest iteration seen
  double load_ms = 0;           // wall time load_model (or update_model) took
  // How far the file was read, for update_model: the largest events.id and memory.rowid loaded
  // (one less than the first when there were none), and the file's identity.
  int64_t events_read_to = 0;
  int64_t memory_read_to = 0;
  uint64_t file_device = 0, file_inode = 0;
  int64_t rows_read = 0;        // events and memory samples the last load or update read
  // Down while a MemoryLoad still reads the ranks' memory samples (Note [Memory after the first
  // frame]); raised for every model load_model, update_model and cluster_view make.
  PublishedFlag memory_in{true};

  // Whether the ranks' memory fields may be read (Note [Memory after the first frame]).
  bool memory_ready() const { return memory_in.raised(); }

  // names[id], or "" for kNone / unknown ids.
  const std::string& name(trace::NameId id) const;
  // The meta table's value for `key` (a trace::meta_key), or `fallback` when it has none.
  std::string meta_value(std::string_view key, std::string_view fallback = "") const;
  // The run's strategy (meta key strategy), Unknown when absent or not one this version knows.
  trace::Strategy strategy() const;
  // FSDP (units: flat parameters) or FSDP2 (units: fully_shard's parameter groups): a run whose
  // units the Units tab opens first with.
  bool sharded_units() const;
  const RankData* rank(int32_t rank) const;
};

// Load progress, written by load_model's threads and read by the UI thread (atomics only).
struct LoadProgress {
  std::atomic<double> fraction{0};
  std::atomic<bool> cancel{false};  // set to abandon the load (load_model then throws)
};

// Reads the whole trace at `path` into a Model (load.cpp): validates it (trace::Reader), reads
// the events' drawing columns and the memory samples in parallel id ranges on `threads`
// connections (0: one per core, at most 8), then per rank (one rank per thread) sorts each lane
// into rows, assembles the memory series and finds iterations and memory peaks. Rows with a
// negative rank or lane are skipped. Throws trace::TraceError naming the file for a missing,
// foreign, damaged, truncated or newer file, and when `progress->cancel` is set. A 10 M-event,
// 8-rank file takes about 1 s on two idle cores (bench/README.md, "Viewer"). Thread-safety: any
// thread; it shares nothing with other calls.
std::shared_ptr<const Model> load_model(const std::string& path, LoadProgress* progress = nullptr,
                                        int threads = 0);

// load_model but for the memory samples: the events' lanes, the run tables, iterations and the
// model's time range are in; memory_ready() is false until the FirstLoad's `memory` has run (a
// file without samples gives a ready model and an invalid load). About two thirds of
// load_model's time on a 10 M-event trace. Errors and thread-safety as load_model.
struct FirstLoad;
FirstLoad load_events_first(const std::string& path, LoadProgress* progress = nullptr, int threads = 0);

// The second half of a window's open (Note [Memory after the first frame]): reads the memory
// samples of the model load_events_first returned into that model, then raises its memory_in.
// Owns (shares) the model it writes; copies share the one load. Thread-safety: run it once, on
// one thread (the viewer's background), while other threads read the model's other fields.
class MemoryLoad {
 public:
  MemoryLoad() = default;  // nothing to read: valid() is false
  bool valid() const { return model_ != nullptr; }
  // Reads and publishes the samples, and returns null; or, when the file has samples of a rank
  // that neither its ranks table nor its events name (a file dpscope did not write), which the
  // first half's model has no place for, leaves that model's memory down and returns the
  // complete model load_model reads instead, for the caller to show. Throws trace::TraceError
  // as load_model does (cancelled: `cancel()` was called); the model's memory then stays down.
  std::shared_ptr<const Model> operator()() const;
  // How far the reading is (0 to 1); any thread.
  double fraction() const { return progress_ ? progress_->fraction.load() : 1.0; }
  // Asks a running load to stop early (it then throws); any thread.
  void cancel() const {
    if (progress_) progress_->cancel = true;
  }

 private:
  friend FirstLoad load_events_first(const std::string& path, LoadProgress* progress, int threads);
  std::shared_ptr<Model> model_;
  std::pair<int64_t, int64_t> rows_{1, 0};  // the memory.rowid range to read
  int threads_ = 1;
  std::shared_ptr<LoadProgress> progress_;
};

// A window's open of one trace: the model without its memory samples, and the load that reads
// them (Note [Memory after the first frame]).
struct FirstLoad {
  std::shared_ptr<const Model> model;
  MemoryLoad memory;
};

// `previous` brought up to date with its file, which a running training is still writing
// (--live): the run tables are read again, but of the events and memory samples only those
// added since (events.id above previous->events_read_to, memory.rowid above memory_read_to);
// lanes and memory series that got rows are rebuilt, the others copied. A file that was
// replaced (another inode, or ids that went back) is loaded afresh with load_model. Errors and
// thread-safety as load_model; `previous` is only read, and must be memory_ready().
std::shared_ptr<const Model> update_model(const Model& previous, LoadProgress* progress = nullptr,
                                          int threads = 1);

// What load_model derives from a model's lanes and memory series, found again after their times
// changed (cluster_model.cpp): each series' order and peak, each rank's memory at the peak,
// iterations, event count and lanes' drawing order, and the model's time range, events and
// iterations. The lanes must
// be built (build_rows). Pure; `model` is the caller's.
void derive_from_rows(Model& model);

// The text a span is known by in the timeline, find and range statistics: the phase or mark
// name, "hook", "bucket_ready", the collective's op ("allreduce"), "wait allreduce", a unit
// state ("gathering"). Pure.
std::string span_label(const Model& model, const Span& span);

// Sorts the spans of one lane into rows (Note [Lane rows]), fills end_max and row_start, and
// numbers each span's same_begin_index (Note [Span to event]), for which lane.spans must be in
// file order (events.id). Spans nearly sorted by begin (as a recorder writes them) sort in about
// linear time. Pure; thread-safe on distinct lanes.
void build_rows(Lane& lane);
// The same for the spans in `spans` (which replace lane.spans, and are left sorted by begin):
// the first `numbered` of them already carry their same_begin_index and come before the others
// in the file (update_model's lanes that gained rows), the others are in file order. `spans`
// and `span_rows` are scratch the caller may reuse across lanes, so that loading a big file
// allocates each lane's storage once (load.cpp).
void build_rows(Lane& lane, std::vector<Span>& spans, std::vector<uint16_t>& span_rows,
                size_t numbered);

}  // namespace dpscope::view
