// Checks the tutorial tests share: a tutorial run on 2 ranks under `dpscope launch`, the one
// analysis of a trace it wrote, and the numbers it printed. Every tests/tutorials/ test file
// includes it; header-only, so each test program carries its own copy.
#pragma once

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/stats.h"
#include "tests/test_util.h"
#include "trace/reader.h"

namespace dpscope::testing::tutorial {

namespace analysis = dpscope::analysis;
namespace trace = dpscope::trace;
using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

struct TutorialRun {
  int exit_code = -1;
  std::string output;
  std::string trace_dir;
};

// `tutorial ARGS` on `ranks` ranks, tracing under `dir`/`traces`, with the launcher's
// `launch_args` (an emulated link); never longer than 120 s.
inline TutorialRun launch(const TempDir& dir, const std::string& tutorial, const std::string& args,
                          const std::string& launch_args = "", int ranks = 2,
                          const std::string& traces = "traces") {
  TutorialRun run;
  run.trace_dir = dir.file(traces);
  const auto result = run_command("timeout 120 " + dpscope_bin() + " launch -n " + std::to_string(ranks) + " " +
                                  launch_args +
                                  " --trace-dir " + run.trace_dir + " -- " + DPSCOPE_BIN_DIR + "/" +
                                  tutorial + " " + args);
  run.exit_code = result.exit_code;
  run.output = result.output;
  return run;
}

// The statistics a tutorial prints, on its lesson's clock: the cluster clock for a run on an
// emulated link (Note [The lesson's clock]), so that the timing checks hold on a busy machine.
inline analysis::RunStats stats_of(const std::string& path) {
  trace::Reader reader(path);
  return analysis::compute_lesson_stats(reader);
}

inline std::vector<trace::BucketInfo> plan(const analysis::RunStats& stats, int generation) {
  std::vector<trace::BucketInfo> buckets;
  for (const auto& b : stats.buckets) {
    if (b.generation == generation) buckets.push_back(b);
  }
  return buckets;
}

inline int64_t all_reduces(const analysis::RankStats& rank, int32_t iteration) {
  return rank.iterations.at(iteration).collectives[static_cast<int>(trace::CollectiveOp::AllReduce)];
}

inline int64_t all_reduce_bytes(const analysis::RankStats& rank, int32_t iteration) {
  int64_t bytes = 0;
  for (const auto& c : rank.collectives) {
    if (c.iteration == iteration && c.op == trace::CollectiveOp::AllReduce) bytes += c.bytes;
  }
  return bytes;
}

inline std::string param_name(const analysis::RunStats& stats, int32_t index) {
  return stats.params.at(index).name;
}

inline bool holds(const analysis::RunStats& stats, const trace::BucketInfo& bucket, const std::string& prefix) {
  for (const int32_t p : bucket.params) {
    if (param_name(stats, p).rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// The largest value `category` reached on its own (RankStats::category_max).
inline int64_t peak_of(const analysis::RankStats& rank, trace::MemoryCategory category) {
  for (const auto& largest : rank.category_max) {
    if (largest.category == category) return largest.bytes;
  }
  return 0;
}

// The numbers printed on the first output line that contains `label`, in order.
inline std::vector<double> numbers_on(const std::string& output, const std::string& label) {
  const std::regex number(R"([-+]?[0-9]*\.?[0-9]+(e[-+]?[0-9]+)?)");
  std::istringstream lines(output);
  std::string line;
  std::vector<double> numbers;
  while (std::getline(lines, line)) {
    if (line.find(label) == std::string::npos) continue;
    for (std::sregex_iterator it(line.begin(), line.end(), number), end; it != end; ++it) {
      numbers.push_back(std::stod(it->str()));
    }
    break;
  }
  return numbers;
}

inline double mib(int64_t bytes) { return double(bytes) / double(1 << 20); }

// At every rank's peak, "other" (memory the engine could not name) is at most 10 % of it.
inline void expect_little_other(const analysis::RunStats& stats) {
  for (const analysis::RankStats& rank : stats.ranks) {
    for (const analysis::MemoryAtPeak* peak : {&rank.memory_peak, &rank.step_memory_peak}) {
      ASSERT_TRUE(peak->found()) << stats.path << " rank " << rank.rank;
      EXPECT_LE(peak->bytes(trace::MemoryCategory::Other), peak->total_bytes / 10)
          << stats.path << " rank " << rank.rank << ": other "
          << peak->bytes(trace::MemoryCategory::Other) << " B of a " << peak->total_bytes << " B peak";
    }
  }
}

// The number printed last on the first output line that contains `label`.
inline double last_number_on(const std::string& output, const std::string& label) {
  const std::regex number(R"([-+]?[0-9]*\.?[0-9]+(e[-+]?[0-9]+)?)");
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find(label) == std::string::npos) continue;
    std::string last;
    for (std::sregex_iterator it(line.begin(), line.end(), number), end; it != end; ++it) last = it->str();
    return std::stod(last);
  }
  ADD_FAILURE() << "no line with '" << label << "' in\n" << output;
  return -1;
}

// Rank `rank`'s collectives of kind `op` in `iteration` of the file at `path`, and how many of
// them carry `flag` (trace::kFlag*; 0: all).
inline int64_t collectives_with(trace::Reader& reader, int rank, int32_t iteration, trace::CollectiveOp op,
                                uint8_t flag = 0) {
  int64_t count = 0;
  for (const auto& c : reader.events_of_kind(trace::EventKind::Collective, rank)) {
    count += c.iteration == iteration && c.op == static_cast<uint8_t>(op) && (flag == 0 || (c.flags & flag));
  }
  return count;
}
}  // namespace dpscope::testing::tutorial
