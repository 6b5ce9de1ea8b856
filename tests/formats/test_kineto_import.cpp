// Tests of the Kineto import (formats/kineto_import.h) on real PyTorch profiler traces: HTA's
// numbers on the three shipped traces (tests/data/kineto, from HTA's own test data), nccl_data's
// bucket all-reduces per ProfilerStep, the two sampled ranks matched; and on odd but valid traces
// built here: no GPU events, a ROCm GPU, no distributedInfo, the older bare-list form, memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "analysis/stats.h"
#include "formats/kineto_survey.h"
#include "tests/formats/kineto_fixture.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::formats {
namespace {

using namespace kineto_test;
using analysis::GpuBreakdown;

// HTA's figures for one rank (tests/data/kineto/README.md), percentages.
struct HtaFigures {
  double overlap, idle, compute, non_compute, span_us;
};

void expect_hta(const GpuBreakdown& g, const HtaFigures& hta) {
  ASSERT_TRUE(g.comm_overlap_pct.has_value());
  EXPECT_NEAR(*g.comm_overlap_pct, hta.overlap, 0.05);
  EXPECT_NEAR(g.idle_pct, hta.idle, 0.05);
  EXPECT_NEAR(g.compute_pct, hta.compute, 0.05);
  EXPECT_NEAR(g.non_compute_pct, hta.non_compute, 0.05);
  EXPECT_NEAR(g.kernel_span_ms * 1000, hta.span_us, 2.0);
}

analysis::RunStats stats_of(const std::string& path) {
  trace::Reader reader(path);
  return analysis::compute_stats(reader);
}

TEST(KinetoImport, SampledRanksGiveHtasBreakdownAndOverlap) {
  Imported run;
  import_into(run, {shipped("sampled_rank-0.json.gz"), shipped("sampled_rank-1.json.gz")});
  EXPECT_TRUE(run.warnings.empty());
  const analysis::RunStats stats = stats_of(run.path);
  ASSERT_EQ(stats.ranks.size(), 2u);
  EXPECT_EQ(stats.world_size, 128);
  ASSERT_TRUE(stats.ranks[0].gpu && stats.ranks[1].gpu);
  expect_hta(*stats.ranks[0].gpu, {11.81, 53.56, 17.71, 28.74, 600058});
  expect_hta(*stats.ranks[1].gpu, {20.05, 54.72, 22.57, 22.72, 600674});
}

TEST(KinetoImport, SampledRanksMatchTheirCollectives) {
  Imported run;
  import_into(run, {shipped("sampled_rank-0.json.gz"), shipped("sampled_rank-1.json.gz")});
  const analysis::RunStats stats = stats_of(run.path);
  // Ten NCCL send/recv kernels (torchrec's all-to-alls) on each rank, matched one to one.
  EXPECT_EQ(stats.ranks[0].collectives.size(), 10u);
  EXPECT_EQ(stats.ranks[1].collectives.size(), 10u);
  ASSERT_EQ(stats.matches.size(), 10u);
  for (const analysis::CollectiveMatch& m : stats.matches) {
    EXPECT_EQ(m.ranks, (std::vector<int32_t>{0, 1})) << "seq " << m.seq;
    EXPECT_FALSE(m.mismatch) << m.why;
  }
  EXPECT_EQ(stats.mismatches, 0);
  EXPECT_GT(stats.max_skew_ns, 0);
  EXPECT_EQ(stats.iterations, 2);  // ProfilerStep#551 and #552
}

// An epoch-sized time in µs (HTA's sampled traces: 1.68e15) keeps its nanoseconds: times 1000 as
// one double it would land on a 256-ns grid.
TEST(KinetoImport, EpochSizedMicrosecondsKeepTheirNanoseconds) {
  EXPECT_EQ(to_ns(0, 1682725898236763.25), 1682725898236763250);
  EXPECT_EQ(to_ns(0, 1682725898236763.0), 1682725898236763000);
  EXPECT_EQ(to_ns(0, 4458676522873.933), 4458676522873933);
  EXPECT_EQ(to_ns(7, -1.5), 7 - 1500);
  EXPECT_THROW(to_ns(0, 3e15), KinetoError);
}

TEST(KinetoImport, NcclDataGivesHtasBreakdownAndOverlap) {
  Imported run;
  import_into(run, {shipped("nccl_data.json.gz")});
  const analysis::RunStats stats = stats_of(run.path);
  ASSERT_EQ(stats.ranks.size(), 1u);
  ASSERT_TRUE(stats.ranks[0].gpu);
  expect_hta(*stats.ranks[0].gpu, {14.31, 77.78, 17.26, 4.97, 435586});
}

TEST(KinetoImport, NcclDataHasFiveBucketAllReducesAStep) {
  Imported run;
  import_into(run, {shipped("nccl_data.json.gz")});
  const analysis::RunStats stats = stats_of(run.path);
  ASSERT_EQ(stats.iterations, 3);
  const std::multiset<int64_t> buckets = {2049000, 7875584, 6563840, 6637568, 2431040};
  std::map<int32_t, std::multiset<int64_t>> floats;
  std::map<int32_t, int> broadcasts;
  for (const analysis::CollectiveStats& c : stats.ranks[0].collectives) {
    if (c.op == trace::CollectiveOp::AllReduce) {
      EXPECT_EQ(c.dtype, static_cast<uint8_t>(trace::DType::Float32));
      floats[c.iteration].insert(c.bytes / 4);
    } else if (c.op == trace::CollectiveOp::Broadcast) {
      ++broadcasts[c.iteration];
    }
  }
  for (int32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(floats[i], buckets) << "ProfilerStep " << i;
    EXPECT_GE(broadcasts[i], 1) << "DDP's buffer broadcast in step " << i;
    EXPECT_EQ(stats.ranks[0].iterations[size_t(i)].collectives[size_t(trace::CollectiveOp::AllReduce)], 5);
  }
}

// DDP's buckets read from the NCCL kernels' records (Note [DDP's buckets from PyTorch's
// records]): five a step, numbered in launch order, their sizes in the plan; the buffer
// broadcasts are none of them.
TEST(KinetoImport, NcclDataGivesDdpsFiveBucketsInLaunchOrder) {
  Imported run;
  import_into(run, {shipped("nccl_data.json.gz")});
  const std::vector<int64_t> floats = {2049000, 7875584, 6563840, 6637568, 2431040};
  trace::Reader reader(run.path);
  const std::vector<trace::BucketInfo> plan = reader.buckets();
  ASSERT_EQ(plan.size(), floats.size());
  for (size_t b = 0; b < plan.size(); ++b) {
    EXPECT_EQ(plan[b].generation, 1);
    EXPECT_EQ(plan[b].numel, floats[b]) << "bucket " << b;
    EXPECT_EQ(plan[b].bytes, floats[b] * 4) << "bucket " << b;
    EXPECT_EQ(plan[b].dtype, trace::DType::Float32);
  }
  std::map<int32_t, std::vector<std::pair<int64_t, trace::Event>>> steps;  // by launch
  reader.for_each_event([&](const trace::Event& e) {
    if (e.kind != trace::EventKind::Collective) return true;
    if (e.op != uint8_t(trace::CollectiveOp::AllReduce)) {
      EXPECT_EQ(e.bucket, trace::kNone) << "a broadcast is no bucket";
      return true;
    }
    steps[e.iteration].emplace_back(e.enqueue_ns, e);
    return true;
  });
  ASSERT_EQ(steps.size(), 3u);
  for (auto& [step, list] : steps) {
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    ASSERT_EQ(list.size(), floats.size()) << "step " << step;
    for (size_t b = 0; b < list.size(); ++b) {
      EXPECT_EQ(list[b].second.bucket, int32_t(b)) << "step " << step;
      EXPECT_EQ(list[b].second.bytes, floats[b] * 4) << "step " << step;
    }
  }
  const analysis::RunStats stats = stats_of(run.path);
  ASSERT_EQ(stats.ranks[0].buckets.size(), floats.size());
  for (const analysis::BucketExposure& b : stats.ranks[0].buckets) {
    EXPECT_EQ(b.collectives, 3);
    EXPECT_EQ(b.bytes, floats[size_t(b.bucket)] * 4);
    EXPECT_GT(b.comm_ms, 0);
    EXPECT_LE(b.exposed_comm_ms, b.comm_ms + 1e-9);
  }
}

// On a GPU trace the exposed communication is the GPU's (Note [Compute and exposed
// communication]): its steps before the last give HTA's window's figure, to HTA's rounding.
TEST(KinetoImport, NcclDataExposedCommunicationIsTheGpus) {
  Imported run;
  import_into(run, {shipped("nccl_data.json.gz")});
  const analysis::RunStats stats = stats_of(run.path);
  const analysis::RankStats& r = stats.ranks[0];
  EXPECT_EQ(r.compute_source, analysis::RankStats::ComputeSource::GpuKernels);
  ASSERT_TRUE(r.gpu);
  ASSERT_EQ(r.iterations.size(), 3u);
  const double first_two = r.iterations[0].overlap.exposed_comm_ms + r.iterations[1].overlap.exposed_comm_ms;
  EXPECT_NEAR(first_two, r.gpu->exposed_comm_ms, 0.02 * r.gpu->exposed_comm_ms);
  EXPECT_GT(r.overlap.exposed_comm_ms, 0.5 * r.overlap.comm_ms) << "NCCL mostly runs where no kernel computes";
  EXPECT_LT(r.overlap.compute_ms, 150.0) << "the compute kernels, not the CPU's phases";
}

TEST(KinetoImport, NcclDataKeepsLanesPhasesAndSourceNames) {
  Imported run;
  import_into(run, {shipped("nccl_data.json.gz")});
  trace::Reader reader(run.path);
  std::set<std::string> lanes;
  for (const trace::LaneInfo& l : reader.lanes()) lanes.insert(l.name);
  EXPECT_TRUE(lanes.count("GPU 0 stream 7")) << "compute stream";
  EXPECT_TRUE(lanes.count("GPU 0 stream 40")) << "NCCL's stream";
  EXPECT_EQ(reader.lanes().front().name, "thread 2910249 (pt_main_thread)");
  const std::vector<std::string> names = reader.names();
  std::map<std::string, int> phases;
  std::set<std::string> sources;
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Phase)) {
    ++phases[names[size_t(e.name)]];
    if (e.value >= 0) sources.insert(names[size_t(e.value)]);
  }
  EXPECT_EQ(phases[std::string(trace::kPhaseIteration)], 3);
  EXPECT_GE(phases[std::string(trace::kPhaseForward)], 3);
  EXPECT_GE(phases[std::string(trace::kPhaseBackward)], 3);
  EXPECT_GE(phases[std::string(trace::kPhaseOptimizerStep)], 3);
  EXPECT_TRUE(sources.count("ProfilerStep#4") && sources.count("DistributedDataParallel.forward"));
  // Kernels keep the profiler's names, with their launch's CPU time.
  int64_t kernels = 0, launched = 0;
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Mark)) {
    if (!(e.flags & trace::kFlagGpuKernel)) continue;
    ++kernels;
    launched += e.enqueue_ns != trace::kNone64 && e.enqueue_ns <= e.begin_ns;
  }
  EXPECT_EQ(kernels, 2700 - 21 + 960 + 114);
  EXPECT_GT(launched, kernels * 9 / 10);
  EXPECT_EQ(reader.meta_value(std::string(trace::meta_key::kBackend)), "nccl");
  EXPECT_EQ(reader.meta_value(std::string(trace::meta_key::kStrategy)), "ddp");
}

