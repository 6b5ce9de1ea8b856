// fully_shard: PyTorch 2's FSDP (FSDP2) on dpscope's ProcessGroup — applied to chosen submodules
// bottom-up and then to the root, it shards each parameter on dim 0 across the ranks and gathers
// a group's parameters just for its forward and backward; FsdpState is what it attaches to a
// module (PyTorch's FSDPState and FSDPModule). Traced like FSDP1 (docs/fsdp2.md).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/fsdp2/fsdp2_options.h"
#include "engine/comm/device_mesh.h"
#include "engine/fsdp2/fsdp_param_group.h"

namespace dpscope::fsdp2 {

// Note [FSDP2 hooks]
// Per group and iteration, on every rank in the same order (See Note [FSDP2 collective order]):
//  1. pre-forward (the root: FsdpState::forward; a nested state: its forward hook, which
//     nn::call_module runs): unshard — the copy-in and the group's one all-gather — then
//     wait and copy out into the parameters (See Note [Copy-in and copy-out]); the states set
//     to forward-prefetch issue their all-gathers.
//  2. post-forward: reshard unless reshard_after_forward is false or this is the root (whose
//     backward comes at once: PyTorch's lazy init keeps the root unsharded too); append the
//     group to the post-forward order; hook the outputs for pre-backward.
//  3. pre-backward (a hook on the outputs, once per backward): the first queues the root's final
//     callback; unshard and wait if resharded; then implicit backward prefetch: the group before
//     this one in the post-forward order issues its all-gather, not waited for (or, when set,
//     the states set to backward-prefetch issue theirs).
//  4. post-backward: once autograd has run the AccumulateGrad of every parameter of the group in
//     this backward (a count on each accumulator; one AccumulateGrad a parameter however often
//     it was used, after all its gradients are summed), take the unsharded gradients, reshard,
//     and reduce-scatter them in one collective (averaged, as DDP), after finishing the
//     reduce-scatter in flight. PyTorch hangs post-backward on an autograd function wrapping the
//     module's forward inputs instead; call_module's hooks do not see the inputs, and the count
//     fires at the same point: when the group's gradients are complete.
//  5. final callback (end of backward): post-backward for every group whose count did not
//     complete (parameters without a gradient in this backward), finish the last reduce-scatter,
//     reshard whatever is unsharded, every group back to Idle. The optimizer then steps on the
//     sharded parameters, each rank on its rows.
// Inside no_sync post-backward reshards but keeps the gradients unsharded in .grad, and the next
// backward adds to them; the first synced backward reduces the sum.
//
// Note [FSDP2 collective order]
// Every rank must issue the same collectives in the same order (Note [Collective order]).
// Forward all-gathers follow the forward's call order, the same on every rank for the same
// model; backward all-gathers and reduce-scatters follow autograd's execution order and the
// post-forward order of this very iteration, also the same everywhere. The final callback runs
// the missing post-backwards in a fixed order (the root's groups, last unit first). As with
// PyTorch's, a group whose outputs reach the loss on some ranks only is not supported
// (DPSCOPE_CHECK_COLLECTIVES=1 names the mismatch).

class FsdpState;

// Applies FSDP2 to `module`: its parameters not already under a fully_shard of a submodule are
// sharded on dim 0 across `group` (as they are now on each rank: the ranks must hold the same
// values — build the model alike or call sync_module_states first) and form one group; the
// states fully_shard made below it become its children. Apply it bottom-up, the root last.
// Throws Fsdp2Error when the module is sharded already, a state below it uses another group,
// or a parameter cannot be sharded (fsdp_param.h), naming the module or the parameter; and for
// reshard_after_forward against the group's size (fsdp2_options.h).
std::shared_ptr<FsdpState> fully_shard(torch::nn::Module& module,
                                       std::shared_ptr<comm::ProcessGroup> group,
                                       FullyShardOptions options = {});
// HSDP (PyTorch's fully_shard with a 2-D mesh): the same over `mesh`: parameters sharded across
// mesh.shard, gradients reduce-scattered there and then all-reduced across mesh.replicate (See
// Note [HSDP mesh] in engine/comm/device_mesh.h; make_hsdp_mesh makes one). A mesh without a replicate group is
// the overload above. Every state under one root must use the same mesh; reshard_after_forward's
// int form must divide the shard group's size.
std::shared_ptr<FsdpState> fully_shard(torch::nn::Module& module, comm::DeviceMesh mesh,
                                       FullyShardOptions options = {});

// Rank 0's parameters and buffers into every rank's, after checking that every rank's model has
// the same parameter shapes (PyTorch's fully_shard does not broadcast; DDP's and FSDP1's
// construction do, and dpscope train does it before sharding). Collective; throws Fsdp2Error
// naming the mismatch.
void sync_module_states(torch::nn::Module& module, comm::ProcessGroup& group);

// Usage, one rank (the model built alike everywhere, or sync_module_states first):
//   for (auto* block : blocks) fully_shard(*block, group);     // innermost first
//   auto fsdp = fully_shard(*model, group);                     // then the root
//   torch::optim::SGD sgd(fsdp->parameters(), ...);             // sharded parameters only
//   at::Tensor out = fsdp->forward(x, [&](const at::Tensor& in) { return model->forward(in); });
//   loss(out).backward();                                       // sharded gradients ready
//   sgd.step();
// The module must outlive the state; a nested module must be called through
// nn::call_module by its parent (the engine's models do), else nothing gathers it.
// Thread-safety: one training loop thread; backward runs on the thread that calls backward().
class FsdpState {
 public:
  // Use fully_shard().
  FsdpState(torch::nn::Module& module, comm::DeviceMesh mesh, FullyShardOptions options,
            std::vector<std::shared_ptr<FsdpState>> children,
            std::vector<std::unique_ptr<FsdpParam>> params);
  ~FsdpState();
  FsdpState(const FsdpState&) = delete;
  FsdpState& operator=(const FsdpState&) = delete;

