// FSDP's modes as `dpscope train` and the trace spell them: the sharding strategy, backward
// prefetch and the compute precision, each an enum with its one spelling (to_string; parsed by
// train::parse_mode). Needs no LibTorch, so the command line and the CLI fuzzer can use it.
#pragma once

#include <array>
#include <string_view>

namespace dpscope::fsdp {

// What each rank keeps between uses of a unit (ZeRO's stages).
enum class ShardingStrategy {
  FullShard,    // ZeRO-3: parameters, gradients and optimizer state sharded; full parameters
                // gathered for forward, freed, gathered again for backward
  ShardGradOp,  // ZeRO-2: like FullShard, but the full parameters stay from forward to backward
  NoShard,      // DDP-like: every rank keeps everything; gradients are all-reduced
};
inline constexpr std::array<ShardingStrategy, 3> kShardingStrategies{
    ShardingStrategy::FullShard, ShardingStrategy::ShardGradOp, ShardingStrategy::NoShard};
// "full" | "grad_op" | "no_shard".
constexpr std::string_view to_string(ShardingStrategy strategy) {
  switch (strategy) {
    case ShardingStrategy::FullShard: return "full";
    case ShardingStrategy::ShardGradOp: return "grad_op";
    case ShardingStrategy::NoShard: return "no_shard";
  }
  return "?";
}

// When backward gathers the next unit's parameters ahead of need.
enum class BackwardPrefetch {
  None,
  Pre,   // BACKWARD_PRE: when this unit's backward begins (more overlap, more memory)
  Post,  // BACKWARD_POST: when this unit's gradient is complete
};
inline constexpr std::array<BackwardPrefetch, 3> kBackwardPrefetches{
    BackwardPrefetch::Pre, BackwardPrefetch::Post, BackwardPrefetch::None};
// "none" | "pre" | "post".
constexpr std::string_view to_string(BackwardPrefetch prefetch) {
  switch (prefetch) {
    case BackwardPrefetch::None: return "none";
    case BackwardPrefetch::Pre: return "pre";
    case BackwardPrefetch::Post: return "post";
  }
  return "?";
}

// The dtype units compute in (`--mixed-precision`); MixedPrecision (fsdp_options.h) derives the
// dtypes of parameters, reductions and buffers from it.
enum class ComputePrecision { Fp32, Fp16, Bf16 };
inline constexpr std::array<ComputePrecision, 3> kComputePrecisions{
    ComputePrecision::Fp32, ComputePrecision::Fp16, ComputePrecision::Bf16};
// "none" (float32: mixed precision off) | "fp16" | "bf16".
constexpr std::string_view to_string(ComputePrecision precision) {
  switch (precision) {
    case ComputePrecision::Fp32: return "none";
    case ComputePrecision::Fp16: return "fp16";
    case ComputePrecision::Bf16: return "bf16";
  }
  return "?";
}

}  // namespace dpscope::fsdp