// A CPU-only DDP step of PyTorch 1.13 in the older bare-list form, without distributedInfo.
std::string cpu_list_trace() {
  return "[\n" + x_event("user_annotation", "ProfilerStep#0", 10, 10, 1000, 900) + ",\n" +
         x_event("user_annotation", "DistributedDataParallel.forward", 10, 10, 1010, 100) + ",\n" +
         x_event("cpu_op", "aten::linear", 10, 10, 1020, 50, "\"Input Dims\": [[8, 4], [2, 4]]") + ",\n" +
         x_event("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 10, 11, 1200, 40) + ",\n" +
         x_event("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 10, 11, 1300, 20) + ",\n" +
         x_event("cpu_op", "gloo:all_reduce", 10, 12, 1250, 300,
                 "\"Input Dims\": [[10, 4]], \"Input type\": [\"float\"]") + ",\n" +
         x_event("user_annotation", "Optimizer.step#SGD.step", 10, 10, 1700, 100) + ",\n" +
         "{\"ph\": \"i\", \"name\": \"[memory]\", \"pid\": 10, \"tid\": 10, \"ts\": 1030, \"s\": \"t\", "
         "\"args\": {\"Total Allocated\": 4096, \"Total Reserved\": 0, \"Device Type\": 0, \"Device Id\": -1}}\n]";
}

TEST(KinetoImport, CpuTraceWithoutDistributedInfoImportsWithAWarning) {
  Imported run;
  write_file(run.dir.file("rank.json"), cpu_list_trace());
  import_into(run, {run.dir.file("rank.json")}, 3);
  ASSERT_EQ(run.warnings.size(), 1u);
  EXPECT_NE(run.warnings[0].find("rank.json: no distributedInfo.rank; imported as rank 3"), std::string::npos)
      << run.warnings[0];
  trace::Reader reader(run.path);
  ASSERT_EQ(reader.ranks().size(), 1u);
  EXPECT_EQ(reader.ranks()[0].rank, 3);
  EXPECT_EQ(reader.ranks()[0].device, "cpu");
  for (const trace::LaneInfo& l : reader.lanes()) EXPECT_EQ(l.kind, trace::LaneKind::Host) << l.name;
  EXPECT_EQ(reader.lanes().size(), 3u);  // the main thread, autograd's, gloo's
  const analysis::RunStats stats = stats_of(run.path);
  const analysis::RankStats& r = stats.ranks[0];
  EXPECT_FALSE(r.gpu) << "no GPU kernels, no GPU breakdown";
  ASSERT_EQ(r.collectives.size(), 1u);
  EXPECT_EQ(r.collectives[0].op, trace::CollectiveOp::AllReduce);
  EXPECT_EQ(r.collectives[0].bytes, 160);
  EXPECT_EQ(r.collectives[0].iteration, 0);
  // Backward is derived from the autograd functions: 1200 to 1320 µs.
  bool backward = false;
  const auto names = reader.names();
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Phase)) {
    if (names[size_t(e.name)] != trace::kPhaseBackward) continue;
    backward = true;
    EXPECT_EQ(e.end_ns - e.begin_ns, 120000);
  }
  EXPECT_TRUE(backward);
  EXPECT_GT(r.overlap.overlap_ms, 0) << "the all-reduce overlaps the backward";
  const auto memory = reader.memory();
  ASSERT_EQ(memory.size(), 1u);
  EXPECT_EQ(memory[0].category, trace::MemoryCategory::AllocatorTotal);
  EXPECT_EQ(memory[0].bytes, 4096);
}