  // The root's forward around `run`: pre- and post-forward of this state around `run(input)`
  // (nested states gather in their hooks). The first call makes this state the root (PyTorch's
  // lazy init), as do unshard(), no_sync() and full_state_dict(). Without grad (an evaluation)
  // every group is resharded afterwards and nothing counts as an iteration's work. With mixed
  // precision a floating input is cast to the parameters' dtype and a floating output to float32.
  at::Tensor forward(const at::Tensor& input, const std::function<at::Tensor(const at::Tensor&)>& run);

  // PyTorch's FSDPModule.unshard(): gathers this state's parameters now (collective) and keeps
  // them until reshard() or the end of the next backward.
  void unshard();
  void reshard();

  // Explicit prefetching (PyTorch's set_modules_to_forward_prefetch and
  // set_modules_to_backward_prefetch), for a model whose order is the same every iteration: when
  // this state's forward (backward) begins, after its own all-gather, each of `states` issues
  // its all-gather without waiting, in the order given. A backward list replaces the implicit
  // backward prefetch of this state. The states must be under the same root as this one.
  void set_modules_to_forward_prefetch(std::vector<FsdpState*> states);
  void set_modules_to_backward_prefetch(std::vector<FsdpState*> states);

  // Gradient accumulation (PyTorch's set_requires_gradient_sync(False) while the guard lives):
  // backward keeps every group's unsharded gradients and reduces nothing; the first backward
  // after it reduces the accumulated gradients. gradient_sync() is the switch it turns, the
  // root's context's, shared by every state under it.
  replica::NoSyncGuard no_sync() { return replica::NoSyncGuard(gradient_sync()); }
  replica::GradientSync& gradient_sync();

  // The optimizer's parameters: every sharded parameter of this state and the states under it,
  // innermost state first, each state's in its group's order.
  std::vector<at::Tensor> parameters();

  // ---- State (fully_shard_state.cpp).
  // The full parameters by qualified name (the root's named_parameters() order), then the
  // buffers, on the host; on rank `root` of the world only (other ranks get an empty list; under
  // HSDP every shard group gathers its own copy). Collective: every
  // rank calls it; each group's float32 shards are all-gathered in turn into buffers of their own
  // (exact under mixed precision; the groups' state untouched), as no iteration's work.
  std::vector<std::pair<std::string, at::Tensor>> full_state_dict(int root = 0);

