// The memory sampler: samples written into a real trace (only what changed, the total every
// time), peaks per category, no recorder, and the CPU build's CUDA statistics.
#include <gtest/gtest.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <map>
#include <vector>

#include "engine/memory/memory_sampler.h"
#include "engine/memory/tracking_allocator.h"
#include "tests/test_util.h"
#include "trace/reader.h"
#include "trace/recorder.h"

using dpscope::memory::CategoryScope;
using dpscope::memory::MemoryCategory;
using dpscope::memory::MemorySampler;
using dpscope::memory::TrackingAllocator;
using dpscope::testing::TempDir;
using namespace dpscope::trace;

TEST(MemorySampler, WritesSamplesIntoATrace) {
  TrackingAllocator& a = TrackingAllocator::install();
  // A peak far above this test's allocations, so that no new peak adds a moment of its own.
  { const at::Tensor headroom = at::empty({16 << 20}, at::kFloat); }
  TempDir dir;
  const std::string path = dir.file("rank0.sqlite");
  const int64_t params0 = a.bytes(MemoryCategory::Parameters);
  const int64_t acts0 = a.bytes(MemoryCategory::Activations);
  int64_t t0, t1, t2;
  int64_t total0, total1, total2;
  {
    RecorderOptions options;
    options.path = path;
    Recorder recorder(options);
    MemorySampler sampler(&recorder, &a);
    t0 = now_ns();
    total0 = a.bytes_in_use();
    sampler.sample(t0);  // first sample: every category
    at::Tensor p, act;
    {
      CategoryScope s(MemoryCategory::Parameters);
      p = at::empty({256}, at::kFloat);
    }
    {
      CategoryScope s(MemoryCategory::Activations);
      act = at::empty({1000}, at::kFloat);
    }
    t1 = t0 + 1000;
    total1 = a.bytes_in_use();
    sampler.sample(t1);  // Parameters and Activations changed
    act.reset();
    t2 = t0 + 2000;
    total2 = a.bytes_in_use();
    sampler.sample(t2);  // Activations changed back
    EXPECT_EQ(sampler.peak(MemoryCategory::Activations), acts0 + 4000);
    EXPECT_EQ(sampler.peak(MemoryCategory::Parameters), params0 + 1024);
    EXPECT_EQ(sampler.peak(MemoryCategory::AllocatorTotal), std::max({total0, total1, total2}));
    EXPECT_EQ(sampler.peak(MemoryCategory::CudaAllocated), 0);
    recorder.close();
  }
  Reader reader(path);
  std::vector<MemorySample> samples = reader.memory(0);
  std::map<int64_t, std::map<MemoryCategory, int64_t>> by_time;
  for (const auto& s : samples) by_time[s.ts_ns][s.category] = s.bytes;
  ASSERT_EQ(by_time.size(), 3u);
  // The first sample has every counted category and the total, and nothing about CUDA.
  const auto& first = by_time[t0];
  EXPECT_EQ(first.size(), static_cast<size_t>(kMemoryCategoryStacked + 1));
  EXPECT_EQ(first.at(MemoryCategory::Parameters), params0);
  EXPECT_EQ(first.at(MemoryCategory::AllocatorTotal), total0);
  EXPECT_EQ(first.count(MemoryCategory::CudaAllocated), 0u);
  // Then only what changed (the total every time).
  const auto& second = by_time[t1];
  EXPECT_EQ(second.at(MemoryCategory::Parameters), params0 + 1024);
  EXPECT_EQ(second.at(MemoryCategory::Activations), acts0 + 4000);
  EXPECT_EQ(second.at(MemoryCategory::AllocatorTotal), total1);
  EXPECT_EQ(second.count(MemoryCategory::Gradients), 0u);
  const auto& third = by_time[t2];
  EXPECT_EQ(third.at(MemoryCategory::Activations), acts0);
  EXPECT_EQ(third.count(MemoryCategory::Parameters), 0u);
  EXPECT_EQ(third.at(MemoryCategory::AllocatorTotal), total2);
}

