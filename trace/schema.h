// The dpscope trace format: its version, every table and column, and the enumerations stored
// in them. Shared by everything that writes (Writer, Recorder, merge, synth) and by the Reader.
// docs/trace-format.md describes the same tables for users; keep the two in step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

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
// Each table is described here once: its columns in order, each with its SQL type and
// constraints, the schema version that added it and what it holds, and an enum of the column
// positions. The CREATE TABLE statements, the Writer's inserts, the Reader's selects and merge's
// copies are all made from these descriptions (the functions after them) and bind or read a
// column by its enumerator, never by a number; columns_as_of says what a file of an older
// version holds instead. Times are int64 nanoseconds on the rank's steady clock, aligned to
// rank 0 (see ranks.clock_offset_ns). NULL (kNone in memory) where a column does not apply.
// A new column goes at the end of its table, with `since` the new kSchemaVersion.

// One column of a table.
struct Column {
  // `position` is the column's enumerator in its table's enum, which must equal its index in
  // the table (Table checks it): the enum and the columns cannot drift apart.
  template <typename Position, typename = std::enable_if_t<std::is_enum_v<Position>>>
  constexpr Column(Position position, std::string_view name, std::string_view type, int since,
                   std::string_view meaning)
      : position(static_cast<int>(position)), name(name), type(type), since(since),
        meaning(meaning) {}

  int position;
  std::string_view name;
  // The SQL type and column constraints as CREATE TABLE declares them. DEFAULT, where there is
  // one, comes last: its value is also what a file older than `since` reads as (columns_as_of).
  std::string_view type;
  int since;  // the schema version that added the column
  std::string_view meaning;
};

// A table's columns, in order.
struct ColumnList {
  const Column* data;
  size_t count;
  constexpr size_t size() const { return count; }
  constexpr const Column& operator[](size_t i) const { return data[i]; }
  constexpr const Column* begin() const { return data; }
  constexpr const Column* end() const { return data + count; }
};

// One table: its name and columns, and a primary key over several columns (a one-column key is
// in that column's type).
struct Table {
  template <size_t N>
  constexpr Table(std::string_view name, const Column (&columns)[N],
                  std::string_view primary_key = "")
      : name(name), columns{columns, N}, primary_key(primary_key) {
    for (size_t i = 0; i < N; ++i) {
      // Not a constant expression: a description out of its enum's order does not compile.
      if (columns[i].position != static_cast<int>(i)) throw "columns out of their enum's order";
    }
  }

  std::string_view name;
  ColumnList columns;
  std::string_view primary_key;  // "rank, lane": PRIMARY KEY (rank, lane); "" for none
};

// A column's index in its table: its value's index in every statement made from the table
// below (a bound parameter's number is position + 1).
template <typename Position, typename = std::enable_if_t<std::is_enum_v<Position>>>
constexpr int column_position(Position column) {
  return static_cast<int>(column);
}

// Run-wide key/value metadata; the keys are trace/vocabulary.h's meta_key constants.
enum class MetaColumn { Key, Value };
inline constexpr Column kMetaColumns[] = {
    {MetaColumn::Key, "key", "TEXT PRIMARY KEY", 1, "the setting: a meta_key"},
    {MetaColumn::Value, "value", "TEXT NOT NULL", 1, "its value"},
};
inline constexpr Table kMetaTable{"meta", kMetaColumns};

// One row per rank in the file. status: 'running' while written, then 'complete',
// 'interrupted (SIGINT)', 'terminated: <why>', ... (trace/vocabulary.h's RankStatus); a killed
// writer leaves 'running', the DEFAULT (tests/trace/test_schema.cpp checks it is
// to_string(RankStatus::Running)).
enum class RanksColumn {
  Rank, Host, Pid, LocalRank, Device, ClockOffsetNs, StartNs, EndNs, Events, DroppedEvents,
  Status, ClockUncertaintyNs,
};
inline constexpr Column kRanksColumns[] = {
    {RanksColumn::Rank, "rank", "INTEGER PRIMARY KEY", 1, "the global rank"},
    {RanksColumn::Host, "host", "TEXT", 1, "host name"},
    {RanksColumn::Pid, "pid", "INTEGER", 1, "process id"},
    {RanksColumn::LocalRank, "local_rank", "INTEGER", 1, "rank on its host"},
    {RanksColumn::Device, "device", "TEXT", 1, "cpu, cuda:0, ..."},
    {RanksColumn::ClockOffsetNs, "clock_offset_ns", "INTEGER NOT NULL DEFAULT 0", 1,
     "added to this rank's clock to align it with rank 0's"},
    {RanksColumn::StartNs, "start_ns", "INTEGER", 1, "when the recorder opened"},
    {RanksColumn::EndNs, "end_ns", "INTEGER", 1, "when the recorder closed"},
    {RanksColumn::Events, "events", "INTEGER NOT NULL DEFAULT 0", 1, "events written"},
    {RanksColumn::DroppedEvents, "dropped_events", "INTEGER NOT NULL DEFAULT 0", 1,
     "events lost because buffers stayed full"},
    {RanksColumn::Status, "status", "TEXT NOT NULL DEFAULT 'running'", 1,
     "how the rank's recording ended, or 'running'"},
    {RanksColumn::ClockUncertaintyNs, "clock_uncertainty_ns", "INTEGER NOT NULL DEFAULT 0", 3,
     "how far clock_offset_ns may be off: half the best round trip through the store; 0 on "
     "rank 0's host, whose clock every rank there shares"},
};
inline constexpr Table kRanksTable{"ranks", kRanksColumns};

