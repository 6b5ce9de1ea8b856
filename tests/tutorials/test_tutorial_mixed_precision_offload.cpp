// Tutorial 14 (FSDP mixed precision and CPU offload) claims, from its traces: bf16 halves the
// all-gathers' bytes exactly and the reduce-scatters' too unless reduce_fp32 keeps them float32;
// the gathered parameters, full gradients and activations shrink while the float32 shards and
// optimizer state do not; CPU offload on the CPU changes nothing, and what it would move.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/tutorials/tutorial_checks.h"

using namespace dpscope::testing::tutorial;
using dpscope::testing::TempDir;

namespace {

constexpr int32_t kCounted = 2;  // the iteration whose bytes the tutorial prints

int64_t bytes_of(const analysis::RankStats& rank, trace::CollectiveOp op) {
  int64_t bytes = 0;
  for (const analysis::CollectiveStats& c : rank.collectives) {
    if (c.iteration == kCounted && c.op == op) bytes += c.bytes;
  }
  return bytes;
}

int64_t largest_of(const analysis::RankStats& rank, trace::CollectiveOp op) {
  int64_t largest = 0;
  for (const analysis::CollectiveStats& c : rank.collectives) {
    if (c.op == op) largest = std::max(largest, c.bytes);
  }
  return largest;
}

// The numbers on the printed table row of `label` ("[0]   bf16 reduce_fp32   13 ..."), token by
// token, so that dtype names (float32) add none; the label must be followed by a number, so that
// header lines do not match.
std::vector<double> row(const std::string& output, const std::string& label) {
  const std::string start = "[0]   " + label + " ";
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(start, 0) != 0) continue;
    std::istringstream tokens(line.substr(start.size()));
    std::vector<double> numbers;
    bool first = true;
    for (std::string token; tokens >> token; first = false) {
      size_t used = 0;
      try {
        const double value = std::stod(token, &used);
        if (used == token.size()) numbers.push_back(value);
      } catch (const std::invalid_argument&) {
      }
      if (first && numbers.empty()) break;  // "fp32 cpu_offload" when looking for "fp32"
    }
    if (!numbers.empty()) return numbers;
  }
  ADD_FAILURE() << "no row '" << label << "' in\n" << output;
  return {};
}

int64_t at_peak(const analysis::RankStats& rank, trace::MemoryCategory category) {
  return rank.step_memory_peak.bytes(category);
}

