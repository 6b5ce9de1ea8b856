// Memory at the peak: the one definition of a rank's peak memory and of what each category held
// at that moment, shared by `dpscope stats`, the viewer, the demo and the tutorials, so the parts
// shown always add up to the total shown. See Note [Memory at the peak].
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "trace/schema.h"

namespace dpscope::analysis {

// Note [Memory at the peak]
// A rank's memory samples describe moments: all samples of one timestamp are applied together
// (a sum between them never existed), and each category holds its value until its next sample.
// The peak is the first moment at which the stacked total (the sum of the stacked categories,
// schema.h's is_stacked, which the engine keeps so that every byte is in exactly one, Other
// included: the tracking allocator's, or by ownership the run device's, Note [Ownership
// accounting] in engine/memory) is largest; a rank that sampled no stacked category
// peaks where allocator_total does, with the categories unknown. "Memory at the peak" is each
// stacked category's bytes at that moment, so the parts sum to the total by construction. By
// tracking the engine writes the allocator's own peak into the samples (MemorySampler), so the
// sampled peak is the real one, not only what the sampling points happened to see; by ownership
// the sampling points are all there is. The largest value of each
// category on its own (category maxima) is another figure: those maxima come from different
// moments and may add up to more than the peak.

struct CategoryBytes {
  trace::MemoryCategory category = trace::MemoryCategory::Other;
  int64_t bytes = 0;
};

struct MemoryAtPeak {
  int64_t total_bytes = 0;  // the peak; 0 without samples in the window
  int64_t ts_ns = trace::kNone64;  // the moment; trace::kNone64 without samples in the window
  // Each stacked category sampled by then, with its bytes at that moment, in MemoryCategory
  // order; they sum to total_bytes. Empty when only allocator_total was sampled.
  std::vector<CategoryBytes> categories;
  bool found() const { return ts_ns != trace::kNone64; }
  // The bytes of `category` at the peak (0 when not among `categories`).
  int64_t bytes(trace::MemoryCategory category) const;
};

// Finds the peak of one rank's samples fed in time order (ties in any order). The window
// [window_begin_ns, window_end_ns] limits where the peak may lie (state before it still counts: a
// category sampled earlier holds its value into the window). Plain value; not thread-safe.
class MemoryPeakFinder {
 public:
  explicit MemoryPeakFinder(int64_t window_begin_ns = INT64_MIN, int64_t window_end_ns = INT64_MAX);
  void add(int64_t ts_ns, trace::MemoryCategory category, int64_t bytes);
  // The peak over everything added. Call once, after the last add().
  MemoryAtPeak finish();

 private:
  void close_moment();
  int64_t window_begin_ns_;
  int64_t window_end_ns_;
  int64_t moment_ns_ = trace::kNone64;  // timestamp of the samples being applied
  bool moment_open_ = false;
  std::array<int64_t, trace::kMemoryCategoryCount> current_{};
  std::array<bool, trace::kMemoryCategoryCount> seen_{};
  bool any_stacked_ = false;
  MemoryAtPeak stacked_peak_, allocator_peak_;
};

}  // namespace dpscope::analysis