// Timeline lanes of each rank: threads, communication threads, CUDA streams, FSDP units.
enum class LanesColumn { Rank, Lane, Name, Kind };
inline constexpr Column kLanesColumns[] = {
    {LanesColumn::Rank, "rank", "INTEGER NOT NULL", 1, "the rank"},
    {LanesColumn::Lane, "lane", "INTEGER NOT NULL", 1, "lane id within the rank; 0 is main"},
    {LanesColumn::Name, "name", "TEXT NOT NULL", 1, "main, autograd, gloo comm, unit 3, ..."},
    {LanesColumn::Kind, "kind", "INTEGER NOT NULL", 1, "a LaneKind"},
};
inline constexpr Table kLanesTable{"lanes", kLanesColumns, "rank, lane"};

// Interned event and metric names; events.name and metrics.name refer to names.id.
enum class NamesColumn { Id, Name };
inline constexpr Column kNamesColumns[] = {
    {NamesColumn::Id, "id", "INTEGER PRIMARY KEY", 1, "the name's id"},
    {NamesColumn::Name, "name", "TEXT NOT NULL UNIQUE", 1, "the name"},
};
inline constexpr Table kNamesTable{"names", kNamesColumns};

// Every recorded event. Instants have end_ns = begin_ns. Events have no indexes while a
// recorder writes, so ingest stays fast; kIndexes are created when a file is closed or merged.
enum class EventsColumn {
  Id, Rank, Lane, Kind, Name, BeginNs, EndNs, Iteration, Param, Bucket, Unit, Op, Grp, Seq,
  Bytes, Dtype, Value, EnqueueNs, Flags, CpuBeginNs, CpuEndNs,
};
inline constexpr Column kEventsColumns[] = {
    {EventsColumn::Id, "id", "INTEGER PRIMARY KEY", 1, "increases in the order written"},
    {EventsColumn::Rank, "rank", "INTEGER NOT NULL", 1, "the rank"},
    {EventsColumn::Lane, "lane", "INTEGER NOT NULL", 1, "the lane it is drawn on"},
    {EventsColumn::Kind, "kind", "INTEGER NOT NULL", 1, "an EventKind"},
    {EventsColumn::Name, "name", "INTEGER", 1, "names.id"},
    {EventsColumn::BeginNs, "begin_ns", "INTEGER NOT NULL", 1, "when it began"},
    {EventsColumn::EndNs, "end_ns", "INTEGER NOT NULL", 1, "when it ended"},
    {EventsColumn::Iteration, "iteration", "INTEGER", 1,
     "the optimizer step whose work it is (Note [Work outside iterations])"},
    {EventsColumn::Param, "param", "INTEGER", 1, "params.param"},
    {EventsColumn::Bucket, "bucket", "INTEGER", 1, "a DDP bucket"},
    {EventsColumn::Unit, "unit", "INTEGER", 1, "units.unit"},
    {EventsColumn::Op, "op", "INTEGER", 1, "a CollectiveOp, or a UnitState for unit states"},
    {EventsColumn::Grp, "grp", "INTEGER", 1, "a collective's process group"},
    {EventsColumn::Seq, "seq", "INTEGER", 1, "a collective's sequence number in its group"},
    {EventsColumn::Bytes, "bytes", "INTEGER", 1, "a collective's input bytes on this rank"},
    {EventsColumn::Dtype, "dtype", "INTEGER", 1, "a collective's DType"},
    {EventsColumn::Value, "value", "INTEGER", 1, "hooks: bucket fill bytes after; marks: any"},
    {EventsColumn::EnqueueNs, "enqueue_ns", "INTEGER", 1, "when a collective was issued"},
    {EventsColumn::Flags, "flags", "INTEGER NOT NULL DEFAULT 0", 1, "kFlag* bits"},
    {EventsColumn::CpuBeginNs, "cpu_begin_ns", "INTEGER", 4,
     "the recording thread's CPU time at begin (Note [Thread CPU time])"},
    {EventsColumn::CpuEndNs, "cpu_end_ns", "INTEGER", 4,
     "the recording thread's CPU time at end (Note [Thread CPU time])"},
};
inline constexpr Table kEventsTable{"events", kEventsColumns};

