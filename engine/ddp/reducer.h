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
#include <optional>
#include <string>
#include <vector>

#include "engine/comm/host_values.h"
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

// What the options say about the autograd graph, which decides how the Reducer learns that a
// parameter got no gradient. static_graph wins over find_unused_parameters, as in PyTorch.
enum class GraphMode : uint8_t {
  AllUsed,     // neither option: every parameter must get a gradient in every synced backward
  FindUnused,  // find_unused_parameters: the graph is walked after each forward; no rebuild
  Static,      // static_graph: the first backward counts hooks, later ones reuse the counts
};

// The Reducer's options, as PyTorch's DDP arguments. DdpOptions extends them with what the DDP
// module itself does (distributed_data_parallel.h).
struct ReducerOptions {
  int64_t bucket_cap_bytes = kDefaultBucketBytes;  // PyTorch: bucket_cap_mb (25)
  int64_t first_bucket_bytes = kDefaultFirstBucketBytes;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;  // each .grad is a view of its bucket slot: no copy
  bool static_graph = false;

  GraphMode graph_mode() const {
    if (static_graph) return GraphMode::Static;
    return find_unused_parameters ? GraphMode::FindUnused : GraphMode::AllUsed;
  }
};

// The tag DDP records with a collective of `iteration`: of bucket `bucket`, or of none (the
// rebuild's broadcast, the used-parameter map, buffers, Join's agreements).
inline comm::CollectiveTag collective_tag(int32_t iteration, int32_t bucket = trace::kNone) {
  return {iteration, bucket, trace::kNone, 0};
}

