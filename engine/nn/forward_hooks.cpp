// The forward-hook registry behind nn::call_module: a map from module object to its hooks,
// skipped without a lock in the common case of no hooks at all.
#include "engine/nn/forward_hooks.h"

#include <atomic>
#include <shared_mutex>
#include <unordered_map>

namespace dpscope::nn {

namespace {

struct Registry {
  std::shared_mutex mutex;
  std::unordered_map<const torch::nn::Module*, std::shared_ptr<const ForwardHooks>> hooks;
  std::atomic<size_t> count{0};
};

Registry& registry() {
  static Registry* instance = new Registry();  // outlives every module, also at exit
  return *instance;
}

}  // namespace

void set_forward_hooks(const torch::nn::Module& module, ForwardHooks hooks) {
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  r.hooks[&module] = std::make_shared<const ForwardHooks>(std::move(hooks));
  r.count.store(r.hooks.size(), std::memory_order_release);
}

void clear_forward_hooks(const torch::nn::Module& module) {
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  r.hooks.erase(&module);
  r.count.store(r.hooks.size(), std::memory_order_release);
}

std::shared_ptr<const ForwardHooks> find_forward_hooks(const torch::nn::Module& module) {
  Registry& r = registry();
  if (r.count.load(std::memory_order_acquire) == 0) return nullptr;
  std::shared_lock lock(r.mutex);
  const auto it = r.hooks.find(&module);
  return it == r.hooks.end() ? nullptr : it->second;
}

}  // namespace dpscope::nn
