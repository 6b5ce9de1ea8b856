// The memory sampler: splits memory into the trace's categories by the tracking allocator's
// per-category counts or by the ownership registry's storages on the run's device, records them
// with the allocators' totals (the CUDA caching allocator's statistics on a GPU), and keeps each
// one's peak.
#include "engine/memory/memory_sampler.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>

namespace dpscope::memory {

MemoryAccounting default_accounting(c10::Device device) {
  return device.is_cpu() ? MemoryAccounting::Tracking : MemoryAccounting::Ownership;
}

MemorySampler::MemorySampler(trace::Recorder* recorder, const TrackingAllocator* allocator,
                             int cuda_device)
    : recorder_(recorder), allocator_(allocator), cuda_device_(cuda_device) {}

MemorySampler::MemorySampler(trace::Recorder* recorder, const TrackingAllocator* allocator,
                             c10::Device device, MemoryAccounting accounting)
    : recorder_(recorder), allocator_(allocator),
      cuda_device_(device.is_cuda() ? (device.has_index() ? device.index() : 0) : -1),
      accounting_(accounting), device_(device) {
  if (accounting_ == MemoryAccounting::Ownership) registry_ = &OwnershipRegistry::install();
  if (recorder_) recorder_->set_meta(trace::meta_key::kMemoryAccounting, trace::to_string(accounting_));
}

void MemorySampler::sample(int64_t ts_ns) {
  auto put = [&](MemoryCategory category, int64_t bytes, bool always) {
    const int i = static_cast<int>(category);
    peaks_[i] = std::max(peaks_[i], bytes);
    if (always || first_ || bytes != last_[i]) {
      if (recorder_) recorder_->memory(category, bytes, ts_ns);
      last_[i] = bytes;
    }
  };
  const CudaMemoryStats cuda = cuda_device_ >= 0 ? cuda_memory_stats(cuda_device_) : CudaMemoryStats{};
  // The allocator's total is read once a sample, so that the categories recorded beside it add
  // up to it even while another thread (a Gloo worker) allocates.
  int64_t allocator_total = allocator_ ? allocator_->bytes_in_use() : 0;
  Bytes stacked{};
  bool has_categories = false;
  if (accounting_ == MemoryAccounting::Ownership) {
    stacked = owned_sample(cuda.allocated, allocator_total);
    has_categories = true;
  } else if (allocator_) {
    record_tracking_peak(ts_ns);
    stacked = tracked_sample(allocator_total);
    has_categories = true;
  }
  if (has_categories) {
    int64_t sum = 0;
    for (const MemoryCategory category : trace::kStackedCategories) {
      put(category, stacked[static_cast<size_t>(category)], false);
      sum += stacked[static_cast<size_t>(category)];
    }
    const auto total = static_cast<size_t>(MemoryCategory::AllocatorTotal);
    if (first_ || sum > peak_moment_[total]) {
      peak_moment_ = stacked;
      peak_moment_[total] = sum;
    }
  }
  if (allocator_) put(MemoryCategory::AllocatorTotal, allocator_total, true);
  if (cuda_device_ >= 0) {
    put(MemoryCategory::CudaAllocated, cuda.allocated, true);
    put(MemoryCategory::CudaReserved, cuda.reserved, true);
  }
  first_ = false;
  last_ts_ns_ = ts_ns;
}

// See Note [Ownership accounting]: the owned bytes on the device, the rest of the device
// allocator's total as activations (and the tracking allocator's `other` on the CPU).
MemorySampler::Bytes MemorySampler::owned_sample(int64_t cuda_allocated, int64_t allocator_total) {
  Bytes bytes = registry_->owned_bytes(device_);
  int64_t owned = 0;
  for (const MemoryCategory category : trace::kStackedCategories) owned += bytes[static_cast<size_t>(category)];
  const auto activations = static_cast<size_t>(MemoryCategory::Activations);
  const auto other = static_cast<size_t>(MemoryCategory::Other);
  if (device_.is_cpu() && allocator_) {
    const int64_t total = allocator_total;
    bytes[other] = allocator_->bytes(MemoryCategory::Other);
    bytes[activations] = total - owned - bytes[other];
    // How far this sample is from the tracking allocator's own split of the same memory.
    largest_tracked_total_ = std::max(largest_tracked_total_, total);
    for (const MemoryCategory category : trace::kStackedCategories) {
      if (category == MemoryCategory::Activations || category == MemoryCategory::Other) continue;
      const auto i = static_cast<size_t>(category);
      largest_difference_[i] =
          std::max(largest_difference_[i], std::abs(bytes[i] - allocator_->bytes(category)));
    }
  } else if (device_.is_cuda()) {
    bytes[activations] = cuda_allocated - owned;
  }
  return bytes;
}

// The allocator counts a category and its total in two relaxed atomics, so a reader racing an
// allocation on another thread can see one without the other. Reading the total on both sides
// of the categories, and again until the two agree and the categories sum to it, gives a
// moment's consistent split; a thread allocating without pause for all the tries leaves the
// last reading, off by that thread's allocations in flight.
MemorySampler::Bytes MemorySampler::tracked_sample(int64_t& allocator_total) const {
  constexpr int kTries = 64;
  Bytes bytes{};
  for (int attempt = 0; attempt < kTries; ++attempt) {
    const int64_t before = allocator_->bytes_in_use();
    int64_t sum = 0;
    for (const MemoryCategory category : trace::kStackedCategories) {
      bytes[static_cast<size_t>(category)] = allocator_->bytes(category);
      sum += bytes[static_cast<size_t>(category)];
    }
    allocator_total = allocator_->bytes_in_use();
    if (before == allocator_total && sum == allocator_total) break;
  }
  return bytes;
}

// A peak the tracking allocator reached since the previous sample, recorded at its moment.
void MemorySampler::record_tracking_peak(int64_t ts_ns) {
  const TrackingAllocator::PeakSnapshot peak = allocator_->peak_snapshot();
  if (peak.generation == peak_generation_) return;
  peak_generation_ = peak.generation;
  // A snapshot from before the previous sample was seen by it (or raced with it): only one
  // strictly between the two samples is a moment the trace has not got.
  if (first_ || peak.ts_ns <= last_ts_ns_ || peak.ts_ns >= ts_ns) return;
  int64_t sum = 0;
  for (int i = 0; i < trace::kMemoryCategoryCount; ++i) {
    const auto category = static_cast<MemoryCategory>(i);
    if (!trace::is_stacked(category) && category != MemoryCategory::AllocatorTotal) continue;
    const int64_t bytes = peak.bytes[static_cast<size_t>(i)];
    peaks_[static_cast<size_t>(i)] = std::max(peaks_[static_cast<size_t>(i)], bytes);
    if (recorder_) recorder_->memory(category, bytes, peak.ts_ns);
    last_[static_cast<size_t>(i)] = bytes;
    if (trace::is_stacked(category)) sum += bytes;
  }
  const auto total = static_cast<size_t>(MemoryCategory::AllocatorTotal);
  if (sum > peak_moment_[total]) {
    peak_moment_ = peak.bytes;
    peak_moment_[total] = sum;
  }
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
