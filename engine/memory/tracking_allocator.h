// The tracking CPU allocator: wraps LibTorch's CPU allocator (c10::SetCPUAllocator) and counts
// the bytes of every live allocation under a memory category, so the trace can show parameters,
// gradients, buckets, optimizer state, activations and other as the engine moves through a step.
#pragma once

#include <c10/core/Allocator.h>
#include <torch/version.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "trace/schema.h"

namespace at {
class Tensor;
}

// LibTorch 2.3 made c10::Allocator::allocate non-const and added the pure virtual copy_data;
// 1.13 (Debian's) has neither. The build follows the LibTorch it is given (docs/gpu.md).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define DPSCOPE_LIBTORCH_2_3 1
#define DPSCOPE_ALLOCATE_CONST
#else
#define DPSCOPE_LIBTORCH_2_3 0
#define DPSCOPE_ALLOCATE_CONST const
#endif

namespace dpscope::memory {

using trace::MemoryCategory;

// Note [Memory categories]
// A new allocation is counted under the calling thread's current category (CategoryScope; Other
// when none is set): the engine sets Parameters while it builds parameters, Buckets while it
// allocates buckets, Activations around forward and backward (DDP's and FSDP's forward set it
// themselves), Data while it loads the data set and draws a batch. Some memory changes role after it
// is allocated — a gradient is made by backward (Activations) and then kept as param.grad; a
// momentum buffer is made inside the optimizer's step — so the engine retags such storage once it
// knows what it holds (retag()). Scopes are per thread: what LibTorch's intra-op worker threads
// allocate themselves (rare: outputs are allocated by the calling thread) counts as Other. Each
// allocation carries its size and category in a header just before its data, so counting and
// freeing take no lock and no lookup. This is the tracking accounting, the CPU's; a GPU's memory
// is split by ownership instead (See Note [Ownership accounting] in ownership_registry.h).
class TrackingAllocator final : public c10::Allocator {
 public:
  // Installs the tracking allocator as LibTorch's CPU allocator (once per process; later calls
  // return the same one). Allocations made before keep their old deleter and are not counted.
  // The allocator lives until the process exits.
  static TrackingAllocator& install();
  // The installed allocator, or null before install().
  static TrackingAllocator* installed();

  // The base allocator's block with a 64-byte header in front (size, category, the base's
  // context and deleter; Note [Allocation header] in tracking_allocator.cpp), so the data keeps
  // the base's 64-byte alignment. Zero bytes: a null DataPtr, nothing counted (as LibTorch's own).
  c10::DataPtr allocate(size_t bytes) DPSCOPE_ALLOCATE_CONST override;
#if DPSCOPE_LIBTORCH_2_3
  // LibTorch 2.3 and later ask every allocator how to copy what it allocated (tensor clones of
  // raw storage): host memory, so a memcpy.
  void copy_data(void* dest, const void* src, std::size_t count) const override;
#endif
  // Frees what raw_allocate() returned (the context is the data pointer).
  c10::DeleterFnPtr raw_deleter() const override { return &TrackingAllocator::free; }

  // Bytes currently allocated, in all and by category. Thread-safe (relaxed atomics).
  // bytes(AllocatorTotal) is bytes_in_use(); the CUDA read-outs are 0 here.
  int64_t bytes_in_use() const;
  int64_t bytes(MemoryCategory category) const;
  // The largest bytes_in_use() since the last reset_peak().
  int64_t peak_bytes() const;
  void reset_peak();
  // The moment the peak was reached: each stacked category's bytes then (read one after the
  // other, so a concurrent allocation may be off by itself), AllocatorTotal their sum, when
  // (trace::now_ns()), and a generation that changes with every new snapshot (each new peak, and
  // reset_peak()). MemorySampler writes it into the trace so that the sampled peak is the real
  // one (See Note [Memory at the peak] in analysis/memory_peak.h). Thread-safe.
  struct PeakSnapshot {
    std::array<int64_t, trace::kMemoryCategoryCount> bytes{};
    int64_t ts_ns = 0;
    uint64_t generation = 0;
  };
  PeakSnapshot peak_snapshot() const;

  // Counts the storage under `tensor` (a view retags its whole storage) as `category` from now
  // on. Returns false (and changes nothing) when the storage was not allocated by this allocator
  // or the tensor is undefined; true for a storage of zero bytes (nothing to count). Throws
  // std::invalid_argument for a category that is an allocator read-out (AllocatorTotal, Cuda*).
  // Thread-safe.
  bool retag(const at::Tensor& tensor, MemoryCategory category);

 private:
  TrackingAllocator();
  static void free(void* context);
  void add(MemoryCategory category, int64_t bytes) const;
  void record_peak_breakdown(int64_t total) const;

  c10::Allocator* base_;
  mutable std::array<std::atomic<int64_t>, trace::kMemoryCategoryCount> by_category_{};
  mutable std::atomic<int64_t> total_{0};
  mutable std::atomic<int64_t> peak_{0};
  mutable std::mutex peak_mutex_;  // guards the two below
  mutable PeakSnapshot peak_snapshot_;
  mutable int64_t peak_snapshot_total_ = 0;  // the total whose peak the snapshot caught
};

// Sets the category of allocations made by this thread while it lives; scopes nest. Threads
// start in Other. Throws std::invalid_argument for an allocator read-out category.
class CategoryScope {
 public:
  explicit CategoryScope(MemoryCategory category);
  ~CategoryScope();
  CategoryScope(const CategoryScope&) = delete;
  CategoryScope& operator=(const CategoryScope&) = delete;
  static MemoryCategory current();

 private:
  MemoryCategory previous_;
};

// Gives `tensor`'s storage `bytes` bytes from the device's current allocator (the tracking one
// when installed, not the allocator the storage was first made with), or none when `bytes` is 0:
// the storage object and every view of it stay, their memory comes and goes. FSDP1's full flat
// parameter and FSDP2's all-gather outputs are freed and refilled so (Note [Unsharded parameter
// storage]). The old memory is released. Not thread-safe for the same tensor.
void set_storage_bytes(const at::Tensor& tensor, size_t bytes);

}  // namespace dpscope::memory
