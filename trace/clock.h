// The trace's two clocks: nanoseconds on the process's steady clock (CLOCK_MONOTONIC), the time
// base of every timestamp a rank records before alignment to rank 0 (Recorder::set_clock_offset),
// and the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), which the compute spans carry
// beside it (events.cpu_begin_ns / cpu_end_ns, docs/trace-format.md).
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

#include "trace/schema.h"

namespace dpscope::trace {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The CPU time the calling thread has used, in nanoseconds: the time it computed, not the time
// it waited or was preempted. A system call (about 0.3–1 µs here, against 25 ns for now_ns()),
// so the engine reads it only where a level records. kNone64 if the clock cannot be read.
inline int64_t thread_cpu_ns() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return kNone64;
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// One moment on both clocks of the calling thread: the begin or end of a compute span.
struct Stamp {
  int64_t wall_ns = 0;
  int64_t cpu_ns = kNone64;
};
inline Stamp stamp_now() { return Stamp{now_ns(), thread_cpu_ns()}; }

}  // namespace dpscope::trace
