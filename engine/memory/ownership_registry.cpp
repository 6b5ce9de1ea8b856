// The ownership registry (Note [Ownership accounting]): weak references to the claimed storages,
// keyed by their StorageImpl, summed by category at each memory sample.
#include "engine/memory/ownership_registry.h"

#include <stdexcept>
#include <string>

#include "engine/memory/tracking_allocator.h"

namespace dpscope::memory {

namespace {

std::atomic<OwnershipRegistry*> g_registry{nullptr};

// The storage under `tensor`, or null when it has none (undefined, sparse).
c10::StorageImpl* storage_of(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return nullptr;
  return tensor.storage().unsafeGetStorageImpl();
}

bool on_device(const c10::StorageImpl& storage, c10::Device device) {
  const c10::Device where = storage.device();
  return where.type() == device.type() && (!device.has_index() || where.index() == device.index());
}

}  // namespace

OwnershipRegistry& OwnershipRegistry::install() {
  static OwnershipRegistry* const instance = [] {
    // Never deleted: storages die during static destruction too.
    auto* registry = new OwnershipRegistry();
    g_registry.store(registry, std::memory_order_release);
    return registry;
  }();
  return *instance;
}

OwnershipRegistry* OwnershipRegistry::installed() { return g_registry.load(std::memory_order_acquire); }

void OwnershipRegistry::claim(const at::Tensor& tensor, MemoryCategory category) {
  if (!trace::is_stacked(category) || category == MemoryCategory::Activations ||
      category == MemoryCategory::Other) {
    throw std::invalid_argument("OwnershipRegistry::claim: " + std::string(trace::to_string(category)) +
                                " is not a category a storage can be owned as: activations are the "
                                "remainder, other the tracking allocator's own, the rest allocator "
                                "read-outs; claim it as what holds it (parameters, gradients, ...)");
  }
  c10::StorageImpl* storage = storage_of(tensor);
  if (!storage) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = entries_.find(storage);
  if (it != entries_.end()) {
    it->second.category = category;
  } else {
    entries_.emplace(storage, Entry{tensor.storage().getWeakStorageImpl(), category});
  }
  if (entries_.size() >= 2 * size_after_prune_ + 64) prune_locked();
}

void OwnershipRegistry::release(const at::Tensor& tensor) {
  c10::StorageImpl* storage = storage_of(tensor);
  if (!storage) return;
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.erase(storage);
}

std::array<int64_t, trace::kMemoryCategoryCount> OwnershipRegistry::owned_bytes(c10::Device device) {
  std::array<int64_t, trace::kMemoryCategoryCount> bytes{};
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    const c10::intrusive_ptr<c10::StorageImpl> storage = it->second.storage.lock();
    if (!storage) {
      it = entries_.erase(it);
      continue;
    }
    if (on_device(*storage, device)) {
      bytes[static_cast<size_t>(it->second.category)] += static_cast<int64_t>(storage->nbytes());
    }
    ++it;
  }
  size_after_prune_ = entries_.size();
  return bytes;
}

size_t OwnershipRegistry::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  prune_locked();
  return entries_.size();
}

void OwnershipRegistry::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  size_after_prune_ = 0;
}

void OwnershipRegistry::prune_locked() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = it->second.storage.expired() ? entries_.erase(it) : std::next(it);
  }
  size_after_prune_ = entries_.size();
}

void own(const at::Tensor& tensor, MemoryCategory category) {
  if (OwnershipRegistry* registry = OwnershipRegistry::installed()) registry->claim(tensor, category);
}

void count_as(const at::Tensor& tensor, MemoryCategory category) {
  if (TrackingAllocator* allocator = TrackingAllocator::installed()) allocator->retag(tensor, category);
  own(tensor, category);
}

}  // namespace dpscope::memory
