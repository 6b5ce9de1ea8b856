// dpscope-view in a real window driven by scripted input (window_driver.h): xdotool (scripts/setup
// installs it) moves the pointer, turns the wheel and presses keys in the window the suite's Xvfb
// display shows; the test reads the viewer's CPU time from /proc and what it drew with xwd
// (x11-apps). Without a display, xdotool or xwd these tests skip.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/viewer/window_driver.h"

namespace {

using namespace dpscope::testing;

// See Note [Quiet when idle]: left alone, the window sleeps; moved over, it draws.
TEST(ViewerInteractive, AnIdleWindowSleepsAndInputWakesIt) {
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`";
  if (!have_xdotool()) GTEST_SKIP() << "xdotool is missing: apt-get install xdotool (scripts/setup)";
  TempDir dir;
  ViewerProcess viewer(synth_trace(dir, 4, 200000));
  ASSERT_GT(viewer.pid(), 0);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";

  const double idle = cpu_over(viewer, std::chrono::milliseconds(4000));
  EXPECT_LE(idle, 0.05 * 4) << "idle, the viewer used " << idle << " s of CPU in 4 s";

  // The pointer moving over the timeline: every move is a frame (hover, tooltips).
  int moves = 0;
  const double moving = cpu_over(viewer, std::chrono::milliseconds(3000), [&] {
    const int x = 200 + (moves % 20) * 40;
    run_command("xdotool mousemove --window " + window + " " + std::to_string(x) + " 300");
    ++moves;
  });
  EXPECT_GT(moves, 10);
  EXPECT_GT(moving, idle + 0.05) << "the viewer drew nothing while the pointer moved (" << moves
                                 << " moves, " << moving << " s of CPU)";
  EXPECT_TRUE(viewer.running()) << "the viewer exited";

  // And quiet again once the input stops.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double after = cpu_over(viewer, std::chrono::milliseconds(3000));
  EXPECT_LE(after, 0.05 * 3) << "after the input, the viewer used " << after << " s in 3 s";
}

// The keys and the wheel, as a teacher uses them: step (->), play (space), find (Ctrl+F), text
// size (Ctrl +), zoom (wheel); each checked on what the window then shows.
TEST(ViewerInteractive, StepPlayFindZoomAndScaleWithTheKeysAndTheWheel) {
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`";
  if (!have_xdotool() || !have_xwd()) GTEST_SKIP() << "xdotool or xwd is missing: apt-get install xdotool x11-apps (scripts/setup)";
  TempDir dir;
  ViewerProcess viewer(synth_trace(dir, 2, 40000));
  ASSERT_GT(viewer.pid(), 0);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  take_keyboard(window);
  // Each input is followed by the picture once it has changed and settled (settled_capture).
  const auto key = [&](const std::string& keys, const std::string& file) { return press(viewer, window, keys, dir.file(file)); };
  // Pointer input given as xdotool's arguments after "mousemove --window W", the pointer then
  // moved off the timeline.
  const auto pointer = [&](const std::string& input, const std::string& file) {
    const Image before = settled_capture(viewer, window, dir.file(file));
    run_command("xdotool mousemove --window " + window + " " + input);
    run_command("xdotool mousemove --window " + window + " 5 795");
    return settled_capture(viewer, window, dir.file(file), &before);
  };
  const std::array<int, 3> narration = {255, 219, 115}, found = {255, 230, 0};
  // The playhead's green, drawn translucent and anti-aliased (so fainter where it falls between
  // two columns) over whatever lies beneath; a column of it is a line, not a green span's edge.
  const auto is_playhead = [](const unsigned char* p) { return p[1] > 90 && p[1] > p[0] + 40 && p[1] > p[2] + 20; };
  const Image start = settled_capture(viewer, window, dir.file("start.xwd"));
  ASSERT_GT(start.width, 0) << "xwd read nothing back";

  // -> : the playhead moves to the next step; the narration line (rows 24-80: the header takes
  // two lines at x1) says another thing. The view zooms to the stepped iteration (Note [Following
  // the narrated iteration]); F fits the whole run again, from where the wheel zooms in below.
  // The window opens on an iteration near the run's end; Escape frees the playhead and F puts it
  // in the middle of the run, from where the flows below stay in view.
  const Image stepped = key("Escape f Right Right f", "stepped.xwd");
  EXPECT_GT(pixels_near(stepped, 24, 80, narration), 100) << "no narration after stepping";
  EXPECT_FALSE(same_rows(stepped, start, 24, 80)) << "the narration line did not change";

  // The wheel over the playhead zooms in around it: the ruler (rows 80-120) shows other times.
  const int playhead_x = column_where(stepped, 100, 500, is_playhead);
  ASSERT_GE(playhead_x, 0) << "no playhead drawn";
  const Image zoomed = pointer(std::to_string(playhead_x) + " 300 click --repeat 20 --delay 30 4", "zoom.xwd");
  EXPECT_FALSE(same_rows(zoomed, stepped, 80, 120)) << "the ruler did not change after the wheel";

  // Where the window shows a solid fill of `colors` (the pixel and its four neighbours), scanning
  // rows [y0, y1) from the top: {-1, -1} if nowhere. Anti-aliased edges of other shapes do not count.
  const auto solid = [](const Image& image, int y0, int y1, const std::vector<std::array<int, 3>>& colors) {
    const auto is = [&](const unsigned char* p) {
      return std::any_of(colors.begin(), colors.end(), [&](const auto& c) { return dpscope::testing::near(p, c); });
    };
    for (int y = y0; y < y1; ++y) {
      for (int x = 150; x < image.width - 30; ++x) {
        if (is(image.at(x, y)) && is(image.at(x - 1, y)) && is(image.at(x + 1, y)) && is(image.at(x, y - 1)) &&
            is(image.at(x, y + 1))) {
          return std::pair{x, y};
        }
      }
    }
    return std::pair{-1, -1};
  };
  const auto click_at = [&](std::pair<int, int> at, const std::string& file) {
    return pointer(std::to_string(at.first) + " " + std::to_string(at.second) + " click 1", file);
  };

  // Click a gradient hook: it is selected (outlined in white) and its flows are drawn, the first
  // to its bucket's "ready" later on. Stepping put the playhead on a hook ("...'s gradient is
  // ready"); zoomed far in around it, that hook is wide enough to be drawn in its own colour
  // (narrower spans fold into grey blocks). A pixel off at one zoom is a hundred at the next, so
  // the zoom goes a few notches at a time, each about where the playhead is drawn now.
  Image zooming = zoomed;
  for (int round = 0; round < 6; ++round) {
    const int x = column_where(zooming, 100, 500, is_playhead);
    ASSERT_GE(x, 0) << "the playhead left the view while zooming in on it (round " << round << ")";
    zooming = pointer(std::to_string(x) + " 300 click --repeat 8 --delay 30 4", "zoom-in.xwd");
  }
  // Stepping selected the step's span: Escape selects nothing, so whatever the click adds is its
  // doing. The picture may not change (press would wait for a change); the viewer has taken the
  // key once it is asleep again (drawn_and_asleep).
  EXPECT_EQ(run_command("xdotool key Escape").exit_code, 0);
  const Image before_hook = settled_capture(viewer, window, dir.file("hook0.xwd"));
  const auto hook = solid(before_hook, 100, 500, {{230, 200, 60}, {200, 170, 30}});
  ASSERT_GE(hook.first, 0) << "no hook drawn to click";
  const Image hook_clicked = click_at(hook, "hook1.xwd");
  // The selection's outline is opaque white; a flow is white at 200/255 over the lanes.
  int box_x0 = hook_clicked.width, box_x1 = -1, box_y0 = hook_clicked.height, box_y1 = -1;
  for (int y = 100; y < 500; ++y) {
    for (int x = 0; x < hook_clicked.width; ++x) {
      const unsigned char* p = hook_clicked.at(x, y);
      if (p[0] >= 250 && p[1] >= 250 && p[2] >= 250 && !std::equal(p, p + 3, before_hook.at(x, y))) {
        box_x0 = std::min(box_x0, x), box_x1 = std::max(box_x1, x), box_y0 = std::min(box_y0, y), box_y1 = std::max(box_y1, y);
      }
    }
  }
  ASSERT_GE(box_x1, box_x0) << "the clicked hook at (" << hook.first << ", " << hook.second << ") is not outlined";
  int flow_pixels = 0;
  for (int y = 100; y < 500; ++y) {
    for (int x = 0; x < hook_clicked.width; ++x) {
      const unsigned char* p = hook_clicked.at(x, y);
      const bool outside = x < box_x0 - 3 || x > box_x1 + 3 || y < box_y0 - 3 || y > box_y1 + 3;
      const bool flow_white = p[0] > 170 && p[0] < 245 && std::abs(p[0] - p[1]) < 25 && std::abs(p[1] - p[2]) < 25;
      flow_pixels += outside && flow_white && !std::equal(p, p + 3, before_hook.at(x, y));
    }
  }
  EXPECT_GT(flow_pixels, 20) << "no flow drawn from the clicked hook at (" << hook.first << ", " << hook.second << ")";

  // Click an all-reduce (rank 0's comm lane lies above any memory graph's red): its flow to the
  // other rank's part of the same collective is drawn in the skew colour (orange), with the skew.
  key("Escape", "deselected.xwd");
  const Image before_allreduce = pointer("700 300 click --repeat 48 --delay 30 5", "allreduce0.xwd");
  const auto allreduce = solid(before_allreduce, 100, 500, {{219, 68, 55}});
  ASSERT_GE(allreduce.first, 0) << "no all-reduce drawn to click";
  const Image allreduce_clicked = click_at(allreduce, "allreduce1.xwd");
  const auto is_skew = [](const unsigned char* p) { return p[0] > 200 && p[1] > 100 && p[1] < 160 && p[2] < 60; };
  int skew_pixels = 0;
  for (int y = 100; y < 500; ++y) {
    for (int x = 0; x < allreduce_clicked.width; ++x) {
      skew_pixels += is_skew(allreduce_clicked.at(x, y)) && !is_skew(before_allreduce.at(x, y));
    }
  }
  EXPECT_GT(skew_pixels, 30) << "no flow to the other rank after clicking the all-reduce at (" << allreduce.first
                             << ", " << allreduce.second << ")";
  key("Escape", "deselected.xwd");

  // space: playing moves the playhead from frame to frame (it is watched for up to 10 s, as long
  // as a busy machine may take to draw a few frames); space again pauses.
  EXPECT_EQ(run_command("xdotool key space").exit_code, 0);
  const int x0 = column_where(capture(window, dir.file("play0.xwd")), 100, 500, is_playhead);
  int x1 = x0;
  for (int attempt = 0; attempt < 100 && x1 <= x0; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    x1 = column_where(capture(window, dir.file("play1.xwd")), 100, 500, is_playhead);
  }
  EXPECT_EQ(run_command("xdotool key space").exit_code, 0);
  EXPECT_GE(x0, 0);
  EXPECT_GT(x1, x0) << "the playhead did not move while playing";

  // Ctrl+F, a query, Return: the matches in view are outlined in the find colour.
  const int found_before = pixels_near(settled_capture(viewer, window, dir.file("find0.xwd")), 50, 520, found);
  key("ctrl+f", "find-box.xwd");
  ASSERT_EQ(run_command("xdotool type --delay 40 allreduce").exit_code, 0);
  const int found_after = pixels_near(key("Return", "find1.xwd"), 50, 520, found);
  EXPECT_GT(found_after, found_before + 50) << "no matches outlined after typing in the find box";
  // Escape leaves the find box; the matches stay outlined, so the picture may not change.
  EXPECT_EQ(run_command("xdotool key Escape").exit_code, 0);
  const Image before_pan = settled_capture(viewer, window, dir.file("pan0.xwd"));

  // D held pans: the ruler shows other times.
  ASSERT_EQ(run_command("xdotool keydown d sleep 0.5 keyup d").exit_code, 0);
  EXPECT_FALSE(same_rows(settled_capture(viewer, window, dir.file("pan1.xwd"), &before_pan), before_pan, 80, 120))
      << "D did not pan";

  // Ctrl + four times: x2 text, the narration line's glyphs about twice as tall (a step first, so
  // that there is a narration). Beside two busy loops and the suite, one capture a fixed time
  // after the keys once showed 19 rows where 20 were due: the settled picture is read instead.
  const int rows_small = rows_with(key("Right", "small.xwd"), 0, 120, narration);
  ASSERT_GT(rows_small, 5) << "no narration after stepping";
  const int rows_large = rows_with(key("ctrl+equal ctrl+equal ctrl+equal ctrl+equal", "large.xwd"), 0, 240, narration);
  EXPECT_GE(rows_large, rows_small * 17 / 10) << rows_small << " rows of narration, then " << rows_large;
  EXPECT_TRUE(viewer.running()) << "the viewer exited";
}

}  // namespace

