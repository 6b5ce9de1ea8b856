// test_tutorial_screenshot: the step that makes a tutorial's README screenshot works headless:
// tutorials/screenshot.sh runs tutorial 03 under `dpscope launch` and has dpscope-view draw its
// trace with --screenshot (in the suite's xvfb-run display, or under its own xvfb-run without one);
// the picture has a rank group per rank of the run and the step's backward, all-reduce and
// broadcasts drawn on the lanes.
#include <gtest/gtest.h>
#include <stb_image.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "trace/reader.h"

using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

TEST(TutorialScreenshot, Tutorial03Headless) {
  if (!std::getenv("DISPLAY") && run_command("command -v xvfb-run").exit_code != 0) {
    GTEST_SKIP() << "no display and no xvfb-run: run the suite under `xvfb-run -a ctest`";
  }
  TempDir dir;
  const std::string png = dir.file("screenshot.png");
  const auto result = run_command("timeout 120 " + std::string(DPSCOPE_SOURCE_DIR) +
                                  "/tutorials/screenshot.sh --bin " + DPSCOPE_BIN_DIR + " --out " + png +
                                  " --keep-traces " + dir.file("traces") + " 03 -- --steps 1");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("wrote " + png), std::string::npos) << result.output;
  EXPECT_TRUE(std::filesystem::exists(dir.file("traces/run.sqlite")));

  int width = 0, height = 0, channels = 0;
  unsigned char* pixels = stbi_load(png.c_str(), &width, &height, &channels, 3);
  ASSERT_NE(pixels, nullptr) << png << " is not a readable PNG";
  const std::vector<unsigned char> rgb(pixels, pixels + size_t(width) * size_t(height) * 3);
  stbi_image_free(pixels);
  EXPECT_EQ(width, 1280);
  EXPECT_EQ(height, 800);
  const auto at = [&](int x, int y) { return &rgb[(size_t(y) * size_t(width) + size_t(x)) * 3]; };
  const auto is = [](const unsigned char* p, int r, int g, int b) {
    return std::abs(p[0] - r) <= 3 && std::abs(p[1] - g) <= 3 && std::abs(p[2] - b) <= 3;
  };
  // One rank group per rank of the run: the headers' bands (44, 48, 62) down the label column.
  const size_t ranks = dpscope::trace::Reader(dir.file("traces/run.sqlite")).ranks().size();
  int headers = 0;
  for (int y = 1; y < height; ++y) headers += is(at(20, y), 44, 48, 62) && !is(at(20, y - 1), 44, 48, 62);
  EXPECT_EQ(headers, int(ranks)) << "rank headers in the label column";
  // The step's lanes right of the label column, above the panels (rows 90-520): backward's
  // orange, the bucket's all-reduce in red and construction's broadcasts in teal.
  const auto count = [&](int r, int g, int b) {
    int n = 0;
    for (int y = 90; y < 520; ++y) {
      for (int x = 150; x < width; ++x) n += is(at(x, y), r, g, b);
    }
    return n;
  };
  EXPECT_GT(count(244, 160, 0), 1000) << "backward";
  EXPECT_GT(count(219, 68, 55), 500) << "the all-reduce";
  EXPECT_GT(count(0, 170, 170), 500) << "the broadcasts";
}

}  // namespace
