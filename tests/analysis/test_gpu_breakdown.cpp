// Tests of the GPU breakdown's pieces (analysis/gpu_breakdown.h, Note [GPU breakdown]) on
// hand-made kernels: HTA's kernel classes by name, which kernels count by launch time, the
// rounding to whole microseconds, and a rank without communication kernels. The figures on real
// traces against HTA's are tests/formats/test_kineto_import.cpp's.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "analysis/gpu_breakdown.h"
#include "trace/schema.h"

namespace dpscope::analysis {
namespace {

trace::Event kernel(int64_t begin_ns, int64_t end_ns, int64_t launch_ns, trace::NameId name) {
  trace::Event e;
  e.begin_ns = begin_ns;
  e.end_ns = end_ns;
  e.enqueue_ns = launch_ns;
  e.name = name;
  e.flags = trace::kFlagGpuKernel;
  return e;
}

trace::Event step(int64_t begin_ns, int64_t end_ns) {
  trace::Event e;
  e.kind = trace::EventKind::Phase;
  e.begin_ns = begin_ns;
  e.end_ns = end_ns;
  return e;
}

TEST(GpuBreakdown, KernelsAreClassedByHtasNames) {
  EXPECT_EQ(classify_kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)"), KernelClass::Communication);
  EXPECT_EQ(classify_kernel("ncclDevKernel_AllGather_RING_LL"), KernelClass::Communication);
  EXPECT_EQ(classify_kernel("void foo::ncclKernel_bar()"), KernelClass::Communication);
  EXPECT_EQ(classify_kernel("Memcpy DtoD (Device -> Device)"), KernelClass::Memory);
  EXPECT_EQ(classify_kernel("Memset (Device)"), KernelClass::Memory);
  EXPECT_EQ(classify_kernel("dma_copy"), KernelClass::Memory);
  EXPECT_EQ(classify_kernel("cudaDeviceSync_kernel"), KernelClass::Other);
  EXPECT_EQ(classify_kernel("void at::native::vectorized_elementwise_kernel<4>"), KernelClass::Compute);
  EXPECT_EQ(classify_kernel("Cijk_Ailk_Bljk_SB_MT64x64x16"), KernelClass::Compute);
}

TEST(GpuBreakdown, RoundingIsReadFromTheRankList) {
  EXPECT_EQ(rounding_for("0,3", 3), TimeRounding::WholeMicroseconds);
  EXPECT_EQ(rounding_for("0,3", 1), TimeRounding::None);
  EXPECT_EQ(rounding_for("13", 1), TimeRounding::None);
  EXPECT_EQ(rounding_for("", 0), TimeRounding::None);
}

// Names: 0 a compute kernel, 1 an NCCL kernel, 2 a memcpy.
const std::vector<KernelClass> kClasses = classify_names({"gemm", "ncclKernel_AllReduce", "Memcpy HtoD"});

TEST(GpuBreakdown, KernelsLaunchedInTheLastStepAreLeftOut) {
  GpuBreakdownBuilder b;
  b.add_iteration(step(0, 1000000));
  b.add_iteration(step(1000000, 2000000));
  b.add_kernel(kernel(100000, 300000, 50000, 0));     // compute, 200 µs
  b.add_kernel(kernel(200000, 500000, 60000, 1));     // comm, 300 µs, 100 of them with compute
  b.add_kernel(kernel(600000, 700000, 70000, 2));     // memcpy
  b.add_kernel(kernel(1500000, 1900000, 1100000, 0));  // launched in the last step: left out
  b.add_kernel(kernel(800000, 900000, trace::kNone64, 0));  // no launch: left out
  const auto g = b.finish(kClasses, TimeRounding::None);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->kernels, 3);
  EXPECT_DOUBLE_EQ(g->kernel_span_ms, 0.6);
  EXPECT_NEAR(g->idle_pct, 100.0 * 100 / 600, 1e-9);
  EXPECT_NEAR(g->compute_pct, 100.0 * 200 / 600, 1e-9);
  EXPECT_NEAR(g->non_compute_pct, 100.0 * 300 / 600, 1e-9);
  ASSERT_TRUE(g->comm_overlap_pct);
  EXPECT_NEAR(*g->comm_overlap_pct, 100.0 * 100 / 300, 1e-9);
  EXPECT_DOUBLE_EQ(g->comm_ms, 0.3);
  EXPECT_DOUBLE_EQ(g->exposed_comm_ms, 0.2);
}

TEST(GpuBreakdown, WholeMicrosecondsRoundBeginsUpAndEndsDown) {
  GpuBreakdownBuilder b;
  b.add_kernel(kernel(1100, 3900, 0, 0));  // 1.1 to 3.9 µs: 2 to 3 µs rounded
  b.add_kernel(kernel(5000, 6000, 0, 0));
  const auto exact = b.finish(kClasses, TimeRounding::None);
  const auto rounded = b.finish(kClasses, TimeRounding::WholeMicroseconds);
  ASSERT_TRUE(exact && rounded);
  EXPECT_DOUBLE_EQ(exact->kernel_span_ms, 0.0049);
  EXPECT_DOUBLE_EQ(rounded->kernel_span_ms, 0.004);
  EXPECT_NEAR(rounded->compute_pct, 50, 1e-9);
}

// fuzz_kineto found the rounding negating INT64_MIN: a damaged file's times reach both ends of
// int64, and each must round to the whole microsecond on its side, clamped inside int64.
TEST(GpuBreakdown, WholeMicrosecondsRoundAnyTimeADamagedFileHolds) {
  const int64_t lowest = std::numeric_limits<int64_t>::min(), highest = std::numeric_limits<int64_t>::max();
  for (const auto& [begin, end, span_ms] : std::vector<std::tuple<int64_t, int64_t, double>>{
           {-1500, 2500, 0.003},            // -1.5 to 2.5 µs: -1 to 2 µs
           {lowest, lowest + 5000, 0.004},  // begins at the lowest whole µs inside int64
           {highest - 5000, highest, 0.004}}) {  // ends at the highest
    GpuBreakdownBuilder b;
    b.add_kernel(kernel(begin, end, 0, 0));
    const auto g = b.finish(kClasses, TimeRounding::WholeMicroseconds);
    ASSERT_TRUE(g);
    EXPECT_DOUBLE_EQ(g->kernel_span_ms, span_ms) << begin << " to " << end << " ns";
  }
}

// Found by fuzz_trace_sql (CI's scripts/test, 20 s, after 2026-11-28): a rank whose only
// kernels end before they begin left no interval to take a span on, and finish() read the back
// of an empty set. The span of a kernel from INT64_MIN to INT64_MAX saturates instead of
// wrapping negative.
TEST(GpuBreakdown, KernelsThatEndBeforeTheyBeginLeaveNoBreakdown) {
  GpuBreakdownBuilder backwards;
  backwards.add_kernel(kernel(1000, 0, 0, 0));
  backwards.add_kernel(kernel(5000, 5000, 0, 1));
  EXPECT_FALSE(backwards.finish(kClasses, TimeRounding::None));
  EXPECT_FALSE(backwards.finish(kClasses, TimeRounding::WholeMicroseconds));

  GpuBreakdownBuilder widest;
  const int64_t lowest = std::numeric_limits<int64_t>::min(), highest = std::numeric_limits<int64_t>::max();
  widest.add_kernel(kernel(lowest, highest, 0, 0));
  const auto g = widest.finish(kClasses, TimeRounding::None);
  ASSERT_TRUE(g);
  EXPECT_DOUBLE_EQ(g->kernel_span_ms, double(highest) / 1e6);
  EXPECT_DOUBLE_EQ(g->idle_pct, 0);
}

TEST(GpuBreakdown, NoCommunicationKernelsMeansNoOverlapFigure) {
  GpuBreakdownBuilder b;
  b.add_kernel(kernel(0, 1000, 0, 0));
  const auto g = b.finish(kClasses, TimeRounding::None);
  ASSERT_TRUE(g);
  EXPECT_FALSE(g->comm_overlap_pct);
  EXPECT_FALSE(GpuBreakdownBuilder().finish(kClasses, TimeRounding::None)) << "no kernels, no breakdown";
}

}  // namespace
}  // namespace dpscope::analysis
