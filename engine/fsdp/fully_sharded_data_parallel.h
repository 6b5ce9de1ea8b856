// FullyShardedDataParallel: wraps a torch::nn::Module so that each rank keeps only a shard of
// every parameter, gradient and optimizer state, gathering a unit's full parameters just for its
// forward and backward — fairscale's FullyShardedDataParallel with PyTorch FSDP's options, on
// the ProcessGroup interface, traced.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/device_mesh.h"
#include "engine/comm/process_group.h"
#include "engine/fsdp/flat_param.h"
#include "engine/fsdp/fsdp_options.h"
#include "engine/fsdp/fsdp_unit.h"
#include "engine/fsdp/reduce_scatter_bucketer.h"
#include "engine/replica/gradient_sync.h"
#include "trace/recorder.h"

namespace dpscope::fsdp {

// Note [FSDP hooks]
// Per unit and iteration, on every rank in the same order (See Note [FSDP collective order]):
//  1. pre-forward (the root: forward(); a nested unit: its forward hook, nn::call_module):
//     gather the full parameter (all-gather of the shards) unless it is still full, make the
//     module's parameters interior variables of one UnflattenBackward node (flat_param.h), and
//     with forward prefetch issue the next unit's all-gather.
//  2. post-forward: under FULL_SHARD free the full parameter again (not the root's: its backward
//     comes at once); register the pre-backward hook on the outputs.
//  3. pre-backward (a hook on the unit's outputs, once per backward): gather the full parameter
//     again if it was freed; with BACKWARD_PRE prefetch issue the next unit's all-gather. The
//     first pre-backward queues the root's final callback.
//  4. post-backward (a hook on the full parameter's AccumulateGrad, which autograd runs once per
//     backward after UnflattenBackward has summed every gradient of every parameter of the unit —
//     a per-parameter hook would fire once per parameter and too early for parameters used
//     twice): reduce-scatter the full gradient (through the bucketer) so this rank keeps the sum
//     of its shard's gradients, free the full parameter and the full gradient; with
//     BACKWARD_POST prefetch issue the next unit's all-gather.
//  5. final callback (end of backward): flush the bucketer, wait for every reduction, divide,
//     write the shards' .grad, free whatever is still full. The optimizer then steps on shards.
// Under no_sync step 4 keeps the full gradient (accumulating) and reduces nothing.
//
// Note [FSDP collective order]
// Every rank must issue the same collectives in the same order (Note [Collective order]).
// Forward gathers follow the forward's call order, which is the same on every rank for the same
// model; backward gathers and reductions follow autograd's execution order, also the same for
// the same graph. Prefetching uses the order recorded in the first iteration (the same on every
// rank). A unit that takes part in backward on one rank must take part on all: FSDP, like
// PyTorch's, does not support a unit whose outputs reach the loss on some ranks only (check mode,
// DPSCOPE_CHECK_COLLECTIVES=1, names the mismatch instead of hanging).

// Usage, one rank:
//   FullyShardedDataParallel fsdp(model, group, options);    // collective: every rank
//   torch::optim::SGD sgd(fsdp.parameters(), ...);            // shards only
//   at::Tensor out = fsdp.forward(x, [&](const at::Tensor& in) { return model->forward(in); });
//   loss(out).backward();                                      // shard gradients ready on return
//   sgd.step();
// Thread-safety: one training loop thread; backward runs on the thread that calls backward().
class FullyShardedDataParallel {
 public:
  // Plans the units (options.wrap_policy), broadcasts rank 0's parameters and buffers, flattens
  // and shards every unit and installs the hooks. Throws FsdpError when the module has no
  // parameters, or parameters that FSDP cannot flatten (the message names them).
  FullyShardedDataParallel(std::shared_ptr<torch::nn::Module> module,
                           std::shared_ptr<comm::ProcessGroup> group, FsdpOptions options = {});
  // HYBRID_SHARD (options.sharding HybridShard; PyTorch's FSDP with a 2-D device_mesh): the same
  // over `mesh` (FSDP2's type; See Note [HSDP mesh] in engine/comm/device_mesh.h): flat parameters
  // sharded over mesh.shard, each unit's gradient reduce-scattered there and its shard then
  // all-reduced across mesh.replicate, divided so as to average over every rank (DDP's). Rank
  // 0's state is broadcast across the replicate group, then the shard group. Throws FsdpError
  // when the strategy and the mesh disagree (HybridShard needs a replicate group, the others
  // take none).
  FullyShardedDataParallel(std::shared_ptr<torch::nn::Module> module, comm::DeviceMesh mesh,
                           FsdpOptions options = {});
  ~FullyShardedDataParallel();
  FullyShardedDataParallel(const FullyShardedDataParallel&) = delete;
  FullyShardedDataParallel& operator=(const FullyShardedDataParallel&) = delete;