// Note [Reducer states]
// Besides its buckets and per-parameter tables, the Reducer's state is three enums: one fixed by
// the options, two that each change in one place.
//  - GraphMode, from the options (ReducerOptions::graph_mode). With Static the first synced
//    backward (num_backward_ == 1) only counts each parameter's hooks and reduces everything at
//    its end (delay_all_reduce); later backwards take a parameter as ready at its last counted
//    hook.
//  - BackwardPhase, how far the current synced backward has come; changed only by enter():
//        Idle --prepare_for_backward--> Prepared --a gradient marked ready--> Reducing
//             --last bucket launched: finalize queued--> FinalizeQueued --finalize_backward--> Idle
//    A static graph's first backward only counts hooks until its end:
//        Prepared --first hook: delay_all_reduce queued--> CountingHooks
//                 --delay_all_reduce marks every gradient ready--> Reducing --finalize--> Idle
//    Hooks do nothing while Idle (no_sync, or a backward of an unsynced forward). A hook that
//    finds the phase Prepared first marks the unused parameters ready (marking one moves the
//    phase on, so this happens once per backward). While Reducing or FinalizeQueued the
//    reduction is unfinished: rebuild_buckets (before every synced forward) and
//    check_reduction_finished throw, naming the parameters without a gradient, so
//    prepare_for_backward comes only from Idle, Prepared or CountingHooks (a forward whose
//    backward never ran or stopped).
//  - BucketRebuild, the one-time rebuild from the arrival order (See Note [The first
//    iteration's buckets]); set by the constructor, changed only by rebuild_buckets:
//        Pending --rebuild_buckets after a backward recorded the order--> Done
//    or Never with FindUnused (the set of gradients may change from one iteration to the next).
// The used-parameter map keeps a flag of its own, local_used_map_reduced_: whether the map
// already holds the sum over ranks, so that finalizing waits for that all-reduce only when some
// parameter is unused here.
enum class BackwardPhase : uint8_t { Idle, Prepared, CountingHooks, Reducing, FinalizeQueued };
enum class BucketRebuild : uint8_t { Never, Pending, Done };

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
  // After a synced forward (and after rebuild_buckets): the next backward reduces. `outputs` are
  // the forward's outputs; with GraphMode::FindUnused the autograd graph is walked from them and
  // the parameters it does not reach are marked ready when backward starts.
  void prepare_for_backward(const std::vector<at::Tensor>& outputs);
  // Throws the error rebuild_buckets() would throw if the last backward left parameters
  // without gradients; a training loop may call it right after backward to fail at that step.
  void check_reduction_finished();
  // The iteration recorded with hooks, bucket events and collectives.
  void set_iteration(int32_t iteration);

  // ---- Join (uneven inputs, reducer_join.cpp): what a rank that ran out of data does in place
  // of a backward, so that the ranks still training find their all-reduces matched. Issues, in
  // the same order as a real backward, an all-reduce of zeros for every bucket (and of the
  // used-parameter map with GraphMode::FindUnused). Waits for them.
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
  bool has_rebuilt_buckets() const { return rebuild_ == BucketRebuild::Done; }
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
  // The only place phase_ changes; See Note [Reducer states].
  void enter(BackwardPhase next) { phase_ = next; }
  // Parameter `index` is ready in this backward: its gradient goes into its bucket, the bucket
  // launches when full and every bucket before it launched, and finalize is queued after the
  // last launch.
  void mark_variable_ready(size_t index);
  // What marking a parameter ready and delay_all_reduce share: the check that it is marked once,
  // and its gradient copied (or divided in place) into its bucket slot.
  void put_gradient_in_bucket(size_t index);
  void mark_variable_ready_dense(size_t index);
  void mark_variable_ready_sparse(size_t index);
  void mark_bucket_ready(size_t bucket_index);
  void all_reduce_bucket(size_t bucket_index);
  void finalize_backward();
  void finalize_bucket_dense(Bucket& bucket);
  // The end of a static graph's first backward: every gradient into its bucket, every bucket
  // launched in order, then finalize.
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

  // The predicates every site asks; See Note [Reducer states].
  bool expects_hooks() const { return phase_ != BackwardPhase::Idle; }
  bool reduction_unfinished() const {
    return phase_ == BackwardPhase::Reducing || phase_ == BackwardPhase::FinalizeQueued;
  }
  bool dynamic_graph_find_unused() const {
    return options_.graph_mode() == GraphMode::FindUnused;
  }
  bool static_graph_first_iteration() const {
    return options_.graph_mode() == GraphMode::Static && num_backward_ == 1;
  }
  bool static_graph_after_first_iteration() const {
    return options_.graph_mode() == GraphMode::Static && num_backward_ > 1;
  }
  // Whether this backward marks the parameters that got a gradient and all-reduces that map.
  bool reduces_used_map() const {
    return dynamic_graph_find_unused() || static_graph_first_iteration();
  }
  // Whether some parameter may have got no gradient on any rank (its .grad is then left alone).
  bool tracks_unused_parameters() const { return options_.graph_mode() != GraphMode::AllUsed; }
  bool should_rebuild_buckets() const { return rebuild_ == BucketRebuild::Pending; }

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
  BackwardPhase phase_ = BackwardPhase::Idle;  // See Note [Reducer states]
  int64_t num_backward_ = 0;  // synced backward passes prepared so far
  int32_t iteration_ = 0;
  double div_factor_ = 1;

  std::vector<int64_t> unused_parameters_;
  std::vector<char> ready_this_iteration_;
  std::vector<int64_t> ready_order_;
  at::Tensor local_used_map_;  // int32 per parameter, on the host: used in this backward
  std::optional<comm::HostValues> local_used_sum_;  // its sum over ranks, in flight
  bool local_used_map_reduced_ = false;
  std::vector<int> hooks_per_param_;            // static graph: hooks seen in the first iteration
  std::vector<int> hooks_pending_this_iteration_;

  std::vector<int32_t> initial_bucket_of_;  // each parameter's bucket in the initial plan
  BucketRebuild rebuild_;                   // See Note [Reducer states]
  std::vector<int64_t> rebuilt_param_indices_;  // the arrival order, while rebuild_ is Pending

  // Trace names, interned once.
  trace::NameId finalize_name_ = trace::kNone;
};

}  // namespace dpscope::ddp
