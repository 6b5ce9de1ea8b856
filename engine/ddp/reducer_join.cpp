// The Reducer's part in Join (uneven inputs): what a rank that ran out of data issues in place
// of a backward (the all-reduces of the ranks still training, on zeros) and the arrival order it
// takes for the one-time bucket rebuild. See Note [Join protocol] in join.h.
#include <ATen/ops/zeros_like.h>

#include "engine/ddp/reducer.h"
#include "engine/ddp/reductions.h"

namespace dpscope::ddp {

void Reducer::match_all_reduce_for_joined_rank() {
  std::lock_guard<std::mutex> lock(mutex_);
  // The same collectives as a backward, in the same order (See Note [Bucket order]), on zeros:
  // a joined rank contributes nothing to the sum.
  std::vector<std::unique_ptr<PendingReduction>> reductions;
  std::vector<GradBucket> hook_buckets(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    const comm::CollectiveTag tag = collective_tag(iteration_, static_cast<int32_t>(b));
    const at::Tensor& first = params_[bucket.variables.front()];
    if (bucket.sparse) {
      reductions.push_back(launch_sparse_all_reduce_zeros(group_, first, tag));
      continue;
    }
    at::Tensor zeros = at::zeros_like(bucket.gradients);
    if (!comm_hook_) {
      reductions.push_back(launch_sum_all_reduce(group_, zeros, tag));
      continue;
    }
    std::vector<at::Tensor> views;
    for (size_t slot = 0; slot < bucket.variables.size(); ++slot) {
      views.push_back(zeros.narrow(0, bucket.offsets[slot], bucket.lengths[slot])
                          .view(params_[bucket.variables[slot]].sizes()));
    }
    hook_buckets[b] = hook_bucket(b, zeros, std::move(views));
    reductions.push_back(comm_hook_->launch(group_, hook_buckets[b]));
  }
  for (auto& reduction : reductions) reduction->wait();
  if (dynamic_graph_find_unused()) {
    comm::HostValues::all_reduce(group_, at::zeros_like(local_used_map_), comm::ReduceOp::Sum,
                                 collective_tag(iteration_))
        .wait();
  }
}

void Reducer::push_all_rebuilt_params() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!should_rebuild_buckets() || !rebuilt_param_indices_.empty()) return;
  for (size_t index = 0; index < params_.size(); ++index) {
    rebuilt_param_indices_.push_back(static_cast<int64_t>(index));
  }
}

}  // namespace dpscope::ddp