// Memory counters: the bytes held by `category` on `rank` from ts_ns on.
enum class MemoryColumn { Rank, TsNs, Category, Bytes };
inline constexpr Column kMemoryColumns[] = {
    {MemoryColumn::Rank, "rank", "INTEGER NOT NULL", 1, "the rank"},
    {MemoryColumn::TsNs, "ts_ns", "INTEGER NOT NULL", 1, "from this time on"},
    {MemoryColumn::Category, "category", "INTEGER NOT NULL", 1, "a MemoryCategory"},
    {MemoryColumn::Bytes, "bytes", "INTEGER NOT NULL", 1, "the bytes it holds"},
};
inline constexpr Table kMemoryTable{"memory", kMemoryColumns};

// Per-iteration metrics (loss, step_ms, accuracy, ...), by name.
enum class MetricsColumn { Rank, Iteration, Name, Value };
inline constexpr Column kMetricsColumns[] = {
    {MetricsColumn::Rank, "rank", "INTEGER NOT NULL", 1, "the rank"},
    {MetricsColumn::Iteration, "iteration", "INTEGER NOT NULL", 1, "the iteration"},
    {MetricsColumn::Name, "name", "INTEGER NOT NULL", 1, "names.id"},
    {MetricsColumn::Value, "value", "REAL NOT NULL", 1, "the value"},
};
inline constexpr Table kMetricsTable{"metrics", kMetricsColumns};

// The model's parameters in registration order (DDP's and FSDP's index).
enum class ParamsColumn {
  Param, Name, Shape, Numel, Dtype, RequiresGrad, Sparse, Bucket, RebuiltBucket, Unit,
  UnitOffset,
};
inline constexpr Column kParamsColumns[] = {
    {ParamsColumn::Param, "param", "INTEGER PRIMARY KEY", 1, "index in registration order"},
    {ParamsColumn::Name, "name", "TEXT NOT NULL", 1, "fc0.weight, ..."},
    {ParamsColumn::Shape, "shape", "TEXT NOT NULL", 1, "a JSON array: [10,64]"},
    {ParamsColumn::Numel, "numel", "INTEGER NOT NULL", 1, "elements"},
    {ParamsColumn::Dtype, "dtype", "INTEGER NOT NULL", 1, "a DType"},
    {ParamsColumn::RequiresGrad, "requires_grad", "INTEGER NOT NULL DEFAULT 1", 1, "1 or 0"},
    {ParamsColumn::Sparse, "sparse", "INTEGER NOT NULL DEFAULT 0", 1,
     "1 for sparse gradients (alone in its bucket)"},
    {ParamsColumn::Bucket, "bucket", "INTEGER", 1, "DDP: its bucket in the initial plan"},
    {ParamsColumn::RebuiltBucket, "rebuilt_bucket", "INTEGER", 1,
     "DDP: its bucket in the plan rebuilt after iteration 0"},
    {ParamsColumn::Unit, "unit", "INTEGER", 1, "FSDP: the unit whose flat parameter holds it"},
    {ParamsColumn::UnitOffset, "unit_offset", "INTEGER", 1,
     "FSDP: its first element in that flat parameter"},
};
inline constexpr Table kParamsTable{"params", kParamsColumns};

// DDP buckets: generation 0 is the initial plan, 1 the plan rebuilt after iteration 0.
enum class BucketsColumn { Generation, Bucket, Bytes, Numel, Dtype };
inline constexpr Column kBucketsColumns[] = {
    {BucketsColumn::Generation, "generation", "INTEGER NOT NULL", 1, "0 initial, 1 rebuilt"},
    {BucketsColumn::Bucket, "bucket", "INTEGER NOT NULL", 1, "index: the launch order"},
    {BucketsColumn::Bytes, "bytes", "INTEGER NOT NULL", 1, "size in bytes"},
    {BucketsColumn::Numel, "numel", "INTEGER NOT NULL", 1, "elements"},
    {BucketsColumn::Dtype, "dtype", "INTEGER NOT NULL", 1, "a DType"},
};
inline constexpr Table kBucketsTable{"buckets", kBucketsColumns, "generation, bucket"};

