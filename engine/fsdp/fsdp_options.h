// FSDP's options, as PyTorch's FullyShardedDataParallel names them: the sharding strategy, the
// wrap policy, mixed precision, CPU offload, prefetching and the reduce-scatter bucket — and the
// error every FSDP failure throws.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

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

// What each rank keeps between uses of a unit (ZeRO's stages).
enum class ShardingStrategy {
  FullShard,    // ZeRO-3: parameters, gradients and optimizer state sharded; full parameters
                // gathered for forward, freed, gathered again for backward
  ShardGradOp,  // ZeRO-2: like FullShard, but the full parameters stay from forward to backward
  NoShard,      // DDP-like: every rank keeps everything; gradients are all-reduced
};
std::string_view to_string(ShardingStrategy strategy);
// "full" | "grad_op" | "no_shard"; throws FsdpError naming the choices otherwise.
ShardingStrategy parse_sharding(std::string_view text);

// When backward gathers the next unit's parameters ahead of need.
enum class BackwardPrefetch {
  None,
  Pre,   // BACKWARD_PRE: when this unit's backward begins (more overlap, more memory)
  Post,  // BACKWARD_POST: when this unit's gradient is complete
};
std::string_view to_string(BackwardPrefetch prefetch);
// "none" | "pre" | "post".
BackwardPrefetch parse_backward_prefetch(std::string_view text);

// Mixed precision: compute in `param_dtype` from a low-precision copy of each shard; reduce
// gradients in `reduce_dtype`; keep buffers in `buffer_dtype`. Everything float32: off.
struct MixedPrecision {
  c10::ScalarType param_dtype = c10::ScalarType::Float;
  c10::ScalarType reduce_dtype = c10::ScalarType::Float;
  c10::ScalarType buffer_dtype = c10::ScalarType::Float;
  bool enabled() const { return param_dtype != c10::ScalarType::Float; }
};
// "none" | "fp16" | "bf16"; reduce_fp32 keeps reduce-scatters in float32.
MixedPrecision parse_mixed_precision(std::string_view text, bool reduce_fp32);

// Decides whether a submodule becomes a unit of its own. Called innermost first with the
// module's qualified name and the number of its parameter elements not already in a unit.
using WrapPolicy =
    std::function<bool(const std::string& name, const torch::nn::Module& module, int64_t numel)>;
// PyTorch's size_based_auto_wrap_policy: wrap a submodule holding at least `min_params`
// parameter elements (not counting those of units inside it). 0: wrap nothing.
WrapPolicy size_based_wrap_policy(int64_t min_params);

struct FsdpOptions {
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