  // One parameter's part of a sharded state dict: this rank's rows, as PyTorch's DTensor Shard(0)
  // holds them.
  struct ShardedTensor {
    std::string name;                 // qualified, as the root's named_parameters() says
    at::Tensor local;                 // this rank's rows (the sharded parameter itself; may be empty)
    std::vector<int64_t> full_shape;  // the whole parameter's shape
    int64_t first_row = 0;            // local is rows [first_row, first_row + local.size(0))
  };
  // This rank's rows of every parameter under this state, in the root's named_parameters()
  // order; no collectives (what a sharded checkpoint writes, one file a rank).
  std::vector<ShardedTensor> sharded_state_dict();
  // A sharded checkpoint (sharded_checkpoint.cpp): this rank's sharded_state_dict and the
  // buffers written to DIR/shard-rank<R>-of-<W>.pt (replica/checkpoint_file.h), no collectives.
  // Throws Fsdp2Error naming the file when it cannot be written.
  void save_sharded_state(const std::string& dir);
  // Reads every rank's file in `dir`, also of another world size (each parameter's rows put back
  // together and this rank's taken: a reshard; HSDP's replicas hold the same rows and are read
  // once), into the sharded parameters and the buffers. No collectives; call it between steps,
  // every group resharded. Throws Fsdp2Error naming the file and what differs when the files do
  // not belong to this model, or were written by FSDP1.
  void load_sharded_state(const std::string& dir);

  // Scales the sharded gradients so that the norm of the whole gradient is at most `max_norm`
  // (torch.nn.utils.clip_grad_norm_ over the shards: each rank's squares, summed over ranks by
  // one all-reduce). Returns the total norm before clipping, a float64 scalar on the gradients'
  // device. Collective.
  at::Tensor clip_grad_norm(double max_norm);

  // ---- Introspection.
  torch::nn::Module& module() { return *module_; }
  // The group parameters are sharded over: the world, or HSDP's shard group.
  comm::ProcessGroup& group() { return *mesh_.shard; }
  const comm::DeviceMesh& mesh() const { return mesh_; }
  const FsdpParamGroup& param_group() const { return *param_group_; }
  // After lazy init: every state under the root, innermost first (unit order), the root last.
  const std::vector<FsdpState*>& all_states() const { return all_states_; }
  // What this state keeps after forward (the root always keeps: see Note [FSDP2 hooks]).
  ReshardAfterForward reshard_after_forward() const { return reshard_; }
  const FullyShardOptions& options() const { return options_; }

 private:
  friend std::shared_ptr<FsdpState> fully_shard(torch::nn::Module&, comm::DeviceMesh, FullyShardOptions);
  // ---- Construction and forward (fully_shard.cpp).
  // Makes this state the root unless it is one already or a nested one: the shared context,
  // every state below numbered innermost first, their groups attached (Note [FSDP2 hooks]).
  // Throws Fsdp2Error for a state under a fully_shard ancestor that is not initialized yet.
  void lazy_init();
  static Fsdp2Context& initialized_context(FsdpState& root);
  // The root's lazy init, continued: every state's group numbered and attached (parameters in
  // two groups refused), and the groups of N ranks reshard_after_forward N needs.
  void attach_states(const std::vector<int32_t>& parents);
  void make_post_forward_groups();
  // Appends the states of this subtree in unit order (children first) with each one's parent
  // index (kNone for this one); returns this one's index.
  int32_t collect_states(std::vector<FsdpState*>* out, std::vector<int32_t>* parents);
  // The parameters (TensorImpls) and states of this subtree.
  void add_managed(std::unordered_set<const void*>* params,
                   std::unordered_set<const FsdpState*>* states) const;
  void pre_forward();
  at::Tensor post_forward(at::Tensor output);
  void begin_root_forward();

  // ---- Backward (fully_shard_backward.cpp).
  void register_pre_backward_hook(const at::Tensor& output);
  void pre_backward();
  void implicit_backward_prefetch();
  void final_callback();

  enum class Role { Undecided, Root, Nested };

  torch::nn::Module* module_;
  comm::DeviceMesh mesh_;
  FullyShardOptions options_;
  ReshardAfterForward reshard_;
  std::unique_ptr<FsdpParamGroup> param_group_;
  std::vector<std::shared_ptr<FsdpState>> children_;  // the states fully_shard found below
  FsdpState* parent_ = nullptr;                      // the state that claimed this one
  Role role_ = Role::Undecided;
  std::shared_ptr<Fsdp2Context> ctx_;     // set by the root's lazy init
  std::vector<FsdpState*> all_states_;    // the root's: unit order
  std::vector<FsdpState*> forward_prefetch_;   // explicit prefetching, as set
  std::vector<FsdpState*> backward_prefetch_;
  trace::NameId final_callback_name_ = trace::kNone;
};

}  // namespace dpscope::fsdp2