// A peak reached and gone between two samples is recorded at the moment it happened, with every
// stacked category as it was then, so the trace's peak is the allocator's (Note [Memory at the
// peak]).
TEST(MemorySampler, APeakBetweenSamplesIsRecordedAtItsMoment) {
  TrackingAllocator& a = TrackingAllocator::install();
  TempDir dir;
  const std::string path = dir.file("peak.sqlite");
  int64_t t0 = 0, t1 = 0, peak_total = 0;
  {
    RecorderOptions options;
    options.path = path;
    Recorder recorder(options);
    MemorySampler sampler(&recorder, &a);
    a.reset_peak();
    t0 = now_ns();
    sampler.sample(t0);
    {
      CategoryScope s(MemoryCategory::Activations);
      const at::Tensor burst = at::empty({2 << 20}, at::kFloat);  // 8 MiB, freed before t1
      peak_total = a.bytes_in_use();
    }
    t1 = now_ns();
    sampler.sample(t1);
    recorder.close();
  }
  Reader reader(path);
  std::map<int64_t, std::map<MemoryCategory, int64_t>> by_time;
  for (const auto& s : reader.memory(0)) by_time[s.ts_ns][s.category] = s.bytes;
  ASSERT_EQ(by_time.size(), 3u) << "t0, the peak, t1";
  const auto peak = std::next(by_time.begin());
  EXPECT_GT(peak->first, t0);
  EXPECT_LT(peak->first, t1);
  int64_t stacked = 0;
  for (const auto& [category, bytes] : peak->second) stacked += is_stacked(category) ? bytes : 0;
  EXPECT_EQ(stacked, peak->second.at(MemoryCategory::AllocatorTotal));
  EXPECT_GE(stacked, peak_total - 4096) << "the burst is in the recorded peak";
  EXPECT_GE(peak->second.at(MemoryCategory::Activations), int64_t{8} << 20);
  EXPECT_LT(by_time.rbegin()->second.at(MemoryCategory::AllocatorTotal), stacked - (int64_t{7} << 20));
}

TEST(MemorySampler, KeepsPeaksWithoutARecorderAndHonorsTraceLevel) {
  TrackingAllocator& a = TrackingAllocator::install();
  MemorySampler sampler(nullptr, &a);
  const int64_t base = a.bytes(MemoryCategory::Buckets);
  sampler.sample();
  {
    CategoryScope s(MemoryCategory::Buckets);
    at::Tensor b = at::empty({1 << 16}, at::kByte);
    sampler.sample();
  }
  sampler.sample();
  EXPECT_EQ(sampler.peak(MemoryCategory::Buckets), base + (1 << 16));

  // At trace level summary, memory samples are not recorded.
  TempDir dir;
  const std::string path = dir.file("summary.sqlite");
  {
    RecorderOptions options;
    options.path = path;
    options.level = TraceLevel::Summary;
    Recorder recorder(options);
    MemorySampler quiet(&recorder, &a);
    at::Tensor held = at::empty({100}, at::kFloat);
    quiet.sample();
    EXPECT_GE(quiet.peak(MemoryCategory::AllocatorTotal), 400);
    recorder.close();
  }
  Reader reader(path);
  EXPECT_TRUE(reader.memory().empty());
}

TEST(MemorySampler, CudaStatisticsInThisBuild) {
#ifdef DPSCOPE_HAVE_CUDA
  GTEST_SKIP() << "CUDA build: cuda_memory_stats reads the caching allocator";
#else
  auto stats = dpscope::memory::cuda_memory_stats(0);
  EXPECT_EQ(stats.allocated, 0);
  EXPECT_EQ(stats.reserved, 0);
  // A sampler with a CUDA device in a CPU build records zeros for the CUDA lines.
  TempDir dir;
  const std::string path = dir.file("cuda.sqlite");
  {
    RecorderOptions options;
    options.path = path;
    Recorder recorder(options);
    MemorySampler sampler(&recorder, nullptr, 0);
    sampler.sample(12345);
    recorder.close();
  }
  Reader reader(path);
  auto samples = reader.memory();
  ASSERT_EQ(samples.size(), 2u);
  for (const auto& s : samples) {
    EXPECT_TRUE(s.category == MemoryCategory::CudaAllocated ||
                s.category == MemoryCategory::CudaReserved);
    EXPECT_EQ(s.bytes, 0);
    EXPECT_EQ(s.ts_ns, 12345);
  }
#endif
}
