// The ownership registry and the sampler's ownership accounting: each storage counted once (views,
// a storage claimed twice), the latest claim wins, dead storages drop out, a storage emptied and
// refilled is counted at its size, only the asked device's storages count, the remainder is
// activations and the categories add up to the allocator's total (Note [Ownership accounting]).
#include <gtest/gtest.h>

#include <ATen/ops/empty.h>

#include <atomic>
#include <map>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/memory/memory_sampler.h"
#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"
#include "tests/test_util.h"
#include "trace/reader.h"
#include "trace/recorder.h"

using dpscope::memory::CategoryScope;
using dpscope::memory::MemoryCategory;
using dpscope::memory::MemorySampler;
using dpscope::memory::OwnershipRegistry;
using dpscope::memory::TrackingAllocator;
using dpscope::testing::TempDir;
using dpscope::trace::MemoryAccounting;

namespace {

const c10::Device kCpu(c10::kCPU);
const c10::Device kMeta(c10::kMeta);

int64_t owned(OwnershipRegistry& registry, MemoryCategory category, c10::Device device = kCpu) {
  return registry.owned_bytes(device)[static_cast<size_t>(category)];
}

TEST(OwnershipRegistry, CountsEachStorageOnceWhateverViewsIt) {
  OwnershipRegistry& registry = OwnershipRegistry::install();
  registry.clear();
  const at::Tensor bucket = at::empty({1000}, at::kFloat);
  registry.claim(bucket, MemoryCategory::Buckets);
  // Two gradients that are views of the bucket, claimed as buckets too: still 4000 bytes.
  registry.claim(bucket.narrow(0, 0, 500), MemoryCategory::Buckets);
  registry.claim(bucket.narrow(0, 500, 500).view({25, 20}), MemoryCategory::Buckets);
  EXPECT_EQ(owned(registry, MemoryCategory::Buckets), 4000);
  EXPECT_EQ(registry.size(), 1u);
  // A view claims its whole storage, as retag() does.
  const at::Tensor data = at::empty({256}, at::kDouble);
  registry.claim(data.narrow(0, 10, 5), MemoryCategory::Data);
  EXPECT_EQ(owned(registry, MemoryCategory::Data), 2048);
  registry.clear();
}

TEST(OwnershipRegistry, TheLatestClaimWinsAndReleaseForgets) {
  OwnershipRegistry& registry = OwnershipRegistry::install();
  registry.clear();
  const at::Tensor grad = at::empty({100}, at::kFloat);
  registry.claim(grad, MemoryCategory::FullGradients);
  registry.claim(grad, MemoryCategory::GradientShards);
  EXPECT_EQ(owned(registry, MemoryCategory::FullGradients), 0);
  EXPECT_EQ(owned(registry, MemoryCategory::GradientShards), 400);
  registry.release(grad);
  EXPECT_EQ(owned(registry, MemoryCategory::GradientShards), 0);
  EXPECT_EQ(registry.size(), 0u);
}

TEST(OwnershipRegistry, ADeadStorageDropsOutAndAnEmptiedOneCountsItsSize) {
  OwnershipRegistry& registry = OwnershipRegistry::install();
  registry.clear();
  {
    const at::Tensor batch = at::empty({64}, at::kLong);
    registry.claim(batch, MemoryCategory::Data);
    EXPECT_EQ(owned(registry, MemoryCategory::Data), 512);
  }
  EXPECT_EQ(owned(registry, MemoryCategory::Data), 0);
  EXPECT_EQ(registry.size(), 0u);
  // FSDP's full parameter: the storage object stays, its memory goes and comes back.
  const at::Tensor full = at::empty({300}, at::kFloat);
  registry.claim(full, MemoryCategory::FullParameters);
  dpscope::memory::set_storage_bytes(full, 0);
  EXPECT_EQ(owned(registry, MemoryCategory::FullParameters), 0);
  dpscope::memory::set_storage_bytes(full, 1200);
  EXPECT_EQ(owned(registry, MemoryCategory::FullParameters), 1200);
  registry.clear();
}

TEST(OwnershipRegistry, OnlyTheAskedDevicesStoragesCount) {
  OwnershipRegistry& registry = OwnershipRegistry::install();
  registry.clear();
  const at::Tensor host_shard = at::empty({10}, at::kFloat);
  const at::Tensor meta_shard = at::empty({1000}, at::TensorOptions(kMeta).dtype(at::kFloat));
  registry.claim(host_shard, MemoryCategory::Shards);
  registry.claim(meta_shard, MemoryCategory::Shards);
  EXPECT_EQ(owned(registry, MemoryCategory::Shards, kCpu), 40);
  // A meta tensor has no memory, but its storage has a size: what it would take on a device.
  EXPECT_EQ(owned(registry, MemoryCategory::Shards, kMeta), 4000);
  registry.clear();
}

TEST(OwnershipRegistry, RefusesTheRemainderAndTheReadOuts) {
  OwnershipRegistry& registry = OwnershipRegistry::install();
  const at::Tensor t = at::empty({4}, at::kFloat);
  for (const MemoryCategory category : {MemoryCategory::Activations, MemoryCategory::Other,
                                        MemoryCategory::AllocatorTotal, MemoryCategory::CudaAllocated}) {
    EXPECT_THROW(registry.claim(t, category), std::invalid_argument);
  }
  registry.claim(at::Tensor(), MemoryCategory::Parameters);  // undefined: nothing to claim
  EXPECT_EQ(registry.size(), 0u);
}

// Claims come from several threads (FSDP's autograd node runs on a GPU's device thread) while
// another samples: each storage counted once, the dead ones dropped (ThreadSanitizer runs this
// in scripts/test, test_memory being one of its targets).
TEST(OwnershipRegistry, ClaimsFromSeveralThreadsWhileSampling) {
  OwnershipRegistry& registry = OwnershipRegistry::install();
  registry.clear();
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done.load()) registry.owned_bytes(kCpu);
  });
  std::vector<std::vector<at::Tensor>> kept(4);
  std::vector<std::thread> claimers;
  for (int t = 0; t < 4; ++t) {
    claimers.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        at::Tensor tensor = at::empty({16}, at::kFloat);
        registry.claim(tensor, MemoryCategory::Shards);
        registry.claim(tensor.narrow(0, 0, 8), MemoryCategory::Shards);
        if (i % 2 == 0) kept[static_cast<size_t>(t)].push_back(tensor);  // the odd ones die here
      }
    });
  }
  for (std::thread& claimer : claimers) claimer.join();
  done.store(true);
  sampler.join();
  EXPECT_EQ(owned(registry, MemoryCategory::Shards), 4 * 100 * 64);
  EXPECT_EQ(registry.size(), 400u);
  registry.clear();
}

