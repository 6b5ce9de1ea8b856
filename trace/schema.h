// The dpscope trace format: its version, every table and column, and the enumerations stored
// in them. Shared by everything that writes (Writer, Recorder, merge, synth) and by the Reader.
// docs/trace-format.md describes the same tables for users; keep the two in step.
#pragma once

#include <cstdint>
#include <string_view>

namespace dpscope::trace {

// ---- Version and identity ------------------------------------------------------------------
// Bump kSchemaVersion on any change a reader of the previous version would misread; the reader
// refuses files with a newer version and names both versions in its error.
// 2: memory category 13 `data`.
// 3: ranks.clock_uncertainty_ns.
// 4: events.cpu_begin_ns and events.cpu_end_ns (Note [Thread CPU time]).
// 5: collective ops 5 `alltoall` and 6 `send_recv`, event flag kFlagGpuKernel (imported PyTorch
//    profiler traces, docs/kineto.md).
inline constexpr int kSchemaVersion = 5;
// Stored as `PRAGMA application_id`: tells a dpscope trace from any other SQLite database.
inline constexpr int32_t kApplicationId = 0x44505343;  // "DPSC"

// A column value that is SQL NULL is held as kNone in memory (iteration of construction work,
// the bucket of a phase, ...).
//
// Note [Work outside iterations]
// An event's iteration is the optimizer step whose work it is. Work outside every step has
// none (kNone): construction, an evaluation forward (gradients off: DDP's buffer broadcast,
// FSDP's all-gathers and unit states), gathering a full state dict. The engine tags it so
// (DistributedDataParallel::pre_forward, FullyShardedDataParallel's WorkScope), and the trainer
// records an evaluation's span as an `evaluation` phase of no iteration. Everything per
// iteration relies on it: the collectives and comm of a step, its unit states, what-if's
// replay, and the memory windows of the steps (analysis/stats.cpp), which end with the last
// iteration's last event — an evaluation after the last step would otherwise count in its
// figures and in the steps' peak.
inline constexpr int32_t kNone = -1;
inline constexpr int64_t kNone64 = -1;

// Note [Thread CPU time]
// Beside its wall-clock begin and end, an event the engine records from the thread that does
// the work carries that thread's CPU time (CLOCK_THREAD_CPUTIME_ID, trace/clock.h) at the same
// two moments: how much the thread computed in between, whatever else the machine ran. It is
// what a cluster clock replays compute with, instead of this machine's wall time.
// - Phases: cpu_begin_ns and cpu_end_ns, read on the recording thread.
// - Collectives: cpu_begin_ns is the issuing thread's CPU time when it issued the collective
//   (with enqueue_ns); cpu_end_ns is NULL, the transfer being the link's, not a thread's.
// - Collective waits: the waiting thread's CPU time when the wait began and ended.
// - Gradient hooks: cpu_end_ns only, the moment the gradient is ready, which the cluster clock
//   and the what-if on it time the buckets by; a hook preempted between its collective's issue
//   and its end would otherwise be placed by wall time. cpu_begin_ns is NULL: one reading a
//   gradient on the hot path, the clock being a system call (0.3–1 µs, trace/clock.h). Traces
//   before this reading (schema version 4 all the same) have NULL there, and their hook ends
//   are placed between the points around them.
// - Everything else: NULL. Bucket instants lie inside the hooks; also unit states, marks, files
//   of schema version 3 and older. Synthesized traces (formats/synth.h) carry them as a thread
//   at full speed would.
// A step records 2 readings a phase, 3 a bucket's collective (its issue and wait) and 1 a
// gradient: some 30 for a 3-bucket, 8-parameter DDP step, 15–40 µs here, 90 µs for the GPT's 54
// gradients on its 190 ms step (bench/README.md), against steps of milliseconds.
// The values are a thread's own clock, comparable only between events of the same thread (the
// same rank and lane, and for a collective the lane that issued it); merge and clock alignment
// leave them as recorded. LibTorch's intra-op threads are not counted: with `--threads N` above
// 1 a span's computation is partly on other threads (the meta key intra_op_threads says how many).

// ---- Enumerations --------------------------------------------------------------------------
// Every enumeration is also written into its own lookup table (event_kinds, collective_ops, ...)
// so that SQL users can join names instead of remembering numbers. Values are part of the
// format: append, never renumber.

enum class TraceLevel : uint8_t {
  Off = 0,      // nothing is recorded; each call site costs one branch
  Summary = 1,  // phases, collectives and their waits, FSDP unit states, metrics
  Full = 2,     // everything: also hook firings, bucket events, memory samples, marks
};

enum class EventKind : uint8_t {
  Phase = 0,           // slice: forward, backward, optimizer_step, iteration, construction steps
  Hook = 1,            // slice: a gradient hook firing; param, bucket, value = bucket fill bytes after
  BucketReady = 2,     // instant: every gradient of `bucket` is in place
  BucketLaunch = 3,    // instant: `bucket`'s collective was issued (seq = its sequence number)
  BucketDone = 4,      // instant: `bucket`'s result was written back
  Collective = 5,      // slice on the lane where it runs: op, grp, seq, bytes, dtype, enqueue_ns
  CollectiveWait = 6,  // slice on the waiting thread: op, grp, seq
  UnitState = 7,       // slice on an FSDP unit's lane: unit, op = UnitState
  Mark = 8,            // instant or slice: anything else, by name
};
inline constexpr int kEventKindCount = 9;

enum class CollectiveOp : uint8_t {
  Broadcast = 0,
  AllReduce = 1,
  AllGather = 2,
  ReduceScatter = 3,
  Barrier = 4,
  AllToAll = 5,  // since version 5: imported traces (NCCL's and Gloo's all_to_all)
  SendRecv = 6,  // since version 5: imported traces (NCCL's point-to-point send/recv kernels)
};
inline constexpr int kCollectiveOpCount = 7;

// The FSDP unit state that a UnitState slice spans; a unit is `sharded` between slices.
enum class UnitState : uint8_t {
  Gathering = 0,  // all-gather of the full parameter in flight
  Full = 1,       // full parameter materialised
  Reducing = 2,   // gradient reduce-scatter in flight
};
inline constexpr int kUnitStateCount = 3;

enum class DType : uint8_t {
  Float32 = 0,
  Float16 = 1,
  BFloat16 = 2,
  Float64 = 3,
  Int64 = 4,
  Int32 = 5,
  Int8 = 6,
  UInt8 = 7,
  Bool = 8,
};
inline constexpr int kDTypeCount = 9;

// Memory categories. The stacked ones (is_stacked) hold every byte the engine's tracking
// allocator counts, each byte in exactly one; the allocator read-outs (allocator_total, cuda_*)
// are totals read from an allocator and drawn as lines.
enum class MemoryCategory : uint8_t {
  Parameters = 0,
  Gradients = 1,
  Buckets = 2,
  FullParameters = 3,
  Shards = 4,
  GradientShards = 5,
  FullGradients = 6,
  OptimizerState = 7,
  Activations = 8,
  Other = 9,
  AllocatorTotal = 10,  // the tracking CPU allocator's bytes in use
  CudaAllocated = 11,   // CUDA caching allocator: allocated bytes
  CudaReserved = 12,    // CUDA caching allocator: reserved bytes
  Data = 13,            // the training data: the data set and the batches drawn from it
};
inline constexpr int kMemoryCategoryCount = 14;
constexpr bool is_stacked(MemoryCategory c) {
  return c != MemoryCategory::AllocatorTotal && c != MemoryCategory::CudaAllocated &&
         c != MemoryCategory::CudaReserved;
}
// The stacked categories in the order they stack (bottom first), as the viewer draws them.
inline constexpr MemoryCategory kStackedCategories[] = {
    MemoryCategory::Parameters,     MemoryCategory::Gradients,      MemoryCategory::Buckets,
    MemoryCategory::FullParameters, MemoryCategory::Shards,         MemoryCategory::GradientShards,
    MemoryCategory::FullGradients,  MemoryCategory::OptimizerState, MemoryCategory::Activations,
    MemoryCategory::Data,           MemoryCategory::Other};
inline constexpr int kMemoryCategoryStacked = 11;  // the size of kStackedCategories
static_assert(sizeof(kStackedCategories) / sizeof(kStackedCategories[0]) == kMemoryCategoryStacked);

enum class LaneKind : uint8_t {
  Host = 0,     // a host thread: main / autograd (phases, hooks, waits)
  Comm = 1,     // a communication thread (gloo) running collectives
  Stream = 2,   // a CUDA stream (nccl collectives, GPU compute spans)
  Unit = 3,     // an FSDP unit's state
};
inline constexpr int kLaneKindCount = 4;

// Event flags (events.flags, a bit set).

// An FSDP all-gather issued ahead of need.
inline constexpr uint8_t kFlagPrefetch = 1 << 0;
// Work of the backward pass (FSDP all-gather before backward).
inline constexpr uint8_t kFlagBackward = 1 << 1;
// A reduce-scatter that went through the bucketer.
inline constexpr uint8_t kFlagBucketed = 1 << 2;
// begin/end come from CUDA events (converted to the host clock).
inline constexpr uint8_t kFlagGpuTime = 1 << 3;
// Run by the thread that waited for it (Note [Run on wait]).
inline constexpr uint8_t kFlagRanOnWaiter = 1 << 4;
// Since version 5: a GPU kernel, memcpy or memset as a profiler recorded it on a stream lane
// (imported PyTorch profiler traces: a Mark, or a Collective for a communication kernel, named
// as the profiler named it, enqueue_ns its launch's CPU time). analysis/gpu_breakdown.h.
inline constexpr uint8_t kFlagGpuKernel = 1 << 5;

// Names as stored in the lookup tables, in `stats --json` and in exports.
std::string_view to_string(EventKind v);
std::string_view to_string(CollectiveOp v);
std::string_view to_string(UnitState v);
std::string_view to_string(DType v);
std::string_view to_string(MemoryCategory v);
std::string_view to_string(LaneKind v);
std::string_view to_string(TraceLevel v);
// Parses "off" | "summary" | "full"; false for anything else.
bool parse_trace_level(std::string_view text, TraceLevel* out);

// ---- Tables --------------------------------------------------------------------------------
// One DDL statement per table. Times are int64 nanoseconds on the rank's steady clock, aligned
// to rank 0 (see ranks.clock_offset_ns). Events have no indexes while a recorder writes, so
// ingest stays fast; kIndexes are created when a file is closed or merged.
inline constexpr const char* kTables[] = {
    // Run-wide key/value metadata; the keys are trace/vocabulary.h's meta_key constants.
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",

    // One row per rank in the file. status: 'running' while written, then 'complete',
    // 'interrupted (SIGINT)', 'terminated: <why>', ...; a killed writer leaves 'running'.
    "CREATE TABLE ranks (rank INTEGER PRIMARY KEY, host TEXT, pid INTEGER, local_rank INTEGER,"
    // clock_uncertainty_ns: how far clock_offset_ns may be off (half the best round trip through
    // the store; 0 on rank 0's host, whose clock every rank there shares). Since version 3.
    " device TEXT, clock_offset_ns INTEGER NOT NULL DEFAULT 0, start_ns INTEGER, end_ns INTEGER,"
    " events INTEGER NOT NULL DEFAULT 0, dropped_events INTEGER NOT NULL DEFAULT 0,"
    " status TEXT NOT NULL DEFAULT 'running', clock_uncertainty_ns INTEGER NOT NULL DEFAULT 0)",

    // Timeline lanes of each rank: threads, communication threads, CUDA streams, FSDP units.
    "CREATE TABLE lanes (rank INTEGER NOT NULL, lane INTEGER NOT NULL, name TEXT NOT NULL,"
    " kind INTEGER NOT NULL, PRIMARY KEY (rank, lane))",

    // Interned event and metric names; events.name and metrics.name refer to names.id.
    "CREATE TABLE names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",

    // Every recorded event. Instants have end_ns = begin_ns. NULL where a column does not apply.
    // cpu_begin_ns / cpu_end_ns: see Note [Thread CPU time].
    "CREATE TABLE events (id INTEGER PRIMARY KEY, rank INTEGER NOT NULL, lane INTEGER NOT NULL,"
    " kind INTEGER NOT NULL, name INTEGER, begin_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
    " iteration INTEGER, param INTEGER, bucket INTEGER, unit INTEGER, op INTEGER, grp INTEGER,"
    " seq INTEGER, bytes INTEGER, dtype INTEGER, value INTEGER, enqueue_ns INTEGER,"
    " flags INTEGER NOT NULL DEFAULT 0, cpu_begin_ns INTEGER, cpu_end_ns INTEGER)",

    // Memory counters: the bytes held by `category` on `rank` from ts_ns on.
    "CREATE TABLE memory (rank INTEGER NOT NULL, ts_ns INTEGER NOT NULL,"
    " category INTEGER NOT NULL, bytes INTEGER NOT NULL)",

    // Per-iteration metrics (loss, step_ms, accuracy, ...), by name.
    "CREATE TABLE metrics (rank INTEGER NOT NULL, iteration INTEGER NOT NULL,"
    " name INTEGER NOT NULL, value REAL NOT NULL)",

    // The model's parameters in registration order (DDP's and FSDP's index). shape is a JSON
    // array. bucket/rebuilt_bucket: DDP bucket in the initial and the rebuilt plan. unit and
    // unit_offset: the FSDP unit and the element offset inside its flat parameter.
    "CREATE TABLE params (param INTEGER PRIMARY KEY, name TEXT NOT NULL, shape TEXT NOT NULL,"
    " numel INTEGER NOT NULL, dtype INTEGER NOT NULL, requires_grad INTEGER NOT NULL DEFAULT 1,"
    " sparse INTEGER NOT NULL DEFAULT 0, bucket INTEGER, rebuilt_bucket INTEGER, unit INTEGER,"
    " unit_offset INTEGER)",

    // DDP buckets: generation 0 is the initial plan, 1 the plan rebuilt after iteration 0.
    "CREATE TABLE buckets (generation INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    " bytes INTEGER NOT NULL, numel INTEGER NOT NULL, dtype INTEGER NOT NULL,"
    " PRIMARY KEY (generation, bucket))",
    // The parameters of each bucket in slot order, with their element offset in the bucket.
    "CREATE TABLE bucket_params (generation INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    " position INTEGER NOT NULL, param INTEGER NOT NULL, offset INTEGER NOT NULL,"
    " PRIMARY KEY (generation, bucket, position))",

    // FSDP units (flat parameters). parent is NULL for the root.
    "CREATE TABLE units (unit INTEGER PRIMARY KEY, name TEXT NOT NULL, parent INTEGER,"
    " numel INTEGER NOT NULL, padded_numel INTEGER NOT NULL, shard_numel INTEGER NOT NULL)",
    // Each rank's shard of each unit: elements [shard_begin, shard_end) of the padded flat
    // parameter; real_numel of them are parameters, the rest padding.
    "CREATE TABLE unit_shards (unit INTEGER NOT NULL, rank INTEGER NOT NULL,"
    " shard_begin INTEGER NOT NULL, shard_end INTEGER NOT NULL, real_numel INTEGER NOT NULL,"
    " PRIMARY KEY (unit, rank))",

    // Lookup tables for the enumerations above.
    "CREATE TABLE event_kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
    "CREATE TABLE collective_ops (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
    "CREATE TABLE unit_states (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
    "CREATE TABLE dtypes (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
    "CREATE TABLE memory_categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
    "CREATE TABLE lane_kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",

    // A readable view of events with every enumeration spelled out.
    "CREATE VIEW events_named AS SELECT e.id, e.rank, e.lane, l.name AS lane_name,"
    " k.name AS kind, n.name AS name, e.begin_ns, e.end_ns, e.end_ns - e.begin_ns AS dur_ns,"
    " e.iteration, e.param, e.bucket, e.unit, o.name AS op, e.grp, e.seq, e.bytes,"
    " d.name AS dtype, e.value, e.enqueue_ns, e.flags, e.cpu_begin_ns, e.cpu_end_ns,"
    " e.cpu_end_ns - e.cpu_begin_ns AS cpu_ns FROM events e"
    " LEFT JOIN lanes l ON l.rank = e.rank AND l.lane = e.lane"
    " LEFT JOIN event_kinds k ON k.id = e.kind LEFT JOIN names n ON n.id = e.name"
    " LEFT JOIN collective_ops o ON o.id = e.op AND e.kind IN (5, 6)"
    " LEFT JOIN dtypes d ON d.id = e.dtype",
};

// Created when a file is finished (Recorder::close, merge, synth).
inline constexpr const char* kIndexes[] = {
    "CREATE INDEX IF NOT EXISTS events_by_lane ON events (rank, lane, begin_ns)",
    "CREATE INDEX IF NOT EXISTS events_by_kind ON events (kind, rank, begin_ns)",
    "CREATE INDEX IF NOT EXISTS memory_by_rank ON memory (rank, ts_ns)",
};

}  // namespace dpscope::trace
