// FSDP's backward (See Note [FSDP hooks]): the pre-backward hook on each unit's outputs, the
// post-backward hook on each full parameter's AccumulateGrad that reduces the unit's gradient, and
// the root's final callback that waits for every reduction and hands the shards their gradients.
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <algorithm>

#include "engine/comm/nccl_backend.h"
#include "engine/fault/fault_injection.h"
#include "engine/fsdp/fully_sharded_data_parallel.h"
#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"

namespace dpscope::fsdp {

using memory::CategoryScope;
using memory::MemoryCategory;

void FullyShardedDataParallel::install_post_backward_hooks() {
  for (auto& unit : units_) {
    if (unit->flat->empty()) continue;
    Unit* raw = unit.get();
    unit->post_hook_key = unit->flat->grad_accumulator()->add_post_hook(
        std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, raw](const torch::autograd::variable_list& outputs,
                        const torch::autograd::variable_list& /*inputs*/) {
              post_backward(*raw);
              return outputs;
            }));
  }
}

void FullyShardedDataParallel::remove_post_backward_hooks() {
  for (auto& unit : units_) {
    if (!unit->flat->empty()) unit->flat->grad_accumulator()->del_post_hook(unit->post_hook_key);
  }
}

void FullyShardedDataParallel::register_pre_backward_hook(Unit& unit, const at::Tensor& output) {
  if (!output.defined() || !output.requires_grad()) return;
  Unit* raw = &unit;
  output.register_hook([this, raw](const at::Tensor&) { pre_backward(*raw); });
}

const std::vector<int32_t>& FullyShardedDataParallel::backward_order() {
  if (!recording_order_) return backward_order_;
  // The first backward: its order is being recorded; the forward order reversed stands in.
  reversed_forward_order_.assign(forward_order_.rbegin(), forward_order_.rend());
  return reversed_forward_order_;
}

void FullyShardedDataParallel::pre_backward(Unit& unit) {
  if (unit.reached(UnitPass::BackwardStarted)) return;
  unit.reach(UnitPass::BackwardStarted);
  if (!callback_queued_) {
    callback_queued_ = true;
    torch::autograd::Engine::get_default_engine().queue_callback([this] { final_callback(); });
  }
  if (recording_order_ &&
      std::find(backward_order_.begin(), backward_order_.end(), unit.index) == backward_order_.end()) {
    backward_order_.push_back(unit.index);
  }
  unshard(unit, trace::kFlagBackward);
  if (options_.backward_prefetch == BackwardPrefetch::Pre) {
    prefetch_after(unit, backward_order(), trace::kFlagBackward);
  }
}

void FullyShardedDataParallel::post_backward(Unit& unit) {
  c10::NoGradGuard no_grad;
  fault::reached("backward");  // See Note [Fault points]
  unit.reach(UnitPass::BackwardDone);
  finish_completed_reductions();
  FlatParameter& flat = *unit.flat;
  at::Tensor& full_grad = flat.full().mutable_grad();
  // Forward and backward of this unit are over: the full parameter may go (its gradient stays).
  reshard(unit);
  if (options_.backward_prefetch == BackwardPrefetch::Post) {
    prefetch_after(unit, backward_order(), trace::kFlagBackward);
  }
  if (!gradient_sync_.enabled() || !full_grad.defined()) return;

  at::Tensor grad = std::move(full_grad);
  full_grad = at::Tensor();
  unit.reduce_begin_ns = trace::now_ns();
  {
    CategoryScope full_gradients(MemoryCategory::FullGradients);
    if (grad.scalar_type() != options_.mixed_precision.reduce_dtype) {
      grad = grad.to(options_.mixed_precision.reduce_dtype);
    }
    if (predivide_ != 1) grad.div_(predivide_);
    memory::own(grad, MemoryCategory::FullGradients);
  }
  const comm::CollectiveTag reduce_tag = tag(unit, trace::kFlagBackward);
  if (!flat.config().sharded) {
    // NO_SHARD across the world; HYBRID_SHARD over shard groups of one rank across the replicas.
    all_reduce_shard_grad(unit, grad, replicated() ? *replicate_ : *group_);
  } else {
    Unit* raw = &unit;
    bucketer_->reduce_scatter(grad, reduce_tag, [this, raw](const at::Tensor& reduced) {
      // HYBRID_SHARD: the shard group's sum, summed across the replicas (See Note [HSDP mesh]);
      // issued here, in reduce-scatter order on every rank, and finished as NO_SHARD's are.
      if (replicated()) {
        all_reduce_shard_grad(*raw, reduced, *replicate_);
      } else {
        accumulate_shard_grad(*raw, reduced);
      }
    });
  }
  sample_memory();
}

