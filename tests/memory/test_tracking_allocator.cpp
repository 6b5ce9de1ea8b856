// The tracking allocator: exact per-category counts under CategoryScope, frees, retag, views,
// alignment, zero-byte storages, peaks, and consistency under many threads.
#include <gtest/gtest.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <c10/core/CPUAllocator.h>

#include <array>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/memory/tracking_allocator.h"

using dpscope::memory::CategoryScope;
using dpscope::memory::MemoryCategory;
using dpscope::memory::TrackingAllocator;
using dpscope::trace::kMemoryCategoryCount;

namespace {

// Every category's bytes (0 for the allocator read-outs), to compare before and after.
std::array<int64_t, kMemoryCategoryCount> snapshot(const TrackingAllocator& a) {
  std::array<int64_t, kMemoryCategoryCount> s{};
  for (const MemoryCategory c : dpscope::trace::kStackedCategories) s[static_cast<size_t>(c)] = a.bytes(c);
  return s;
}

// The change since `before`, per category.
std::array<int64_t, kMemoryCategoryCount> delta(
    const TrackingAllocator& a, const std::array<int64_t, kMemoryCategoryCount>& before) {
  auto now = snapshot(a);
  for (int i = 0; i < kMemoryCategoryCount; ++i) now[i] -= before[i];
  return now;
}

int64_t at_(const std::array<int64_t, kMemoryCategoryCount>& d, MemoryCategory c) {
  return d[static_cast<int>(c)];
}

at::Tensor floats(int64_t n) { return at::empty({n}, at::kFloat); }

}  // namespace

TEST(TrackingAllocator, InstallsOnceAsTheCpuAllocator) {
  TrackingAllocator& a = TrackingAllocator::install();
  EXPECT_EQ(&TrackingAllocator::install(), &a);
  EXPECT_EQ(TrackingAllocator::installed(), &a);
  EXPECT_EQ(c10::GetCPUAllocator(), &a);
  at::Tensor t = floats(10);
  EXPECT_TRUE(a.retag(t, MemoryCategory::Other)) << "new tensors come from the tracking allocator";
}

TEST(TrackingAllocator, CountsUnderTheCurrentScopeExactly) {
  TrackingAllocator& a = TrackingAllocator::install();
  EXPECT_EQ(CategoryScope::current(), MemoryCategory::Other);
  const auto before = snapshot(a);
  const int64_t total_before = a.bytes_in_use();
  at::Tensor other = floats(100);  // 400 bytes, Other
  at::Tensor p, g, b;
  {
    CategoryScope params(MemoryCategory::Parameters);
    p = at::empty({10, 25}, at::kDouble);  // 2000 bytes
    {
      CategoryScope buckets(MemoryCategory::Buckets);
      EXPECT_EQ(CategoryScope::current(), MemoryCategory::Buckets);
      b = at::empty({1 << 20}, at::kByte);  // 1 MiB
    }
    EXPECT_EQ(CategoryScope::current(), MemoryCategory::Parameters);
    g = at::empty({3}, at::kLong);  // 24 bytes, still Parameters
  }
  EXPECT_EQ(CategoryScope::current(), MemoryCategory::Other);
  auto d = delta(a, before);
  EXPECT_EQ(at_(d, MemoryCategory::Other), 400);
  EXPECT_EQ(at_(d, MemoryCategory::Parameters), 2024);
  EXPECT_EQ(at_(d, MemoryCategory::Buckets), 1 << 20);
  EXPECT_EQ(at_(d, MemoryCategory::Gradients), 0);
  EXPECT_EQ(a.bytes_in_use() - total_before, 400 + 2024 + (1 << 20));
  EXPECT_EQ(a.bytes(MemoryCategory::AllocatorTotal), a.bytes_in_use());
  int64_t sum = 0;
  for (int64_t v : snapshot(a)) sum += v;
  EXPECT_EQ(sum, a.bytes_in_use());
  EXPECT_EQ(a.bytes(MemoryCategory::CudaAllocated), 0);

  // Freeing returns every category to where it was.
  other.reset();
  p.reset();
  g.reset();
  b.reset();
  EXPECT_EQ(snapshot(a), before);
  EXPECT_EQ(a.bytes_in_use(), total_before);
}

