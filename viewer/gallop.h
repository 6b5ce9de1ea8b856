// A galloping search: the first index where an ordered predicate turns false, found from a
// starting index in time logarithmic in the distance to it, not in the length of the range.
// What the timeline's folds and the memory graphs' walks use, both of which ask for a place a
// few entries past the last one.
#pragma once

#include <algorithm>
#include <cstddef>

namespace dpscope::view {

// The first i in [from, to) with !before(i), or `to`; `before` must hold on a prefix of the
// range and nowhere after it. Probes from, from+2, from+6, ... (strides doubling), then bisects
// the last stride.
template <typename Before>
size_t gallop(size_t from, size_t to, Before before) {
  // Every index in [from, lo) is before; the probe is lo + stride - 1.
  size_t lo = from, stride = 1;
  while (lo + stride - 1 < to && before(lo + stride - 1)) {
    lo += stride;
    stride *= 2;
  }
  size_t hi = std::min(to, lo + stride - 1);  // `to`, or an index known not before
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (before(mid)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

}  // namespace dpscope::view
