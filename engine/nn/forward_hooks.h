// Forward hooks for LibTorch modules: the C++ stand-in for the pre- and post-forward hooks that
// Python's Module.__call__ runs and LibTorch lacks. FSDP gathers a nested unit's parameters in its
// pre-hook and frees them in its post-hook, so a parent calls its children through call_module().
// Below the models and both FSDPs, which all build on it (docs/architecture.md).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <utility>

namespace dpscope::nn {

// What runs around one module's forward. Either may be empty.
struct ForwardHooks {
  std::function<void()> pre;                          // before the module's forward
  std::function<at::Tensor(at::Tensor output)> post;  // after it; returns the output to use
};

// Registry of hooks by module (the object, not its type). Thread-safety: set/clear take a lock;
// find is lock-free while no hooks are registered at all, and takes a shared lock otherwise.
// Hooks are called on the thread that calls the module.
void set_forward_hooks(const torch::nn::Module& module, ForwardHooks hooks);
void clear_forward_hooks(const torch::nn::Module& module);
// The hooks of `module`, or null. The pointer stays valid while the caller holds it.
std::shared_ptr<const ForwardHooks> find_forward_hooks(const torch::nn::Module& module);

// A module whose forward calls each child through call_module, so that FSDP may make a child a
// unit of its own (engine/fsdp/wrap_policy.h). models::Model is one; a module that calls its
// children directly is not, and FSDP wraps it whole.
class HookedParent {
 public:
  virtual ~HookedParent() = default;
  // True when forward calls every child module through call_module.
  virtual bool calls_children_through_hooks() const = 0;
};

// Calls `holder(args...)` (a ModuleHolder such as torch::nn::Linear, or a module pointer) with
// the module's hooks around it.
template <typename Holder, typename... Args>
at::Tensor call_module(Holder& holder, Args&&... args) {
  const std::shared_ptr<const ForwardHooks> hooks = find_forward_hooks(*holder);
  if (!hooks) return holder(std::forward<Args>(args)...);
  if (hooks->pre) hooks->pre();
  at::Tensor output = holder(std::forward<Args>(args)...);
  return hooks->post ? hooks->post(std::move(output)) : output;
}

}  // namespace dpscope::nn
