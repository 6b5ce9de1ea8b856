// DistributedDataParallel: wraps a torch::nn::Module so that every rank trains the same model on
// its own data and ends each backward with gradients averaged over all ranks — PyTorch's
// torch.nn.parallel.DistributedDataParallel, built on the Reducer and a ProcessGroup.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/ddp/comm_hook.h"
#include "engine/ddp/initial_buckets.h"
#include "engine/ddp/reducer.h"
#include "engine/replica/gradient_sync.h"
#include "trace/recorder.h"

namespace dpscope::ddp {

// DDP's options: the Reducer's (bucket sizes, find_unused_parameters, gradient_as_bucket_view,
// static_graph; reducer.h), handed to it as they are, and what the module itself does.
struct DdpOptions : ReducerOptions {
  // Iteration 0's plan; See Note [The first iteration's buckets].
  trace::InitialBuckets initial_buckets = trace::InitialBuckets::PyTorch;
  bool broadcast_buffers = true;  // rank 0's buffers to every rank before each synced forward
  trace::Recorder* recorder = nullptr;  // may be null: nothing recorded
};

// Usage, one rank:
//   DistributedDataParallel ddp(model, group, options);       // collective: every rank
//   at::Tensor out = ddp.forward([&] { return model->forward(x); });
//   loss(out).backward();                                      // gradients averaged on return
//   optimizer.step();
// Construction verifies the model across ranks, broadcasts rank 0's parameters and buffers,
// assigns iteration 0's buckets (See Note [The first iteration's buckets]) and installs the Reducer's hooks. Every rank must call forward and backward in
// step (See Note [Bucket order]).
// Thread-safety: one training loop thread; backward may run on autograd's threads.
class DistributedDataParallel {
 public:
  // Throws DdpError when the module has no parameter that requires grad, or the model differs
  // across ranks (every rank fails; the one that differs names the parameter).
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module,
                          std::shared_ptr<comm::ProcessGroup> group, DdpOptions options = {});
  ~DistributedDataParallel();

  // DDP's forward around `run` (which calls the module): join notification, the one-time bucket
  // rebuild, buffer broadcast; then, after `run`, prepares the Reducer for the backward of the
  // returned outputs (walking the graph from them with find_unused_parameters). Under no_sync
  // only `run` happens.
  at::Tensor forward(const std::function<at::Tensor()>& run);
  std::vector<at::Tensor> forward(const std::function<std::vector<at::Tensor>()>& run);

  // Gradient accumulation: while the returned guard lives, backward passes accumulate into
  // .grad locally without communication; the first forward+backward after it synchronises the
  // accumulated gradients (PyTorch's no_sync()). gradient_sync() is the switch it turns.
  replica::NoSyncGuard no_sync() { return replica::NoSyncGuard(gradient_sync_); }
  replica::GradientSync& gradient_sync() { return gradient_sync_; }

  // A communication hook in place of the built-in all-reduce; before the first backward.
  void register_comm_hook(std::unique_ptr<CommHook> hook);

  torch::nn::Module& module() { return *module_; }
  std::shared_ptr<torch::nn::Module> module_ptr() { return module_; }
  comm::ProcessGroup& group() { return *group_; }
  Reducer& reducer() { return *reducer_; }
  const DdpOptions& options() const { return options_; }
  // The parameters DDP synchronises (require grad, shared ones once), their names and which
  // expect sparse gradients, in registration order: the index used in the trace.
  const std::vector<at::Tensor>& parameters() const { return params_; }
  const std::vector<std::string>& parameter_names() const { return names_; }
  // Synced forward passes begun so far (the iteration recorded with the next one's events).
  int32_t iteration() const { return iteration_; }

 private:
  friend class Join;
  void pre_forward();
  void post_forward(const std::vector<at::Tensor>& outputs);
  bool will_sync_buffers() const;
  // Broadcasts the buffers from `authoritative_rank`, recorded with `iteration` (kNone for an
  // evaluation forward's: See Note [Work outside iterations] in trace/schema.h).
  void sync_buffers(int authoritative_rank, int32_t iteration);
  void collect_parameters();

  std::shared_ptr<torch::nn::Module> module_;
  std::shared_ptr<comm::ProcessGroup> group_;
  DdpOptions options_;
  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<bool> expect_sparse_;
  std::vector<at::Tensor> buffers_;
  std::unique_ptr<Reducer> reducer_;
  replica::GradientSync gradient_sync_;  // PyTorch's require_backward_grad_sync
  bool require_forward_param_sync_ = true;
  int32_t iteration_ = 0;
  class Join* join_ = nullptr;  // set while a Join context is active
  trace::NameId forward_sync_name_ = trace::kNone;
};

}  // namespace dpscope::ddp
