// FlatParameter (flat_param.h): flattening and sharding at construction, the full parameter's
// storage that is emptied and refilled (Note [Full parameter storage]), and the autograd node
// that gathers a unit's parameter gradients into one flat gradient.
#include "engine/fsdp/flat_param.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>

#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"

namespace dpscope::fsdp {

namespace {

using memory::CategoryScope;
using memory::MemoryCategory;

// The autograd node behind a unit's parameters (See Note [FSDP hooks]). Input i is parameter i's
// gradient; autograd runs the node once per backward, after every gradient of every parameter of
// the unit has been summed, and hands it undefined inputs for parameters that got none. It writes
// them into one padded flat gradient for the full parameter's AccumulateGrad.
class UnflattenBackward final : public torch::autograd::Node {
 public:
  UnflattenBackward(std::vector<int64_t> offsets, std::vector<int64_t> numels, int64_t padded_numel,
                    at::TensorOptions options)
      : offsets_(std::move(offsets)),
        numels_(std::move(numels)),
        padded_numel_(padded_numel),
        options_(options) {}

  std::string name() const override { return "FsdpUnflattenBackward"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    CategoryScope full_gradients(MemoryCategory::FullGradients);
    at::Tensor flat = at::empty({padded_numel_}, options_);
    int64_t covered = 0;  // elements before this point are written or zeroed
    for (size_t i = 0; i < grads.size(); ++i) {
      at::Tensor slot = flat.narrow(0, offsets_[i], numels_[i]);
      if (offsets_[i] > covered) flat.narrow(0, covered, offsets_[i] - covered).zero_();
      if (grads[i].defined()) {
        slot.view(grads[i].sizes()).copy_(grads[i]);
        grads[i] = at::Tensor();  // often the last reference: the copy's source goes at once
      } else {
        slot.zero_();
      }
      covered = std::max(covered, offsets_[i] + numels_[i]);
    }
    if (padded_numel_ > covered) flat.narrow(0, covered, padded_numel_ - covered).zero_();
    memory::own(flat, MemoryCategory::FullGradients);
    return {std::move(flat)};
  }

 private:
  const std::vector<int64_t> offsets_;
  const std::vector<int64_t> numels_;
  const int64_t padded_numel_;
  const at::TensorOptions options_;
};

}  // namespace

FlatParameter::FlatParameter(const UnitPlan& plan, const FlatParamConfig& config)
    : config_(config), params_(plan.params), param_names_(plan.param_names) {
  c10::NoGradGuard no_grad;
  const std::string unit = plan.name.empty() ? "the root" : "'" + plan.name + "'";
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& p = params_[i];
    if (p.scalar_type() != c10::ScalarType::Float) {
      throw FsdpError("parameter '" + param_names_[i] + "' of unit " + unit + " is " +
                      std::string(c10::toString(p.scalar_type())) +
                      "; FSDP keeps float32 shards — build the model in float32 and use mixed "
                      "precision for low-precision compute");
    }
    if (p.device() != params_[0].device()) {
      throw FsdpError("unit " + unit + " mixes devices ('" + param_names_[0] + "' and '" +
                      param_names_[i] + "'); move the model to one device first");
    }
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
  const int64_t world = config_.sharded ? config_.world_size : 1;
  padded_numel_ = (numel_ + world - 1) / world * world;
  shard_numel_ = padded_numel_ / world;
  shard_begin_ = config_.sharded ? shard_numel_ * config_.rank : 0;

  const at::TensorOptions fp32 = at::TensorOptions().dtype(c10::ScalarType::Float);
  {
    CategoryScope shards(MemoryCategory::Shards);
    shard_ = at::zeros({shard_numel_}, fp32.device(config_.shard_device));
    for (size_t i = 0; i < params_.size(); ++i) {
      // The part of parameter i inside [shard_begin, shard_begin + shard_numel).
      const int64_t begin = std::max(offsets_[i], shard_begin_);
      const int64_t end = std::min(offsets_[i] + params_[i].numel(), shard_begin_ + shard_numel_);
      if (begin >= end) continue;
      shard_.narrow(0, begin - shard_begin_, end - begin)
          .copy_(params_[i].reshape({-1}).narrow(0, begin - offsets_[i], end - begin));
    }
  }
  memory::own(shard_, MemoryCategory::Shards);
  shard_.set_requires_grad(true);

  full_aliases_shard_ = !config_.sharded && config_.compute_dtype == c10::ScalarType::Float &&
                        config_.shard_device == config_.compute_device;
  if (full_aliases_shard_) {
    full_ = shard_.detach();
  } else {
    CategoryScope full_parameters(MemoryCategory::FullParameters);
    full_ = at::empty({padded_numel_}, fp32.dtype(config_.compute_dtype).device(config_.compute_device));
    // Its storage object stays while its memory comes and goes: owned once, counted at its size.
    memory::own(full_, MemoryCategory::FullParameters);
  }
  full_.set_requires_grad(true);
  // See Note [Full parameter storage]: the parameters' own memory goes; they view full() now.
  const at::Tensor full_data = full_.detach();
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].set_data(full_data.narrow(0, offsets_[i], params_[i].numel()).view(params_[i].sizes()));
  }
  if (!full_aliases_shard_) free_full();
  accumulator_ = torch::autograd::impl::grad_accumulator(full_);
}

FlatParameter::~FlatParameter() = default;

int64_t FlatParameter::real_numel_of(int rank) const {
  const int64_t begin = config_.sharded ? shard_numel_ * rank : 0;
  return std::clamp<int64_t>(numel_ - begin, 0, shard_numel_);
}

bool FlatParameter::is_materialized() const {
  return full_aliases_shard_ || full_.storage().nbytes() > 0 || padded_numel_ == 0;
}

void FlatParameter::materialize() {
  if (is_materialized()) return;
  CategoryScope full_parameters(MemoryCategory::FullParameters);
  memory::set_storage_bytes(full_, static_cast<size_t>(padded_numel_) * full_.element_size());
}

void FlatParameter::free_full() {
  if (full_aliases_shard_) return;
  memory::set_storage_bytes(full_, 0);
}

at::Tensor FlatParameter::shard_for_gather() const {
  const at::Tensor shard = shard_.detach();
  if (shard.scalar_type() == config_.compute_dtype && shard.device() == config_.compute_device) {
    return shard;
  }
  CategoryScope full_parameters(MemoryCategory::FullParameters);
  at::Tensor gather_input = shard.to(config_.compute_device, config_.compute_dtype);
  memory::own(gather_input, MemoryCategory::FullParameters);
  return gather_input;
}

void FlatParameter::fill_full_from_shard() {
  c10::NoGradGuard no_grad;
  full_.detach().narrow(0, 0, shard_numel_).copy_(shard_.detach());
}

void FlatParameter::attach_gradient_node() {
  if (params_.empty()) return;
  std::vector<int64_t> numels;
  for (const at::Tensor& p : params_) numels.push_back(p.numel());
  auto node = std::make_shared<UnflattenBackward>(offsets_, std::move(numels), padded_numel_,
                                                  full_.options().requires_grad(false));
  node->add_next_edge(torch::autograd::impl::gradient_edge(full_));
  for (const at::Tensor& p : params_) {
    const uint32_t input_nr = node->add_input_metadata(p);
    torch::autograd::impl::set_gradient_edge(p, {node, input_nr});
  }
}

}  // namespace dpscope::fsdp