TEST(KinetoImport, FilesWithoutDistributedInfoTakeTheirPlaceInTheList) {
  Imported run;
  write_file(run.dir.file("a.json"), cpu_list_trace());
  write_file(run.dir.file("b.json"), cpu_list_trace());
  import_into(run, {run.dir.file("a.json"), run.dir.file("b.json")});
  EXPECT_EQ(run.warnings.size(), 2u);
  const analysis::RunStats stats = stats_of(run.path);
  ASSERT_EQ(stats.ranks.size(), 2u);
  EXPECT_EQ(stats.ranks[1].rank, 1);
  ASSERT_EQ(stats.matches.size(), 1u);
  EXPECT_FALSE(stats.matches[0].mismatch);
}

// FSDP2 annotates its hooks only: forward spans its first pre-forward to its last post-forward,
// backward the autograd functions (its backward hooks stay marks).
TEST(KinetoImport, Fsdp2HooksGiveDerivedForwardAndBackward) {
  Imported run;
  write_file(run.dir.file("fsdp2.json"),
             object_trace({x_event("user_annotation", "ProfilerStep#7", 1, 1, 100, 1000),
                           x_event("user_annotation", "FSDP::root_pre_forward", 1, 1, 110, 5),
                           x_event("user_annotation", "FSDP::pre_forward", 1, 1, 120, 10),
                           x_event("user_annotation", "FSDP::post_forward", 1, 1, 300, 10),
                           x_event("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 1, 2, 400, 50),
                           x_event("user_annotation", "FSDP::pre_backward", 1, 2, 405, 5),
                           x_event("cpu_op", "autograd::engine::evaluate_function: AddBackward0", 1, 2, 600, 40),
                           x_event("user_annotation", "FSDP::post_backward", 1, 2, 630, 5)},
                          "\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 2"));
  import_into(run, {run.dir.file("fsdp2.json")});
  trace::Reader reader(run.path);
  EXPECT_EQ(reader.meta_value(std::string(trace::meta_key::kStrategy)), "fsdp2") << "its FSDP:: records are FSDP2's";
  const auto names = reader.names();
  std::map<std::string, std::pair<int64_t, int64_t>> phases;
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Phase)) {
    EXPECT_TRUE(phases.emplace(names[size_t(e.name)], std::make_pair(e.begin_ns, e.end_ns)).second)
        << "one " << names[size_t(e.name)] << " phase";
  }
  EXPECT_EQ(phases[std::string(trace::kPhaseForward)], std::make_pair(int64_t(110000), int64_t(310000)));
  EXPECT_EQ(phases[std::string(trace::kPhaseBackward)], std::make_pair(int64_t(400000), int64_t(640000)));
}

