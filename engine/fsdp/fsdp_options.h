// FSDP's options, as PyTorch's FullyShardedDataParallel names them: the sharding strategy, the
// wrap policy, mixed precision, CPU offload, prefetching and the reduce-scatter bucket — and the
// error every FSDP failure throws. The modes' enums and spellings are in fsdp_modes.h.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "engine/fsdp/fsdp_modes.h"

namespace torch::nn {
class Module;
}
namespace dpscope::memory {
class MemorySampler;
}
namespace dpscope::trace {
class Recorder;
}

namespace dpscope::fsdp {

class FsdpError : public std::runtime_error {
 public:
  explicit FsdpError(const std::string& message) : std::runtime_error(message) {}
};

// Mixed precision: compute in `param_dtype` from a low-precision copy of each shard; reduce
// gradients in `reduce_dtype`; keep buffers in `buffer_dtype`. Everything float32: off.
struct MixedPrecision {
  c10::ScalarType param_dtype = c10::ScalarType::Float;
  c10::ScalarType reduce_dtype = c10::ScalarType::Float;
  c10::ScalarType buffer_dtype = c10::ScalarType::Float;
  bool enabled() const { return param_dtype != c10::ScalarType::Float; }
};
// `dpscope train --mixed-precision P [--reduce-fp32]`: parameters and buffers in P, reductions
// in P too unless `reduce_fp32` keeps them in float32 (fsdp_options.cpp).
MixedPrecision mixed_precision_for(ComputePrecision precision, bool reduce_fp32);

// Decides whether a submodule becomes a unit of its own. Called innermost first with the
// module's qualified name and the number of its parameter elements not already in a unit.
using WrapPolicy =
    std::function<bool(const std::string& name, const torch::nn::Module& module, int64_t numel)>;
// PyTorch's size_based_auto_wrap_policy: wrap a submodule holding at least `min_params`
// parameter elements (not counting those of units inside it). 0: wrap nothing.
WrapPolicy size_based_wrap_policy(int64_t min_params);

struct FsdpOptions {
  // HybridShard needs the constructor that takes an comm::DeviceMesh with a replicate group.
  ShardingStrategy sharding = ShardingStrategy::FullShard;
  WrapPolicy wrap_policy;  // empty: the root is the only unit
  MixedPrecision mixed_precision;
  // Shards and their gradients live in CPU memory; a unit's shard is copied to the compute
  // device for its all-gather (a no-op on a CPU device).
  bool cpu_offload = false;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::Pre;
  // Gather the next unit (in the first iteration's forward order) when a unit's forward begins.
  bool forward_prefetch = false;
  // At most this many all-gathers in flight; issuing another first waits for the oldest.
  // 0: no limit.
  int limit_all_gathers = 0;
  // At most this many reduce-scatters in flight; issuing another first waits for the oldest.
  // Each holds a unit's full gradient until it is done, so 1 keeps one full gradient waiting
  // behind the communication thread while the next unit's backward runs. 0: no limit.
  int limit_reduce_scatters = 1;
  // Reduce-scatter bucket (fairscale's ReduceScatterBucketer), in bytes over all ranks: a
  // gradient whose per-rank chunk is smaller than cap / world size waits in the bucket, which is
  // reduce-scattered when full and at the end of backward; larger ones go straight through.
  // 0: no bucketing.
  int64_t reduce_bucket_bytes = int64_t{1} << 20;
  // Broadcast rank 0's parameters and buffers at construction (PyTorch's sync_module_states).
  bool sync_module_states = true;
  trace::Recorder* recorder = nullptr;           // may be null: nothing recorded
  memory::MemorySampler* memory_sampler = nullptr;  // sampled at each gather and free; may be null
};

}  // namespace dpscope::fsdp
