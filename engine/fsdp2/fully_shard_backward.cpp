// FSDP2's backward (See Note [FSDP2 hooks], steps 3 to 5): the pre-backward hook on each group's
// outputs with the implicit backward prefetch, and the root's final callback that runs the
// post-backwards autograd did not trigger, finishes the last reduce-scatter and ends the pass.
// Post-backward itself is the group's (fsdp_param_group.cpp).
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/engine.h>

#include "engine/fsdp2/fully_shard.h"

namespace dpscope::fsdp2 {

void FsdpState::register_pre_backward_hook(const at::Tensor& output) {
  if (!output.defined() || !output.requires_grad()) return;
  output.register_hook([this](const at::Tensor&) { pre_backward(); });
}

void FsdpState::pre_backward() {
  FsdpParamGroup& group = *param_group_;
  if (group.pass() == GroupPass::PreBackward || group.pass() == GroupPass::PostBackward) return;
  group.set_pass(GroupPass::PreBackward);
  if (!ctx_->callback_queued) {
    ctx_->callback_queued = true;
    FsdpState* root = ctx_->root;
    torch::autograd::Engine::get_default_engine().queue_callback([root] { root->final_callback(); });
  }
  group.unshard(trace::kFlagBackward);
  group.wait_for_unshard();
  if (backward_prefetch_.empty()) {
    implicit_backward_prefetch();
    return;
  }
  for (FsdpState* target : backward_prefetch_) {
    if (target->param_group_->pass() == GroupPass::PostBackward) continue;
    target->param_group_->unshard(trace::kFlagBackward | trace::kFlagPrefetch);
  }
}

// PyTorch's _backward_prefetch: the group whose forward came just before this use of this group
// is the next to need its parameters in backward, so its all-gather is issued now and waited for
// in its own pre-backward. A group whose backward is already over is skipped (PyTorch gathers it
// and drops it at the end of backward: a "mistargeted" prefetch).
void FsdpState::implicit_backward_prefetch() {
  std::vector<size_t>& indices = param_group_->post_forward_indices;
  if (indices.empty()) return;
  const size_t index = indices.back();
  indices.pop_back();
  if (index == 0) return;
  FsdpParamGroup* target = ctx_->post_forward_order[index - 1];
  if (target->pass() == GroupPass::PostBackward) return;
  target->unshard(trace::kFlagBackward | trace::kFlagPrefetch);
}

void FsdpState::final_callback() {
  trace::ScopedPhase phase(options_.recorder, 0, final_callback_name_, ctx_->traced_iteration());
  c10::NoGradGuard no_grad;
  ctx_->callback_queued = false;
  // Groups whose gradients did not all come (parameters without a gradient in this backward), in
  // a fixed order: the root first, then the units before it, last first.
  for (auto it = all_states_.rbegin(); it != all_states_.rend(); ++it) {
    FsdpParamGroup& group = *(*it)->param_group_;
    if (group.pass() != GroupPass::PostBackward) group.post_backward();
  }
  if (ctx_->reducing) ctx_->reducing->finish_reduce();
  for (FsdpState* state : all_states_) state->param_group_->end_backward();
  ctx_->post_forward_order.clear();
  if (ctx_->gradient_sync.enabled()) ctx_->step_finished = true;
  ctx_->sample_memory();
}

}  // namespace dpscope::fsdp2
