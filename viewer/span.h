// The viewer's record of one event on the timeline (Span): its times, its kind, the few fields
// by kind that drawing, labels, find and flows read, and the key back to the full event, in 32
// bytes, since a big trace holds ten million of them. See Note [Span fields], Note [Span to event].
#pragma once

#include <cstdint>
#include <optional>

#include "trace/records.h"
#include "trace/schema.h"

namespace dpscope::view {

// Note [Span fields]
// A Span keeps of its event only what the panels read for every span in view: colours, labels,
// find, flows, mismatches and iterations. Which fields that is depends on the kind, so they sit
// in a union tagged by `kind` and a Span stays 32 bytes (a 10 M-event trace holds ten million,
// Note [Lane rows]). Each accessor names one field and answers kNone (or nullopt) for a kind
// without it, so no reader needs to know which kind keeps what:
//   Phase, Mark                         name, iteration
//   Hook, BucketReady, BucketDone       bucket
//   BucketLaunch                        bucket, seq
//   Collective, CollectiveWait          op, seq
//   UnitState                           unit, state
// Everything else (param, bytes, group, dtype, flags, a collective's bucket or unit, ...) is one
// DetailSource::event away (Note [Span to event]). from_trace is the one reader of the reader's
// packed drawing columns (trace::EventSpan's seq_or_iteration and bucket_or_unit).

// Note [Span to event]
// The tooltip, Details and anything else that needs a span's full event must find exactly that
// event again, also beside others with the same times, kind and seq on the same lane. The
// reader's bulk scan does not give the events' ids, so a span names its event by place: its
// rank and lane (the SpanRef), begin_ns, and same_begin_index, which of the lane's events that
// begin at begin_ns it is in the file's order (events.id), 0 but for ties.
// trace::Reader::events(rank, lane, begin_ns, begin_ns, 0) returns exactly the lane's events
// that begin at begin_ns and end no earlier, ordered by (begin_ns, id): the span's event is the
// same_begin_index-th of them. build_rows numbers a lane's spans (model.h; load.cpp hands them
// over in file order, update_model's new rows after the ones already numbered); a span that
// ends before it begins, which that query never returns, gets kNoEvent. DetailSource::event
// (detail_source.cpp) reads it.

class Span {
 public:
  // same_begin_index of a span without an event to look up (Note [Span to event]).
  static constexpr uint32_t kNoEvent = UINT32_MAX;

  int64_t begin_ns = 0;
  int64_t end_ns = 0;  // == begin_ns for an instant
  // Which of its lane's events beginning at begin_ns this one is, in file order; see Note
  // [Span to event]. Set by build_rows.
  uint32_t same_begin_index = 0;
  trace::EventKind kind = trace::EventKind::Mark;

  // A span of each kind, with that kind's fields (Note [Span fields]).
  static Span phase(int64_t begin, int64_t end, trace::NameId name, int32_t iteration) {
    return Span(trace::EventKind::Phase, begin, end, Named{name, iteration});
  }
  static Span mark(int64_t begin, int64_t end, trace::NameId name, int32_t iteration) {
    return Span(trace::EventKind::Mark, begin, end, Named{name, iteration});
  }
  static Span hook(int64_t begin, int64_t end, int32_t bucket) {
    return Span(trace::EventKind::Hook, begin, end, Bucketed{bucket, trace::kNone});
  }
  static Span bucket_ready(int64_t begin, int64_t end, int32_t bucket) {
    return Span(trace::EventKind::BucketReady, begin, end, Bucketed{bucket, trace::kNone});
  }
  static Span bucket_launch(int64_t begin, int64_t end, int32_t bucket, int32_t seq) {
    return Span(trace::EventKind::BucketLaunch, begin, end, Bucketed{bucket, seq});
  }
  static Span bucket_done(int64_t begin, int64_t end, int32_t bucket) {
    return Span(trace::EventKind::BucketDone, begin, end, Bucketed{bucket, trace::kNone});
  }
  static Span collective(int64_t begin, int64_t end, trace::CollectiveOp op, int32_t seq) {
    return Span(trace::EventKind::Collective, begin, end, Collective{seq, op});
  }
  static Span collective_wait(int64_t begin, int64_t end, trace::CollectiveOp op, int32_t seq) {
    return Span(trace::EventKind::CollectiveWait, begin, end, Collective{seq, op});
  }
  static Span unit_state(int64_t begin, int64_t end, int32_t unit, trace::UnitState state) {
    return Span(trace::EventKind::UnitState, begin, end, Unit{unit, state});
  }
  // The span of one row of trace::Reader::scan_event_spans (an unknown kind keeps no fields).
  static Span from_trace(const trace::EventSpan& row);

