// FsdpParam (fsdp_param.h): a parameter's dim-0 chunk kept in a padded shard at construction, and
// the unsharded parameter's storage emptied and refilled (Note [Unsharded parameter storage]).
#include "engine/fsdp2/fsdp_param.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/autograd/variable.h>

#include "engine/fsdp2/fsdp2_options.h"
#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"

namespace dpscope::fsdp2 {

namespace {

void check_shardable(const at::Tensor& param, const std::string& name) {
  auto refuse = [&](const std::string& why) {
    throw Fsdp2Error("parameter '" + name + "' " + why);
  };
  if (param.dim() == 0) {
    refuse("has no dimensions; FSDP2 shards every parameter on dim 0 — give it shape [1]");
  }
  if (param.scalar_type() != c10::ScalarType::Float) {
    refuse("is " + std::string(c10::toString(param.scalar_type())) +
           "; dpscope's FSDP2 keeps float32 shards — build the model in float32 and give "
           "MixedPrecisionPolicy a param precision for low-precision compute");
  }
  if (!param.is_contiguous() || param.is_view()) {
    refuse("is not a contiguous tensor of its own; FSDP2 (as PyTorch's) shards only "
           "contiguous parameters");
  }
  if (!param.requires_grad()) {
    refuse("does not require grad; make it a buffer, or train it");
  }
}

}  // namespace

c10::ScalarType scalar_type_of(ComputePrecision precision) {
  switch (precision) {
    case ComputePrecision::Fp32: return c10::ScalarType::Float;
    case ComputePrecision::Fp16: return c10::ScalarType::Half;
    case ComputePrecision::Bf16: return c10::ScalarType::BFloat16;
  }
  return c10::ScalarType::Float;
}

FsdpParam::FsdpParam(at::Tensor param, std::string name, int rank, int world_size,
                     c10::ScalarType compute_dtype, OffloadPolicy offload)
    : name_(std::move(name)), rank_(rank), param_(std::move(param)) {
  check_shardable(param_, name_);
  c10::NoGradGuard no_grad;
  chunks_ = Dim0Chunks(param_.size(0), world_size);
  for (int64_t d = 1; d < param_.dim(); ++d) row_numel_ *= param_.size(d);
  const int64_t rows = chunks_.rows_of(rank);
  {
    // See Note [FSDP2 CPU offload]: the shard on the host, pinned only for a GPU to copy from.
    c10::TensorOptions shard_options = param_.options().requires_grad(false);
    if (offload.offloads()) {
      shard_options = shard_options.device(c10::kCPU).pinned_memory(offload.pin_memory && !param_.is_cpu());
    }
    memory::CategoryScope shards(memory::MemoryCategory::Shards);
    padded_shard_ = at::zeros({padded_chunk_numel()}, shard_options);
    memory::own(padded_shard_, memory::MemoryCategory::Shards);
  }
  padded_shard_.narrow(0, 0, rows * row_numel_)
      .copy_(param_.detach().reshape({-1}).narrow(0, chunks_.first_row(rank) * row_numel_,
                                                 rows * row_numel_));
  std::vector<int64_t> shape = param_.sizes().vec();
  shape[0] = rows;
  sharded_ = padded_shard_.narrow(0, 0, rows * row_numel_).view(shape).detach();
  sharded_.set_requires_grad(true);

  {
    memory::CategoryScope full(memory::MemoryCategory::FullParameters);
    all_gather_output_ = at::empty({padded_chunk_numel() * world_size},
                                   param_.options().dtype(compute_dtype).requires_grad(false));
    // Its storage object stays while its memory comes and goes: owned once, counted at its size.
    memory::own(all_gather_output_, memory::MemoryCategory::FullParameters);
  }
  // See Note [Unsharded parameter storage]: the parameter's own memory goes; it views the
  // all-gather output's first numel elements from now on (a new dtype under mixed precision,
  // which gives it a new gradient accumulator: taken below).
  param_.set_data(all_gather_output_.narrow(0, 0, param_.numel()).view(param_.sizes()));
  free_unsharded();
  accumulator_ = torch::autograd::impl::grad_accumulator(param_);
}

bool FsdpParam::is_allocated() const {
  return all_gather_output_.storage().nbytes() > 0 || all_gather_output_.numel() == 0;
}

void FsdpParam::alloc_unsharded() {
  if (is_allocated()) return;
  memory::CategoryScope full(memory::MemoryCategory::FullParameters);
  memory::set_storage_bytes(all_gather_output_,
                              static_cast<size_t>(all_gather_output_.numel()) *
                                  all_gather_output_.element_size());
}

void FsdpParam::free_unsharded() { memory::set_storage_bytes(all_gather_output_, 0); }

void FsdpParam::keep_post_forward_shard(int group_size, int group_rank) {
  c10::NoGradGuard no_grad;
  const int64_t slice = all_gather_output_.numel() / group_size;
  memory::CategoryScope full(memory::MemoryCategory::FullParameters);
  post_forward_shard_ = all_gather_output_.narrow(0, slice * group_rank, slice).clone();
  memory::own(post_forward_shard_, memory::MemoryCategory::FullParameters);
}

void FsdpParam::accumulate_sharded_grad(const at::Tensor& grad) {
  c10::NoGradGuard no_grad;
  memory::CategoryScope gradient_shards(memory::MemoryCategory::GradientShards);
  const at::Tensor rows = grad.view(sharded_.sizes());
  at::Tensor& current = sharded_.mutable_grad();
  if (current.defined()) {
    current.add_(rows.to(current.device()));
  } else {
    // Its own tensor, not a view into the reduce-scatter's output as PyTorch keeps it: LibTorch
    // 1.13's Optimizer::zero_grad detaches a gradient in place, which a view refuses.
    current = rows.to(sharded_.device(), sharded_.scalar_type(), false, /*copy=*/true);
    memory::own(current, memory::MemoryCategory::GradientShards);
  }
}

}  // namespace dpscope::fsdp2
