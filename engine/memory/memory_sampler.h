// The memory sampler: splits memory into the trace's categories at each sample — by the tracking
// allocator's per-category counts (tracking accounting) or by the storages the engine owns on the
// run's device (ownership accounting, Note [Ownership accounting]) — records them with the
// allocators' totals (the tracking allocator's, and on CUDA the caching allocator's statistics),
// and keeps each category's peak for the run summary.
#pragma once

#include <c10/core/Device.h>

#include <array>
#include <cstdint>

#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"
#include "trace/recorder.h"
#include "trace/vocabulary.h"

namespace dpscope::memory {

using trace::MemoryAccounting;

// The accounting a run on `device` uses unless told otherwise: tracking on the CPU (the tracking
// allocator sees all of it), ownership elsewhere (a GPU's memory is the caching allocator's,
// which the tracking allocator does not see).
MemoryAccounting default_accounting(c10::Device device);

// Thread-safety: sample() from one thread at a time (the training loop's, or the one a wrapper's
// hooks run on while that thread waits in backward).
class MemorySampler {
 public:
  // Tracking accounting. `recorder` may be null (peaks are still kept). `allocator` may be null:
  // then only the CUDA statistics (when cuda_device >= 0) are sampled.
  MemorySampler(trace::Recorder* recorder, const TrackingAllocator* allocator,
                int cuda_device = -1);
  // `accounting` on `device` (a CUDA device samples the caching allocator's statistics too).
  // Ownership installs the OwnershipRegistry (so the engine claims what it makes from then on);
  // its remainder, `activations`, is what the device's allocator holds beyond the owned bytes:
  // the tracking allocator's total less its `other` on the CPU (`allocator` needed), cuda_allocated
  // on a GPU; on a device with no allocator to read (meta) it is 0. Tracking on a device other
  // than the CPU counts host memory, as the tracking allocator sees it. Records the accounting in
  // the trace's meta (`memory_accounting`) when `recorder` is given.
  MemorySampler(trace::Recorder* recorder, const TrackingAllocator* allocator, c10::Device device,
                MemoryAccounting accounting);
  // Records every category whose bytes changed since the last sample (all of them the first
  // time), and AllocatorTotal (and CudaAllocated / CudaReserved with a CUDA device) every time,
  // at time `ts_ns`. Tracking: when the allocator reached a new peak since the last sample, that
  // moment is recorded first, at the time it happened (TrackingAllocator::peak_snapshot), so the
  // trace holds the real peak and not only what the sampling points saw (Note [Memory at the
  // peak] in analysis/memory_peak.h); ownership records the sampling points only (a peak between
  // them is not a moment whose owners anyone asked). Memory samples need trace level full.
  void sample(int64_t ts_ns = trace::now_ns());
  // The largest value each category (and AllocatorTotal, CudaAllocated, CudaReserved) reached in
  // any sample.
  int64_t peak(MemoryCategory category) const { return peaks_[static_cast<int>(category)]; }
  MemoryAccounting accounting() const { return accounting_; }

  // The sample whose stacked categories added up to the most: each category's bytes then, and
  // AllocatorTotal their sum (the peak the trace shows when the accounting is ownership).
  const std::array<int64_t, trace::kMemoryCategoryCount>& peak_moment() const { return peak_moment_; }

  // Ownership on the CPU with a tracking allocator: the largest difference, over the samples,
  // between the two accountings' bytes of `category` at the same sample (how far ownership is
  // from the reference; tests/memory/test_ownership_equality.cpp), and the largest tracking total
  // seen (the run's peak, to compare it with). 0 in other modes.
  int64_t largest_difference(MemoryCategory category) const {
    return largest_difference_[static_cast<int>(category)];
  }
  int64_t largest_tracked_total() const { return largest_tracked_total_; }

 private:
  using Bytes = std::array<int64_t, trace::kMemoryCategoryCount>;
  // This sample's stacked categories by ownership; AllocatorTotal and the CUDA read-outs too.
  Bytes owned_sample(int64_t cuda_allocated, int64_t allocator_total);
  // The tracking allocator's categories and total, read so that they add up (see the .cpp).
  Bytes tracked_sample(int64_t& allocator_total) const;
  void record_tracking_peak(int64_t ts_ns);

  trace::Recorder* recorder_;
  const TrackingAllocator* allocator_;
  int cuda_device_;
  MemoryAccounting accounting_ = MemoryAccounting::Tracking;
  c10::Device device_{c10::kCPU};
  OwnershipRegistry* registry_ = nullptr;  // ownership only
  Bytes last_{};
  Bytes peaks_{};
  Bytes peak_moment_{};
  Bytes largest_difference_{};
  int64_t largest_tracked_total_ = 0;
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
