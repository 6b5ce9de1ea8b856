// FSDP2's options as PyTorch's fully_shard names them — reshard_after_forward (True, False or an
// int) and where to trace — and Fsdp2Error, the error every FSDP2 failure throws. Needs no
// LibTorch: `dpscope train` parses and checks them in its options-only build too.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "engine/fsdp2/offload_policy.h"
#include "trace/vocabulary.h"

namespace dpscope::memory {
class MemorySampler;
}
namespace dpscope::trace {
class Recorder;
}

namespace dpscope::fsdp2 {

using trace::ComputePrecision;
using trace::ReshardAfterForward;

class Fsdp2Error : public std::runtime_error {
 public:
  explicit Fsdp2Error(const std::string& message) : std::runtime_error(message) {}
};

// PyTorch's `reshard_after_forward: bool | int`, as an explicit mode and, for the int form, the
// size of the group the parameters are resharded to after forward (a host's ranks, say).
struct ReshardSpec {
  ReshardAfterForward mode = ReshardAfterForward::Reshard;
  int group_size = 0;  // ToGroupSize only

  static ReshardSpec reshard() { return {ReshardAfterForward::Reshard, 0}; }
  static ReshardSpec keep() { return {ReshardAfterForward::Keep, 0}; }
  static ReshardSpec to_group_size(int n) { return {ReshardAfterForward::ToGroupSize, n}; }
  // "true", "false" or the group size ("2").
  std::string text() const;
};

// "true" | "false" | a positive integer N (`--reshard-after-forward`). Throws
// std::invalid_argument naming `flag` and the forms otherwise.
ReshardSpec parse_reshard_spec(std::string_view text, std::string_view flag);

// What a group keeps after forward when its parameters are sharded over `world_size` ranks (the
// world, or HSDP's shard group), as PyTorch's _get_post_forward_mesh_info decides it: the int
// form N must divide that size (1 <= N <= it); N == world is Reshard, N == 1 is Keep (PyTorch warns that 1 means "no resharding"),
// and 1 < N < world is ToGroupSize (See Note [Resharding to a smaller group] in
// fsdp_param_group.h). Throws Fsdp2Error naming N, the world size and the choices.
ReshardAfterForward resolve_reshard(const ReshardSpec& spec, int world_size);

// PyTorch's MixedPrecisionPolicy(param_dtype, reduce_dtype): the unsharded parameters (and so
// the all-gather and the compute) in `param`, the gradients reduce-scattered in `reduce`; the
// sharded parameters, their gradients and the optimizer stay float32. Fp32 for both: off.
struct MixedPrecisionPolicy {
  ComputePrecision param = ComputePrecision::Fp32;
  ComputePrecision reduce = ComputePrecision::Fp32;
  bool enabled() const { return param != ComputePrecision::Fp32; }
};

// What fully_shard takes besides the module and the group.
struct FullyShardOptions {
  ReshardSpec reshard_after_forward = ReshardSpec::reshard();
  MixedPrecisionPolicy mp_policy;  // fp16 needs CUDA (LibTorch 1.13 has no float16 matmul on the CPU)
  OffloadPolicy offload_policy;    // See Note [FSDP2 CPU offload]
  trace::Recorder* recorder = nullptr;              // may be null: nothing recorded
  memory::MemorySampler* memory_sampler = nullptr;  // sampled at each gather and free; may be null
};

}  // namespace dpscope::fsdp2
