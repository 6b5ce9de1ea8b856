// FsdpParamGroup: the parameters of one fully_shard call, which communicate together (PyTorch's
// FSDPParamGroup) — one all-gather to unshard them, one reduce-scatter for their gradients — and
// Fsdp2Context, what every group under one root shares. Private to FsdpState (fully_shard.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/fsdp2/fsdp_collectives.h"
#include "engine/fsdp2/fsdp_param.h"
#include "engine/replica/gradient_sync.h"
#include "trace/recorder.h"

namespace dpscope::memory {
class MemorySampler;
}

namespace dpscope::fsdp2 {

class FsdpParamGroup;
class FsdpState;

// The root module's parameters, in order: each one's TensorImpl and qualified name.
using RootParams = std::vector<std::pair<const void*, std::string>>;

// Note [Group lifecycle]
// A group's state is two enums, each changed in one place:
//  - GroupResidency, where its unsharded parameters are; changed only by FsdpParamGroup::move_to,
//    which records the span that ends as a UnitState slice on the group's lane:
//        Sharded --unshard (copy-in, all-gather issued)--> Gathering
//                --wait_for_unshard (wait, copy-out)--> Unsharded --reshard--> Sharded
//    and with reshard_after_forward N, Unsharded --reshard_to_post_forward--> ShardedPostForward
//    --unshard (within N ranks)--> Gathering (See Note [Resharding to a smaller group]).
//    The unsharded parameters' memory exists exactly while the group is Unsharded, the
//    post-forward shards' while it is ShardedPostForward or Gathering from them; the
//    all-gather's buffer exists from the copy-in to the end of the copy-out.
//  - GroupPass, how far this iteration's passes have come over the group (PyTorch's
//    TrainingState): Idle --pre_forward--> Forward --post_forward--> Idle --pre_backward-->
//    PreBackward --post_backward--> PostBackward --end_backward--> Idle. post_backward runs once
//    per backward (it returns at once when the group is PostBackward already); end_backward runs
//    for every group in the root's final callback.
// A reduce-scatter's state is its own: issued by post_backward, finished (waited, viewed out into
// the sharded gradients) by finish_reduce, which the next group's post_backward calls before its
// copy-in (one reduce-scatter in flight, as PyTorch's reduce_scatter_state) and the final
// callback calls for the last. Under HSDP finish_reduce, once the reduce-scatter is done, all-
// reduces its output across the replicate group and waits for that too (See Note [HSDP mesh] in
// engine/comm/device_mesh.h): the host waits for it there with Gloo (no overlap of the all-reduce with the next
// group's backward), the compute stream only with NCCL.
//
// Note [Resharding to a smaller group]
// reshard_after_forward N (1 < N < world, N dividing it: PyTorch's int form, its post-forward
// mesh) keeps after forward not this rank's 1/world rows but slice j = rank mod N of N equal
// slices of each parameter's all-gather output, so the N ranks rank - j .. rank - j + N - 1 (a
// host's, say) hold the whole parameter between them. An all-gather output is the world's padded
// chunks one after the other, so its j-th slice is N' = world / N consecutive padded chunks, and
// the pre-backward all-gather within those N ranks — a ProcessGroup of their own, made in the
// root's lazy init over the world group's store — rebuilds it with the same copy-in and copy-out
// (Note [Copy-in and copy-out] with N ranks and chunks N' times as long). Between forward and
// backward a rank holds 1/N of the group's parameters instead of 1/world, and backward's
// all-gathers stay within the N ranks.
enum class GroupResidency : uint8_t { Sharded, ShardedPostForward, Gathering, Unsharded };
enum class GroupPass : uint8_t { Idle, Forward, PreBackward, PostBackward };

// What an FSDP2 run's work belongs to: a training iteration, or none (an evaluation forward, a
// state dict's gathers; See Note [Work outside iterations] in trace/schema.h).
enum class WorkScope { Iteration, OutsideIterations };

// Shared by every group and state under one root (PyTorch's FSDPCommContext and
// FSDPStateContext). Not thread-safe: the training thread and its backward.
struct Fsdp2Context {
  std::shared_ptr<comm::ProcessGroup> group;      // parameters are sharded over it
  // HSDP with more than one replica: gradients all-reduced across it; else null.
  std::shared_ptr<comm::ProcessGroup> replicate;
  trace::Recorder* recorder = nullptr;
  memory::MemorySampler* memory_sampler = nullptr;
  int32_t iteration = 0;  // synced iterations begun so far
  WorkScope scope = WorkScope::Iteration;
  // Whether backward reduces gradients (off inside no_sync: they accumulate unsharded).
  replica::GradientSync gradient_sync;
  // Every group's post-forward, in order (with multiplicity): backward prefetches by it, reversed.
  std::vector<FsdpParamGroup*> post_forward_order;
  // The group whose reduce-scatter is in flight, or null.
  FsdpParamGroup* reducing = nullptr;
  // The root, whose final callback ends each backward; queued once per backward.
  FsdpState* root = nullptr;
  bool callback_queued = false;
  // A synced backward ended: the next root forward begins an iteration.
  bool step_finished = false;
  // Phase names of the copies (registered once).
  trace::NameId copy_in_name = trace::kNone;
  trace::NameId copy_out_name = trace::kNone;
  trace::NameId reduce_copy_in_name = trace::kNone;

