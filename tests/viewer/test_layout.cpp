// The presenter layout: dpscope-view headless at text sizes x1, x2 and x3 in windows of
// 1280x800 and 1600x1000, its JSON line's "layout" (measured where the frame was drawn) read
// back: the header's controls on screen, the narration within its two lines, no fixed label cut,
// and two ranks' main and comm lanes in view where the issue's presenter sizes ask for it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

#include "formats/synth.h"
#include "tests/test_util.h"
#include "tests/viewer/screenshot_json.h"

using dpscope::testing::CommandResult;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
using dpscope::testing::screenshot_json;

namespace {

std::string viewer() { return std::string(DPSCOPE_BIN_DIR) + "/dpscope-view"; }

// A 4-rank synthetic DDP run (as the demo's: main, comm and memory lanes per rank).
std::string synth_run(const TempDir& dir, const std::string& name, uint64_t seed) {
  dpscope::formats::SynthOptions options;
  options.events = 20000;
  options.ranks = 4;
  options.seed = seed;
  options.out = dir.file(name);
  dpscope::formats::synthesize(options);
  return options.out;
}

// The layout report of one headless frame of `args` at `scale` in a window of `size`, stepped
// to a moment of backward so that the narration is a long one.
nlohmann::json layout_of(const TempDir& dir, const std::string& args, const std::string& size, double scale) {
  const std::string png = dir.file("layout.png");
  const CommandResult shown = run_command(viewer() + " " + args + " --size " + size + " --font-scale " +
                                          std::to_string(scale) + " --iteration 10 --step 6 --screenshot " + png);
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  const nlohmann::json j = screenshot_json(shown.output);
  EXPECT_TRUE(j.is_object() && j.contains("layout")) << shown.output;
  return j.is_object() && j.contains("layout") ? j["layout"] : nlohmann::json::object();
}

#define REQUIRE_DISPLAY() \
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`"

TEST(ViewerLayout, EverySizeKeepsTheControlsTheNarrationAndTheLabels) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string run = synth_run(dir, "a.sqlite", 1);
  for (const std::string size : {"1280x800", "1600x1000"}) {
    for (const double scale : {1.0, 1.5, 2.0, 2.5, 3.0}) {
      SCOPED_TRACE(size + " at x" + std::to_string(scale));
      const nlohmann::json layout = layout_of(dir, run, size, scale);
      EXPECT_EQ(layout["controls_visible"], true) << layout.dump();
      EXPECT_EQ(layout["narration_clipped"], false) << layout.dump();
      EXPECT_EQ(layout["clipped_labels"], 0) << layout.dump();
      // Whole ranks (main and comm lanes) in view, as measured (docs/viewer.md, "A projector"):
      // 3 and 4 at x1, 2 from x1.5 to x3 at both sizes, where the lanes' text steps down as far as
      // x1.5 to keep two (Note [The timeline's text size]) and the header folds into a Menu.
      const int ranks = layout["ranks_visible"].get<int>();
      const int expected = scale == 1 ? 3 : 2;
      EXPECT_GE(ranks, expected) << layout.dump();
    }
  }
}

// The presenter's check: x2 at 1600x1000 reads true, false, at least 2 and 0; two compared runs
// keep the controls, the narration and the labels whole too, and with the other ranks folded
// (a line each, their step, exposed communication and peak) each panel shows rank 0's lanes whole
// at x2 and x3: the lanes' text goes down to x1 there, each panel having half the height.
TEST(ViewerLayout, TwiceTheTextOnAProjectorShowsTwoRanksOfEachRun) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string a = synth_run(dir, "a.sqlite", 1), b = synth_run(dir, "b.sqlite", 2);
  nlohmann::json one = layout_of(dir, a, "1600x1000", 2);
  // Its lanes as recorded, none folded: a run of dpscope's own (Note [GPU first]).
  for (const nlohmann::json& rank : one["lanes"]) {
    EXPECT_EQ(rank["lanes"], nlohmann::json::parse(R"(["main", "gloo comm"])")) << rank.dump();
    EXPECT_TRUE(rank["folded"].empty()) << rank.dump();
  }
  EXPECT_EQ(one["lanes"].size(), 4u);
  one.erase("lanes");
  EXPECT_EQ(one, nlohmann::json::parse(R"({"controls_visible": true, "narration_clipped": false,
                                           "ranks_visible": )" + std::to_string(one["ranks_visible"].get<int>()) +
                                       R"(, "clipped_labels": 0, "clipped_headers": 0, "timeline_font_scale": 2.0})"));
  EXPECT_GE(one["ranks_visible"].get<int>(), 2) << one.dump();
  for (const double scale : {2.0, 3.0}) {
    const nlohmann::json both = layout_of(dir, a + " --compare " + b + " --fold 1,2,3", "1600x1000", scale);
    EXPECT_EQ(both["controls_visible"], true) << both.dump();
    EXPECT_EQ(both["narration_clipped"], false) << both.dump();
    EXPECT_EQ(both["clipped_labels"], 0) << both.dump();
    EXPECT_GE(both["ranks_visible"].get<int>(), 1) << both.dump();
  }
  // Unfolded, two ranks of each run do not fit at x1.5: the viewer folds ranks 1 to 3 itself and
  // keeps the lanes' text at x1.5 or more (Note [The timeline's text size]).
  const nlohmann::json unfolded = layout_of(dir, a + " --compare " + b, "1600x1000", 2);
  EXPECT_GE(unfolded["ranks_visible"].get<int>(), 1) << unfolded.dump();
  EXPECT_GE(unfolded["timeline_font_scale"].get<double>(), 1.5) << unfolded.dump();
  EXPECT_EQ(unfolded["clipped_headers"], 0) << unfolded.dump();
  const nlohmann::json projector = layout_of(dir, a + " --compare " + b, "1280x800", 1.5);
  EXPECT_EQ(projector["timeline_font_scale"].get<double>(), 1.5) << projector.dump();
  EXPECT_GE(projector["ranks_visible"].get<int>(), 1) << projector.dump();
  EXPECT_EQ(projector["clipped_headers"], 0) << projector.dump();
}

// A layout clipped on purpose: x3 in a 400x300 window cuts a rank header's words, x2 in 640x400
// leaves the Stats and Buckets tables' headers out of view, and the report counts them; at x1
// in 1280x800 nothing is cut.
TEST(ViewerLayout, TheReportCountsAClippedLayout) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string run = synth_run(dir, "a.sqlite", 1);
  const nlohmann::json cut_labels = layout_of(dir, run, "400x300", 3);
  EXPECT_GT(cut_labels["clipped_labels"].get<int>(), 0) << cut_labels.dump();
  const nlohmann::json cut_headers = layout_of(dir, run, "640x400", 2);
  EXPECT_GT(cut_headers["clipped_headers"].get<int>(), 0) << cut_headers.dump();
  const nlohmann::json whole = layout_of(dir, run, "1280x800", 1);
  EXPECT_EQ(whole["clipped_labels"], 0) << whole.dump();
  EXPECT_EQ(whole["clipped_headers"], 0) << whole.dump();
}

}  // namespace
