// The critical path over the timeline (K; viewer/view_critical_path.cpp, docs/critical-path.md):
// headless, the path the window draws is the one `dpscope stats --critical-path` gives (length
// and keys), on the cluster clock for a dpscope run and the measured one for an imported trace,
// and its colour is on screen only when shown; in a real window K shows and hides it.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/test_util.h"
#include "tests/viewer/image_checks.h"
#include "tests/viewer/png_image.h"
#include "tests/viewer/screenshot_json.h"
#include "tests/viewer/window_driver.h"
#include "viewer/palette.h"

namespace {

using namespace dpscope::testing;
using nlohmann::json;

std::string viewer() { return std::string(DPSCOPE_BIN_DIR) + "/dpscope-view"; }
std::string dpscope() { return std::string(DPSCOPE_BIN_DIR) + "/dpscope"; }

// Pixels of the path's colour in the lanes of `png` (below the header and narration lines).
int path_pixels(const std::string& png) {
  const Image image = load_png(png);
  if (image.width == 0) return -1;
  const ImU32 c = dpscope::view::theme().critical_path;  // the dark theme's, the screenshots'
  return pixels_near(image, 60, image.height / 2 + 100, {int(c & 0xff), int((c >> 8) & 0xff), int((c >> 16) & 0xff)});
}

// `dpscope stats --critical-path --iteration N --json`'s critical_path.
json stats_path(const std::string& trace, int iteration) {
  const CommandResult r = run_command(dpscope() + " stats --critical-path --iteration " + std::to_string(iteration) +
                                      " --json " + trace + " 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output, nullptr, false);
  return j.is_discarded() ? j : j["critical_path"];
}

// The window's path equals the report's: its length and each key's time.
void expect_same_path(const json& drawn, const json& reported) {
  ASSERT_TRUE(drawn.is_object()) << drawn;
  ASSERT_TRUE(drawn.contains("length_ms")) << drawn;
  EXPECT_NEAR(drawn["length_ms"].get<double>(), reported["length_ms"].get<double>(), 1e-5);
  for (const auto& [key, ms] : reported["bound_by_ms"].items()) {
    EXPECT_NEAR(drawn["bound_by_ms"][key].get<double>(), ms.get<double>(), 1e-5) << key;
  }
  EXPECT_GT(drawn["segments"].get<int>(), 0);
  EXPECT_GT(drawn["segments_drawn"].get<int>(), 0);
}

#define REQUIRE_DISPLAY() \
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`"

TEST(ViewerCriticalPath, ADpscopeRunsPathIsDrawnOnTheClusterClockAsStatsGivesIt) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth_trace(dir, 2, 3000);
  const std::string with = dir.file("with.png"), without = dir.file("without.png");
  const std::string open = viewer() + " " + trace + " --clock cluster --size 1280x800 --iteration 2 --screenshot ";
  const CommandResult shown = run_command(open + with + " --critical-path");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  const json drawn = screenshot_json(shown.output)["critical_path"];
  expect_same_path(drawn, stats_path(trace, 2));
  EXPECT_EQ(drawn["clock"], "cluster");
  EXPECT_EQ(drawn["region"], "iteration 2");
  const CommandResult hidden = run_command(open + without);
  ASSERT_EQ(hidden.exit_code, 0) << hidden.output;
  EXPECT_TRUE(screenshot_json(hidden.output)["critical_path"].is_null());
  EXPECT_GT(path_pixels(with), 500) << "the path's band and line";
  EXPECT_EQ(path_pixels(without), 0);
}

// On the measured clock a dpscope run has no path of its own: the line says to press C.
TEST(ViewerCriticalPath, OnTheMeasuredClockADpscopeRunSaysToPressC) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth_trace(dir, 2, 3000);
  const CommandResult r = run_command(viewer() + " " + trace + " --iteration 2 --critical-path --screenshot " +
                                      dir.file("m.png"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json drawn = screenshot_json(r.output)["critical_path"];
  ASSERT_TRUE(drawn.contains("why_none")) << drawn;
  EXPECT_NE(drawn["why_none"].get<std::string>().find("press C"), std::string::npos) << drawn;
}

// An imported GPU trace's path is HTA's graph on its measured clock (nccl_data: all CPU-bound).
TEST(ViewerCriticalPath, AnImportedTracesPathIsHtasAsStatsGivesIt) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string run = dir.file("nccl.sqlite");
  ASSERT_EQ(run_command(dpscope() + " import " + std::string(DPSCOPE_SOURCE_DIR) +
                        "/tests/data/kineto/nccl_data.json.gz -o " + run + " 2>/dev/null").exit_code, 0);
  const CommandResult r = run_command(viewer() + " " + run + " --size 1280x800 --iteration 1 --critical-path --screenshot " +
                                      dir.file("n.png"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json drawn = screenshot_json(r.output)["critical_path"];
  expect_same_path(drawn, stats_path(run, 1));
  EXPECT_EQ(drawn["clock"], "measured");
  EXPECT_GT(path_pixels(dir.file("n.png")), 500);
}

// In a real window K shows the path (the window's F9 line then has it) and K again hides it.
TEST(ViewerCriticalPath, KShowsAndHidesThePathInARealWindow) {
  REQUIRE_DISPLAY();
  if (!have_xdotool() || !have_xwd()) GTEST_SKIP() << "xdotool or xwd is missing: apt-get install xdotool x11-apps (scripts/setup)";
  TempDir dir;
  const std::string trace = synth_trace(dir, 2, 3000);
  const std::string out = dir.file("stdout.txt");
  ViewerProcess viewer_process(trace, {"--clock", "cluster"}, out);
  const std::string window = settled_window(viewer_process);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  take_keyboard(window);
  const json before = f9_report(viewer_process, window, out);
  ASSERT_FALSE(before.is_discarded()) << read_text(out);
  EXPECT_TRUE(before["critical_path"].is_null());
  run_command("xdotool key --delay 80 k");
  json shown = f9_report(viewer_process, window, out);
  for (int attempt = 0; attempt < 20 && !shown["critical_path"].contains("length_ms"); ++attempt) {
    shown = f9_report(viewer_process, window, out);  // computed on a background thread
  }
  ASSERT_TRUE(shown["critical_path"].contains("length_ms")) << shown["critical_path"];
  const int narrated = shown["view"][0]["iteration"].get<int>();
  EXPECT_EQ(shown["critical_path"]["region"], "iteration " + std::to_string(narrated)) << "the narrated iteration's";
  expect_same_path(shown["critical_path"], stats_path(trace, narrated));
  run_command("xdotool key --delay 80 k");
  const json hidden = f9_report(viewer_process, window, out);
  EXPECT_TRUE(hidden["critical_path"].is_null());
}

}  // namespace
