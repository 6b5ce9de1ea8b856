// The viewer's record of one event on the timeline (Span): its times, its kind, the few fields
// by kind that drawing, labels, find and flows read, and the key back to the full event, in 24
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
// packed beside the kind and same_begin_index into one 64-bit word, and a Span is 24 bytes (a
// 10 M-event trace holds ten million, Note [Lane rows]; 32 bytes before, 80 MB more). A kind
// keeps two fields, the first in 20 signed bits and the second in 28: a name id, bucket, op or
// unit up to 524,287, an iteration or seq (its low 32 bits as the file has them) up to
// 134,217,727; a larger value is kept as kNone (it draws, unlabelled, and is no flow's end). Each
// accessor names one field and answers kNone (or nullopt) for a kind
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

  // A span of each kind, with that kind's fields (Note [Span fields]).
  static Span phase(int64_t begin, int64_t end, trace::NameId name, int32_t iteration) {
    return Span(trace::EventKind::Phase, begin, end, name, iteration);
  }
  static Span mark(int64_t begin, int64_t end, trace::NameId name, int32_t iteration) {
    return Span(trace::EventKind::Mark, begin, end, name, iteration);
  }
  static Span hook(int64_t begin, int64_t end, int32_t bucket) {
    return Span(trace::EventKind::Hook, begin, end, bucket, trace::kNone);
  }
  static Span bucket_ready(int64_t begin, int64_t end, int32_t bucket) {
    return Span(trace::EventKind::BucketReady, begin, end, bucket, trace::kNone);
  }
  static Span bucket_launch(int64_t begin, int64_t end, int32_t bucket, int32_t seq) {
    return Span(trace::EventKind::BucketLaunch, begin, end, bucket, seq);
  }
  static Span bucket_done(int64_t begin, int64_t end, int32_t bucket) {
    return Span(trace::EventKind::BucketDone, begin, end, bucket, trace::kNone);
  }
  static Span collective(int64_t begin, int64_t end, trace::CollectiveOp op, int32_t seq) {
    return Span(trace::EventKind::Collective, begin, end, int32_t(op), seq);
  }
  static Span collective_wait(int64_t begin, int64_t end, trace::CollectiveOp op, int32_t seq) {
    return Span(trace::EventKind::CollectiveWait, begin, end, int32_t(op), seq);
  }
  static Span unit_state(int64_t begin, int64_t end, int32_t unit, trace::UnitState state) {
    return Span(trace::EventKind::UnitState, begin, end, unit, int32_t(state));
  }
  // A span of a kind this build does not know (a newer file's), with no fields.
  static Span other(int64_t begin, int64_t end, trace::EventKind kind) {
    return Span(kind, begin, end, trace::kNone, trace::kNone);
  }
  // The span of one row of trace::Reader::scan_event_spans (an unknown kind keeps no fields).
  static Span from_trace(const trace::EventSpan& row);

  Span() = default;

  trace::EventKind kind() const { return static_cast<trace::EventKind>(packed_ & kKindMask); }
  // Which of its lane's events beginning at begin_ns this one is, in file order, or kNoEvent;
  // see Note [Span to event]. Set by build_rows.
  uint32_t same_begin_index() const {
    const auto index = uint32_t((packed_ >> kIndexShift) & kIndexMask);
    return index == kIndexMask ? kNoEvent : index;
  }
  // Sets it; an index past the field's 2,046 (as many events beginning at one nanosecond on one
  // lane) becomes kNoEvent: the span draws, its event is not looked up.
  void set_same_begin_index(uint32_t index) {
    const uint64_t stored = index >= kIndexMask ? kIndexMask : index;
    packed_ = (packed_ & ~(kIndexMask << kIndexShift)) | (stored << kIndexShift);
  }

  // Phases and marks: the name (Model::name) and events.iteration (kNone: construction).
  trace::NameId name() const { return is_named() ? first() : trace::kNone; }
  int32_t iteration() const { return is_named() ? second() : trace::kNone; }
  // Hooks and the bucket instants: events.bucket.
  int32_t bucket() const { return is_bucketed() ? first() : trace::kNone; }
  // Collectives, their waits and bucket launches: the low bits of events.seq (Note [Span fields]).
  int32_t seq() const {
    return kind() == trace::EventKind::BucketLaunch || is_collective() ? second() : trace::kNone;
  }
  // Collectives and their waits: the op; nullopt where the file has none or one this build does
  // not know.
  std::optional<trace::CollectiveOp> op() const {
    if (!is_collective() || first() < 0 || first() >= trace::kCollectiveOpCount) return std::nullopt;
    return static_cast<trace::CollectiveOp>(first());
  }
  // Unit states: events.unit, and the state (nullopt as for op).
  int32_t unit() const { return kind() == trace::EventKind::UnitState ? first() : trace::kNone; }
  std::optional<trace::UnitState> state() const {
    if (kind() != trace::EventKind::UnitState || second() < 0 || second() >= trace::kUnitStateCount) {
      return std::nullopt;
    }
    return static_cast<trace::UnitState>(second());
  }

  // The largest field values a Span keeps; a larger one is kept as kNone (Note [Span fields]).
  static constexpr int32_t kFirstFieldMax = (1 << 19) - 1;
  static constexpr int32_t kSecondFieldMax = (1 << 27) - 1;

 private:
  // packed_, from bit 0: the kind (5 bits), same_begin_index (11 bits, all ones: kNoEvent), then
  // the kind's two fields (Note [Span fields]), each signed: the first (name, bucket, op, unit)
  // in 20 bits, the second (iteration, seq, state) in 28.
  static constexpr uint64_t kKindMask = 0x1F;
  static constexpr int kIndexShift = 5;
  static constexpr uint64_t kIndexMask = 0x7FF;
  static constexpr int kFirstShift = 16, kFirstBits = 20;
  static constexpr int kSecondShift = 36, kSecondBits = 28;

  Span(trace::EventKind kind, int64_t begin, int64_t end, int32_t first, int32_t second)
      : begin_ns(begin), end_ns(end),
        packed_((uint64_t(kind) & kKindMask) | (uint64_t(first_field(first)) << kFirstShift) |
                (uint64_t(second_field(second)) << kSecondShift)) {}

  // `value` in `bits` bits, two's complement; out of range: kNone's bits.
  static uint64_t field_bits(int32_t value, int bits, int32_t max) {
    if (value > max || value < -max - 1) value = trace::kNone;
    return uint64_t(uint32_t(value)) & ((uint64_t(1) << bits) - 1);
  }
  static uint64_t first_field(int32_t value) { return field_bits(value, kFirstBits, kFirstFieldMax); }
  static uint64_t second_field(int32_t value) { return field_bits(value, kSecondBits, kSecondFieldMax); }
  static int32_t signed_field(uint64_t bits, int width) {
    const uint64_t sign = uint64_t(1) << (width - 1);
    return int32_t(int64_t((bits ^ sign) - sign));
  }
  int32_t first() const {
    return signed_field((packed_ >> kFirstShift) & ((uint64_t(1) << kFirstBits) - 1), kFirstBits);
  }
  int32_t second() const { return signed_field(packed_ >> kSecondShift, kSecondBits); }

  bool is_named() const { return kind() == trace::EventKind::Phase || kind() == trace::EventKind::Mark; }
  bool is_bucketed() const {
    const trace::EventKind k = kind();
    return k == trace::EventKind::Hook || k == trace::EventKind::BucketReady || k == trace::EventKind::BucketLaunch ||
           k == trace::EventKind::BucketDone;
  }
  bool is_collective() const {
    return kind() == trace::EventKind::Collective || kind() == trace::EventKind::CollectiveWait;
  }

  // A default Span: a Phase (kind 0), index 0, both fields kNone.
  uint64_t packed_ = (uint64_t((1u << kFirstBits) - 1) << kFirstShift) | (uint64_t((1u << kSecondBits) - 1) << kSecondShift);
};
static_assert(sizeof(Span) == 24, "a Span is held by the ten million in the viewer: keep it at 24 bytes");

}  // namespace dpscope::view
