// The trace clock: nanoseconds on the process's steady clock (CLOCK_MONOTONIC), the time base
// of every timestamp a rank records before alignment to rank 0 (Recorder::set_clock_offset).
#pragma once

#include <chrono>
#include <cstdint>

namespace dpscope::trace {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace dpscope::trace
