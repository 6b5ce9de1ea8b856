// test_demo: `dpscope demo` with no display (DISPLAY and WAYLAND_DISPLAY unset, although the suite
// runs under xvfb-run) trains DDP and FSDP on 4 ranks, leaves both traces, summarises them and
// writes the viewer's screenshots next to them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_util.h"
#include "trace/reader.h"
#include "trace/stats.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
namespace trace = dpscope::trace;

namespace {

bool is_png(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char signature[8] = {};
  in.read(signature, sizeof(signature));
  return in && std::string(signature + 1, 3) == "PNG";
}

TEST(Demo, TrainsBothStrategiesAndWritesScreenshotsWithoutDisplay) {
  TempDir dir;
  const std::string out = dir.file("demo");
  const auto result = run_command("env -u DISPLAY -u WAYLAND_DISPLAY timeout 240 " + dpscope_bin() +
                                  " demo --steps 6 --out " + out);
  ASSERT_EQ(result.exit_code, 0) << result.output;

  const trace::RunStats ddp = [&] {
    trace::Reader reader(out + "/ddp/run.sqlite");
    return trace::compute_stats(reader);
  }();
  const trace::RunStats fsdp = [&] {
    trace::Reader reader(out + "/fsdp/run.sqlite");
    return trace::compute_stats(reader);
  }();
  EXPECT_EQ(ddp.strategy, "ddp");
  EXPECT_EQ(fsdp.strategy, "fsdp");
  for (const auto* stats : {&ddp, &fsdp}) {
    EXPECT_EQ(stats->world_size, 4);
    EXPECT_EQ(stats->ranks.size(), 4u);
    EXPECT_EQ(stats->iterations, 6);
  }
  // Each of the MLP's three layers is a unit, beside the root.
  EXPECT_EQ(fsdp.units.size(), 4u);

  for (const char* word : {"DDP — mlp, 4 ranks", "FSDP FULL_SHARD — mlp, 4 ranks", "final loss",
                           "step time", "exposed", "peak memory", "accuracy"}) {
    EXPECT_NE(result.output.find(word), std::string::npos) << word << "\n" << result.output;
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
