// dpscope-view on the cluster clock, headless (`--clock cluster`; the suite runs under
// `xvfb-run -a ctest`, without a display these tests skip): a synthetic trace drawn on either
// clock, its extents and figures moved as the replay's model says, a compared pair on one clock,
// and the traces the cluster clock cannot replay refused with the fix. The C key: test_interactive.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stb_image.h>

#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "formats/synth.h"
#include "tests/test_util.h"
#include "tests/viewer/screenshot_json.h"
#include "tests/viewer/image_checks.h"

using dpscope::testing::CommandResult;
using dpscope::testing::Image;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
using dpscope::testing::screenshot_json;

namespace {

#define REQUIRE_DISPLAY()                                                              \
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`"

std::string synth(const TempDir& dir, const std::string& name, int ranks, int64_t events, uint64_t seed = 1) {
  dpscope::formats::SynthOptions options;
  options.events = events;
  options.ranks = ranks;
  options.out = dir.file(name);
  options.seed = seed;
  dpscope::formats::synthesize(options);
  return options.out;
}

// Runs `sql` on the trace at `path` (to take away what the cluster clock needs).
void edit(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

CommandResult view(const std::string& args) {
  return run_command(std::string(DPSCOPE_BIN_DIR) + "/dpscope-view " + args);
}

// Distinct colours of the PNG at `path`, quantised to 32 levels per channel (0 if unreadable).
size_t colours(const std::string& path) {
  int width = 0, height = 0, channels = 0;
  unsigned char* data = stbi_load(path.c_str(), &width, &height, &channels, 3);
  if (!data) return 0;
  std::set<int> seen;
  for (size_t i = 0; i + 2 < size_t(width) * size_t(height) * 3; i += 3) {
    seen.insert((data[i] >> 3) << 10 | (data[i + 1] >> 3) << 5 | (data[i + 2] >> 3));
  }
  stbi_image_free(data);
  return seen.size();
}

// A screenshot of `trace` on `clock` (extra flags after), its JSON line checked for the clock.
nlohmann::json draw(const TempDir& dir, const std::string& trace, const std::string& clock,
                    const std::string& extra = "") {
  const std::string png = dir.file(clock + std::to_string(std::hash<std::string>()(extra)) + ".png");
  const CommandResult result = view(trace + " --clock " + clock + " --screenshot " + png + " --frames 2 " + extra);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json json = screenshot_json(result.output);
  EXPECT_EQ(json.value("clock", ""), clock) << result.output;
  EXPECT_GT(colours(png), 8u) << png << " looks blank";
  return json;
}

double rank_figure(const nlohmann::json& json, size_t rank, const char* figure) {
  return json.at("overlap").at(rank).at(figure).get<double>();
}

TEST(ViewerClock, ClusterClockDrawsASynthTraceAsTheModelSays) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 2, 20000);
  const nlohmann::json measured = draw(dir, trace, "measured");
  const nlohmann::json cluster = draw(dir, trace, "cluster");
  EXPECT_EQ(measured.value("clock_label", ""), "measured (this machine)");
  EXPECT_EQ(cluster.value("clock_label", ""), "cluster clock (modeled: compute as CPU time, link 4 Gb/s, 50 µs)");
  // A synthetic thread computes at full speed on the link it was sized by, each duration jittered
  // by up to 2 %. The replay takes each piece of a steady step at the least it took over the
  // steps (Note [Steady compute]), so compute comes out a little below the CPU time recorded
  // (the wall time less the waits) and the run as much shorter: measured, the run 157897.4 ms and
  // its replay 155332.9 (-1.6 %), compute 152646.3 and 150061.9 ms (-1.7 %); 0 to 3 % allowed.
  const double run = measured.at("run_ms").at(0).get<double>();
  const double replayed = cluster.at("run_ms").at(0).get<double>();
  EXPECT_LE(replayed, run);
  EXPECT_GE(replayed, 0.97 * run);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_LE(rank_figure(cluster, r, "compute_ms"), rank_figure(measured, r, "compute_ms"));
    EXPECT_GE(rank_figure(cluster, r, "compute_ms"), 0.97 * rank_figure(measured, r, "compute_ms"));
  }
  // A link ten times faster: the same compute; the collectives (from each rank's NIC taking one
  // up to its end, the wait for the other rank included) less than half as long; a shorter run.
  const nlohmann::json fast = draw(dir, trace, "cluster", "--link-gbps 40 --link-latency-us 5");
  EXPECT_EQ(fast.value("clock_label", ""), "cluster clock (modeled: compute as CPU time, link 40 Gb/s, 5 µs)");
  EXPECT_LT(fast.at("run_ms").at(0).get<double>(), replayed);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_NEAR(rank_figure(fast, r, "compute_ms"), rank_figure(cluster, r, "compute_ms"),
                1e-6 * rank_figure(cluster, r, "compute_ms"));
    EXPECT_LT(rank_figure(fast, r, "comm_ms"), 0.5 * rank_figure(cluster, r, "comm_ms"));
    EXPECT_LT(rank_figure(fast, r, "exposed_comm_ms"), rank_figure(cluster, r, "exposed_comm_ms"));
  }
}

TEST(ViewerClock, CompareSwitchesBothRuns) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string a = synth(dir, "a.sqlite", 2, 10000, 1);
  const std::string b = synth(dir, "b.sqlite", 2, 10000, 2);
  const nlohmann::json measured = draw(dir, a, "measured", "--compare " + b);
  const nlohmann::json fast = draw(dir, a, "cluster", "--compare " + b + " --link-gbps 40 --link-latency-us 5");
  ASSERT_EQ(fast.at("run_ms").size(), 2u);
  for (size_t t = 0; t < 2; ++t) {
    EXPECT_LT(fast.at("run_ms").at(t).get<double>(), measured.at("run_ms").at(t).get<double>()) << "trace " << t;
  }
}

// The step-through reads the file's events of the playhead's iteration and, on the cluster clock,
// maps them by the replay: the same moments to step to, placed on that clock, where the ones on
// the main thread keep their order and a collective's start moves to when the link takes it.
TEST(ViewerClock, StepsThroughAnIterationOnTheClusterClock) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 2, 20000);
  std::vector<std::string> measured, cluster;
  for (int step = 0; step < 6; ++step) {
    const std::string at = "--iteration 3 --step " + std::to_string(step);
    measured.push_back(draw(dir, trace, "measured", at).value("narration", ""));
    cluster.push_back(draw(dir, trace, "cluster", at).value("narration", ""));
    EXPECT_EQ(cluster.back().rfind("rank 0, ", 0), 0u) << "step " << step << ": " << cluster.back();
  }
  EXPECT_EQ(cluster[0], measured[0]);
  EXPECT_NE(cluster[0].find("gradient is ready"), std::string::npos) << cluster[0];
  // The first gradients fill bucket 0 on both clocks; its collective comes within these steps.
  auto names_collective = [](const std::vector<std::string>& narrations) {
    for (const std::string& n : narrations) {
      if (n.find("seq 16") != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(names_collective(measured));
  EXPECT_TRUE(names_collective(cluster));
}

// On the cluster clock the what-if lanes are predicted on it, as `dpscope whatif --clock cluster`
// predicts: the same figures, the collectives costed by the link; switching clocks predicts again.
TEST(ViewerClock, PredictsWhatifLanesOnTheClusterClock) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 2, 20000);
  const nlohmann::json cluster = draw(dir, trace, "cluster", "--whatif-cap-mb 1");
  const nlohmann::json measured = draw(dir, trace, "measured", "--whatif-cap-mb 1");
  const auto cli = run_command(std::string(DPSCOPE_BIN_DIR) + "/dpscope whatif --json --clock cluster --bucket-cap-mb 1 " + trace);
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  const nlohmann::json expected = nlohmann::json::parse(cli.output);
  ASSERT_TRUE(cluster.at("whatif").contains("predicted_step_ms")) << cluster.dump();
  for (const char* figure : {"measured_step_ms", "predicted_step_ms", "measured_exposed_comm_ms", "predicted_exposed_comm_ms"}) {
    EXPECT_NEAR(cluster.at("whatif").at(figure).get<double>(), expected.at(figure).get<double>(), 1e-6) << figure;
  }
  EXPECT_EQ(cluster.at("whatif").at("buckets").get<size_t>(), expected.at("buckets").size());
  // The measured clock's lanes are the fitted model's, on other times.
  ASSERT_TRUE(measured.at("whatif").contains("measured_step_ms")) << measured.dump();
  EXPECT_NE(measured.at("whatif").at("measured_step_ms").get<double>(),
            cluster.at("whatif").at("measured_step_ms").get<double>());
}

TEST(ViewerClock, RefusesATraceWithoutALink) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 2, 5000);
  edit(trace, "DELETE FROM meta WHERE key IN ('link_gbps', 'link_latency_us')");
  const CommandResult result = view(trace + " --clock cluster --screenshot " + dir.file("x.png"));
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("recorded without an emulated link"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("--link-gbps 4 --link-latency-us 50"), std::string::npos) << result.output;
  // A link given on the command line is enough; the measured clock never needed one.
  draw(dir, trace, "cluster", "--link-gbps 4 --link-latency-us 50");
  draw(dir, trace, "measured");
  // A compared run that cannot be replayed keeps both on the measured clock.
  const std::string good = synth(dir, "good.sqlite", 2, 5000);
  const CommandResult pair = view(good + " --compare " + trace + " --clock cluster --screenshot " + dir.file("y.png"));
  EXPECT_NE(pair.exit_code, 0) << pair.output;
  EXPECT_NE(pair.output.find("recorded without an emulated link"), std::string::npos) << pair.output;
}

TEST(ViewerClock, RefusesATraceWithoutCpuTimes) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 2, 5000);
  edit(trace, "UPDATE events SET cpu_begin_ns = NULL, cpu_end_ns = NULL");
  const CommandResult result = view(trace + " --clock cluster --screenshot " + dir.file("x.png"));
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("recorded no thread CPU times"), std::string::npos) << result.output;
}

TEST(ViewerClock, ChecksTheClockAndTheLink) {
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 1, 1000);
  CommandResult result = view(trace + " --clock wall --screenshot " + dir.file("x.png"));
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("--clock wall: choose measured or cluster"), std::string::npos) << result.output;
  result = view(trace + " --clock cluster --link-gbps 4 --screenshot " + dir.file("x.png"));
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("--link-gbps needs --link-latency-us too"), std::string::npos) << result.output;
}

}  // namespace
