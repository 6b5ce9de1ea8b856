// One trace::Event for the tests that write traces by hand (stats, fuzz seeds, the CLI, the
// viewer's loader): rank, lane, kind, span and iteration set, every other field as the schema's
// default leaves it (kNone, 0). Each test sets the few fields its kind uses on the result.
#pragma once

#include <cstdint>

#include "trace/records.h"

namespace dpscope::testing {

inline trace::Event trace_event(int16_t rank, trace::LaneId lane, trace::EventKind kind, int64_t begin_ns,
                                int64_t end_ns, int32_t iteration) {
  trace::Event e;
  e.rank = rank;
  e.lane = lane;
  e.kind = kind;
  e.begin_ns = begin_ns;
  e.end_ns = end_ns;
  e.iteration = iteration;
  return e;
}

}  // namespace dpscope::testing
