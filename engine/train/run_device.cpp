// --device and --backend: which device each rank trains on, and the backend that goes with it
// (see run_device.h).
#include "engine/train/run_device.h"

#include <stdexcept>
#include <string>

#include "trace/vocabulary.h"

#ifdef DPSCOPE_HAVE_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace dpscope::train {

c10::Device select_run_device(std::string_view device, const comm::LaunchEnv& env) {
  if (trace::parse_mode(trace::kDevices, device) != trace::Device::Cuda) return c10::Device(c10::kCPU);
#ifdef DPSCOPE_HAVE_CUDA
  const int visible = static_cast<int>(c10::cuda::device_count());
  if (visible == 0) {
    throw std::invalid_argument("rank " + std::to_string(env.rank) + ": --device cuda, but this "
                                "process sees no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES), "
                                "or use --device cpu");
  }
  if (env.local_rank >= visible) {
    throw std::invalid_argument(
        "rank " + std::to_string(env.rank) + ": --device cuda puts each rank on GPU LOCAL_RANK, "
        "but local rank " + std::to_string(env.local_rank) + " has none: this host sees " +
        std::to_string(visible) + " GPU(s); start at most that many ranks per host (dpscope "
        "launch -n " + std::to_string(visible) + "), or use --backend gloo --device cpu");
  }
  const auto index = static_cast<c10::DeviceIndex>(env.local_rank);
  c10::cuda::set_device(index);
  return c10::Device(c10::kCUDA, index);
#else
  throw std::invalid_argument("rank " + std::to_string(env.rank) +
                              ": --device cuda: this build has no CUDA (docs/gpu.md)");
#endif
}

comm::Backend backend_for(std::string_view backend, c10::Device device) {
  if (!backend.empty()) return comm::parse_backend(backend);
  return device.is_cuda() ? comm::Backend::Nccl : comm::Backend::Gloo;
}

}  // namespace dpscope::train
