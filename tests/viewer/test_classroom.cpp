// dpscope-view used as a teacher uses it, in a real window under the suite's Xvfb display
// (window_driver.h): step from the whole run, step two compared runs, switch the clock, text at
// x2 in compare mode. Each check reads the window's own JSON line (F9, docs/viewer.md) for what
// the ruler shows and which iteration is narrated, and the traces' iterations from the file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "tests/viewer/window_driver.h"
#include "viewer/model.h"

namespace {

using namespace dpscope::testing;
using nlohmann::json;

// Iteration `iteration` of rank 0 of `trace`, in ms from the run's start on the measured clock.
struct IterationMs {
  double begin = 0, end = 0;
};
IterationMs iteration_ms(const dpscope::view::Model& model, int iteration) {
  const dpscope::view::IterationSpan* span = model.ranks.at(0).find_iteration(iteration);
  if (!span) return {};
  return {double(span->begin_ns - model.t_begin) / 1e6, double(span->end_ns - model.t_begin) / 1e6};
}

// Presses `names` (xdotool's key names), each held long enough for a frame to see it down: Dear
// ImGui 1.86 takes a press and its release that arrive between two frames as no press at all.
void keys(const std::string& names) { run_command("xdotool key --delay 80 " + names); }

// The checks of this file need a display, xdotool and xwd; the reason when one is missing.
std::string missing_tool() {
  if (!std::getenv("DISPLAY")) return "no display: run under `xvfb-run -a ctest`";
  if (!have_xdotool() || !have_xwd()) return "xdotool or xwd is missing: apt-get install xdotool x11-apps (scripts/setup)";
  return "";
}

// The window opens on one steady iteration with the playhead on its first step; F fits the
// whole run; -> from there zooms to the iteration it narrates; I fits it again after a zoom out.
TEST(ViewerClassroom, SteppingBringsTheNarratedIterationIntoView) {
  if (const std::string missing = missing_tool(); !missing.empty()) GTEST_SKIP() << missing;
  TempDir dir;
  const std::string trace = synth_trace(dir, 2, 20000);
  const auto model = dpscope::view::load_model(trace);
  ASSERT_GE(model->iterations, 5);
  const std::string out = dir.file("stdout.txt");
  ViewerProcess viewer(trace, {}, out);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  take_keyboard(window);
  const auto covers = [&](const json& view, int iteration) {
    const IterationMs it = iteration_ms(*model, iteration);
    return view["begin_ms"].get<double>() <= it.begin && view["end_ms"].get<double>() >= it.end;
  };
  const auto width = [](const json& view) { return view["end_ms"].get<double>() - view["begin_ms"].get<double>(); };

  const json opened = f9_report(viewer, window, out);
  ASSERT_FALSE(opened.is_discarded()) << "F9 wrote no JSON line:\n" << read_text(out);
  const json& first = opened["view"][0];
  ASSERT_TRUE(first["iteration"].is_number()) << opened["view"].dump();
  const int typical = first["iteration"];
  EXPECT_GE(typical, 2) << "the window opened on a warm-up iteration";
  EXPECT_TRUE(covers(first, typical)) << first.dump();
  const IterationMs it = iteration_ms(*model, typical);
  EXPECT_LT(width(first), 1.5 * (it.end - it.begin)) << "the window opened wider than its iteration: " << first.dump();
  EXPECT_NE(opened["narration"].get<std::string>().find("iteration " + std::to_string(typical)), std::string::npos)
      << opened["narration"];

  keys("f");
  const json whole = f9_report(viewer, window, out);
  EXPECT_GE(width(whole["view"][0]), whole["run_ms"][0].get<double>()) << "F did not fit the whole run";

  keys("Right");
  const json stepped = f9_report(viewer, window, out);
  const json& view = stepped["view"][0];
  ASSERT_TRUE(view["iteration"].is_number()) << stepped["view"].dump();
  const int narrated = view["iteration"];
  const IterationMs at = iteration_ms(*model, narrated);
  EXPECT_TRUE(covers(view, narrated)) << "the view " << view.dump() << " does not show iteration " << narrated;
  EXPECT_LT(width(view), 1.5 * (at.end - at.begin)) << "-> from the whole run did not zoom to the iteration";
  EXPECT_NE(stepped["narration"].get<std::string>().find("iteration " + std::to_string(narrated)), std::string::npos)
      << stepped["narration"];

  // Zoomed out to a few iterations, I fits the narrated one again.
  run_command("xdotool keydown s sleep 0.6 keyup s");
  const json out_zoomed = f9_report(viewer, window, out);
  EXPECT_GT(width(out_zoomed["view"][0]), 1.5 * (at.end - at.begin)) << "S did not zoom out";
  keys("i");
  const json fitted = f9_report(viewer, window, out);
  EXPECT_EQ(fitted["view"][0]["iteration"], narrated);
  EXPECT_TRUE(covers(fitted["view"][0], narrated)) << fitted["view"].dump();
  EXPECT_LT(width(fitted["view"][0]), 1.5 * (at.end - at.begin)) << "I did not fit the iteration";
  EXPECT_TRUE(viewer.running()) << "the viewer exited";
}

// Compare: stepping run A keeps run B at the same iteration, aligned at its start; Tab steps B
// with A following, the right panel on B's Units or Buckets.
TEST(ViewerClassroom, CompareFollowsTheSteppedIteration) {
  if (const std::string missing = missing_tool(); !missing.empty()) GTEST_SKIP() << missing;
  TempDir dir;
  const std::string a = synth_trace(dir, 2, 20000, "a.sqlite", 1);
  // As many iterations as A (a synthetic rank's events make its iterations), on twice the ranks.
  const std::string b = synth_trace(dir, 4, 40000, "b.sqlite", 2);
  const auto model_a = dpscope::view::load_model(a);
  const auto model_b = dpscope::view::load_model(b);
  const std::string out = dir.file("stdout.txt");
  ViewerProcess viewer(a, {"--compare", b}, out);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  take_keyboard(window);
  // Both runs at the same iteration, each view's start the same distance before that iteration's.
  const auto check_aligned = [&](const json& report, const char* when) {
    SCOPED_TRACE(when);
    ASSERT_FALSE(report.is_discarded()) << "F9 wrote no JSON line:\n" << read_text(out);
    const json& va = report["view"][0];
    const json& vb = report["view"][1];
    ASSERT_TRUE(va["iteration"].is_number() && vb["iteration"].is_number()) << report["view"].dump();
    EXPECT_EQ(va["iteration"], vb["iteration"]) << report["view"].dump();
    const int iteration = va["iteration"];
    const double lead_a = iteration_ms(*model_a, iteration).begin - va["begin_ms"].get<double>();
    const double lead_b = iteration_ms(*model_b, iteration).begin - vb["begin_ms"].get<double>();
    EXPECT_NEAR(lead_a, lead_b, 0.01) << "the runs are not aligned at iteration " << iteration << "'s start";
  };
  check_aligned(f9_report(viewer, window, out), "opened");
  const int opened_on = f9_report(viewer, window, out)["view"][0]["iteration"];
  // The whole run (F), the playhead put in its middle by a click on run A's ruler, then a step:
  // another iteration, B following.
  keys("f");
  run_command("xdotool mousemove --window " + window + " 640 100 click 1 mousemove --window " + window + " 5 795");
  keys("Right");
  const json on_a = f9_report(viewer, window, out);
  check_aligned(on_a, "after stepping A");
  EXPECT_NE(on_a["view"][0]["iteration"], opened_on) << "the click and the step did not leave the first iteration";

  keys("Tab");
  const json tabbed = f9_report(viewer, window, out);
  check_aligned(tabbed, "after Tab");
  EXPECT_EQ(tabbed["view"][1]["iteration"], on_a["view"][0]["iteration"]) << "Tab left A's iteration";
  keys("Left Left Left");
  const json on_b = f9_report(viewer, window, out);
  check_aligned(on_b, "after stepping B");
  EXPECT_EQ(on_b["right_tab"], "Buckets");
  EXPECT_TRUE(viewer.running()) << "the viewer exited";
}

// The demo's two runs (tests/cli/data): Tab from DDP to FSDP turns the right panel to Units, keeps
// the iteration, and Tab back gives Buckets again.
TEST(ViewerClassroom, TheRightPanelFollowsTheSteppedRun) {
  if (const std::string missing = missing_tool(); !missing.empty()) GTEST_SKIP() << missing;
  TempDir dir;
  const std::string data = std::string(DPSCOPE_SOURCE_DIR) + "/tests/cli/data/";
  const std::string ddp = dir.file("ddp.sqlite"), fsdp = dir.file("fsdp.sqlite");
  ASSERT_EQ(run_command("gzip -dc " + data + "demo-ddp.sqlite.gz > " + ddp).exit_code, 0);
  ASSERT_EQ(run_command("gzip -dc " + data + "demo-fsdp.sqlite.gz > " + fsdp).exit_code, 0);
  const std::string out = dir.file("stdout.txt");
  ViewerProcess viewer(ddp, {"--compare", fsdp}, out);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  take_keyboard(window);
  keys("Right Right");
  const json on_ddp = f9_report(viewer, window, out);
  ASSERT_FALSE(on_ddp.is_discarded()) << "F9 wrote no JSON line:\n" << read_text(out);
  EXPECT_EQ(on_ddp["right_tab"], "Buckets");
  keys("Tab");
  const json on_fsdp = f9_report(viewer, window, out);
  EXPECT_EQ(on_fsdp["right_tab"], "Units") << "the right panel did not follow Tab to the FSDP run";
  EXPECT_EQ(on_fsdp["view"][1]["iteration"], on_ddp["view"][0]["iteration"]) << on_fsdp["view"].dump();
  EXPECT_NE(on_fsdp["narration"], on_ddp["narration"]) << "the narration did not turn to the FSDP run";
  keys("Tab");
  EXPECT_EQ(f9_report(viewer, window, out)["right_tab"], "Buckets");
}

// C keeps the iteration and the moment in view on the other clock, and a second C gives the
// first view back.
TEST(ViewerClassroom, CKeepsTheIterationInView) {
  if (const std::string missing = missing_tool(); !missing.empty()) GTEST_SKIP() << missing;
  TempDir dir;
  const std::string trace = synth_trace(dir, 2, 20000);
  const std::string out = dir.file("stdout.txt");
  ViewerProcess viewer(trace, {"--link-gbps", "40", "--link-latency-us", "5"}, out);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  take_keyboard(window);
  keys("Right Right Right");
  const json measured = f9_report(viewer, window, out);
  ASSERT_FALSE(measured.is_discarded()) << "F9 wrote no JSON line:\n" << read_text(out);
  ASSERT_TRUE(measured["view"][0]["iteration"].is_number()) << measured["view"].dump();
  const int iteration = measured["view"][0]["iteration"];
  const std::string narration = measured["narration"];

  // The replay runs in the background: the switch comes in a later frame.
  keys("c");
  json cluster = f9_report(viewer, window, out);
  for (int attempt = 0; attempt < 20 && cluster["clock"] != "cluster"; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    cluster = f9_report(viewer, window, out);
  }
  ASSERT_EQ(cluster["clock"], "cluster") << cluster["clock_label"];
  const json& view = cluster["view"][0];
  EXPECT_EQ(view["iteration"], iteration) << "C moved to another iteration: " << cluster["view"].dump();
  EXPECT_EQ(cluster["narration"], narration) << "C moved the playhead off its step";
  EXPECT_LT(view["end_ms"].get<double>() - view["begin_ms"].get<double>(), cluster["run_ms"][0].get<double>() / 3)
      << "C zoomed out: " << view.dump();

  keys("c");
  json back = f9_report(viewer, window, out);
  for (int attempt = 0; attempt < 20 && back["clock"] != "measured"; ++attempt) back = f9_report(viewer, window, out);
  EXPECT_EQ(back["view"][0]["iteration"], iteration);
  EXPECT_NEAR(back["view"][0]["begin_ms"].get<double>(), measured["view"][0]["begin_ms"].get<double>(), 0.01);
  EXPECT_NEAR(back["view"][0]["end_ms"].get<double>(), measured["view"][0]["end_ms"].get<double>(), 0.01);
  EXPECT_EQ(back["narration"], narration);
}

// x2 in 1600x1000 and x1.5 in 1280x800, two compared runs of four ranks: rank 0's lanes and
// memory graph in each run's panel at the text size asked for, or x1.5 where x2 leaves no room
// for them, the other ranks folded; nothing cut.
TEST(ViewerClassroom, CompareAtX2KeepsTheLanesTextAtX2) {
  if (const std::string missing = missing_tool(); !missing.empty()) GTEST_SKIP() << missing;
  TempDir dir;
  const std::string a = synth_trace(dir, 4, 20000, "a.sqlite", 1);
  const std::string b = synth_trace(dir, 4, 20000, "b.sqlite", 2);
  for (const auto& [scale, size] : {std::pair{"2", "1600x1000"}, std::pair{"1.5", "1280x800"}}) {
    SCOPED_TRACE(std::string("x") + scale + " in " + size);
    const std::string out = dir.file(std::string("stdout-") + scale + ".txt");
    ViewerProcess viewer(a, {"--compare", b, "--font-scale", scale, "--size", size, "--theme", "projector"}, out);
    const std::string window = settled_window(viewer);
    ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
    take_keyboard(window);
    keys("Right");
    const json report = f9_report(viewer, window, out);
    ASSERT_FALSE(report.is_discarded()) << "F9 wrote no JSON line:\n" << read_text(out);
    const json& layout = report["layout"];
    // x2 where rank 0 fits at x2, else x1.5; x1.5 where asked for.
    EXPECT_GE(layout["timeline_font_scale"].get<double>(), 1.5) << layout.dump();
    EXPECT_GE(layout["ranks_visible"].get<int>(), 1) << layout.dump();
    EXPECT_EQ(layout["clipped_labels"], 0) << layout.dump();
    EXPECT_EQ(layout["clipped_headers"], 0) << layout.dump();
    EXPECT_TRUE(layout["controls_visible"].get<bool>()) << layout.dump();
    // Keep the picture for a person to look at (DPSCOPE_KEEP_SCREENSHOTS=dir).
    if (const char* keep = std::getenv("DPSCOPE_KEEP_SCREENSHOTS")) {
      capture(window, std::string(keep) + "/compare-x" + scale + ".xwd");
    }
  }
}

}  // namespace
