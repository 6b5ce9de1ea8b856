// test_tutorial_screenshot: the step that makes a tutorial's README screenshot works headless:
// tutorials/screenshot.sh runs tutorial 03 under `dpscope launch` and has dpscope-view draw its
// trace with --screenshot (in the suite's xvfb-run display, or under its own xvfb-run without one).
#include <gtest/gtest.h>
#include <stb_image.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "tests/test_util.h"

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
  EXPECT_EQ(width, 1280);
  EXPECT_EQ(height, 800);
  // A drawn timeline has many colours; a blank or failed frame has one or two.
  std::set<int> colours;
  for (int i = 0; i < width * height; i += 7) {
    colours.insert(pixels[3 * i] << 16 | pixels[3 * i + 1] << 8 | pixels[3 * i + 2]);
  }
  stbi_image_free(pixels);
  EXPECT_GT(colours.size(), 20u);
}

}  // namespace
