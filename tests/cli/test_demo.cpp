// test_demo: `dpscope demo` with no display (DISPLAY and WAYLAND_DISPLAY unset, although the suite
// runs under xvfb-run) trains DDP and FSDP on 4 ranks, leaves both traces, summarises them and
// writes the viewer's screenshots next to them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/stats.h"
#include "tests/test_util.h"
#include "trace/reader.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
namespace analysis = dpscope::analysis;
namespace trace = dpscope::trace;

namespace {

bool is_png(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char signature[8] = {};
  in.read(signature, sizeof(signature));
  return in && std::string(signature + 1, 3) == "PNG";
}

// Every rank's peak on each "  peak memory     a / b / c / d MiB in the steps (ranks 0..3)" line,
// in order.
std::vector<std::vector<double>> peak_lines(const std::string& output) {
  std::vector<std::vector<double>> lines;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find("  peak memory ");
    if (at == std::string::npos) continue;
    std::vector<double> values;
    std::istringstream fields(line.substr(at + 14, line.find("MiB") - at - 14));
    std::string field;
    while (fields >> field) {
      if (field != "/") values.push_back(std::stod(field));
    }
    lines.push_back(values);
  }
  return lines;
}

TEST(Demo, TrainsBothStrategiesAndWritesScreenshotsWithoutDisplay) {
  TempDir dir;
  const std::string out = dir.file("demo");
  const auto result = run_command("env -u DISPLAY -u WAYLAND_DISPLAY timeout 240 " + dpscope_bin() +
                                  " demo --steps 6 --out " + out);
  ASSERT_EQ(result.exit_code, 0) << result.output;

  const analysis::RunStats ddp = [&] {
    trace::Reader reader(out + "/ddp/run.sqlite");
    return analysis::compute_lesson_stats(reader);
  }();
  const analysis::RunStats fsdp = [&] {
    trace::Reader reader(out + "/fsdp/run.sqlite");
    return analysis::compute_lesson_stats(reader);
  }();
  EXPECT_EQ(ddp.strategy, trace::Strategy::Ddp);
  EXPECT_EQ(fsdp.strategy, trace::Strategy::Fsdp);
  for (const auto* stats : {&ddp, &fsdp}) {
    EXPECT_EQ(stats->world_size, 4);
    EXPECT_EQ(stats->ranks.size(), 4u);
    EXPECT_EQ(stats->iterations, 6);
    // Both ran on the default emulated link, and the summary says so.
    EXPECT_EQ(stats->link_gbps, 4);
    EXPECT_EQ(stats->link_latency_us, 50);
  }
  // On the emulated link the summary's times are the cluster clock's (Note [The lesson's clock]).
  EXPECT_EQ(ddp.clock.clock, analysis::Clock::Cluster);
  EXPECT_EQ(fsdp.clock.clock, analysis::Clock::Cluster);
  // Each of the MLP's three layers is a unit, beside the root.
  EXPECT_EQ(fsdp.units.size(), 4u);

  for (const char* word : {"DDP — mlp, 4 ranks", "FSDP FULL_SHARD — mlp, 4 ranks", "final loss",
                           "step time", "exposed", "peak memory", "accuracy",
                           "emulated link 4 Gb/s, 50 \u00b5s",
                           "clock           cluster clock (modeled: compute as CPU time, link 4 Gb/s, 50 \u00b5s)",
                           "; measured on this machine "}) {
    EXPECT_NE(result.output.find(word), std::string::npos) << word << "\n" << result.output;
  }
  // The summary's memory is the traces' peak in the steps (as `dpscope stats` has it; the
  // evaluation after them is no step's), and the engine names what it holds: "other" is at most
  // 10 % of every rank's peak.
  const std::vector<std::vector<double>> printed = peak_lines(result.output);
  ASSERT_EQ(printed.size(), 2u) << result.output;
  for (size_t run = 0; run < 2; ++run) {
    const analysis::RunStats& stats = run == 0 ? ddp : fsdp;
    ASSERT_EQ(printed[run].size(), stats.ranks.size()) << result.output;
    for (size_t r = 0; r < stats.ranks.size(); ++r) {
      const analysis::MemoryAtPeak& peak = stats.ranks[r].step_memory_peak;
      EXPECT_NEAR(printed[run][r], double(peak.total_bytes) / double(1 << 20), 0.006) << "rank " << r;
      EXPECT_LE(peak.bytes(trace::MemoryCategory::Other), peak.total_bytes / 10)
          << (run == 0 ? "DDP" : "FSDP") << " rank " << r << ": other "
          << peak.bytes(trace::MemoryCategory::Other) << " B of " << peak.total_bytes << " B";
    }
  }

  if (run_command("command -v xvfb-run").exit_code != 0) {
    GTEST_SKIP() << "no xvfb-run: the demo cannot draw screenshots without a display";
  }
  for (const std::string& png : {out + "/compare.png", out + "/ddp/screenshot.png",
                                out + "/fsdp/screenshot.png"}) {
    EXPECT_TRUE(is_png(png)) << png << "\n" << result.output;
    EXPECT_NE(result.output.find(png), std::string::npos) << result.output;
  }
}

}  // namespace

TEST(Demo, NoLinkRunsOnTheMachinesOwnTransport) {
  TempDir dir;
  const std::string out = dir.file("demo");
  const auto result = run_command("env -u DISPLAY -u WAYLAND_DISPLAY timeout 240 " + dpscope_bin() +
                                  " demo --steps 2 --ranks 2 --no-link --out " + out);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* run : {"/ddp/run.sqlite", "/fsdp/run.sqlite"}) {
    trace::Reader reader(out + run);
    EXPECT_EQ(analysis::compute_stats(reader).link_gbps, 0) << run;
  }
  EXPECT_EQ(result.output.find("emulated link"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("this machine's own (--no-link)"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("clock           measured (this machine)"), std::string::npos) << result.output;
}