// A ROCm GPU: HIP kernels on stream 0, no communication kernels; its allocator's memory samples.
TEST(KinetoImport, RocmTraceWithoutCommunicationKernelsSaysSo) {
  Imported run;
  const std::string launch_args = "\"correlation\": 1";
  write_file(run.dir.file("rocm.json"),
             object_trace({x_event("user_annotation", "ProfilerStep#1", 5, 5, 100, 1000),
                           x_event("cuda_runtime", "hipLaunchKernel", 5, 5, 110, 5, "\"correlation\": 1"),
                           x_event("cuda_runtime", "hipLaunchKernel", 5, 5, 120, 5, "\"correlation\": 2"),
                           x_event("kernel", "Cijk_Ailk_Bljk_SB_MT64x64x16_SN", 0, 0, 200, 100,
                                   "\"device\": 0, \"stream\": 0, \"correlation\": 1"),
                           x_event("gpu_memcpy", "Memcpy HtoD", 0, 0, 350, 50,
                                   "\"device\": 0, \"stream\": 0, \"correlation\": 2"),
                           "{\"ph\": \"i\", \"name\": \"[memory]\", \"pid\": 5, \"tid\": 5, \"ts\": 150, "
                           "\"s\": \"t\", \"args\": {\"Total Allocated\": 1024, \"Total Reserved\": 2048, "
                           "\"Device Type\": 1, \"Device Id\": 0}}"},
                          "\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 1"));
  import_into(run, {run.dir.file("rocm.json")});
  EXPECT_TRUE(run.warnings.empty());
  trace::Reader reader(run.path);
  bool stream0 = false;
  for (const trace::LaneInfo& l : reader.lanes()) stream0 |= l.name == "GPU 0 stream 0" && l.kind == trace::LaneKind::Stream;
  EXPECT_TRUE(stream0);
  const analysis::RunStats stats = stats_of(run.path);
  ASSERT_TRUE(stats.ranks[0].gpu);
  const GpuBreakdown& g = *stats.ranks[0].gpu;
  EXPECT_FALSE(g.comm_overlap_pct.has_value());
  EXPECT_EQ(g.kernels, 2);
  EXPECT_NEAR(g.kernel_span_ms, 0.2, 1e-9);
  EXPECT_NEAR(g.compute_pct, 50, 1e-9);
  EXPECT_NEAR(g.idle_pct, 25, 1e-9);
  EXPECT_NEAR(g.non_compute_pct, 25, 1e-9);
  // The GPU allocator's totals become the memory graph's CUDA lines.
  EXPECT_EQ(stats.ranks[0].largest(trace::MemoryCategory::CudaAllocated), 1024);
  EXPECT_EQ(stats.ranks[0].largest(trace::MemoryCategory::CudaReserved), 2048);
}

TEST(KinetoImport, BaseTimeNanosecondsShiftsEveryTime) {
  Imported run;
  std::string text = object_trace({x_event("cpu_op", "aten::add", 1, 1, 2.5, 1)}, "\"rank\": 0, \"world_size\": 1");
  text.insert(1, "\"baseTimeNanoseconds\": 1000000000, ");
  write_file(run.dir.file("base.json"), text);
  import_into(run, {run.dir.file("base.json")});
  trace::Reader reader(run.path);
  const auto marks = reader.events_of_kind(trace::EventKind::Mark);
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].begin_ns, 1000002500);
  EXPECT_EQ(marks[0].end_ns, 1000003500);
}

}  // namespace
}  // namespace dpscope::formats