  // The root's forward around `run`: casts a floating-point `input` to the compute dtype, runs
  // the root unit's pre- and post-forward around `run(input)` (nested units gather in their
  // hooks), and returns the output in float32. Without grad (evaluation) nothing of backward is
  // prepared and every full parameter is freed again afterwards (except with NO_SHARD).
  at::Tensor forward(const at::Tensor& input, const std::function<at::Tensor(const at::Tensor&)>& run);

  // Gradient accumulation: while the guard lives, backward keeps each unit's full gradient and
  // reduces nothing; the first backward after it reduces the accumulated gradients.
  // gradient_sync() is the switch it turns.
  replica::NoSyncGuard no_sync() { return replica::NoSyncGuard(gradient_sync_); }
  replica::GradientSync& gradient_sync() { return gradient_sync_; }

  // The optimizer's parameters: every non-empty unit's float32 shard, in unit order.
  std::vector<at::Tensor> parameters() const;

  // ---- State (fsdp_state.cpp). All collective: every rank calls them.
  // Where full_state_dict leaves its copies: on the host (PyTorch's offload_to_cpu, what a
  // checkpoint file needs), or on the parameters' device.
  enum class StateCopies { OnHost, OnDevice };
  // The full parameters by qualified name, and the buffers, in float32; on rank `root` of the
  // world only (other ranks get an empty list).
  std::vector<std::pair<std::string, at::Tensor>> full_state_dict(
      int root = 0, StateCopies copies = StateCopies::OnHost);
  // Writes this rank's shards to DIR/shard-rank<R>-of-<W>.pt (torch::pickle_save of a
  // c10::Dict<std::string, at::Tensor>, with the unit layout). Throws FsdpError naming the file,
  // and under HYBRID_SHARD (every replica would write the same files; not built).
  void save_sharded_state(const std::string& dir);
  // Reads the shards written by save_sharded_state, also by another world size (it reads every
  // rank's file and takes this rank's part: a reshard). Throws FsdpError naming the file and what
  // differs when the files do not belong to this model; and under HYBRID_SHARD, as saving.
  void load_sharded_state(const std::string& dir);
  // Scales the shards' gradients so that the norm of the whole gradient is at most `max_norm`
  // (torch.nn.utils.clip_grad_norm_ across shards: squares summed over ranks). Returns the total
  // norm before clipping, a float64 scalar on the gradients' device, as PyTorch does: nothing
  // waits for it until the caller reads it (.item<double>()).
  at::Tensor clip_grad_norm(double max_norm);

  // ---- Introspection.
  torch::nn::Module& module() { return *module_; }
  // The group the flat parameters are sharded over: the world, or HYBRID_SHARD's shard group.
  comm::ProcessGroup& group() { return *group_; }
  // This rank in the whole world (its rank in group() unless HYBRID_SHARD).
  int world_rank() const;
  const FsdpOptions& options() const { return options_; }
  // The strategy in effect (world size 1 runs NO_SHARD: there is nothing to shard).
  ShardingStrategy sharding() const { return sharding_; }
  size_t unit_count() const { return units_.size(); }
  // Unit i: innermost first, the root last.
  const FlatParameter& flat_param(size_t unit) const { return *units_[unit]->flat; }
  const std::string& unit_name(size_t unit) const { return units_[unit]->name; }
  int32_t unit_parent(size_t unit) const { return units_[unit]->parent; }
  // Notes from wrapping (submodules the policy chose but that could not be units).
  const std::vector<std::string>& wrap_notes() const { return wrap_notes_; }
  // Synced iterations begun so far (recorded with the next iteration's events).
  int32_t iteration() const { return iteration_; }

 private:
  // A NO_SHARD all-reduce on its way: every rank keeps the whole gradient.
  struct PendingReduction {
    Unit* unit = nullptr;
    comm::WorkHandle work;
    at::Tensor grad;  // reduced in place
  };