namespace {

// At x3 in the 1280x800 window the full header would take three lines and more: it folds into a
// Menu button (view_header.cpp). Ctrl+F opens the menu under it (rows 90-300) at its find box; a
// query typed there finds, and Escape closes the menu, whose line (rows 20-90) then says how many
// it found.
TEST(ViewerInteractive, TheFoldedHeadersMenuFinds) {
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`";
  if (!have_xdotool() || !have_xwd()) GTEST_SKIP() << "xdotool or xwd is missing: apt-get install xdotool x11-apps (scripts/setup)";
  TempDir dir;
  ViewerProcess viewer(synth_trace(dir, 2, 20000), {"--font-scale", "3"});
  ASSERT_GT(viewer.pid(), 0);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  take_keyboard(window);
  const Image start = settled_capture(viewer, window, dir.file("start.xwd"));
  ASSERT_GT(start.width, 0) << "xwd read nothing back";
  const Image menu = press(viewer, window, "ctrl+f", dir.file("menu.xwd"));
  EXPECT_FALSE(same_rows(menu, start, 90, 300)) << "Ctrl+F did not open the folded header's menu under its button";
  ASSERT_EQ(run_command("xdotool type --delay 40 allreduce").exit_code, 0);
  const Image typed = press(viewer, window, "Return", dir.file("typed.xwd"));
  const Image closed = press(viewer, window, "Escape", dir.file("closed.xwd"));
  EXPECT_FALSE(same_rows(closed, typed, 90, 300)) << "Escape did not close the menu";
  EXPECT_FALSE(same_rows(closed, start, 20, 90)) << "the Menu line does not say what the query found";
}

// Compare mode is two runs: Tab gives the focus to the other run, and the narration line (rows
// 24-80: "run A (Tab: run B) | ... rank 0, iteration ...") tells the focused run's step; a second
// Tab gives the first run's line back, pixel for pixel.
TEST(ViewerInteractive, TabMovesTheFocusToTheOtherRun) {
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`";
  if (!have_xdotool() || !have_xwd()) GTEST_SKIP() << "xdotool or xwd is missing: apt-get install xdotool x11-apps (scripts/setup)";
  TempDir dir;
  const std::string a = synth_trace(dir, 2, 10000, "a.sqlite", 1);
  const std::string b = synth_trace(dir, 4, 10000, "b.sqlite", 2);
  ViewerProcess viewer(a, {"--compare", b});
  ASSERT_GT(viewer.pid(), 0);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  take_keyboard(window);
  const Image on_a = press(viewer, window, "Right Right", dir.file("a.xwd"));
  ASSERT_GT(on_a.width, 0) << "xwd read nothing back";
  const Image on_b = press(viewer, window, "Tab", dir.file("b.xwd"));
  EXPECT_FALSE(same_rows(on_b, on_a, 24, 80)) << "Tab did not move the focus: the narration line is the same";
  const Image back = press(viewer, window, "Tab", dir.file("back.xwd"));
  EXPECT_TRUE(same_rows(back, on_a, 24, 80)) << "a second Tab did not give run A's line back";
}

// C switches every open run between the measured clock and the cluster clock together; the
// header (rows 0-20) names the clock shown. A ten times faster link than the runs' makes the
// cluster clock's collectives visibly shorter, so the compared run's lanes (rows 340-510) change
// too; a second C brings back the first picture.
TEST(ViewerInteractive, CSwitchesTheClockOfBothRuns) {
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`";
  if (!have_xdotool() || !have_xwd()) GTEST_SKIP() << "xdotool or xwd is missing: apt-get install xdotool x11-apps (scripts/setup)";
  TempDir dir;
  const std::string a = synth_trace(dir, 2, 10000, "a.sqlite", 1);
  const std::string b = synth_trace(dir, 2, 10000, "b.sqlite", 2);
  ViewerProcess viewer(a, {"--compare", b, "--link-gbps", "40", "--link-latency-us", "5"});
  ASSERT_GT(viewer.pid(), 0);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  take_keyboard(window);
  const Image measured = settled_capture(viewer, window, dir.file("measured.xwd"));
  ASSERT_GT(measured.width, 0) << "xwd read nothing back";
  // The replay runs in the background; the switch comes in the frame after it is done, which
  // may come after the window has drawn and settled on the key's first effect.
  Image cluster = press(viewer, window, "c", dir.file("cluster.xwd"));
  for (int attempt = 0; attempt < 10 && same_rows(cluster, measured, 340, 510); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    cluster = capture(window, dir.file("cluster.xwd"));
  }
  EXPECT_FALSE(same_rows(cluster, measured, 0, 20)) << "the header still names the measured clock";
  EXPECT_FALSE(same_rows(cluster, measured, 340, 510)) << "the compared run did not switch";
  // The first picture again, once the window has drawn it.
  Image back = press(viewer, window, "c", dir.file("back.xwd"));
  for (int attempt = 0; attempt < 6 && !(same_rows(back, measured, 0, 20) && same_rows(back, measured, 340, 510));
       ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    back = capture(window, dir.file("back.xwd"));
  }
  EXPECT_TRUE(same_rows(back, measured, 0, 20)) << "a second C did not return to the measured clock";
  EXPECT_TRUE(same_rows(back, measured, 340, 510)) << "the compared run did not return";
}

// A run the cluster clock cannot replay (no link recorded): C stays on the measured clock and a
// line under the header says why, in the error colour.
TEST(ViewerInteractive, CSaysWhyARunCannotBeReplayed) {
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`";
  if (!have_xdotool() || !have_xwd()) GTEST_SKIP() << "xdotool or xwd is missing: apt-get install xdotool x11-apps (scripts/setup)";
  TempDir dir;
  const std::string trace = synth_trace(dir, 2, 5000);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(trace.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, "DELETE FROM meta WHERE key IN ('link_gbps', 'link_latency_us')", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  ViewerProcess viewer(trace);
  ASSERT_GT(viewer.pid(), 0);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  take_keyboard(window);
  const std::array<int, 3> error = {255, 115, 89};
  const Image before = settled_capture(viewer, window, dir.file("before.xwd"));
  ASSERT_GT(before.width, 0) << "xwd read nothing back";
  EXPECT_EQ(pixels_near(before, 0, 60, error), 0);
  const Image after = press(viewer, window, "c", dir.file("after.xwd"));
  EXPECT_GT(pixels_near(after, 15, 45, error), 50) << "no error line under the header";
  EXPECT_TRUE(same_rows(after, before, 0, 15)) << "the header changed: it should still say measured";
}

}  // namespace