// count_as() moves a storage in both accountings; own() only claims it.
TEST(OwnershipRegistry, CountAsRetagsTheTrackingAllocatorToo) {
  TrackingAllocator& allocator = TrackingAllocator::install();
  OwnershipRegistry& registry = OwnershipRegistry::install();
  registry.clear();
  at::Tensor grad;
  {
    CategoryScope scope(MemoryCategory::Activations);
    grad = at::empty({250}, at::kFloat);
  }
  const int64_t gradients = allocator.bytes(MemoryCategory::Gradients);
  dpscope::memory::count_as(grad, MemoryCategory::Gradients);
  EXPECT_EQ(allocator.bytes(MemoryCategory::Gradients), gradients + 1000);
  EXPECT_EQ(owned(registry, MemoryCategory::Gradients), 1000);
  dpscope::memory::own(grad, MemoryCategory::Buckets);
  EXPECT_EQ(allocator.bytes(MemoryCategory::Gradients), gradients + 1000);
  EXPECT_EQ(owned(registry, MemoryCategory::Buckets), 1000);
  registry.clear();
}

// On the CPU the owned categories, other and the remainder (activations) add up to the tracking
// allocator's total at every sample, and the accounting is in the trace's meta.
TEST(OwnershipSampler, CategoriesAddUpToTheAllocatorsTotal) {
  TrackingAllocator& allocator = TrackingAllocator::install();
  OwnershipRegistry& registry = OwnershipRegistry::install();
  registry.clear();
  TempDir dir;
  const std::string path = dir.file("ownership.sqlite");
  {
    dpscope::trace::RecorderOptions options;
    options.path = path;
    dpscope::trace::Recorder recorder(options);
    MemorySampler sampler(&recorder, &allocator, kCpu, MemoryAccounting::Ownership);
    EXPECT_EQ(sampler.accounting(), MemoryAccounting::Ownership);
    at::Tensor params, activation;
    {
      CategoryScope scope(MemoryCategory::Parameters);
      params = at::empty({1024}, at::kFloat);
    }
    dpscope::memory::own(params, MemoryCategory::Parameters);
    {
      CategoryScope scope(MemoryCategory::Activations);
      activation = at::empty({4096}, at::kFloat);
    }
    sampler.sample(1000);
    activation.reset();
    sampler.sample(2000);
    EXPECT_EQ(sampler.largest_difference(MemoryCategory::Parameters), 0);
    EXPECT_GE(sampler.largest_tracked_total(), 4096 * 4);
    recorder.close();
  }
  dpscope::trace::Reader reader(path);
  EXPECT_EQ(reader.meta().at("memory_accounting"), "ownership");
  std::map<int64_t, std::map<MemoryCategory, int64_t>> by_time;
  for (const auto& s : reader.memory(0)) by_time[s.ts_ns][s.category] = s.bytes;
  ASSERT_EQ(by_time.size(), 2u) << "ownership records the sampling points only";
  std::map<MemoryCategory, int64_t> held;
  for (const auto& [ts, samples] : by_time) {
    for (const auto& [category, bytes] : samples) held[category] = bytes;
    int64_t stacked = 0;
    for (const auto& [category, bytes] : held) stacked += dpscope::trace::is_stacked(category) ? bytes : 0;
    EXPECT_EQ(stacked, held.at(MemoryCategory::AllocatorTotal)) << "at " << ts;
    EXPECT_GE(held.at(MemoryCategory::Activations), 0);
  }
  EXPECT_EQ(by_time.at(1000).at(MemoryCategory::Parameters), 4096);
  EXPECT_EQ(by_time.at(1000).at(MemoryCategory::Activations) - by_time.at(2000).at(MemoryCategory::Activations),
            4096 * 4);
  registry.clear();
}

