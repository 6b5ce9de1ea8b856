// ZeRO stage 1 (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models", SC 2020): an optimizer whose state is sharded across the ranks while the
// parameters and gradients stay whole on every rank. See Note [ZeRO-1].
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/comm/process_group.h"

namespace dpscope::zero {

// Note [ZeRO-1]
// Data parallelism keeps K bytes of optimizer state per parameter on every rank (Adam: 8 in
// fp32; 12 with mixed precision's fp32 master weights), usually the largest share of a model's
// memory. ZeRO-1 keeps each rank's 1/n of it:
//  - The parameters live in one flat buffer (each parameter a view of it), padded to a multiple
//    of the world size n and cut into n equal shards; rank r owns shard r. The gradients live in a
//    second flat buffer of the same layout (each parameter's .grad a view of it), so backward
//    accumulates straight into it.
//  - step(): a reduce-scatter (average) of the gradient buffer leaves rank r the averaged
//    gradient of its shard; a local optimizer, built over the shard only, steps it (its state is
//    1/n of the model's); an all-gather of the shards brings every rank the whole updated
//    parameters, in place.
// On a ring the reduce-scatter and the all-gather each send (n-1)/n of the buffer per rank, the
// two halves of an all-reduce: ZeRO-1 moves the bytes DDP moves (the paper's Table 1).
// PyTorch's torch.distributed.optim.ZeroRedundancyOptimizer does the same sharding differently:
// it sits beside DDP (whose all-reduce averages the whole gradient), gives each rank whole
// parameters chosen greedily by size, and broadcasts each rank's parameters after its step,
// about 1.5x DDP's bytes. Elementwise optimizers (SGD, Adam, AdamW) compute per element, so the
// shard's step equals the whole model's: on 2 ranks a ZeRO-1 run equals a DDP run bit for bit.
// There is no overlap with backward: the reduce-scatter starts after backward, in step().

// Builds the optimizer that steps this rank's shard, given the shard (one tensor), e.g.
//   [](std::vector<at::Tensor> shard) {
//     return std::make_unique<torch::optim::Adam>(shard, torch::optim::AdamOptions(1e-3)); }
using LocalOptimizerFactory =
    std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor> shard)>;

// The options of the outer optimizer's parameter group; learning rate and the like belong to
// the local optimizer.
struct ZeroOptions : torch::optim::OptimizerCloneableOptions<ZeroOptions> {};

// Owns the flat parameter and gradient buffers (counted as parameters and gradients), this
// rank's averaged gradient shard (gradient shards) and the local optimizer (its state counts as
// optimizer state). The model's parameters become views of the parameter buffer: keep the
// optimizer alive as long as the model trains. Not thread-safe; every rank must construct it and
// call step() in the same order (they are collectives).
class ZeroRedundancyOptimizer : public torch::optim::Optimizer {
 public:
  // Flattens `parameters` (float tensors of one dtype and device, each requiring grad, at least
  // one element in all) into the buffers and broadcasts rank 0's values, so every rank starts
  // from the same model. Throws std::invalid_argument naming the parameter for bad input.
  ZeroRedundancyOptimizer(std::vector<at::Tensor> parameters, std::shared_ptr<comm::ProcessGroup> group,
                          const LocalOptimizerFactory& make_local_optimizer);

  // Reduce-scatter of the gradients, the local step, all-gather of the parameters. A gradient
  // that no longer aliases the gradient buffer (zero_grad(set_to_none), or assigned by hand) is
  // copied back into it first and made a view again; a parameter without a gradient contributes
  // zeros. A closure is refused (it would run forward and backward on one rank only).
  at::Tensor step(LossClosure closure = nullptr) override;

  // ---- What it holds: the lesson's numbers.
  int world_size() const { return group_->size(); }
  int64_t numel() const { return numel_; }              // the parameters' elements
  int64_t shard_numel() const { return shard_numel_; }  // per rank, padding included
  const at::Tensor& flat_parameters() const { return flat_parameters_; }
  const at::Tensor& flat_gradients() const { return flat_gradients_; }
  const at::Tensor& gradient_shard() const { return gradient_shard_; }
  torch::optim::Optimizer& local_optimizer() { return *local_; }
  int32_t steps_taken() const { return iteration_; }

 private:
  void attach_gradients();
  comm::CollectiveTag tag() const { return comm::CollectiveTag{iteration_}; }

  std::shared_ptr<comm::ProcessGroup> group_;
  std::vector<at::Tensor> parameters_;
  std::vector<int64_t> offsets_;  // each parameter's first element in the flat buffers
  int64_t numel_ = 0;
  int64_t shard_numel_ = 0;
  at::Tensor flat_parameters_;
  at::Tensor flat_gradients_;
  at::Tensor parameter_shard_;  // this rank's slice of flat_parameters_, stepped in place
  at::Tensor gradient_shard_;
  std::unique_ptr<torch::optim::Optimizer> local_;
  int32_t iteration_ = 0;
};

}  // namespace dpscope::zero
