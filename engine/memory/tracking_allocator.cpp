// The tracking CPU allocator: every allocation is the base allocator's block with a small header
// in front that holds the size and category, found at a fixed distance before the data, so
// counting, retagging and freeing need neither a lock nor a lookup (Note [Memory categories]).
#include "engine/memory/tracking_allocator.h"

#include <cstring>

#include <ATen/core/Tensor.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>

#include <limits>
#include <new>
#include <stdexcept>
#include <string>

#include "trace/clock.h"

namespace dpscope::memory {

namespace {

// Note [Allocation header]
// allocate(n) takes n + kHeaderBytes from the base allocator and hands out the address just past
// the header, so the data keeps the base's alignment (c10::gAlignment, 64 bytes) as long as the
// header is a multiple of it. The header keeps what is needed to give the block back to the
// base (its context and deleter), the counted size, and the category, which retag() changes.
// The DataPtr's context is the data pointer itself (raw_allocate() requires that), and the
// header is kHeaderBytes before it.
struct alignas(16) Header {
  void* base_context;
  c10::DeleterFnPtr base_deleter;
  int64_t bytes;
  std::atomic<uint8_t> category;
};
constexpr size_t kHeaderBytes = 64;
static_assert(sizeof(Header) <= kHeaderBytes, "the header must fit in front of the data");
static_assert(kHeaderBytes % c10::gAlignment == 0, "the header must keep the base's alignment");

std::atomic<TrackingAllocator*> g_installed{nullptr};
thread_local MemoryCategory t_category = MemoryCategory::Other;

bool is_counted(MemoryCategory category) {
  return trace::is_stacked(category);
}

void require_counted(const char* where, MemoryCategory category) {
  if (!is_counted(category)) {
    throw std::invalid_argument(std::string(where) + ": " +
                                std::string(trace::to_string(category)) +
                                " is a read-out of an allocator, not a category memory can be "
                                "counted under");
  }
}

}  // namespace

TrackingAllocator::TrackingAllocator() : base_(c10::GetCPUAllocator()) {}

TrackingAllocator& TrackingAllocator::install() {
  static TrackingAllocator* const instance = [] {
    // Never deleted: tensors freed during static destruction still call our deleter.
    auto* allocator = new TrackingAllocator();
    // The highest priority, so that nothing registered later displaces the wrapper.
    c10::SetCPUAllocator(allocator, std::numeric_limits<uint8_t>::max());
    if (c10::GetCPUAllocator() != allocator) {
      throw std::runtime_error("TrackingAllocator::install: LibTorch kept its CPU allocator");
    }
    g_installed.store(allocator, std::memory_order_release);
    return allocator;
  }();
  return *instance;
}

TrackingAllocator* TrackingAllocator::installed() {
  return g_installed.load(std::memory_order_acquire);
}

#if DPSCOPE_LIBTORCH_2_3
void TrackingAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}
#endif

c10::DataPtr TrackingAllocator::allocate(size_t bytes) DPSCOPE_ALLOCATE_CONST {
  const c10::Device cpu(c10::DeviceType::CPU);
  // Like the default CPU allocator: nothing to allocate, a null pointer, nothing counted.
  if (bytes == 0) return {nullptr, nullptr, nullptr, cpu};
  if (bytes > static_cast<size_t>(std::numeric_limits<int64_t>::max()) - kHeaderBytes) {
    throw std::bad_alloc();
  }
  c10::DataPtr block = base_->allocate(bytes + kHeaderBytes);
  void* raw = block.get();
  if (raw == nullptr) throw std::bad_alloc();
  const c10::DeleterFnPtr base_deleter = block.get_deleter();
  void* base_context = block.release_context();
  const MemoryCategory category = t_category;
  auto* header = new (raw) Header{base_context, base_deleter, static_cast<int64_t>(bytes), {}};
  header->category.store(static_cast<uint8_t>(category), std::memory_order_relaxed);
  add(category, static_cast<int64_t>(bytes));
  // The context is the data pointer itself (the header sits kHeaderBytes before it), as
  // c10::Allocator::raw_allocate requires: some kernels (mkldnn convolutions) allocate raw.
  void* data = static_cast<char*>(raw) + kHeaderBytes;
  return {data, data, &TrackingAllocator::free, cpu};
}