// A device with no allocator to read (meta): the owned bytes alone, activations 0.
TEST(OwnershipSampler, OnMetaTheOwnedBytesAlone) {
  OwnershipRegistry& registry = OwnershipRegistry::install();
  registry.clear();
  MemorySampler sampler(nullptr, nullptr, kMeta, MemoryAccounting::Ownership);
  const at::Tensor shard = at::empty({2000}, at::TensorOptions(kMeta).dtype(at::kFloat));
  dpscope::memory::own(shard, MemoryCategory::Shards);
  sampler.sample();
  EXPECT_EQ(sampler.peak(MemoryCategory::Shards), 8000);
  EXPECT_EQ(sampler.peak(MemoryCategory::Activations), 0);
  EXPECT_EQ(sampler.peak_moment()[static_cast<size_t>(MemoryCategory::AllocatorTotal)], 8000);
  registry.clear();
}

TEST(OwnershipSampler, TheDevicesOwnAccounting) {
  EXPECT_EQ(dpscope::memory::default_accounting(kCpu), MemoryAccounting::Tracking);
  EXPECT_EQ(dpscope::memory::default_accounting(c10::Device(c10::kCUDA, 0)), MemoryAccounting::Ownership);
  EXPECT_EQ(dpscope::memory::default_accounting(kMeta), MemoryAccounting::Ownership);
}

}  // namespace
