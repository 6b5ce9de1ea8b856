// The Reducer: DDP's gradient synchronisation, as PyTorch's c10d::Reducer. It owns the buckets,
// hangs a post-hook on every parameter's gradient accumulator, copies each ready gradient into
// its bucket slot, launches a full bucket's all-reduce in bucket order, waits for all of them at
// the end of backward and writes the averaged gradients back; after the first iteration it
// rebuilds the buckets once from the order gradients arrived.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/ddp/bucket_assignment.h"
#include "engine/ddp/comm_hook.h"
#include "trace/recorder.h"

namespace torch::autograd {
struct Node;
}

namespace dpscope::ddp {

// Thrown for every misuse DDP detects (a parameter without a gradient, a hook fired twice, a
// gradient of the wrong shape); the message names the parameters and says what to do.
class DdpError : public std::runtime_error {
 public:
  explicit DdpError(const std::string& message) : std::runtime_error(message) {}
};

struct ReducerOptions {
  int64_t bucket_cap_bytes = kDefaultBucketBytes;
  int64_t first_bucket_bytes = kDefaultFirstBucketBytes;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  bool static_graph = false;
};

// Note [Bucket order]
// Every rank must issue the same all-reduces in the same order, or the n-th collective of one
// rank meets a different bucket on another (See Note [Collective order]). So:
//  - The plan is the same on every rank: the constructor's buckets come from the parameters'
//    registration order (identical on all ranks after model verification), reversed so the
//    first bucket holds the last layers, whose gradients are ready first (one bucket by default:
//    See Note [The first iteration's buckets]). The rebuilt plan comes from the order gradients
//    arrived on rank 0, broadcast to all (sync_bucket_indices).
//  - A bucket whose gradients are all in place waits until every bucket before it was launched:
//    launches go strictly by bucket index (next_bucket_), whatever order gradients arrive in.
//  - Everything else the Reducer sends (the used-parameter map with find_unused_parameters)
//    follows the last bucket, on every rank.

// Thread-safety: the autograd hooks run on the thread that runs backward (for CPU tensors, the
// caller of backward()); every public method and hook takes mutex_. One backward at a time.
class Reducer {
 public:
  // `params` are distinct leaf tensors requiring grad, in registration order; `names` and
  // `expect_sparse` are indexed like them. `assignment` is the initial plan (already reversed by
  // the DDP constructor). `group` must outlive the Reducer. `recorder` may be null.
  Reducer(std::vector<at::Tensor> params, std::vector<std::string> names,
          std::vector<bool> expect_sparse, const BucketAssignment& assignment,
          comm::ProcessGroup& group, ReducerOptions options, trace::Recorder* recorder);
  // Removes the hooks from the gradient accumulators, so a later Reducer on the same model
  // starts clean.
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // ---- The iteration, called by DistributedDataParallel.
  // Replaces the default all-reduce. Only before the first backward (DdpError otherwise).
  void register_comm_hook(std::unique_ptr<CommHook> hook);
  // Before a synced forward: throws DdpError naming the parameters that got no gradient if the
  // previous backward did not finish its reduction; then rebuilds the buckets once, after the
  // first iteration, when that applies (not with find_unused_parameters unless static_graph).
  // Returns true when it rebuilt. Collective when it rebuilds (every rank calls it).
  bool rebuild_buckets();
  // After a synced forward: the next backward reduces. `outputs` are the forward's outputs; with
  // find_unused_parameters (and no static graph) the autograd graph is walked from them and the
  // parameters it does not reach are marked ready when backward starts.
  void prepare_for_backward(const std::vector<at::Tensor>& outputs);
  // Throws the error rebuild_buckets() would throw if the last backward left parameters
  // without gradients; a training loop may call it right after backward to fail at that step.
  void check_reduction_finished();
  // The iteration recorded with hooks, bucket events and collectives.
  void set_iteration(int32_t iteration);

  // ---- Join (uneven inputs): what a rank that ran out of data does in place of a backward,
  // so that the ranks still training find their all-reduces matched. Issues, in the same order
  // as a real backward, an all-reduce of zeros for every bucket (and of the used-parameter map
  // with find_unused_parameters). Waits for them.
  void match_all_reduce_for_joined_rank();
  // A joined rank that never ran a backward has no arrival order for the rebuild: it takes
  // registration order, so that it rebuilds (a collective) when the training ranks do.
  void push_all_rebuilt_params();

