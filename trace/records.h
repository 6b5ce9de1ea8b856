// The C++ rows of the trace format (see schema.h): what the recorder buffers, what the writer
// inserts and what the reader returns. Plain values, no behaviour; safe to copy anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/schema.h"
#include "trace/vocabulary.h"

namespace dpscope::trace {

using NameId = int32_t;  // an interned name: names.id
using LaneId = int16_t;  // a lane of one rank: lanes.lane

// One row of `events`. 96 bytes, copied into a per-thread buffer on the hot path.
// Fields that do not apply stay kNone / kNone64 and are stored as NULL.
struct Event {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;  // == begin_ns for an instant
  // The recording thread's CPU time at begin and end; see Note [Thread CPU time].
  int64_t cpu_begin_ns = kNone64;
  int64_t cpu_end_ns = kNone64;
  int64_t enqueue_ns = kNone64;  // collectives: when the caller issued it
  int64_t bytes = kNone64;       // collectives: payload bytes
  int64_t value = kNone64;       // hooks: bucket fill bytes after the copy; marks: free use
  int64_t seq = kNone64;         // collectives: the process group's sequence number
  NameId name = kNone;
  int32_t iteration = kNone;     // kNone: construction, before the first iteration
  int32_t param = kNone;
  int32_t bucket = kNone;
  int32_t unit = kNone;
  LaneId lane = 0;
  int16_t rank = 0;              // filled by the writer from the recorder's rank
  EventKind kind = EventKind::Mark;
  uint8_t op = 0xff;             // CollectiveOp for collectives, UnitState for unit states
  uint8_t dtype = 0xff;          // DType; 0xff = none
  uint8_t flags = 0;             // kFlag* bits (schema.h)
  int16_t grp = kNone;           // process group id
};
static_assert(sizeof(Event) == 96, "Event is copied on the hot path; keep it at 96 bytes");

// The columns of an event that a timeline draws with, for bulk loading (Reader::scan_event_spans):
// 32 bytes instead of Event's 80, read from SQLite at a fraction of the cost. Everything else
// about the event is one Reader::events() query away.
struct EventSpan {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  NameId name = kNone;
  // Collectives, waits and launches: the low 32 bits of events.seq. Other events (which have no
  // seq): events.iteration, so phases and hooks know their iteration. kNone when NULL.
  int32_t seq_or_iteration = kNone;
  int16_t rank = 0;
  LaneId lane = 0;
  int16_t bucket_or_unit = kNone;   // events.bucket, or events.unit where bucket is NULL
  EventKind kind = EventKind::Mark;
  uint8_t op = 0xff;                // CollectiveOp or UnitState; 0xff when NULL
};
static_assert(sizeof(EventSpan) == 32, "EventSpan is held by the million in the viewer");

struct MemorySample {
  int32_t rank = 0;
  int64_t ts_ns = 0;
  MemoryCategory category = MemoryCategory::Other;
  int64_t bytes = 0;
};

struct Metric {
  int32_t rank = 0;
  int32_t iteration = 0;
  std::string name;
  double value = 0;
};

struct RankInfo {
  int32_t rank = 0;
  std::string host;
  int64_t pid = 0;
  int32_t local_rank = 0;
  std::string device = "cpu";
  int64_t clock_offset_ns = 0;
  int64_t clock_uncertainty_ns = 0;  // how far clock_offset_ns may be off (see schema.h, ranks)
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t events = 0;
  int64_t dropped_events = 0;
  // ranks.status: a RankStatus's word, or the text that says how the rank ended.
  std::string status{to_string(RankStatus::Running)};
};

struct LaneInfo {
  int32_t rank = 0;
  LaneId lane = 0;
  std::string name;
  LaneKind kind = LaneKind::Host;
};

struct ParamInfo {
  int32_t index = 0;
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  DType dtype = DType::Float32;
  bool requires_grad = true;
  bool sparse = false;
  int32_t bucket = kNone;
  int32_t rebuilt_bucket = kNone;
  int32_t unit = kNone;
  int64_t unit_offset = kNone64;
};

struct BucketInfo {
  int32_t generation = 0;  // 0: initial plan; 1: rebuilt after the first iteration
  int32_t index = 0;
  int64_t bytes = 0;
  int64_t numel = 0;
  DType dtype = DType::Float32;
  std::vector<int32_t> params;   // slot order
  std::vector<int64_t> offsets;  // element offset of each param in the bucket
};

struct UnitInfo {
  int32_t index = 0;
  std::string name;
  int32_t parent = kNone;
  int64_t numel = 0;
  int64_t padded_numel = 0;
  int64_t shard_numel = 0;
};

struct UnitShard {
  int32_t unit = 0;
  int32_t rank = 0;
  int64_t shard_begin = 0;
  int64_t shard_end = 0;
  int64_t real_numel = 0;
};

// Formats a shape as the JSON array stored in params.shape ("[10,5]"); parses it back, leaving
// out what is not an int64_t (never throws).
std::string shape_to_json(const std::vector<int64_t>& shape);
std::vector<int64_t> shape_from_json(const std::string& text);

}  // namespace dpscope::trace
