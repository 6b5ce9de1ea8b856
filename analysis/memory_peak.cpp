// Memory at the peak (see Note [Memory at the peak] in memory_peak.h): walks a rank's samples
// moment by moment and keeps the stacked total's peak with its categories.
#include "analysis/memory_peak.h"

#include "trace/saturate.h"

namespace dpscope::analysis {

int64_t MemoryAtPeak::bytes(trace::MemoryCategory category) const {
  for (const CategoryBytes& c : categories) {
    if (c.category == category) return c.bytes;
  }
  return 0;
}

MemoryPeakFinder::MemoryPeakFinder(int64_t window_begin_ns, int64_t window_end_ns)
    : window_begin_ns_(window_begin_ns), window_end_ns_(window_end_ns) {}

void MemoryPeakFinder::add(int64_t ts_ns, trace::MemoryCategory category, int64_t bytes) {
  const auto c = static_cast<size_t>(category);
  if (c >= trace::kMemoryCategoryCount) return;
  if (moment_open_ && ts_ns != moment_ns_) close_moment();
  moment_ns_ = ts_ns;
  moment_open_ = true;
  current_[c] = bytes;
  seen_[c] = true;
  if (trace::is_stacked(category)) any_stacked_ = true;
}

void MemoryPeakFinder::close_moment() {
  moment_open_ = false;
  if (moment_ns_ < window_begin_ns_ || moment_ns_ > window_end_ns_) return;
  if (any_stacked_) {
    int64_t total = 0;
    for (trace::MemoryCategory c : trace::kStackedCategories) {
      total = trace::detail::saturating_add(total, current_[static_cast<size_t>(c)]);
    }
    if (!stacked_peak_.found() || total > stacked_peak_.total_bytes) {
      stacked_peak_.total_bytes = total;
      stacked_peak_.ts_ns = moment_ns_;
      stacked_peak_.categories.clear();
      for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
        const auto category = static_cast<trace::MemoryCategory>(c);
        if (trace::is_stacked(category) && seen_[static_cast<size_t>(c)]) {
          stacked_peak_.categories.push_back({category, current_[static_cast<size_t>(c)]});
        }
      }
    }
  }
  const auto allocator = static_cast<size_t>(trace::MemoryCategory::AllocatorTotal);
  if (seen_[allocator] &&
      (!allocator_peak_.found() || current_[allocator] > allocator_peak_.total_bytes)) {
    allocator_peak_.total_bytes = current_[allocator];
    allocator_peak_.ts_ns = moment_ns_;
  }
}

MemoryAtPeak MemoryPeakFinder::finish() {
  if (moment_open_) close_moment();
  return any_stacked_ ? stacked_peak_ : allocator_peak_;
}

}  // namespace dpscope::analysis