TEST(TutorialMixedPrecisionOffload, BytesMemoryLossAndOffloadAsTheReadmeStates) {
  TempDir dir;
  const TutorialRun run = launch(dir, "tutorial-14-mixed-precision-offload", "--steps 4",
                                 "--link-gbps 4 --link-latency-us 50");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const analysis::RunStats fp32 = stats_of(run.trace_dir + "/fp32/run.sqlite");
  const analysis::RunStats bf16 = stats_of(run.trace_dir + "/bf16/run.sqlite");
  const analysis::RunStats reduce_fp32 = stats_of(run.trace_dir + "/bf16-reduce-fp32/run.sqlite");
  const analysis::RunStats offload = stats_of(run.trace_dir + "/fp32-offload/run.sqlite");
  using Op = trace::CollectiveOp;

  // Bytes per step, exactly: the all-gathers carry bf16 copies of the shards, half of fp32's; the
  // reduce-scatters carry the gradients in the reduce dtype. Every rank alike.
  for (int r = 0; r < 2; ++r) {
    const analysis::RankStats& base = fp32.ranks.at(r);
    ASSERT_GT(bytes_of(base, Op::AllGather), 0) << run.output;
    EXPECT_EQ(2 * bytes_of(bf16.ranks.at(r), Op::AllGather), bytes_of(base, Op::AllGather));
    EXPECT_EQ(2 * bytes_of(bf16.ranks.at(r), Op::ReduceScatter), bytes_of(base, Op::ReduceScatter));
    EXPECT_EQ(2 * bytes_of(reduce_fp32.ranks.at(r), Op::AllGather), bytes_of(base, Op::AllGather));
    EXPECT_EQ(bytes_of(reduce_fp32.ranks.at(r), Op::ReduceScatter), bytes_of(base, Op::ReduceScatter));
    EXPECT_EQ(bytes_of(offload.ranks.at(r), Op::AllGather), bytes_of(base, Op::AllGather));
    EXPECT_EQ(bytes_of(offload.ranks.at(r), Op::ReduceScatter), bytes_of(base, Op::ReduceScatter));
  }
  // The printed rows are the traces' (rank 0): AG count, bytes, ratio, RS count, bytes, ratio.
  const struct {
    std::string label;
    const analysis::RunStats* stats;
    double all_gather_ratio, reduce_scatter_ratio;
  } rows[] = {{"fp32", &fp32, 1, 1},
              {"bf16", &bf16, 0.5, 0.5},
              {"bf16 reduce_fp32", &reduce_fp32, 0.5, 1},
              {"fp32 cpu_offload", &offload, 1, 1}};
  for (const auto& expected : rows) {
    const std::vector<double> printed = row(run.output, expected.label);
    ASSERT_EQ(printed.size(), 6u) << expected.label << "\n" << run.output;
    const analysis::RankStats& rank0 = expected.stats->ranks.at(0);
    EXPECT_EQ(printed[0], 13) << expected.label;  // 6 units twice, the root once
    EXPECT_EQ(printed[1], static_cast<double>(bytes_of(rank0, Op::AllGather))) << expected.label;
    EXPECT_DOUBLE_EQ(printed[2], expected.all_gather_ratio) << expected.label;
    EXPECT_EQ(printed[3], 7) << expected.label;  // every unit once
    EXPECT_EQ(printed[4], static_cast<double>(bytes_of(rank0, Op::ReduceScatter))) << expected.label;
    EXPECT_DOUBLE_EQ(printed[5], expected.reduce_scatter_ratio) << expected.label;
  }

  // Memory at the peak: what bf16 computes with shrinks, the float32 state does not.
  using Cat = trace::MemoryCategory;
  for (int r = 0; r < 2; ++r) {
    const analysis::RankStats& base = fp32.ranks.at(r);
    const analysis::RankStats& low = bf16.ranks.at(r);
    for (const Cat category : {Cat::FullParameters, Cat::FullGradients, Cat::Activations}) {
      EXPECT_LT(at_peak(low, category), at_peak(base, category) * 7 / 10)
          << "rank " << r << " " << trace::to_string(category) << "\n" << run.output;
    }
    for (const analysis::RunStats* other : {&bf16, &reduce_fp32, &offload}) {
      for (const Cat category : {Cat::Shards, Cat::OptimizerState}) {
        EXPECT_EQ(at_peak(other->ranks.at(r), category), at_peak(base, category))
            << other->path << " rank " << r << " " << trace::to_string(category);
      }
      // The shards' float32 gradients are there in every run, whatever was reduced.
      EXPECT_GE(at_peak(other->ranks.at(r), Cat::GradientShards), at_peak(base, Cat::Shards)) << other->path;
    }
    // "other" is the Gloo backend's float32 copy of a bf16 reduce-scatter: at most a float32
    // scratch of the input and a float32 output, 3 times the largest bf16 payload.
    EXPECT_LE(at_peak(low, Cat::Other), 3 * largest_of(low, Op::ReduceScatter)) << "rank " << r;
  }
  for (const analysis::RunStats* stats : {&fp32, &reduce_fp32, &offload}) expect_little_other(*stats);

  // Loss: the offload run computes exactly what the fp32 run does (same code path on the CPU);
  // bf16 computes from rounded weights, so its loss is close but not equal, from step 0 on, and
  // the two bf16 runs share step 0 (the reduce dtype matters from the first update on).
  const auto& fp32_steps = fp32.ranks.at(0).iterations;
  ASSERT_EQ(fp32_steps.size(), 4u);
  for (size_t i = 0; i < fp32_steps.size(); ++i) {
    ASSERT_TRUE(fp32_steps[i].loss.has_value());
    EXPECT_EQ(offload.ranks.at(0).iterations.at(i).loss, fp32_steps[i].loss) << "step " << i;
    const double low = bf16.ranks.at(0).iterations.at(i).loss.value();
    EXPECT_NE(low, *fp32_steps[i].loss) << "step " << i;
    EXPECT_NEAR(low, *fp32_steps[i].loss, 1e-3 * *fp32_steps[i].loss) << "step " << i;
  }
  EXPECT_EQ(bf16.ranks.at(0).iterations.at(0).loss, reduce_fp32.ranks.at(0).iterations.at(0).loss);

  // Offload: the same peak and categories as fp32 here; what it would move on a GPU is the
  // all-gathers' input to the device and the reduce-scatters' output (input / 2 ranks) back.
  EXPECT_EQ(offload.ranks.at(0).step_memory_peak.total_bytes, fp32.ranks.at(0).step_memory_peak.total_bytes);
  for (const analysis::CategoryBytes& part : fp32.ranks.at(0).step_memory_peak.categories) {
    EXPECT_EQ(at_peak(offload.ranks.at(0), part.category), part.bytes) << trace::to_string(part.category);
  }
  EXPECT_NE(run.output.find("the same bytes per step"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("the same loss"), std::string::npos) << run.output;
  const analysis::RankStats& off0 = offload.ranks.at(0);
  EXPECT_EQ(last_number_on(run.output, "host to device"), static_cast<double>(bytes_of(off0, Op::AllGather)));
  EXPECT_EQ(last_number_on(run.output, "device to host"), static_cast<double>(bytes_of(off0, Op::ReduceScatter) / 2));
}

}  // namespace
