// torch.nn.utils.clip_grad_norm_ over gradients sharded across ranks: the norm of the whole
// gradient from each rank's shards, and every shard scaled so that it is at most the bound.
// FSDP1's and FSDP2's clip_grad_norm both call it (engine/fsdp, engine/fsdp2).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "engine/comm/process_group.h"

namespace dpscope::replica {

// Where the squares of the gradient's elements live: spread over the group's ranks (each rank
// holds a shard: FSDP's sharded strategies), or all on this rank (NO_SHARD, one rank).
enum class GradientSquares { SpreadOverRanks, AllOnThisRank };

// Sums the squares of every defined `.grad` of `shards` in float64, over the group's ranks when
// `squares` says they are spread (one all-reduce, tagged with `iteration`), and scales each
// gradient by min(1, max_norm / (norm + 1e-6)), as PyTorch does. Returns the total norm before
// clipping as a float64 scalar on the gradients' device (the group's device when there are no
// shards): nothing waits for it until the caller reads it (Note [Collective tensors on the
// group's device]). Collective when spread: every rank of `group` calls it. One training thread.
at::Tensor clip_sharded_grad_norm(const std::vector<at::Tensor>& shards, double max_norm,
                                  comm::ProcessGroup& group, GradientSquares squares,
                                  int32_t iteration);

}  // namespace dpscope::replica
