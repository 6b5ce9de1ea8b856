// The memory sampler: turns the tracking allocator's per-category counts (and, on CUDA, the
// caching allocator's statistics) into the trace's memory samples, and keeps each category's peak
// for the run summary.
#pragma once

#include <array>
#include <cstdint>

#include "engine/memory/tracking_allocator.h"
#include "trace/recorder.h"

namespace dpscope::memory {

// Thread-safety: sample() from one thread at a time (the training loop's).
class MemorySampler {
 public:
  // `recorder` may be null (peaks are still kept). `allocator` may be null: then only the CUDA
  // statistics (when cuda_device >= 0) are sampled.
  MemorySampler(trace::Recorder* recorder, const TrackingAllocator* allocator,
                int cuda_device = -1);
  // Records every category whose bytes changed since the last sample (all of them the first
  // time), and AllocatorTotal (and CudaAllocated / CudaReserved with a CUDA device) every time,
  // at time `ts_ns`. When the allocator reached a new peak since the last sample, that moment is
  // recorded first, at the time it happened (TrackingAllocator::peak_snapshot), so the trace
  // holds the real peak and not only what the sampling points saw (Note [Memory at the peak]
  // in analysis/memory_peak.h). Memory samples need trace level full.
  void sample(int64_t ts_ns = trace::now_ns());
  // The largest value each category (and AllocatorTotal, CudaAllocated, CudaReserved) reached in
  // any sample.
  int64_t peak(MemoryCategory category) const { return peaks_[static_cast<int>(category)]; }

 private:
  trace::Recorder* recorder_;
  const TrackingAllocator* allocator_;
  int cuda_device_;
  std::array<int64_t, trace::kMemoryCategoryCount> last_{};
  std::array<int64_t, trace::kMemoryCategoryCount> peaks_{};
  bool first_ = true;
  int64_t last_ts_ns_ = INT64_MIN;    // the previous sample's time
  uint64_t peak_generation_ = 0;      // the allocator's peak snapshot already recorded
};

// CUDA caching allocator statistics of `device` (bytes allocated, reserved). Only with a CUDA
// build (DPSCOPE_HAVE_CUDA); elsewhere both are 0.
struct CudaMemoryStats {
  int64_t allocated = 0;
  int64_t reserved = 0;
};
CudaMemoryStats cuda_memory_stats(int device);

// The process's resident set size in bytes (Linux /proc/self/statm), or -1 where it cannot be
// read. Everything the process holds, not only what the tracking allocator counts: what a leak
// check watches across a long run. Thread-safe.
int64_t resident_bytes();

}  // namespace dpscope::memory