  Span() = default;

  // Phases and marks: the name (Model::name) and events.iteration (kNone: construction).
  trace::NameId name() const { return is_named() ? fields_.named.name : trace::kNone; }
  int32_t iteration() const { return is_named() ? fields_.named.iteration : trace::kNone; }
  // Hooks and the bucket instants: events.bucket.
  int32_t bucket() const { return is_bucketed() ? fields_.bucketed.bucket : trace::kNone; }
  // Collectives, their waits and bucket launches: the low 32 bits of events.seq.
  int32_t seq() const {
    if (kind == trace::EventKind::BucketLaunch) return fields_.bucketed.seq;
    return is_collective() ? fields_.collective.seq : trace::kNone;
  }
  // Collectives and their waits: the op; nullopt where the file has none or one this build does
  // not know.
  std::optional<trace::CollectiveOp> op() const {
    if (!is_collective() || uint8_t(fields_.collective.op) >= trace::kCollectiveOpCount) return std::nullopt;
    return fields_.collective.op;
  }
  // Unit states: events.unit, and the state (nullopt as for op).
  int32_t unit() const { return kind == trace::EventKind::UnitState ? fields_.unit.unit : trace::kNone; }
  std::optional<trace::UnitState> state() const {
    if (kind != trace::EventKind::UnitState || uint8_t(fields_.unit.state) >= trace::kUnitStateCount) {
      return std::nullopt;
    }
    return fields_.unit.state;
  }

 private:
  struct Named {
    trace::NameId name;
    int32_t iteration;
  };
  struct Bucketed {
    int32_t bucket;
    int32_t seq;  // BucketLaunch only
  };
  struct Collective {
    int32_t seq;
    trace::CollectiveOp op;
  };
  struct Unit {
    int32_t unit;
    trace::UnitState state;
  };
  // Tagged by `kind`: the member its kind keeps (Note [Span fields]).
  union Fields {
    Named named;
    Bucketed bucketed;
    Collective collective;
    Unit unit;
  };

  template <class KindFields>
  Span(trace::EventKind k, int64_t begin, int64_t end, KindFields fields)
      : begin_ns(begin), end_ns(end), kind(k) {
    set(fields);
  }
  void set(Named f) { fields_.named = f; }
  void set(Bucketed f) { fields_.bucketed = f; }
  void set(Collective f) { fields_.collective = f; }
  void set(Unit f) { fields_.unit = f; }

  bool is_named() const { return kind == trace::EventKind::Phase || kind == trace::EventKind::Mark; }
  bool is_bucketed() const {
    return kind == trace::EventKind::Hook || kind == trace::EventKind::BucketReady ||
           kind == trace::EventKind::BucketLaunch || kind == trace::EventKind::BucketDone;
  }
  bool is_collective() const {
    return kind == trace::EventKind::Collective || kind == trace::EventKind::CollectiveWait;
  }

  Fields fields_{Named{trace::kNone, trace::kNone}};
};
static_assert(sizeof(Span) == 32, "a Span is held by the ten million in the viewer: keep it at 32 bytes");

}  // namespace dpscope::view