  int32_t traced_iteration() const {
    return scope == WorkScope::Iteration ? iteration : trace::kNone;
  }
  void sample_memory() const;
};

// Thread-safety: the training thread and the backward on it, one at a time.
class FsdpParamGroup {
 public:
  // Takes the group's parameters (in the group's order) and hangs the post-backward count on
  // each one's gradient accumulator. `name` is the module's name as fully_shard was given it
  // (attach gives the qualified one); gradients are reduce-scattered in `reduce_dtype`.
  FsdpParamGroup(std::vector<std::unique_ptr<FsdpParam>> params, std::string name,
                 c10::ScalarType reduce_dtype = c10::ScalarType::Float);
  ~FsdpParamGroup();
  FsdpParamGroup(const FsdpParamGroup&) = delete;
  FsdpParamGroup& operator=(const FsdpParamGroup&) = delete;

  // The root's lazy init: the shared context, this group's index among the root's groups
  // (innermost first, the root last), its parent's, and its module's qualified name; records the
  // group's lane, unit, shards and parameters in the trace, the parameters numbered and named as
  // the root's.
  void attach(std::shared_ptr<Fsdp2Context> context, int32_t index, int32_t parent,
              std::string name, const RootParams& root_params);

  // ---- Collectives (See Note [Group lifecycle]).
  // Copy-in and all-gather, without waiting, unless the group is Unsharded or Gathering (from
  // the post-forward shards within the post-forward group when ShardedPostForward).
  void unshard(uint8_t flags);
  // Waits for the all-gather and copies out into the parameters (unshard first if not issued).
  void wait_for_unshard();
  // Frees the unsharded parameters (waiting first for an all-gather still writing), and the
  // post-forward shards.
  void reshard();
  // Unsharded -> ShardedPostForward: keeps this rank's slice for the group of N ranks and frees
  // the unsharded parameters (See Note [Resharding to a smaller group]).
  void reshard_to_post_forward();
  // The group of N ranks reshard_to_post_forward keeps slices for (the root's lazy init).
  void set_post_forward_group(std::shared_ptr<comm::ProcessGroup> group);
  // Once per backward: takes the parameters' gradients, reshards, and reduce-scatters the
  // gradients (after finishing the reduce-scatter in flight); under no_sync keeps them.
  void post_backward();
  // Waits for this group's reduce-scatter (and HSDP's all-reduce after it) and adds each
  // parameter's rows to its sharded .grad.
  void finish_reduce();
  // Every parameter whole, in float32, from the sharded parameters: one all-gather, waited for,
  // into buffers of its own (the group's residency and its unsharded parameters untouched; what
  // a full state dict reads, exact under mixed precision too). Collective.
  std::vector<at::Tensor> gather_float32();
  // End of backward: the pass back to Idle, resharded (a prefetched all-gather nobody waited for
  // is waited for and dropped).
  void end_backward();

  // ---- Passes (FsdpState drives them; See Note [FSDP2 hooks] in fully_shard.h).
  GroupPass pass() const { return pass_; }
  void set_pass(GroupPass pass) { pass_ = pass; }
  // Indices of this group's post-forwards in the context's post_forward_order.
  std::vector<size_t> post_forward_indices;

  // ---- Introspection.
  const std::string& name() const { return name_; }
  int32_t index() const { return index_; }
  bool empty() const { return params_.empty(); }
  GroupResidency residency() const { return residency_; }
  const std::vector<std::unique_ptr<FsdpParam>>& params() const { return params_; }
  const ChunkLayout& layout() const { return layout_; }

 private:
  void on_gradient_accumulated();
  // Copy-in and all-gather of the post-forward shards within the post-forward group.
  void unshard_from_post_forward(uint8_t flags);
  void free_post_forward_shards();
  void issue_reduce_scatter(const std::vector<at::Tensor>& grads, const std::vector<size_t>& which);
  void move_to(GroupResidency next);
  void record_state(trace::UnitState state, int64_t begin_ns, int64_t end_ns) const;
  void record_layout(const RootParams& root_params);
  comm::CollectiveTag tag(uint8_t flags) const;
  int world_size() const;
  // The unsharded parameters' dtype: the all-gather's.
  c10::ScalarType compute_dtype() const;
  // The unsharded parameters' device: the all-gather's, whatever the shards' (Note [FSDP2 CPU
  // offload]).
  c10::Device compute_device() const;

  std::vector<std::unique_ptr<FsdpParam>> params_;
  std::string name_;
  c10::ScalarType reduce_dtype_;
  ChunkLayout layout_;
  std::shared_ptr<Fsdp2Context> ctx_;
  int32_t index_ = 0;
  int32_t parent_ = trace::kNone;
  trace::LaneId lane_ = 0;

  GroupResidency residency_ = GroupResidency::Sharded;
  int64_t residency_since_ns_ = 0;
  GroupPass pass_ = GroupPass::Idle;
  size_t accumulated_ = 0;  // gradient accumulators run in this backward

  // The all-gather while Gathering (Note [Who frees a collective's tensors]), the group it runs
  // in and its layout: the world's and layout_, or the post-forward group's.
  comm::WorkHandle gather_work_;
  AllGatherBuffers gather_buffers_;
  ChunkLayout gather_layout_;
  std::shared_ptr<comm::ProcessGroup> post_forward_group_;
  // The reduction until finish_reduce: its collective in flight (the shard group's reduce-scatter,
  // or with a shard group of one rank the replicate group's all-reduce), its buffers and which
  // parameters it carries.
  comm::WorkHandle reduce_work_;
  at::Tensor reduce_input_;
  at::Tensor reduce_output_;
  std::vector<size_t> reduced_params_;  // the parameters with a gradient, in the group's order
  ChunkLayout reduce_layout_;           // their chunks
  int64_t reduce_begin_ns_ = 0;
};

}  // namespace dpscope::fsdp2
