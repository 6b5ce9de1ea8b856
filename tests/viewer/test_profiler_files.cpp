// dpscope-view on PyTorch profiler files (docs/kineto.md): `dpscope-view rank-*.json.gz` imports
// them into a temporary run file, draws it like any run (a lane group per rank, the screenshot's
// JSON line) and leaves no temporary file behind; a bad file is one line and exit 1. Needs a
// display (the suite runs under `xvfb-run -a ctest`); without one the tests skip.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/test_util.h"
#include "tests/viewer/image_checks.h"
#include "tests/viewer/png_image.h"
#include "tests/viewer/screenshot_json.h"
#include "viewer/palette.h"

namespace {

using dpscope::testing::run_command;
using dpscope::testing::screenshot_json;
using dpscope::testing::TempDir;

#define REQUIRE_DISPLAY() \
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`"

std::string viewer() { return std::string(DPSCOPE_BIN_DIR) + "/dpscope-view"; }
std::string shipped(const std::string& name) {
  return std::string(DPSCOPE_SOURCE_DIR) + "/tests/data/kineto/" + name;
}

// The dpscope-import-* directories in `tmp`.
int imports_in(const std::filesystem::path& tmp) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(tmp)) {
    n += entry.path().filename().string().rfind("dpscope-import-", 0) == 0 ? 1 : 0;
  }
  return n;
}

TEST(ViewerProfilerFiles, TwoRanksOfGzippedProfilerTracesOpenAndDraw) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string png = dir.file("sampled.png");
  const auto result = run_command("TMPDIR=" + dir.path().string() + " " + viewer() + " " +
                                  shipped("sampled_rank-0.json.gz") + " " + shipped("sampled_rank-1.json.gz") +
                                  " --screenshot " + png + " --frames 3");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json json = screenshot_json(result.output);
  ASSERT_FALSE(json.is_discarded()) << result.output;
  EXPECT_TRUE(std::filesystem::exists(png));
  EXPECT_GT(std::filesystem::file_size(png), 10000u);
  EXPECT_EQ(imports_in(dir.path()), 0) << "the temporary run file outlived the viewer";
}

// Pixels in the peak label's colour in the lane labels' column (x < 250) of `png`.
int peak_label_pixels(const std::string& png) {
  const dpscope::testing::Image image = dpscope::testing::load_png(png);
  if (image.width == 0) return -1;
  const ImU32 c = dpscope::view::theme().peak_text;
  const std::array<int, 3> rgb{int(c & 0xff), int((c >> 8) & 0xff), int((c >> 16) & 0xff)};
  dpscope::testing::Image labels = image;
  for (int y = 0; y < image.height; ++y) {
    for (int x = 250; x < image.width; ++x) {
      unsigned char* p = &labels.rgb[(size_t(y) * size_t(image.width) + size_t(x)) * 3];
      p[0] = p[1] = p[2] = 0;
    }
  }
  return dpscope::testing::pixels_near(labels, 0, image.height, rgb);
}

// A run without memory samples names no peak ("peak 0 B" in the peak's red): its graph says "no
// memory samples" and nothing stands beside it. A run with samples does show its peak there.
TEST(ViewerProfilerFiles, ARunWithoutMemorySamplesNamesNoPeak) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string without = dir.file("nccl.png");
  const auto imported = run_command("TMPDIR=" + dir.path().string() + " " + viewer() + " " +
                                    shipped("nccl_data.json.gz") + " --size 1280x800 --screenshot " + without);
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_EQ(peak_label_pixels(without), 0);
  const std::string synth = dir.file("synth.sqlite"), with = dir.file("synth.png");
  ASSERT_EQ(run_command(std::string(DPSCOPE_BIN_DIR) + "/dpscope synth --events 5000 --ranks 2 --out " + synth).exit_code, 0);
  const auto drawn = run_command(viewer() + " " + synth + " --size 1280x800 --screenshot " + with);
  ASSERT_EQ(drawn.exit_code, 0) << drawn.output;
  EXPECT_GT(peak_label_pixels(with), 20) << "the check sees a peak label where there is one";
}

// Pixels of the Buckets panel's filled colour in `png`'s lower right quarter (the right panel).
int filled_bucket_pixels(const std::string& png) {
  const dpscope::testing::Image image = dpscope::testing::load_png(png);
  if (image.width == 0) return -1;
  const ImU32 c = dpscope::view::kBucketSlotFilledColor;
  const std::array<int, 3> rgb{int(c & 0xff), int((c >> 8) & 0xff), int((c >> 16) & 0xff)};
  int count = 0;
  for (int y = image.height / 2; y < image.height; ++y) {
    for (int x = image.width / 2; x < image.width; ++x) count += dpscope::testing::near(image.at(x, y), rgb);
  }
  return count;
}

// DDP's buckets read from an NCCL trace's records (Note [DDP's buckets from PyTorch's records]):
// the step-through names each one's all-reduce with its place and size, and the Buckets tab (the
// right panel's first) fills a bucket as its all-reduce ends: none at the iteration's first
// step, the first two (7.8 and 30.0 MiB, most of the panel's width) once the second has ended.
TEST(ViewerProfilerFiles, DdpsBucketsFromAnNcclTraceAreNarratedAndDrawn) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string before = dir.file("before.png"), after = dir.file("after.png");
  const std::string open = "TMPDIR=" + dir.path().string() + " " + viewer() + " " + shipped("nccl_data.json.gz") +
                           " --size 1280x800 --iteration 1 --step ";
  const auto first = run_command(open + "0 --screenshot " + before);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto second = run_command(open + "7 --screenshot " + after);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const nlohmann::json json = screenshot_json(second.output);
  ASSERT_FALSE(json.is_discarded()) << second.output;
  EXPECT_NE(json["narration"].get<std::string>().find(
                "bucket 1 (2nd of 5): 30.0 MiB (7,875,584 floats) all-reduced (seq 10)"),
            std::string::npos)
      << json["narration"];
  EXPECT_EQ(filled_bucket_pixels(before), 0);
  EXPECT_GT(filled_bucket_pixels(after), 4000) << "two buckets' bars, 12 px high";
}

TEST(ViewerProfilerFiles, DpscopeViewPassesProfilerFilesToTheViewer) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string png = dir.file("nccl.png");
  const auto result = run_command(std::string(DPSCOPE_BIN_DIR) + "/dpscope view " + shipped("nccl_data.json.gz") +
                                  " --screenshot=" + png + " --frames=2");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_FALSE(screenshot_json(result.output).is_discarded()) << result.output;
  EXPECT_TRUE(std::filesystem::exists(png));
}

TEST(ViewerProfilerFiles, ABadProfilerFileIsOneLineAndExit1) {
  TempDir dir;
  const std::string bad = dir.file("rank-0.json");
  run_command("printf '{\"traceEvents\": [' > " + bad);
  const auto result = run_command("TMPDIR=" + dir.path().string() + " " + viewer() + " " + bad +
                                  " --screenshot " + dir.file("x.png"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_EQ(result.output.rfind("dpscope-view: " + bad + ": at byte ", 0), 0u) << result.output;
  EXPECT_EQ(imports_in(dir.path()), 0);
}

TEST(ViewerProfilerFiles, ProfilerFilesAndATraceTogetherAreRefused) {
  TempDir dir;
  const auto result = run_command(viewer() + " " + shipped("nccl_data.json.gz") + " run.sqlite");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("PyTorch profiler traces (.json, .json.gz) only"), std::string::npos)
      << result.output;
}

}  // namespace