// The parameters of each bucket in slot order, with their element offset in the bucket.
enum class BucketParamsColumn { Generation, Bucket, Position, Param, Offset };
inline constexpr Column kBucketParamsColumns[] = {
    {BucketParamsColumn::Generation, "generation", "INTEGER NOT NULL", 1, "buckets.generation"},
    {BucketParamsColumn::Bucket, "bucket", "INTEGER NOT NULL", 1, "buckets.bucket"},
    {BucketParamsColumn::Position, "position", "INTEGER NOT NULL", 1, "slot order"},
    {BucketParamsColumn::Param, "param", "INTEGER NOT NULL", 1, "params.param"},
    {BucketParamsColumn::Offset, "offset", "INTEGER NOT NULL", 1, "its first element in it"},
};
inline constexpr Table kBucketParamsTable{"bucket_params", kBucketParamsColumns,
                                          "generation, bucket, position"};

// FSDP units (flat parameters).
enum class UnitsColumn { Unit, Name, Parent, Numel, PaddedNumel, ShardNumel };
inline constexpr Column kUnitsColumns[] = {
    {UnitsColumn::Unit, "unit", "INTEGER PRIMARY KEY", 1, "index (the root is a unit too)"},
    {UnitsColumn::Name, "name", "TEXT NOT NULL", 1, "the wrapped module's name"},
    {UnitsColumn::Parent, "parent", "INTEGER", 1, "the enclosing unit; NULL for the root"},
    {UnitsColumn::Numel, "numel", "INTEGER NOT NULL", 1, "elements of the flat parameter"},
    {UnitsColumn::PaddedNumel, "padded_numel", "INTEGER NOT NULL", 1,
     "padded to a multiple of the world size"},
    {UnitsColumn::ShardNumel, "shard_numel", "INTEGER NOT NULL", 1, "what each rank keeps"},
};
inline constexpr Table kUnitsTable{"units", kUnitsColumns};

// Each rank's shard of each unit: elements [shard_begin, shard_end) of the padded flat
// parameter; real_numel of them are parameters, the rest padding.
enum class UnitShardsColumn { Unit, Rank, ShardBegin, ShardEnd, RealNumel };
inline constexpr Column kUnitShardsColumns[] = {
    {UnitShardsColumn::Unit, "unit", "INTEGER NOT NULL", 1, "the unit"},
    {UnitShardsColumn::Rank, "rank", "INTEGER NOT NULL", 1, "the rank"},
    {UnitShardsColumn::ShardBegin, "shard_begin", "INTEGER NOT NULL", 1, "its first element"},
    {UnitShardsColumn::ShardEnd, "shard_end", "INTEGER NOT NULL", 1, "past its last element"},
    {UnitShardsColumn::RealNumel, "real_numel", "INTEGER NOT NULL", 1,
     "how many are parameters, not padding"},
};
inline constexpr Table kUnitShardsTable{"unit_shards", kUnitShardsColumns, "unit, rank"};

// The table whose columns a column enum names (what the Writer inserts into and the Reader
// selects from).
constexpr const Table& table_of(MetaColumn) { return kMetaTable; }
constexpr const Table& table_of(RanksColumn) { return kRanksTable; }
constexpr const Table& table_of(LanesColumn) { return kLanesTable; }
constexpr const Table& table_of(NamesColumn) { return kNamesTable; }
constexpr const Table& table_of(EventsColumn) { return kEventsTable; }
constexpr const Table& table_of(MemoryColumn) { return kMemoryTable; }
constexpr const Table& table_of(MetricsColumn) { return kMetricsTable; }
constexpr const Table& table_of(ParamsColumn) { return kParamsTable; }
constexpr const Table& table_of(BucketsColumn) { return kBucketsTable; }
constexpr const Table& table_of(BucketParamsColumn) { return kBucketParamsTable; }
constexpr const Table& table_of(UnitsColumn) { return kUnitsTable; }
constexpr const Table& table_of(UnitShardsColumn) { return kUnitShardsTable; }
// The description of one column, by its enumerator.
template <typename Position>
constexpr const Column& column_of(Position column) {
  return table_of(column).columns[static_cast<size_t>(column_position(column))];
}

