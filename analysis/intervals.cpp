// Interval arithmetic (see intervals.h): sort-and-merge union, linear-merge intersection and
// difference, binary-searched coverage.
#include "analysis/intervals.h"

#include <algorithm>

#include "trace/saturate.h"

namespace dpscope::analysis {

using trace::detail::saturating_add;
using trace::detail::saturating_sub;

IntervalSet IntervalSet::union_of(std::vector<Interval> slices) {
  std::sort(slices.begin(), slices.end());
  IntervalSet set;
  for (const Interval& s : slices) {
    if (s.end_ns <= s.begin_ns) continue;
    if (!set.merged_.empty() && s.begin_ns <= set.merged_.back().end_ns) {
      set.merged_.back().end_ns = std::max(set.merged_.back().end_ns, s.end_ns);
    } else {
      set.merged_.push_back(s);
    }
  }
  return set;
}

int64_t IntervalSet::length() const {
  int64_t total = 0;
  for (const Interval& i : merged_) total = saturating_add(total, saturating_sub(i.end_ns, i.begin_ns));
  return total;
}

int64_t IntervalSet::intersection_length(const IntervalSet& other) const {
  const auto& a = merged_;
  const auto& b = other.merged_;
  int64_t total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t begin = std::max(a[i].begin_ns, b[j].begin_ns);
    const int64_t end = std::min(a[i].end_ns, b[j].end_ns);
    if (end > begin) total = saturating_add(total, saturating_sub(end, begin));
    if (a[i].end_ns < b[j].end_ns) ++i;
    else ++j;
  }
  return total;
}

int64_t IntervalSet::covered(int64_t begin_ns, int64_t end_ns) const {
  auto it = std::upper_bound(merged_.begin(), merged_.end(), begin_ns,
                             [](int64_t t, const Interval& i) { return t < i.end_ns; });
  int64_t total = 0;
  for (; it != merged_.end() && it->begin_ns < end_ns; ++it) {
    const int64_t begin = std::max(begin_ns, it->begin_ns);
    const int64_t end = std::min(end_ns, it->end_ns);
    if (end > begin) total = saturating_add(total, saturating_sub(end, begin));
  }
  return total;
}

IntervalSet IntervalSet::minus(const IntervalSet& other) const {
  IntervalSet out;
  const auto& b = other.merged_;
  size_t j = 0;
  for (Interval piece : merged_) {
    while (j < b.size() && b[j].end_ns <= piece.begin_ns) ++j;
    for (size_t k = j; k < b.size() && b[k].begin_ns < piece.end_ns; ++k) {
      if (b[k].begin_ns > piece.begin_ns) out.merged_.push_back({piece.begin_ns, b[k].begin_ns});
      piece.begin_ns = std::max(piece.begin_ns, b[k].end_ns);
    }
    if (piece.end_ns > piece.begin_ns) out.merged_.push_back(piece);
  }
  return out;
}

}  // namespace dpscope::analysis
