// ZeRO-1's optimizer: the flat buffers, the broadcast that starts every rank from rank 0's
// model, and the step (reduce-scatter, local step, all-gather). See Note [ZeRO-1].
#include "engine/zero/zero_redundancy_optimizer.h"

#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "engine/memory/optimizer_memory.h"
#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"

namespace dpscope::zero {

namespace {

std::vector<torch::optim::OptimizerParamGroup> outer_groups(const std::vector<at::Tensor>& parameters) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(parameters, std::make_unique<ZeroOptions>());
  return groups;
}

// Parameter i's place in the error messages: "parameter 3 (shape [10, 64])".
std::string describe(size_t index, const at::Tensor& parameter) {
  std::string shape = "[";
  for (int64_t d = 0; d < parameter.dim(); ++d) {
    shape += (d ? ", " : "") + std::to_string(parameter.size(d));
  }
  return "parameter " + std::to_string(index) + " (shape " + shape + "])";
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<at::Tensor> parameters,
                                                 std::shared_ptr<comm::ProcessGroup> group,
                                                 const LocalOptimizerFactory& make_local_optimizer)
    : Optimizer(outer_groups(parameters), std::make_unique<ZeroOptions>()),
      group_(std::move(group)),
      parameters_(std::move(parameters)) {
  if (!group_) throw std::invalid_argument("ZeroRedundancyOptimizer: no process group; pass the world's");
  if (!make_local_optimizer) {
    throw std::invalid_argument("ZeroRedundancyOptimizer: no local optimizer; pass a function that builds "
                                "one over the shard, e.g. torch::optim::SGD");
  }
  if (parameters_.empty()) {
    throw std::invalid_argument("ZeroRedundancyOptimizer: no parameters; pass model->parameters()");
  }
  const at::TensorOptions options = parameters_.front().options();
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const at::Tensor& p = parameters_[i];
    if (!p.defined() || !p.requires_grad()) {
      throw std::invalid_argument("ZeroRedundancyOptimizer: " + describe(i, p) +
                                  " does not require grad; leave frozen parameters out of the list");
    }
    if (!p.is_floating_point() || p.scalar_type() != options.dtype().toScalarType() ||
        p.device() != options.device()) {
      throw std::invalid_argument("ZeroRedundancyOptimizer: " + describe(i, p) + " is " +
                                  std::string(c10::toString(p.scalar_type())) + " on " + p.device().str() +
                                  ", parameter 0 is " +
                                  std::string(c10::toString(options.dtype().toScalarType())) + " on " +
                                  options.device().str() +
                                  "; every parameter must be of one floating dtype on one device");
    }
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
  if (numel_ == 0) throw std::invalid_argument("ZeroRedundancyOptimizer: the parameters have no elements");
  const int n = group_->size();
  shard_numel_ = (numel_ + n - 1) / n;
  const int64_t padded = shard_numel_ * n;

  c10::NoGradGuard no_grad;
  {
    memory::CategoryScope category(memory::MemoryCategory::Parameters);
    flat_parameters_ = at::zeros({padded}, options.requires_grad(false));
    memory::own(flat_parameters_, memory::MemoryCategory::Parameters);
  }
  {
    memory::CategoryScope category(memory::MemoryCategory::Gradients);
    flat_gradients_ = at::zeros({padded}, options.requires_grad(false));
    memory::own(flat_gradients_, memory::MemoryCategory::Gradients);
  }
  {
    memory::CategoryScope category(memory::MemoryCategory::GradientShards);
    gradient_shard_ = at::zeros({shard_numel_}, options.requires_grad(false));
    memory::own(gradient_shard_, memory::MemoryCategory::GradientShards);
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor& p = parameters_[i];
    at::Tensor view = flat_parameters_.narrow(0, offsets_[i], p.numel()).view(p.sizes());
    view.copy_(p.detach());
    p.set_data(view);
  }
  attach_gradients();
  // Each rank built its own random model; start every rank from rank 0's, as DDP does.
  group_->broadcast(flat_parameters_, 0, tag())->wait();

  parameter_shard_ = flat_parameters_.narrow(0, static_cast<int64_t>(group_->rank()) * shard_numel_, shard_numel_);
  parameter_shard_.mutable_grad() = gradient_shard_;
  local_ = make_local_optimizer({parameter_shard_});
  if (!local_) throw std::invalid_argument("ZeroRedundancyOptimizer: the local optimizer factory returned none");
}

void ZeroRedundancyOptimizer::attach_gradients() {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor& p = parameters_[i];
    at::Tensor slot = flat_gradients_.narrow(0, offsets_[i], p.numel()).view(p.sizes());
    at::Tensor& grad = p.mutable_grad();
    if (grad.defined() && grad.data_ptr() == slot.data_ptr()) continue;
    if (grad.defined()) {
      slot.copy_(grad.detach());
    } else {
      slot.zero_();
    }
    grad = slot;
  }
}

at::Tensor ZeroRedundancyOptimizer::step(LossClosure closure) {
  if (closure) {
    throw std::invalid_argument("ZeroRedundancyOptimizer::step: a closure would run forward and backward on "
                                "this rank alone; run them before step() on every rank");
  }
  c10::NoGradGuard no_grad;
  attach_gradients();
  group_->reduce_scatter(gradient_shard_, flat_gradients_, comm::ReduceOp::Average, tag())->wait();
  {
    memory::CategoryScope state(memory::MemoryCategory::OptimizerState);
    local_->step();
  }
  memory::count_optimizer_state(*local_);
  // In place: the input is this rank's slice of the output (Note [ZeRO-1]).
  group_->all_gather(flat_parameters_, parameter_shard_, tag())->wait();
  ++iteration_;
  return {};
}

}  // namespace dpscope::zero