  // ---- Forward (fully_sharded_data_parallel.cpp).
  void build_units(const WrapPlan& plan);
  void record_layout();
  // HYBRID_SHARD with more than one replica: the shard's gradient is all-reduced across them
  // (a replicate group of one rank adds nothing and issues no collective).
  bool replicated() const { return replicate_ && replicate_->size() > 1; }
  // Throws FsdpError for `what` (the sharded checkpoint files) under HYBRID_SHARD.
  void refuse_sharded_files_under_hybrid(const char* what) const;
  // Construction: the strategy in effect and the gradient divisors for this mesh, and the meta.
  void choose_strategy();
  // Construction: rank 0's parameters and buffers on every rank (across the replicate group
  // first under HYBRID_SHARD), after checking that the ranks' models have the same shapes.
  void sync_module_states(const std::vector<at::Tensor>& params, const std::vector<std::string>& names);
  void pre_forward(Unit& unit);
  at::Tensor post_forward(Unit& unit, at::Tensor output);
  void begin_root_forward();
  // Issues the unit's all-gather unless it is full or already gathering.
  void issue_gather(Unit& unit, uint8_t flags);
  // Makes the unit's full parameter available: waits for its all-gather (issuing it first if
  // needed).
  void unshard(Unit& unit, uint8_t flags);
  void reshard(Unit& unit);
  void wait_gather(Unit& unit);
  // The one place a unit's residency changes: records the span that ends (Gathering or Full)
  // and starts the next. See Note [Unit lifecycle].
  void move_to(Unit& unit, Residency next);
  void prefetch_after(const Unit& unit, const std::vector<int32_t>& order, uint8_t flags);

  // ---- Backward (fsdp_backward.cpp).
  void register_pre_backward_hook(Unit& unit, const at::Tensor& output);
  void pre_backward(Unit& unit);
  void post_backward(Unit& unit);
  void final_callback();
  // The unit's forward and backward are over (or abandoned): free what is still full and set its
  // pass back to NotYet. See Note [Unit lifecycle].
  void end_pass(Unit& unit);
  // Hands the shards the results of reductions that are already done (no waiting), freeing their
  // full gradients early.
  void finish_completed_reductions();
  // Adds a reduced gradient chunk (post-divided, cast to float32, moved to the shard's device) to
  // the shard's .grad.
  // Issues the sum of `grad` (a unit's full gradient, or under HYBRID_SHARD its reduced shard)
  // over `group`, finished with the pending reductions (finish_completed_reductions, the final
  // callback).
  void all_reduce_shard_grad(Unit& unit, const at::Tensor& grad, comm::ProcessGroup& group);
  void accumulate_shard_grad(Unit& unit, const at::Tensor& reduced);
  // The order units begin backward: recorded in the first backward; until then, forward's
  // reversed.
  const std::vector<int32_t>& backward_order();
  void install_post_backward_hooks();
  void remove_post_backward_hooks();

  // ---- Trace.
  // What the work in progress belongs to: a training iteration, or none (an evaluation forward,
  // a state dict's gathers). See Note [Work outside iterations] in trace/schema.h.
  enum class WorkScope { Iteration, OutsideIterations };
  // Sets the scope for its lifetime and restores the previous one.
  class ScopedWork {
   public:
    ScopedWork(FullyShardedDataParallel& fsdp, WorkScope scope) : fsdp_(fsdp), previous_(fsdp.work_scope_) {
      fsdp_.work_scope_ = scope;
    }
    ~ScopedWork() { fsdp_.work_scope_ = previous_; }
    ScopedWork(const ScopedWork&) = delete;
    ScopedWork& operator=(const ScopedWork&) = delete;

   private:
    FullyShardedDataParallel& fsdp_;
    WorkScope previous_;
  };
  // The iteration recorded with collectives and unit states: iteration_, or kNone outside them.
  int32_t traced_iteration() const;
  void record_state(const Unit& unit, trace::UnitState state, int64_t begin_ns, int64_t end_ns);
  void sample_memory();
  comm::CollectiveTag tag(const Unit& unit, uint8_t flags) const;

  std::shared_ptr<torch::nn::Module> module_;
  std::shared_ptr<comm::ProcessGroup> group_;
  std::shared_ptr<comm::ProcessGroup> replicate_;  // HYBRID_SHARD only, else null
  FsdpOptions options_;
  ShardingStrategy sharding_;
  std::vector<std::unique_ptr<Unit>> units_;  // innermost first; root last
  std::vector<at::Tensor> buffers_;
  std::vector<std::string> wrap_notes_;
  std::unique_ptr<ReduceScatterBucketer> bucketer_;

  // Execution order, recorded in the first iteration (See Note [FSDP collective order]).
  std::vector<int32_t> forward_order_;
  std::vector<int32_t> backward_order_;
  std::vector<int32_t> reversed_forward_order_;
  bool recording_order_ = true;

  std::vector<Unit*> gathers_in_flight_;  // oldest first, for limit_all_gathers
  std::vector<std::unique_ptr<PendingReduction>> pending_reductions_;
  replica::GradientSync gradient_sync_;
  bool callback_queued_ = false;
  bool step_finished_ = false;  // a synced backward ended: the next forward begins an iteration
  int32_t iteration_ = 0;
  WorkScope work_scope_ = WorkScope::Iteration;
  double predivide_ = 1;
  double postdivide_ = 1;

  trace::NameId final_callback_name_ = trace::kNone;
};

}  // namespace dpscope::fsdp
