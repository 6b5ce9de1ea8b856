// FSDP2's module state: rank 0's parameters and buffers broadcast before sharding
// (sync_module_states), the full state dict (every group's float32 shards all-gathered in turn and
// copied out on one rank), the sharded one (each rank's rows, no collective), and clip_grad_norm over the shards.
#include <c10/core/GradMode.h>

#include <unordered_map>
#include <unordered_set>

#include "engine/fsdp2/fully_shard.h"
#include "engine/replica/broadcast_coalesced.h"
#include "engine/replica/sharded_grad_norm.h"
#include "engine/replica/model_verification.h"

namespace dpscope::fsdp2 {

void sync_module_states(torch::nn::Module& module, comm::ProcessGroup& group) {
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  std::unordered_set<const void*> seen;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
    params.push_back(item.value());
    names.push_back(item.key());
  }
  try {
    replica::verify_params_across_ranks(group, params, names, "fully_shard");
  } catch (const replica::ModelMismatchError& error) {
    throw Fsdp2Error(error.what());
  }
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> state = params;
  for (const at::Tensor& buffer : module.buffers()) state.push_back(buffer);
  replica::broadcast_coalesced(group, state, 0);  // of no iteration, bucket or unit
}

std::vector<std::pair<std::string, at::Tensor>> FsdpState::full_state_dict(int root) {
  lazy_init();
  c10::NoGradGuard no_grad;
  // A state dict's gathers are no iteration's work (Note [Work outside iterations]).
  const WorkScope previous = ctx_->scope;
  ctx_->scope = WorkScope::OutsideIterations;
  const bool keep = mesh_.world_rank() == root;  // under HSDP each shard group gathers its own
  std::unordered_map<const void*, at::Tensor> copies;
  std::vector<FsdpState*> states;
  std::vector<int32_t> parents;
  collect_states(&states, &parents);
  try {
    for (FsdpState* state : states) {
      FsdpParamGroup& group = *state->param_group_;
      // From the float32 shards, not the unsharded parameters, which mixed precision rounds.
      const std::vector<at::Tensor> full = group.gather_float32();
      for (size_t i = 0; keep && i < full.size(); ++i) {
        copies.emplace(group.params()[i]->unsharded_param().unsafeGetTensorImpl(),
                       full[i].to(c10::Device(c10::kCPU), c10::ScalarType::Float, false, /*copy=*/true));
      }
    }
  } catch (...) {
    ctx_->scope = previous;
    throw;
  }
  ctx_->scope = previous;
  std::vector<std::pair<std::string, at::Tensor>> state;
  if (!keep) return state;
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    const auto copy = copies.find(item.value().unsafeGetTensorImpl());
    if (copy != copies.end()) state.emplace_back(item.key(), copy->second);
  }
  for (const auto& item : module_->named_buffers(/*recurse=*/true)) {
    state.emplace_back(item.key(), item.value().detach().to(c10::Device(c10::kCPU), item.value().scalar_type(),
                                                            false, /*copy=*/true));
  }
  return state;
}

std::vector<FsdpState::ShardedTensor> FsdpState::sharded_state_dict() {
  std::vector<FsdpState*> states;
  std::vector<int32_t> parents;
  collect_states(&states, &parents);
  std::unordered_map<const void*, const FsdpParam*> params;
  for (const FsdpState* state : states) {
    for (const auto& param : state->param_group_->params()) {
      params.emplace(param->unsharded_param().unsafeGetTensorImpl(), param.get());
    }
  }
  std::vector<ShardedTensor> dict;
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    const auto found = params.find(item.value().unsafeGetTensorImpl());
    if (found == params.end()) continue;
    const FsdpParam& param = *found->second;
    dict.push_back({item.key(), param.sharded_param(), param.unsharded_param().sizes().vec(),
                    param.chunks().first_row(param.rank())});
  }
  return dict;
}

at::Tensor FsdpState::clip_grad_norm(double max_norm) {
  // Under HSDP the replicas hold the same gradients: the shard group's squares are the whole norm.
  return replica::clip_sharded_grad_norm(parameters(), max_norm, *mesh_.shard,
                                         replica::GradientSquares::SpreadOverRanks,
                                         ctx_ ? ctx_->traced_iteration() : trace::kNone);
}

}  // namespace dpscope::fsdp2
