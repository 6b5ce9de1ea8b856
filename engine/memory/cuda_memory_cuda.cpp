// CUDA builds only (DPSCOPE_HAVE_CUDA): the caching allocator's bytes allocated and reserved on a
// device, for the memory sampler's CudaAllocated and CudaReserved lines.
#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/version.h>

#include <mutex>

#include "engine/memory/memory_sampler.h"

namespace dpscope::memory {

// The statistics' types moved from the CUDA allocator to c10's device-generic one in LibTorch 2.6.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 6)
using StatType = c10::CachingDeviceAllocator::StatType;
#else
using StatType = c10::cuda::CUDACachingAllocator::StatType;
#endif

CudaMemoryStats cuda_memory_stats(int device) {
  if (device < 0 || device >= static_cast<int>(c10::cuda::device_count())) return {};
  // The caching allocator sizes its per-device tables when CUDA is first initialized; before
  // that getDeviceStats rejects every device. Once per process (2.x warns at every call of the
  // old name).
  static std::once_flag initialized;
  std::call_once(initialized, [] {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 6)
    at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
#else
    at::globalContext().lazyInitCUDA();
#endif
  });
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  const auto aggregate = static_cast<size_t>(StatType::AGGREGATE);
  CudaMemoryStats out;
  out.allocated = stats.allocated_bytes[aggregate].current;
  out.reserved = stats.reserved_bytes[aggregate].current;
  return out;
}

}  // namespace dpscope::memory
