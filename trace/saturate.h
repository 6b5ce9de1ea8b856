// Saturating int64 arithmetic for numbers read from trace files. A damaged or hand-edited file
// can hold any INTEGER (times near INT64_MIN and INT64_MAX, huge byte counts); sums and
// differences of them must clamp rather than overflow, which is undefined behaviour in C++.
// Used by the store and by the analysis and formats that read its numbers (the fuzzers found
// these: tests/fuzz/README.md).
#pragma once

#include <cstdint>
#include <limits>

namespace dpscope::trace::detail {

inline int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return sum;
}

inline int64_t saturating_sub(int64_t a, int64_t b) {
  int64_t difference;
  if (__builtin_sub_overflow(a, b, &difference)) {
    return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return difference;
}

}  // namespace dpscope::trace::detail
