// Interval arithmetic on time: the one implementation of union, intersection, difference and
// coverage behind every compute / communication / overlap / exposed figure (stats.h). Lengths
// saturate, so a damaged file's extreme times cannot overflow.
#pragma once

#include <cstdint>
#include <vector>

namespace dpscope::analysis {

// [begin_ns, end_ns): empty when end_ns <= begin_ns.
struct Interval {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  bool operator<(const Interval& o) const {
    return begin_ns != o.begin_ns ? begin_ns < o.begin_ns : end_ns < o.end_ns;
  }
};

// A union of intervals kept sorted, disjoint and without empty members, so lengths count
// overlapping time once. Plain value; not thread-safe (no internal locking).
class IntervalSet {
 public:
  IntervalSet() = default;
  // The union of `slices` (any order, empties and overlaps allowed).
  static IntervalSet union_of(std::vector<Interval> slices);

  const std::vector<Interval>& intervals() const { return merged_; }
  bool empty() const { return merged_.empty(); }
  // Total covered time, ns.
  int64_t length() const;
  // Time covered by both this and `other`, ns.
  int64_t intersection_length(const IntervalSet& other) const;
  // Time of [begin, end) that this set covers, ns. O(log n + intervals inside).
  int64_t covered(int64_t begin_ns, int64_t end_ns) const;
  // The parts of this set outside `other`.
  IntervalSet minus(const IntervalSet& other) const;

 private:
  std::vector<Interval> merged_;
};

}  // namespace dpscope::analysis