void FullyShardedDataParallel::all_reduce_shard_grad(Unit& unit, const at::Tensor& grad,
                                                     comm::ProcessGroup& group) {
  auto pending = std::make_unique<PendingReduction>();
  pending->unit = &unit;
  pending->grad = grad;
  pending->work = group.all_reduce(grad, comm::ReduceOp::Sum, tag(unit, trace::kFlagBackward));
  pending_reductions_.push_back(std::move(pending));
}

void FullyShardedDataParallel::accumulate_shard_grad(Unit& unit, const at::Tensor& reduced) {
  c10::NoGradGuard no_grad;
  CategoryScope gradient_shards(MemoryCategory::GradientShards);
  at::Tensor grad = reduced;
  if (postdivide_ != 1) grad.div_(postdivide_);
  const at::Tensor& shard = unit.flat->shard();
  grad = grad.to(shard.device(), shard.scalar_type());
  at::Tensor& shard_grad = shard.mutable_grad();
  if (shard_grad.defined()) {
    shard_grad.add_(grad);
  } else {
    // A bucket's result is a slice of a larger tensor: keep only this unit's part alive (and the
    // optimizer's zero_grad cannot detach a view in place).
    shard_grad = grad.is_view() ? grad.clone() : grad;
    // NO_SHARD's reduced full gradient becomes the shard's own: counted as what it now holds.
    memory::count_as(shard_grad, MemoryCategory::GradientShards);
  }
  record_state(unit, trace::UnitState::Reducing, unit.reduce_begin_ns, trace::now_ns());
}

void FullyShardedDataParallel::finish_completed_reductions() {
  bucketer_->poll();
  while (!pending_reductions_.empty() && pending_reductions_.front()->work->is_completed()) {
    const std::unique_ptr<PendingReduction> done = std::move(pending_reductions_.front());
    pending_reductions_.erase(pending_reductions_.begin());
    done->work->wait();
    accumulate_shard_grad(*done->unit, done->grad);
  }
}

void FullyShardedDataParallel::final_callback() {
  trace::ScopedPhase phase(options_.recorder, 0, final_callback_name_, iteration_);
  c10::NoGradGuard no_grad;
  callback_queued_ = false;
  if (gradient_sync_.enabled()) {
    Unit& root = *units_.back();
    bucketer_->flush(tag(root, trace::kFlagBackward));
    bucketer_->wait_all();
    std::vector<std::unique_ptr<PendingReduction>> pending = std::move(pending_reductions_);
    pending_reductions_.clear();
    for (auto& reduction : pending) {
      // The shard's gradient is accumulated on the compute stream, after the reduction ends on
      // the GPU (See Note [Streams] in nccl_backend.cpp).
      comm::wait_on_stream(reduction->work);
      accumulate_shard_grad(*reduction->unit, reduction->grad);
    }
    step_finished_ = true;
    recording_order_ = false;
  }
  // Units prefetched but not used, or used in forward but not in this backward.
  for (auto& unit : units_) end_pass(*unit);
  sample_memory();
}

void FullyShardedDataParallel::end_pass(Unit& unit) {
  reshard(unit);
  unit.pass = UnitPass::NotYet;
}

}  // namespace dpscope::fsdp
