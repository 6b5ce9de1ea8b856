// bench_memory_sampler: what one memory sample costs in each accounting (Note [Ownership
// accounting]): tracking reads the tracking allocator's counters; ownership walks the ownership
// registry's claimed storages (a DDP rank of the mlp holds about 20, an FSDP rank of gpt a few
// hundred). No recorder: the accounting alone (recording the samples costs the same in both).
// Results: bench/README.md, "Memory accounting: the cost of a sample".
#include <benchmark/benchmark.h>

#include <ATen/ops/empty.h>

#include <vector>

#include "engine/memory/memory_sampler.h"
#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"

namespace {

using dpscope::memory::MemoryAccounting;
using dpscope::memory::MemoryCategory;
using dpscope::memory::MemorySampler;
using dpscope::memory::OwnershipRegistry;
using dpscope::memory::TrackingAllocator;

void BM_SampleTracking(benchmark::State& state) {
  TrackingAllocator& allocator = TrackingAllocator::install();
  MemorySampler sampler(nullptr, &allocator, c10::Device(c10::kCPU), MemoryAccounting::Tracking);
  for (auto _ : state) sampler.sample();
}
BENCHMARK(BM_SampleTracking);

// state.range(0) claimed storages, a third of them also viewed by a second claim (a bucket's
// gradients), spread over the owned categories.
void BM_SampleOwnership(benchmark::State& state) {
  TrackingAllocator& allocator = TrackingAllocator::install();
  MemorySampler sampler(nullptr, &allocator, c10::Device(c10::kCPU), MemoryAccounting::Ownership);
  OwnershipRegistry& registry = OwnershipRegistry::install();
  registry.clear();
  const MemoryCategory categories[] = {MemoryCategory::Parameters, MemoryCategory::Gradients,
                                       MemoryCategory::Buckets, MemoryCategory::Shards,
                                       MemoryCategory::OptimizerState, MemoryCategory::Data};
  std::vector<at::Tensor> held;
  for (int64_t i = 0; i < state.range(0); ++i) {
    held.push_back(at::empty({256}, at::kFloat));
    registry.claim(held.back(), categories[i % 6]);
    if (i % 3 == 0) registry.claim(held.back().narrow(0, 0, 128), categories[i % 6]);
  }
  for (auto _ : state) sampler.sample();
  state.counters["storages"] = static_cast<double>(registry.size());
  registry.clear();
}
BENCHMARK(BM_SampleOwnership)->Arg(16)->Arg(64)->Arg(256)->Arg(1024);

}  // namespace

BENCHMARK_MAIN();
