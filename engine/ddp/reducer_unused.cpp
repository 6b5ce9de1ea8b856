// The Reducer and parameters that get no gradient: the autograd-graph walk of
// find_unused_parameters, the all-reduce of the used-parameter map that tells a parameter no rank
// used from one only this rank skipped, and PyTorch's error when a parameter got no gradient.
#include <torch/csrc/autograd/function.h>

#include <sstream>
#include <unordered_set>

#include "engine/ddp/reducer.h"

namespace dpscope::ddp {

void Reducer::search_unused_parameters(const std::vector<at::Tensor>& outputs) {
  std::unordered_set<torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> queue;
  for (const at::Tensor& output : outputs) {
    if (output.defined() && output.grad_fn()) queue.push_back(output.grad_fn().get());
  }
  while (!queue.empty()) {
    torch::autograd::Node* node = queue.back();
    queue.pop_back();
    for (const torch::autograd::Edge& edge : node->next_edges()) {
      torch::autograd::Node* next = edge.function.get();
      if (next && seen.insert(next).second) queue.push_back(next);
    }
  }
  for (size_t index = 0; index < params_.size(); ++index) {
    if (!seen.count(grad_accumulators_[index].get())) {
      unused_parameters_.push_back(static_cast<int64_t>(index));
    }
  }
}

void Reducer::all_reduce_local_used_map() {
  // Reduce a copy: this rank's own map stays readable while the sum is in flight. The map lives
  // on the host and is summed on the group's device (Note [Collective tensors on the group's
  // device]), as PyTorch's local_used_map_dev_.
  local_used_sum_ = comm::HostValues::all_reduce(group_, local_used_map_.clone(),
                                                 comm::ReduceOp::Sum, collective_tag(iteration_));
  local_used_map_reduced_ = false;
}

bool Reducer::globally_unused(int64_t index) {
  if (local_used_map_.data_ptr<int32_t>()[index] != 0) return false;
  if (!local_used_map_reduced_) {
    // Wait only when some parameter is unused here: models that use everything never wait.
    if (local_used_sum_) local_used_map_.copy_(local_used_sum_->wait());
    local_used_map_reduced_ = true;
  }
  return local_used_map_.data_ptr<int32_t>()[index] == 0;
}

void Reducer::ensure_prior_reduction_finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!reduction_unfinished()) return;
  std::ostringstream message;
  message << "Expected to have finished reduction in the prior iteration before starting a new "
             "one. ";
  switch (options_.graph_mode()) {
    case GraphMode::Static:
      message << "This error indicates that your training graph has changed in this iteration, "
                 "e.g., one parameter is used in first iteration, but then got unused in the "
                 "second iteration. This is not compatible with static_graph: construct DDP "
                 "without it. ";
      break;
    case GraphMode::AllUsed:
      message << "This error indicates that your module has parameters that were not used in "
                 "producing loss. You can enable unused parameter detection with "
                 "find_unused_parameters (dpscope train --find-unused-parameters), and by making "
                 "sure all forward outputs participate in calculating loss. ";
      break;
    case GraphMode::FindUnused:
      message << "Since find_unused_parameters is enabled, this likely means that not all "
                 "forward outputs participate in computing loss; make them all do. ";
      break;
  }
  message << "Parameter indices which did not receive grad for rank " << group_.rank() << ":";
  std::string names;
  for (size_t index = 0; index < params_.size(); ++index) {
    if (ready_this_iteration_[index]) continue;
    message << " " << index;
    names += (names.empty() ? "" : ", ") + names_[index];
  }
  message << ". Parameters which did not receive grad for rank " << group_.rank() << ": " << names;
  throw DdpError(message.str());
}

void Reducer::check_reduction_finished() { ensure_prior_reduction_finished(); }

}  // namespace dpscope::ddp
