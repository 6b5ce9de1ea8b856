// compute_stats' memory figures: the categories at each rank's peak (they add up to it), in and
// after the steps, each category's largest value, and MemoryPeakFinder's window and fallbacks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "analysis/stats_report.h"
#include "tests/analysis/stats_fixture.h"

namespace dpscope::analysis {
namespace {

using namespace dpscope::trace;

using namespace stats_fixture;

using P = std::vector<std::pair<MemoryCategory, int64_t>>;
P pairs(const std::vector<CategoryBytes>& list) {
  P out;
  for (const CategoryBytes& c : list) out.emplace_back(c.category, c.bytes);
  return out;
}

TEST(stats, MemoryAtThePeak) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  const MemoryAtPeak& p0 = s.ranks[0].memory_peak;
  EXPECT_EQ(p0.total_bytes, 7000);
  EXPECT_EQ(p0.ts_ns, us(8000));
  EXPECT_EQ(pairs(p0.categories), (P{{MemoryCategory::Parameters, 1000},
                                     {MemoryCategory::Gradients, 2000},
                                     {MemoryCategory::OptimizerState, 3000},
                                     {MemoryCategory::Activations, 1000}}));
  EXPECT_EQ(pairs(s.ranks[0].category_max), (P{{MemoryCategory::Parameters, 1000},
                                               {MemoryCategory::Gradients, 2000},
                                               {MemoryCategory::OptimizerState, 3000},
                                               {MemoryCategory::Activations, 4000},
                                               {MemoryCategory::AllocatorTotal, 7200}}));
  const MemoryAtPeak& p1 = s.ranks[1].memory_peak;
  EXPECT_EQ(p1.total_bytes, 5500);
  EXPECT_EQ(p1.ts_ns, us(5000));
  EXPECT_EQ(pairs(p1.categories), (P{{MemoryCategory::Parameters, 1000},
                                     {MemoryCategory::Gradients, 3000},
                                     {MemoryCategory::Buckets, 1500},
                                     {MemoryCategory::Activations, 0}}));
  EXPECT_EQ(pairs(s.ranks[1].category_max), (P{{MemoryCategory::Parameters, 1000},
                                               {MemoryCategory::Gradients, 3000},
                                               {MemoryCategory::Buckets, 1500},
                                               {MemoryCategory::Activations, 4000},
                                               {MemoryCategory::CudaAllocated, 99999}}));
}

// Memory after the steps: every stacked category's last value up to the end of the rank's last
// iteration (rank 0's is at 21 ms; its last samples are at 8 ms), allocator and CUDA read-outs left
// out; none for a rank without iterations.
TEST(stats, MemoryAfterTheSteps) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  const MemoryAtPeak& after = s.ranks[0].memory_after_steps;
  ASSERT_TRUE(after.found());
  EXPECT_EQ(after.ts_ns, us(8000));
  EXPECT_EQ(after.total_bytes, 7000);
  EXPECT_EQ(pairs(after.categories), (P{{MemoryCategory::Parameters, 1000},
                                        {MemoryCategory::Gradients, 2000},
                                        {MemoryCategory::OptimizerState, 3000},
                                        {MemoryCategory::Activations, 1000}}));
  const auto j = nlohmann::json::parse(stats_json(s));
  EXPECT_EQ(j["ranks"][0]["memory_after_steps_bytes"]["total"], 7000);
  EXPECT_EQ(j["ranks"][0]["memory_after_steps_bytes"]["optimizer_state"], 3000);
  EXPECT_NE(stats_text(s).find("memory after the steps 0.01 MiB; at that moment (MiB): parameters 0.00"),
            std::string::npos)
      << stats_text(s);
}

// The categories at the peak add up to the peak, on every rank, in the run and in the steps.
TEST(stats, CategoriesAtThePeakSumToTheTotal) {
  TempDir dir;
  const RunStats s = known_stats(dir);
  for (const RankStats& r : s.ranks) {
    for (const MemoryAtPeak* peak : {&r.memory_peak, &r.step_memory_peak}) {
      ASSERT_TRUE(peak->found()) << "rank " << r.rank;
      int64_t sum = 0;
      for (const CategoryBytes& c : peak->categories) sum += c.bytes;
      EXPECT_EQ(sum, peak->total_bytes) << "rank " << r.rank;
    }
  }
}

