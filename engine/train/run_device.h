// The device a rank trains on and the backend that goes with it: the CPU with Gloo, or in a CUDA
// build the rank's own GPU (cuda:LOCAL_RANK) with NCCL, as torchrun's one process per GPU.
#pragma once

#include <c10/core/Device.h>

#include <string_view>

#include "engine/comm/rendezvous.h"
#include "engine/comm/world.h"

namespace dpscope::train {

// This rank's device for --device `device`: the CPU, or cuda:LOCAL_RANK, which it makes the
// current CUDA device. Throws std::invalid_argument naming the rank and the fix when no GPU is
// visible or LOCAL_RANK has none of its own (more ranks on a host than GPUs).
c10::Device select_run_device(std::string_view device, const comm::LaunchEnv& env);

// The backend for --backend `backend` ("" = the device's own: nccl on a GPU, gloo on the CPU).
comm::Backend backend_for(std::string_view backend, c10::Device device);

}  // namespace dpscope::train
