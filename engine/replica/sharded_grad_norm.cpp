// clip_grad_norm_ over shards (sharded_grad_norm.h): the squares summed shard after shard in
// float64 on the gradients' device, then over ranks with one all-reduce on the group's.
#include "engine/replica/sharded_grad_norm.h"

#include <ATen/ops/full_like.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

namespace dpscope::replica {

at::Tensor clip_sharded_grad_norm(const std::vector<at::Tensor>& shards, double max_norm,
                                  comm::ProcessGroup& group, GradientSquares squares,
                                  int32_t iteration) {
  c10::NoGradGuard no_grad;
  const c10::Device device = shards.empty() ? group.device() : shards.front().device();
  at::Tensor total_squares = at::zeros({1}, at::TensorOptions(device).dtype(at::kDouble));
  for (const at::Tensor& shard : shards) {
    if (shard.grad().defined()) total_squares += shard.grad().to(at::kDouble).pow(2).sum();
  }
  if (squares == GradientSquares::SpreadOverRanks && group.size() > 1) {
    // Offloaded shards sum on the host; the collective takes the group's device (Note
    // [Collective tensors on the group's device]): a copy there and back, none on a CPU run.
    at::Tensor on_group = total_squares.to(group.device());
    group.all_reduce(on_group, comm::ReduceOp::Sum, comm::CollectiveTag{iteration})->wait();
    total_squares = on_group.to(device);
  }
  const at::Tensor total = total_squares.sqrt();
  // A coefficient clamped to 1 leaves a gradient within the bound as it was.
  const at::Tensor coefficient = at::full_like(total, max_norm).div(total + 1e-6).clamp_max(1.0);
  for (const at::Tensor& shard : shards) {
    if (shard.grad().defined()) shard.grad().mul_(coefficient);
  }
  return total.reshape({});
}

}  // namespace dpscope::replica
