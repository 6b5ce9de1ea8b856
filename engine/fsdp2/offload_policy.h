// FSDP2's OffloadPolicy (PyTorch's OffloadPolicy / CPUOffloadPolicy(pin_memory)): where the
// sharded parameters, their gradients and the optimizer live. Plain values, no LibTorch;
// fully_shard takes it in FullyShardOptions, FsdpParam and FsdpParamGroup act on it.
#pragma once

#include <string_view>

namespace dpscope::fsdp2 {

// Note [FSDP2 CPU offload]
// PyTorch's CPUOffloadPolicy keeps each rank's sharded parameters and their gradients in host
// memory (pinned with pin_memory, so the copies can run asynchronously) while the module computes
// on its device; the optimizer steps on the host. dpscope's FSDP2 does the same at four points,
// each device-generic (a tensor's .to / copy_ across devices):
//   - construction: the padded shard (the sharded parameter inside it) is allocated on the host
//     (`Shards`), pinned when pin_memory is set and the compute device is a GPU (host memory is
//     pinned only for a GPU to copy from);
//   - the all-gather's copy-in: the buffer is allocated on the compute device (the group's) and
//     each shard copied into it, a host-to-device copy, so the collective moves device memory;
//   - the view-out: this rank's rows of the reduce-scattered gradient (on the compute device) are
//     copied to the host into the sharded parameter's .grad (`GradientShards`), device-to-host;
//   - the optimizer is built over the sharded parameters, so its state is on the host too;
//     clip_grad_norm sums the host squares and all-reduces them on the group's device.
// The module's unsharded parameters, their gradients and the collective buffers stay on the
// compute device. On a CPU run the compute device is the host: every copy above is a copy within
// host memory (or none), no memory is pinned, and the memory categories equal the run without
// offload — what a CPU run exercises is the policy's plumbing and that training is unchanged,
// not the transfers' cost (FSDP1's --cpu-offload on the CPU likewise: docs/fsdp.md).
enum class OffloadKind {
  None,  // PyTorch's OffloadPolicy(): everything on the compute device
  Cpu,   // CPUOffloadPolicy: shards, their gradients and the optimizer on the host
};

struct OffloadPolicy {
  OffloadKind kind = OffloadKind::None;
  bool pin_memory = true;  // Cpu: pin the host shards when the compute device is a GPU

  static OffloadPolicy none() { return {OffloadKind::None, true}; }
  static OffloadPolicy cpu(bool pin = true) { return {OffloadKind::Cpu, pin}; }
  bool offloads() const { return kind == OffloadKind::Cpu; }
  // "none" or "cpu" (train's describe line and the docs' spelling).
  std::string_view text() const { return offloads() ? "cpu" : "none"; }
};

}  // namespace dpscope::fsdp2