// An evaluation after the last step (a phase and an all-gather of no iteration, forwarding all
// its rows at once) peaks higher than the step: the run's peak is the evaluation's, the steps'
// peak and the memory after the steps are the step's, and the step's comm is its own
// (Note [Work outside iterations]).
TEST(stats, EvaluationAfterTheLastStepIsNoStepsWork) {
  TempDir dir;
  const RunStats s = stats_of_trace(dir, "evaluation.dpscope", [](Writer& w) {
    w.put_rank(rank_row(0, "complete", 0));
    w.add_lane(LaneInfo{0, 0, "main", LaneKind::Host});
    w.add_lane(LaneInfo{0, 1, "gloo", LaneKind::Comm});
    add_names(w);
    w.add_name(kSetup + 1, "evaluation");
    w.add_event(phase(0, kIteration, 1000, 5000, 0));
    w.add_event(phase(0, kForward, 1000, 2000, 0));
    w.add_event(phase(0, kBackward, 2000, 4000, 0));
    w.add_event(collective(0, CollectiveOp::AllReduce, 0, 0, 400, 3000, 4500, 0));
    w.add_event(phase(0, kSetup + 1, 6000, 8000, kNone));
    w.add_event(collective(0, CollectiveOp::AllGather, 0, 1, 400, 6000, 7000, kNone));
    w.add_memory(sample(0, 0, MemoryCategory::Parameters, 1000));
    w.add_memory(sample(0, 0, MemoryCategory::Activations, 0));
    w.add_memory(sample(0, 2000, MemoryCategory::Activations, 3000));
    w.add_memory(sample(0, 4000, MemoryCategory::Activations, 0));
    w.add_memory(sample(0, 7000, MemoryCategory::Activations, 9000));
    w.add_memory(sample(0, 8000, MemoryCategory::Activations, 0));
    w.add_memory(sample(0, 0, MemoryCategory::CudaAllocated, 900));
    w.add_memory(sample(0, 500, MemoryCategory::CudaAllocated, 700));
    w.add_memory(sample(0, 7000, MemoryCategory::CudaAllocated, 5000));
  });
  ASSERT_EQ(s.ranks.size(), 1u);
  const RankStats& r = s.ranks[0];
  EXPECT_EQ(r.memory_peak.total_bytes, 10000);
  EXPECT_EQ(r.memory_peak.ts_ns, us(7000));
  EXPECT_EQ(r.step_memory_peak.total_bytes, 4000);
  EXPECT_EQ(r.step_memory_peak.ts_ns, us(2000));
  EXPECT_EQ(r.memory_after_steps.total_bytes, 1000);
  // Each category's largest value: over the run 9000 activations, 3000 in the steps; the GPU's
  // cuda_allocated, sampled before the steps and in the evaluation, holds 700 into the steps.
  EXPECT_EQ(r.largest(MemoryCategory::Activations), 9000);
  EXPECT_EQ(r.largest_in_steps(MemoryCategory::Activations), 3000);
  EXPECT_EQ(r.largest_in_steps(MemoryCategory::Parameters), 1000);
  EXPECT_EQ(r.largest(MemoryCategory::CudaAllocated), 5000);
  EXPECT_EQ(r.largest_in_steps(MemoryCategory::CudaAllocated), 700);
  ASSERT_EQ(r.iterations.size(), 1u);
  EXPECT_EQ(r.iterations[0].overlap.comm_ms, 1.5);
  EXPECT_EQ(r.iterations[0].collectives[static_cast<int>(CollectiveOp::AllGather)], 0);
  EXPECT_EQ(r.overlap.comm_ms, 2.5);  // the run's figures take everything
}

TEST(MemoryPeakFinder, WindowKeepsEarlierValuesAndAllocatorOnlyFallsBack) {
  MemoryPeakFinder steps(100);
  steps.add(0, MemoryCategory::Parameters, 5000);  // construction: outside the window
  steps.add(0, MemoryCategory::Activations, 9000);
  steps.add(50, MemoryCategory::Activations, 0);
  steps.add(150, MemoryCategory::Activations, 700);
  steps.add(150, MemoryCategory::Gradients, 300);
  steps.add(200, MemoryCategory::Activations, 100);
  const MemoryAtPeak peak = steps.finish();
  EXPECT_EQ(peak.total_bytes, 6000);
  EXPECT_EQ(peak.ts_ns, 150);
  EXPECT_EQ(peak.bytes(MemoryCategory::Parameters), 5000);
  EXPECT_EQ(peak.bytes(MemoryCategory::Activations), 700);

  MemoryPeakFinder bounded(100, 180);  // the moment at 200 is after the window
  bounded.add(0, MemoryCategory::Parameters, 5000);
  bounded.add(150, MemoryCategory::Activations, 700);
  bounded.add(200, MemoryCategory::Activations, 9000);
  const MemoryAtPeak bounded_peak = bounded.finish();
  EXPECT_EQ(bounded_peak.total_bytes, 5700);
  EXPECT_EQ(bounded_peak.ts_ns, 150);

  MemoryPeakFinder allocator_only;
  allocator_only.add(10, MemoryCategory::AllocatorTotal, 40);
  allocator_only.add(20, MemoryCategory::AllocatorTotal, 90);
  allocator_only.add(30, MemoryCategory::AllocatorTotal, 60);
  const MemoryAtPeak fallback = allocator_only.finish();
  EXPECT_EQ(fallback.total_bytes, 90);
  EXPECT_EQ(fallback.ts_ns, 20);
  EXPECT_TRUE(fallback.categories.empty());

  EXPECT_FALSE(MemoryPeakFinder().finish().found());
}

}  // namespace
}  // namespace dpscope::analysis