// Every table of a trace, in the order a new file creates them. The reader requires each.
inline constexpr Table kTables[] = {
    kMetaTable,   kRanksTable,   kLanesTable,   kNamesTable,        kEventsTable,
    kMemoryTable, kMetricsTable, kParamsTable,  kBucketsTable,      kBucketParamsTable,
    kUnitsTable,  kUnitShardsTable,
};

// The lookup tables, one for each enumeration above: (id, name) of every value, the name its
// to_string. Created after kTables and filled when a file is created.
enum class LookupColumn { Id, Name };
inline constexpr Column kLookupColumns[] = {
    {LookupColumn::Id, "id", "INTEGER PRIMARY KEY", 1, "the value"},
    {LookupColumn::Name, "name", "TEXT NOT NULL", 1, "its to_string"},
};
struct LookupTable {
  Table table;
  int count;                                // the enumeration's values are 0 .. count - 1
  std::string_view (*spelling)(int value);  // to_string of the value
};
inline constexpr LookupTable kLookupTables[] = {
    {{"event_kinds", kLookupColumns}, kEventKindCount,
     [](int v) { return to_string(static_cast<EventKind>(v)); }},
    {{"collective_ops", kLookupColumns}, kCollectiveOpCount,
     [](int v) { return to_string(static_cast<CollectiveOp>(v)); }},
    {{"unit_states", kLookupColumns}, kUnitStateCount,
     [](int v) { return to_string(static_cast<UnitState>(v)); }},
    {{"dtypes", kLookupColumns}, kDTypeCount,
     [](int v) { return to_string(static_cast<DType>(v)); }},
    {{"memory_categories", kLookupColumns}, kMemoryCategoryCount,
     [](int v) { return to_string(static_cast<MemoryCategory>(v)); }},
    {{"lane_kinds", kLookupColumns}, kLaneKindCount,
     [](int v) { return to_string(static_cast<LaneKind>(v)); }},
};

// A readable view of events with every enumeration spelled out; created after every table.
inline constexpr const char* kEventsNamedView =
    "CREATE VIEW events_named AS SELECT e.id, e.rank, e.lane, l.name AS lane_name,"
    " k.name AS kind, n.name AS name, e.begin_ns, e.end_ns, e.end_ns - e.begin_ns AS dur_ns,"
    " e.iteration, e.param, e.bucket, e.unit, o.name AS op, e.grp, e.seq, e.bytes,"
    " d.name AS dtype, e.value, e.enqueue_ns, e.flags, e.cpu_begin_ns, e.cpu_end_ns,"
    " e.cpu_end_ns - e.cpu_begin_ns AS cpu_ns FROM events e"
    " LEFT JOIN lanes l ON l.rank = e.rank AND l.lane = e.lane"
    " LEFT JOIN event_kinds k ON k.id = e.kind LEFT JOIN names n ON n.id = e.name"
    " LEFT JOIN collective_ops o ON o.id = e.op AND e.kind IN (5, 6)"
    " LEFT JOIN dtypes d ON d.id = e.dtype";

// ---- Statements made from the descriptions -------------------------------------------------
// CREATE TABLE for `table`, as a new file has it.
std::string create_table_sql(const Table& table);

enum class OnConflict { Abort, Ignore, Replace };
// "INSERT [OR IGNORE | OR REPLACE] INTO <table> (<every column, in order>)": the Writer adds
// VALUES, merge a SELECT.
std::string insert_into(const Table& table, OnConflict conflict);

// What a file of schema version `version` holds of `column`, as a SELECT reads it: the column
// (after `qualifier`, "e."), or, for a column added after `version`, its stand-in: its DEFAULT,
// else NULL. The one place that knows how files of older versions differ; the Reader and merge
// read every table through it.
std::string column_as_of(const Column& column, int version, std::string_view qualifier = "");
// Every column of `table` so, in order: item i reads column i, whatever the file's version.
std::vector<std::string> columns_as_of(const Table& table, int version,
                                       std::string_view qualifier = "");
// The DEFAULT of `column` as SQL ("0", "'running'"), or "" where it has none.
std::string_view column_default(const Column& column);
// "a, b, c".
std::string comma_separated(const std::vector<std::string>& items);

// Created when a file is finished (Recorder::close, merge, synth).
inline constexpr const char* kIndexes[] = {
    "CREATE INDEX IF NOT EXISTS events_by_lane ON events (rank, lane, begin_ns)",
    "CREATE INDEX IF NOT EXISTS events_by_kind ON events (kind, rank, begin_ns)",
    "CREATE INDEX IF NOT EXISTS memory_by_rank ON memory (rank, ts_ns)",
};

}  // namespace dpscope::trace