TEST(TrackingAllocator, OperatorOutputsCountUnderTheScope) {
  TrackingAllocator& a = TrackingAllocator::install();
  at::Tensor x = at::ones({64, 32}, at::kFloat);
  at::Tensor w = at::ones({32, 16}, at::kFloat);
  const auto before = snapshot(a);
  at::Tensor y;
  {
    CategoryScope activations(MemoryCategory::Activations);
    y = at::matmul(x, w);
  }
  EXPECT_EQ(at_(delta(a, before), MemoryCategory::Activations), 64 * 16 * 4);
  EXPECT_EQ(y[0][0].item<float>(), 32.0f);
  y.reset();
  EXPECT_EQ(snapshot(a), before);
}

TEST(TrackingAllocator, ViewsShareTheirStorageAndCountOnce) {
  TrackingAllocator& a = TrackingAllocator::install();
  const auto before = snapshot(a);
  at::Tensor t;
  {
    CategoryScope s(MemoryCategory::Gradients);
    t = at::empty({8, 16}, at::kFloat);
  }
  EXPECT_EQ(at_(delta(a, before), MemoryCategory::Gradients), 512);
  std::vector<at::Tensor> views = {t.view({16, 8}), t.slice(0, 2, 4), t.t(), t[3], t.reshape({-1}),
                                   t.unsqueeze(0), t.narrow(1, 0, 4)};
  EXPECT_EQ(at_(delta(a, before), MemoryCategory::Gradients), 512);
  // Retagging through a view moves the whole storage.
  EXPECT_TRUE(a.retag(views[1], MemoryCategory::OptimizerState));
  auto d = delta(a, before);
  EXPECT_EQ(at_(d, MemoryCategory::Gradients), 0);
  EXPECT_EQ(at_(d, MemoryCategory::OptimizerState), 512);
  t.reset();
  EXPECT_EQ(at_(delta(a, before), MemoryCategory::OptimizerState), 512) << "views keep it alive";
  views.clear();
  EXPECT_EQ(snapshot(a), before);
}

TEST(TrackingAllocator, RetagMovesBytesAndFreeLeavesTheNewCategory) {
  TrackingAllocator& a = TrackingAllocator::install();
  const auto before = snapshot(a);
  const int64_t total_before = a.bytes_in_use();
  at::Tensor grad;
  {
    CategoryScope s(MemoryCategory::Activations);
    grad = floats(1000);
  }
  EXPECT_TRUE(a.retag(grad, MemoryCategory::Gradients));
  auto d = delta(a, before);
  EXPECT_EQ(at_(d, MemoryCategory::Activations), 0);
  EXPECT_EQ(at_(d, MemoryCategory::Gradients), 4000);
  EXPECT_EQ(a.bytes_in_use() - total_before, 4000) << "a retag does not change the total";
  EXPECT_TRUE(a.retag(grad, MemoryCategory::Gradients)) << "retag to the same category";
  EXPECT_EQ(at_(delta(a, before), MemoryCategory::Gradients), 4000);
  grad.reset();
  EXPECT_EQ(snapshot(a), before);

  // Memory the allocator did not make is left alone.
  std::vector<float> outside(16);
  at::Tensor blob = at::from_blob(outside.data(), {16}, at::kFloat);
  EXPECT_FALSE(a.retag(blob, MemoryCategory::Parameters));
  EXPECT_FALSE(a.retag(at::Tensor(), MemoryCategory::Parameters));
  EXPECT_EQ(snapshot(a), before);
  // Categories that are allocator read-outs cannot be counted under.
  at::Tensor t = floats(4);
  EXPECT_THROW(a.retag(t, MemoryCategory::AllocatorTotal), std::invalid_argument);
  EXPECT_THROW(CategoryScope(MemoryCategory::CudaReserved), std::invalid_argument);
}