  // ---- State, for the DDP module, the trace and tests.
  struct BucketView {
    int32_t index;
    std::vector<int32_t> params;  // slot order
    std::vector<int64_t> offsets;
    int64_t numel;
    int64_t bytes;
    bool sparse;
  };
  std::vector<BucketView> buckets() const;
  bool has_rebuilt_buckets() const { return has_rebuilt_buckets_; }
  // The gradient arrival order of the last backward (parameter indices).
  std::vector<int64_t> last_ready_order() const;
  int64_t bucket_bytes_total() const;
  comm::ProcessGroup& group() { return group_; }

 private:
  struct Bucket {
    at::Tensor gradients;               // flat buffer (dense buckets)
    // Per parameter, shaped like it: gradients are copied into (or alias) these, and the
    // reduction leaves the average in place, so finalizing reads them back.
    std::vector<at::Tensor> views_in;
    std::vector<int64_t> variables;     // parameter indices, slot order
    std::vector<int64_t> offsets;
    std::vector<int64_t> lengths;
    int64_t bytes = 0;
    bool sparse = false;
    at::Tensor sparse_gradient;  // sparse buckets: the parameter's grad, reduced in place
    size_t pending = 0;
    int64_t filled_bytes = 0;
    GradBucket hook_bucket;
    std::unique_ptr<PendingReduction> reduction;
  };
  struct Locator {
    size_t bucket;
    size_t slot;
  };

  // Autograd hooks (reducer.cpp).
  void install_hooks();
  void autograd_hook(size_t index);
  void mark_variable_ready(size_t index);
  void mark_variable_ready_dense(size_t index);
  void mark_variable_ready_sparse(size_t index);
  void mark_bucket_ready(size_t bucket_index);
  void all_reduce_bucket(size_t bucket_index);
  void finalize_backward();
  void finalize_bucket_dense(Bucket& bucket);
  void delay_all_reduce();
  void queue_finalize();
  // What a comm hook gets for bucket `bucket_index`: `buffer` and its per-parameter `gradients`.
  GradBucket hook_bucket(size_t bucket_index, at::Tensor buffer,
                         std::vector<at::Tensor> gradients) const;

  // Buckets (reducer_buckets.cpp).
  void initialize_buckets(const std::vector<std::vector<int64_t>>& plan, int32_t generation);
  void initialize_bucket_views(Bucket& bucket);
  std::vector<std::vector<int64_t>> sync_bucket_indices(std::vector<std::vector<int64_t>> plan);
  void reset_bucket_counting();
  void record_plan(int32_t generation);

  // Unused parameters and the static graph (reducer_unused.cpp).
  void search_unused_parameters(const std::vector<at::Tensor>& outputs);
  void all_reduce_local_used_map();
  bool globally_unused(int64_t index);
  void ensure_prior_reduction_finished();
  bool dynamic_graph_find_unused() const {
    return !options_.static_graph && options_.find_unused_parameters;
  }
  bool static_graph_first_iteration() const {
    return options_.static_graph && num_backward_ == 1;
  }
  bool static_graph_after_first_iteration() const {
    return options_.static_graph && num_backward_ > 1;
  }
  bool should_rebuild_buckets() const {
    return (options_.static_graph || !options_.find_unused_parameters) && !has_rebuilt_buckets_;
  }

  at::Tensor& grad_of(size_t index);

  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<bool> expect_sparse_;
  comm::ProcessGroup& group_;
  const ReducerOptions options_;
  trace::Recorder* recorder_;
  std::unique_ptr<CommHook> comm_hook_;

  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<torch::autograd::Node>> grad_accumulators_;
  std::vector<uintptr_t> hook_keys_;

  std::vector<Bucket> buckets_;
  std::vector<Locator> locators_;
  size_t next_bucket_ = 0;
  bool expect_autograd_hooks_ = false;
  bool require_finalize_ = false;
  bool finalize_queued_ = false;
  bool has_marked_unused_parameters_ = false;
  int64_t num_backward_ = 0;  // synced backward passes prepared so far
  int32_t iteration_ = 0;
  double div_factor_ = 1;

  std::vector<int64_t> unused_parameters_;
  std::vector<char> ready_this_iteration_;
  std::vector<int64_t> ready_order_;
  at::Tensor local_used_map_;       // int32 per parameter: used in this backward
  at::Tensor reduced_used_map_;     // its sum over ranks, once local_used_work_ is done
  comm::WorkHandle local_used_work_;
  bool local_used_map_reduced_ = false;
  std::vector<int> hooks_per_param_;            // static graph: hooks seen in the first iteration
  std::vector<int> hooks_pending_this_iteration_;

  std::vector<int32_t> initial_bucket_of_;  // each parameter's bucket in the initial plan
  bool has_rebuilt_buckets_ = false;
  std::vector<int64_t> rebuilt_param_indices_;

  // Trace names, interned once.
  trace::NameId finalize_name_ = trace::kNone;
};

}  // namespace dpscope::ddp
