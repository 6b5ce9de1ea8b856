// Span (span.h) from the reader's drawing columns: the one place that unpacks trace::EventSpan's
// shared columns into the fields each kind keeps (Note [Span fields]).
#include "viewer/span.h"

namespace dpscope::view {

Span Span::from_trace(const trace::EventSpan& row) {
  using trace::EventKind;
  const int64_t b = row.begin_ns, e = row.end_ns;
  // trace::EventSpan packs events.seq or, where that is NULL, events.iteration into one column,
  // and events.bucket or, where that is NULL, events.unit into another: each kind below takes
  // the one it records (a collective's seq, a phase's iteration, a unit state's unit).
  switch (row.kind) {
    case EventKind::Phase: return phase(b, e, row.name, row.seq_or_iteration);
    case EventKind::Mark: return mark(b, e, row.name, row.seq_or_iteration);
    case EventKind::Hook: return hook(b, e, row.bucket_or_unit);
    case EventKind::BucketReady: return bucket_ready(b, e, row.bucket_or_unit);
    case EventKind::BucketLaunch: return bucket_launch(b, e, row.bucket_or_unit, row.seq_or_iteration);
    case EventKind::BucketDone: return bucket_done(b, e, row.bucket_or_unit);
    case EventKind::Collective:
      return collective(b, e, static_cast<trace::CollectiveOp>(row.op), row.seq_or_iteration);
    case EventKind::CollectiveWait:
      return collective_wait(b, e, static_cast<trace::CollectiveOp>(row.op), row.seq_or_iteration);
    case EventKind::UnitState:
      return unit_state(b, e, row.bucket_or_unit, static_cast<trace::UnitState>(row.op));
  }
  return other(b, e, row.kind);
}

}  // namespace dpscope::view