TEST(TrackingAllocator, AlignsDataAndHandlesZeroBytes) {
  TrackingAllocator& a = TrackingAllocator::install();
  std::vector<at::Tensor> keep;
  for (int64_t n : {1, 3, 7, 63, 64, 65, 4095, 4097, 1 << 20}) {
    keep.push_back(at::empty({n}, at::kByte));
    auto address = reinterpret_cast<uintptr_t>(keep.back().data_ptr());
    EXPECT_EQ(address % 64, 0u) << n << " bytes";
    // The memory is usable end to end.
    keep.back().fill_(7);
    EXPECT_EQ(keep.back()[n - 1].item<uint8_t>(), 7);
  }
  keep.clear();
  const auto before = snapshot(a);
  at::Tensor empty;
  {
    CategoryScope s(MemoryCategory::Parameters);
    empty = at::empty({0}, at::kFloat);
    EXPECT_EQ(snapshot(a), before);
    EXPECT_TRUE(a.retag(empty, MemoryCategory::Gradients)) << "nothing to count, nothing wrong";
    // Growing an empty tensor allocates through the same allocator, under the scope of the time.
    empty.resize_({10});
  }
  EXPECT_EQ(at_(delta(a, before), MemoryCategory::Parameters), 40);
  auto raw = a.allocate(0);
  EXPECT_EQ(raw.get(), nullptr);
  empty.reset();
  EXPECT_EQ(snapshot(a), before);
}

TEST(TrackingAllocator, PeakAndReset) {
  TrackingAllocator& a = TrackingAllocator::install();
  a.reset_peak();
  const int64_t base = a.bytes_in_use();
  EXPECT_EQ(a.peak_bytes(), base);
  {
    at::Tensor big = at::empty({1 << 20}, at::kByte);
    at::Tensor small = at::empty({1000}, at::kByte);
    EXPECT_EQ(a.peak_bytes(), base + (1 << 20) + 1000);
  }
  EXPECT_EQ(a.bytes_in_use(), base);
  EXPECT_EQ(a.peak_bytes(), base + (1 << 20) + 1000) << "the peak outlives the memory";
  { at::Tensor smaller = at::empty({100}, at::kByte); }
  EXPECT_EQ(a.peak_bytes(), base + (1 << 20) + 1000);
  a.reset_peak();
  EXPECT_EQ(a.peak_bytes(), base);
}

TEST(TrackingAllocator, ManyThreadsStayConsistent) {
  TrackingAllocator& a = TrackingAllocator::install();
  const auto before = snapshot(a);
  constexpr int kThreads = 8;
  constexpr int kRounds = 2000;
  // Each thread allocates and frees under its own category and keeps a known set alive at the
  // end; frees happen on other threads too (tensors handed over).
  const MemoryCategory categories[] = {MemoryCategory::Parameters, MemoryCategory::Gradients,
                                       MemoryCategory::Buckets, MemoryCategory::Activations};
  std::vector<std::vector<at::Tensor>> kept(kThreads);
  std::vector<int64_t> kept_bytes(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      CategoryScope scope(categories[t % 4]);
      std::mt19937 rng(t);
      std::vector<at::Tensor> live;
      for (int i = 0; i < kRounds; ++i) {
        live.push_back(at::empty({static_cast<int64_t>(rng() % 5000 + 1)}, at::kByte));
        if (live.size() > 20) live.erase(live.begin() + static_cast<long>(rng() % live.size()));
        if (i % 97 == 0) a.retag(live.back(), categories[(t + 1) % 4]);
      }
      for (auto& x : live) {
        a.retag(x, categories[t % 4]);
        kept_bytes[t] += x.nbytes();
      }
      kept[t] = std::move(live);
    });
  }
  for (auto& th : threads) th.join();
  auto d = delta(a, before);
  for (int c = 0; c < 4; ++c) {
    int64_t expected = 0;
    for (int t = 0; t < kThreads; ++t) {
      if (t % 4 == c) expected += kept_bytes[t];
    }
    EXPECT_EQ(at_(d, categories[c]), expected) << dpscope::trace::to_string(categories[c]);
  }
  // Free everything from other threads than the ones that allocated.
  std::vector<std::thread> freers;
  for (int t = 0; t < kThreads; ++t) {
    freers.emplace_back([&kept, t] { kept[(t + 3) % kThreads].clear(); });
  }
  for (auto& th : freers) th.join();
  EXPECT_EQ(snapshot(a), before);
}