void TrackingAllocator::free(void* context) {
  // raw_deallocate() of a zero-byte raw_allocate() (mkldnn does this) hands back null.
  if (context == nullptr) return;
  auto* header = reinterpret_cast<Header*>(static_cast<char*>(context) - kHeaderBytes);
  const auto category = static_cast<MemoryCategory>(header->category.load(std::memory_order_relaxed));
  const int64_t bytes = header->bytes;
  void* base_context = header->base_context;
  const c10::DeleterFnPtr base_deleter = header->base_deleter;
  header->~Header();
  // Only the installed allocator hands out this deleter.
  g_installed.load(std::memory_order_relaxed)->add(category, -bytes);
  if (base_deleter) base_deleter(base_context);
}

void TrackingAllocator::add(MemoryCategory category, int64_t bytes) const {
  by_category_[static_cast<int>(category)].fetch_add(bytes, std::memory_order_relaxed);
  const int64_t total = total_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (bytes > 0) {
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (total > peak) {
      if (peak_.compare_exchange_weak(peak, total, std::memory_order_relaxed)) {
        record_peak_breakdown(total);
        break;
      }
    }
  }
}

// New peaks are rare once a run has warmed up; the lock is taken only for them, and a thread
// that finds it taken leaves the snapshot to the one holding it.
void TrackingAllocator::record_peak_breakdown(int64_t total) const {
  std::unique_lock<std::mutex> lock(peak_mutex_, std::try_to_lock);
  if (!lock.owns_lock() || total < peak_snapshot_total_) return;
  int64_t sum = 0;
  for (const MemoryCategory category : trace::kStackedCategories) {
    const auto i = static_cast<size_t>(category);
    peak_snapshot_.bytes[i] = by_category_[i].load(std::memory_order_relaxed);
    sum += peak_snapshot_.bytes[i];
  }
  // The running total that crossed the peak, not the categories' sum: the two are kept apart so
  // that the trace holds one against the other (tests/ddp/test_ddp_worker.cpp). They differ only
  // by what another thread allocated between the loads above.
  peak_snapshot_.bytes[static_cast<int>(MemoryCategory::AllocatorTotal)] = total;
  peak_snapshot_.ts_ns = trace::now_ns();
  ++peak_snapshot_.generation;
  peak_snapshot_total_ = total;
}

TrackingAllocator::PeakSnapshot TrackingAllocator::peak_snapshot() const {
  std::lock_guard<std::mutex> lock(peak_mutex_);
  return peak_snapshot_;
}

int64_t TrackingAllocator::bytes_in_use() const { return total_.load(std::memory_order_relaxed); }

int64_t TrackingAllocator::bytes(MemoryCategory category) const {
  if (category == MemoryCategory::AllocatorTotal) return bytes_in_use();
  if (!is_counted(category)) return 0;
  return by_category_[static_cast<int>(category)].load(std::memory_order_relaxed);
}

int64_t TrackingAllocator::peak_bytes() const { return peak_.load(std::memory_order_relaxed); }

void TrackingAllocator::reset_peak() {
  const int64_t total = total_.load(std::memory_order_relaxed);
  peak_.store(total, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(peak_mutex_);
    peak_snapshot_total_ = 0;
  }
  record_peak_breakdown(total);
}

bool TrackingAllocator::retag(const at::Tensor& tensor, MemoryCategory category) {
  require_counted("TrackingAllocator::retag", category);
  if (!tensor.defined() || !tensor.has_storage()) return false;
  const c10::DataPtr& data = tensor.storage().data_ptr();
  if (data.get_deleter() != &TrackingAllocator::free) {
    // A storage of no bytes holds nothing to count, wherever it came from.
    return data.get() == nullptr && tensor.storage().nbytes() == 0;
  }
  auto* header =
      reinterpret_cast<Header*>(static_cast<char*>(data.get_context()) - kHeaderBytes);
  const auto previous = static_cast<MemoryCategory>(
      header->category.exchange(static_cast<uint8_t>(category), std::memory_order_relaxed));
  if (previous != category) {
    by_category_[static_cast<int>(previous)].fetch_sub(header->bytes, std::memory_order_relaxed);
    by_category_[static_cast<int>(category)].fetch_add(header->bytes, std::memory_order_relaxed);
  }
  return true;
}

CategoryScope::CategoryScope(MemoryCategory category) : previous_(t_category) {
  require_counted("CategoryScope", category);
  t_category = category;
}

CategoryScope::~CategoryScope() { t_category = previous_; }

MemoryCategory CategoryScope::current() { return t_category; }

void set_storage_bytes(const at::Tensor& tensor, size_t bytes) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  if (bytes == 0) {
    storage->set_data_ptr_noswap(c10::DataPtr(nullptr, storage->device()));
    storage->set_nbytes(0);
    return;
  }
  storage->set_data_ptr_noswap(c10::GetAllocator(storage->device_type())->allocate(bytes));
  storage->set_nbytes(bytes);
}

}  // namespace dpscope::memory
