// The memory sampler: reads the tracking allocator's per-category counts (and the CUDA caching
// allocator's statistics on a GPU) into the trace's memory samples and keeps each one's peak.
#include "engine/memory/memory_sampler.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace dpscope::memory {

MemorySampler::MemorySampler(trace::Recorder* recorder, const TrackingAllocator* allocator,
                             int cuda_device)
    : recorder_(recorder), allocator_(allocator), cuda_device_(cuda_device) {}

void MemorySampler::sample(int64_t ts_ns) {
  auto put = [&](MemoryCategory category, int64_t bytes, bool always) {
    const int i = static_cast<int>(category);
    peaks_[i] = std::max(peaks_[i], bytes);
    if (always || first_ || bytes != last_[i]) {
      if (recorder_) recorder_->memory(category, bytes, ts_ns);
      last_[i] = bytes;
    }
  };
  if (allocator_) {
    const TrackingAllocator::PeakSnapshot peak = allocator_->peak_snapshot();
    if (peak.generation != peak_generation_) {
      peak_generation_ = peak.generation;
      // A snapshot from before the previous sample was seen by it (or raced with it): only one
      // strictly between the two samples is a moment the trace has not got.
      if (!first_ && peak.ts_ns > last_ts_ns_ && peak.ts_ns < ts_ns) {
        for (int i = 0; i < trace::kMemoryCategoryCount; ++i) {
          const auto category = static_cast<MemoryCategory>(i);
          if (!trace::is_stacked(category) && category != MemoryCategory::AllocatorTotal) continue;
          const int64_t bytes = peak.bytes[static_cast<size_t>(i)];
          peaks_[static_cast<size_t>(i)] = std::max(peaks_[static_cast<size_t>(i)], bytes);
          if (recorder_) recorder_->memory(category, bytes, peak.ts_ns);
          last_[static_cast<size_t>(i)] = bytes;
        }
      }
    }
    for (const MemoryCategory category : trace::kStackedCategories) {
      put(category, allocator_->bytes(category), false);
    }
    put(MemoryCategory::AllocatorTotal, allocator_->bytes_in_use(), true);
  }
  if (cuda_device_ >= 0) {
    const CudaMemoryStats stats = cuda_memory_stats(cuda_device_);
    put(MemoryCategory::CudaAllocated, stats.allocated, true);
    put(MemoryCategory::CudaReserved, stats.reserved, true);
  }
  first_ = false;
  last_ts_ns_ = ts_ns;
}

int64_t resident_bytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (!statm) return -1;
  long long total_pages = 0, resident_pages = 0;
  const int read = std::fscanf(statm, "%lld %lld", &total_pages, &resident_pages);
  std::fclose(statm);
  if (read != 2) return -1;
  return static_cast<int64_t>(resident_pages) * ::sysconf(_SC_PAGESIZE);
}

#ifndef DPSCOPE_HAVE_CUDA
// CPU build: no caching allocator to read (the CUDA definition is in cuda_memory_cuda.cpp).
CudaMemoryStats cuda_memory_stats(int /*device*/) { return {}; }
#endif

}  // namespace dpscope::memory
