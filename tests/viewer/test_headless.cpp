// dpscope-view itself, in a real window (the suite runs under `xvfb-run -a ctest`; without a
// display these tests skip): headless screenshots of a DDP and an FSDP trace (PNG written, not
// blank, a lane group per rank), the JSON line, --compare, --zoom-sweep, every bad-file case,
// --live following a file that grows while it is open, and screenshots that ignore the pointer.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sqlite3.h>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "formats/synth.h"
#include "tests/test_util.h"
#include "tests/viewer/screenshot_json.h"
#include "tests/viewer/image_checks.h"
#include "tests/viewer/png_image.h"
#include "trace/merge.h"
#include "trace/reader.h"
#include "trace/recorder.h"

using namespace dpscope::trace;
using namespace dpscope::formats;
using dpscope::testing::CommandResult;
using dpscope::testing::Image;
using dpscope::testing::load_png;
using dpscope::testing::pixels_near;
using dpscope::testing::rows_with;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
using dpscope::testing::screenshot_json;

namespace {

#define REQUIRE_DISPLAY()                                                              \
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`"

std::string viewer() { return std::string(DPSCOPE_BIN_DIR) + "/dpscope-view"; }

std::string synth(const TempDir& dir, const std::string& name, int ranks, int64_t events,
                  uint64_t seed = 1) {
  SynthOptions options;
  options.events = events;
  options.ranks = ranks;
  options.out = dir.file(name);
  options.seed = seed;
  synthesize(options);
  return options.out;
}

// Distinct colours, quantised to 32 levels per channel.
size_t colours(const Image& image) {
  std::set<int> seen;
  for (size_t i = 0; i + 2 < image.rgb.size(); i += 3) {
    seen.insert((image.rgb[i] >> 3) << 10 | (image.rgb[i + 1] >> 3) << 5 | (image.rgb[i + 2] >> 3));
  }
  return seen.size();
}

// Rank group headers (IM_COL32(44, 48, 62) bands) crossing column x. Within 3 a channel: an
// iteration's boundary line, drawn faint across the lanes, may fall on the column.
int rank_headers(const Image& image, int x) {
  int bands = 0;
  bool inside = false;
  for (int y = 0; y < image.height; ++y) {
    const unsigned char* p = image.at(x, y);
    const bool header = std::abs(p[0] - 44) <= 3 && std::abs(p[1] - 48) <= 3 && std::abs(p[2] - 62) <= 3;
    if (header && !inside) ++bands;
    inside = header;
  }
  return bands;
}

CommandResult view(const std::string& args) { return run_command(viewer() + " " + args); }

// "rank 0: main, gloo comm (world); rank 1: ...": what a failed layout check drew.
std::string lane_list(const std::string& trace) {
  Reader reader(trace);
  std::ostringstream out;
  int rank = -1;
  for (const LaneInfo& lane : reader.lanes()) {
    if (lane.rank == rank) {
      out << ", ";
    } else {
      out << (rank < 0 ? "" : "; ") << "rank " << lane.rank << ": ";
      rank = lane.rank;
    }
    out << lane.name;
  }
  return out.str();
}

// The fewest frames a screenshot draws (viewer/window.h, kFramesForAFinishedLayout).
constexpr int kFewestFrames = 4;

// A screenshot of `frames` asked (or none): as many drawn, kFewestFrames at least.
void expect_screenshot(const CommandResult& result, const std::string& png, int frames) {
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto json = screenshot_json(result.output);
  EXPECT_EQ(json["frames"], std::max(frames, kFewestFrames));
  EXPECT_GT(json["open_ms"].get<double>(), 0);
  // The memory samples come after the first frame's model (Note [Memory after the first frame]),
  // and in before the timed frames.
  EXPECT_GE(json["memory_ms"].get<double>(), json["open_ms"].get<double>());
  EXPECT_GT(json["frame_ms_median"].get<double>(), 0);
  EXPECT_GE(json["frame_ms_max"].get<double>(), json["frame_ms_median"].get<double>());
  const Image image = load_png(png);
  ASSERT_GT(image.width, 0) << "no PNG at " << png;
  EXPECT_GE(colours(image), 12u);
}

// The fsdp_trace's units' parameter counts: each its own, and unit 2 a root that holds none of
// its own (its children's parameters are theirs).
constexpr std::array<int64_t, 3> kUnitNumel = {1000, 3000, 0};

// A 2-rank FSDP-like run written through the Recorder and merged: unit lanes with
// gathering / full / reducing states, all-gathers and reduce-scatters, FSDP memory categories.
std::string fsdp_trace(const TempDir& dir) {
  std::vector<std::string> files;
  for (int rank = 0; rank < 2; ++rank) {
    RecorderOptions options;
    options.path = dir.file("fsdp" + std::to_string(rank) + ".sqlite");
    options.rank = rank;
    options.flush_on_signals = false;
    Recorder r(options);
    r.set_meta("strategy", "fsdp");
    r.set_meta("world_size", "2");
    const LaneId comm = r.add_lane("nccl stream", LaneKind::Stream);
    std::vector<LaneId> unit_lanes;
    for (int u = 0; u < 3; ++u) {
      const int64_t numel = kUnitNumel[size_t(u)], shard = numel / 2;
      UnitInfo unit{u, u == 2 ? "" : "layer" + std::to_string(u), u == 2 ? kNone : 2, numel, numel, shard};
      if (rank == 0) r.add_unit(unit);
      r.add_unit_shard({u, rank, rank * shard, rank * shard + shard, shard});
      unit_lanes.push_back(r.add_lane("unit " + std::to_string(u), LaneKind::Unit));
    }
    const NameId forward = r.name("forward"), backward = r.name("backward"), iteration = r.name("iteration");
    int64_t t = 1'000'000, seq = 0;
    for (int it = 0; it < 4; ++it) {
      const int64_t it_begin = t;
      for (int phase = 0; phase < 2; ++phase) {
        const int64_t begin = t;
        for (int u = 0; u < 3; ++u) {
          Event gather;
          gather.kind = EventKind::UnitState;
          gather.lane = unit_lanes[size_t(u)];
          gather.unit = u;
          gather.op = uint8_t(phase == 0 ? UnitState::Gathering : UnitState::Reducing);
          gather.begin_ns = t;
          gather.end_ns = t + 20'000;
          gather.iteration = it;
          r.record(TraceLevel::Summary, gather);
          Event full = gather;
          full.op = uint8_t(UnitState::Full);
          full.begin_ns = t + 20'000;
          full.end_ns = t + 50'000;
          r.record(TraceLevel::Summary, full);
          Event c;
          c.kind = EventKind::Collective;
          c.lane = comm;
          c.op = uint8_t(phase == 0 ? CollectiveOp::AllGather : CollectiveOp::ReduceScatter);
          c.seq = seq++;
          c.grp = 0;
          c.unit = u;
          c.bytes = 2000;
          c.begin_ns = t + 1000 * rank;
          c.end_ns = t + 20'000;
          c.iteration = it;
          r.record(TraceLevel::Summary, c);
          r.memory(MemoryCategory::Shards, 1500, t);
          r.memory(MemoryCategory::FullParameters, 4000 * (u + 1), t + 20'000);
          t += 50'000;
        }
        r.phase(0, phase == 0 ? forward : backward, begin, t, it);
      }
      r.phase(0, iteration, it_begin, t, it);
      t += 10'000;
    }
    r.close();
    files.push_back(options.path);
  }
  const std::string out = dir.file("fsdp.sqlite");
  merge_traces(files, out);
  return out;
}

}  // namespace

TEST(ViewerHeadless, DdpScreenshotHasALaneGroupPerRankAndTheJsonLine) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 3, 20000);
  const std::string png = dir.file("ddp.png");
  const auto result = view(trace + " --screenshot " + png + " --frames 5");
  expect_screenshot(result, png, 5);
  // Exactly one line on stdout: the JSON (stderr is folded in, and is empty here).
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  EXPECT_EQ(rank_headers(load_png(png), 300), 3);
}


// Step-through in a picture: --iteration and --step put the playhead on one moment of a rank's
// iteration; the JSON line and the narration line under the header (drawn in its own colour)
// say what happens there, and the next step says something else.
TEST(ViewerHeadless, AStepOfAnIterationIsNarratedAndDrawn) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 2, 20000);
  const std::string png = dir.file("step.png");
  const auto first = view(trace + " --screenshot " + png + " --frames 3 --iteration 2 --step 0");
  expect_screenshot(first, png, 3);
  const std::string narration = screenshot_json(first.output)["narration"];
  EXPECT_EQ(narration.rfind("rank 0, iteration 2, backward: fc", 0), 0u) << narration;
  EXPECT_NE(narration.find("'s gradient is ready -> bucket 0 is "), std::string::npos) << narration;
  EXPECT_NE(narration.find(" full (1 of "), std::string::npos) << narration;
  // The narration line's colour, on the lines under the header (rows 24-80 at x1 in 1280x800: the
  // header takes two; and nowhere near as much on a screenshot without a step: the line then only
  // says how to get one, greyed).
  const std::array<int, 3> narration_colour = {255, 219, 115};
  const int drawn = pixels_near(load_png(png), 24, 80, narration_colour);
  EXPECT_GT(drawn, 100);
  const std::string plain = dir.file("plain.png");
  ASSERT_EQ(view(trace + " --screenshot " + plain + " --frames 2").exit_code, 0);
  EXPECT_LT(pixels_near(load_png(plain), 24, 80, narration_colour), drawn / 4);

  const auto second = view(trace + " --screenshot " + png + " --frames 2 --iteration 2 --step 1");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(screenshot_json(second.output)["narration"], narration);
  const auto other_rank = view(trace + " --screenshot " + png + " --frames 2 --iteration 2 --rank 1");
  ASSERT_EQ(other_rank.exit_code, 0) << other_rank.output;
  EXPECT_EQ(screenshot_json(other_rank.output)["narration"].get<std::string>().rfind("rank 1, ", 0), 0u);

  const auto missing = view(trace + " --screenshot " + png + " --frames 2 --iteration 100000");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("no iteration 100000"), std::string::npos) << missing.output;
  EXPECT_NE(missing.output.find("--iteration"), std::string::npos) << missing.output;
}

// The legend shows every colour the panels use, also those a run lacks: on a DDP trace, which
// has no reduce-scatter and no FSDP unit, their colours appear only with the legend open.
TEST(ViewerHeadless, TheLegendShowsColoursTheRunDoesNotUse) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 2, 20000);
  const std::string with = dir.file("legend.png"), without = dir.file("plain.png");
  expect_screenshot(view(trace + " --screenshot " + with + " --frames 3 --legend"), with, 3);
  expect_screenshot(view(trace + " --screenshot " + without + " --frames 3"), without, 3);
  const Image legend = load_png(with), plain = load_png(without);
  for (const auto& [what, colour] : {std::pair{"reduce_scatter", std::array<int, 3>{210, 70, 180}},
                                     std::pair{"unit full", std::array<int, 3>{15, 157, 88}},
                                     std::pair{"barrier", std::array<int, 3>{140, 140, 140}}}) {
    EXPECT_GT(pixels_near(legend, 0, legend.height, colour), 100) << what;
  }
  EXPECT_LT(pixels_near(plain, 0, plain.height, {210, 70, 180}), 20) << "reduce_scatter without the legend";
}


// --font-scale 2 (what Ctrl + reaches in the window) draws the text twice as tall: the narration
// line's glyphs cover about twice as many pixel rows.
TEST(ViewerHeadless, FontScaleMakesTheTextLarger) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 2, 20000);
  const std::array<int, 3> narration_colour = {255, 219, 115};
  std::map<std::string, int> rows;
  for (const std::string scale : {"1", "2"}) {
    const std::string png = dir.file("scale" + scale + ".png");
    const auto result = view(trace + " --screenshot " + png + " --frames 3 --iteration 2 --font-scale " + scale);
    expect_screenshot(result, png, 3);
    rows[scale] = rows_with(load_png(png), 0, scale == "1" ? 120 : 240, narration_colour);
  }
  EXPECT_GT(rows["1"], 5);
  EXPECT_GE(rows["2"], rows["1"] * 17 / 10) << rows["1"] << " rows of text at 1, " << rows["2"] << " at 2";
  EXPECT_NE(view(trace + " --screenshot " + dir.file("x.png") + " --font-scale 9").exit_code, 0)
      << "a scale outside 0.75..3 is refused";
}

// --theme projector: dark text on light ground, the narration in its dark orange; the same
// trace in the default dark theme has neither.
TEST(ViewerHeadless, TheProjectorThemeIsLightWithDarkText) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 2, 20000);
  const std::string light = dir.file("projector.png"), dark = dir.file("dark.png");
  expect_screenshot(view(trace + " --screenshot " + light + " --frames 3 --iteration 2 --theme projector"), light, 3);
  expect_screenshot(view(trace + " --screenshot " + dark + " --frames 3 --iteration 2"), dark, 3);
  const std::array<int, 3> ground = {250, 250, 250}, ruler = {228, 230, 236}, narration = {150, 70, 0};
  const Image projector = load_png(light), screen = load_png(dark);
  EXPECT_GT(pixels_near(projector, 0, projector.height, ground), projector.width * 20);
  EXPECT_GT(pixels_near(projector, 0, projector.height, ruler), 10000) << "the ruler's band";
  EXPECT_GT(pixels_near(projector, 24, 80, narration), 100) << "the narration line";
  EXPECT_LT(pixels_near(screen, 0, screen.height, ruler), 2000) << "the dark theme's ruler is dark";
  EXPECT_NE(view(trace + " --screenshot " + light + " --theme neon").exit_code, 0);
}

// --fold: the named ranks' lane groups fold to their headers, so the ranks after them come into
// view: with ranks 1 to 6 of 8 folded, all 8 headers are drawn (rows of the header colour).
TEST(ViewerHeadless, FoldedRanksLetTheOthersFit) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 8, 20000);
  const std::string plain = dir.file("plain.png"), folded = dir.file("folded.png");
  expect_screenshot(view(trace + " --screenshot " + plain + " --frames 3"), plain, 3);
  expect_screenshot(view(trace + " --screenshot " + folded + " --frames 3 --fold 1,2,3,4,5,6"), folded, 3);
  const auto header_rows = [](const Image& image) {
    int rows = 0;
    for (int y = 0; y < image.height; ++y) {
      const unsigned char* p = image.at(300, y);
      rows += p[0] == 44 && p[1] == 48 && p[2] == 62;
    }
    return rows;
  };
  const int plain_rows = header_rows(load_png(plain)), folded_rows = header_rows(load_png(folded));
  EXPECT_LE(plain_rows, 5 * 18) << "at most 5 rank groups fit unfolded";
  EXPECT_GE(folded_rows, 8 * 17) << "all 8 headers once 6 groups are folded";
}

TEST(ViewerHeadless, FsdpScreenshotShowsUnits) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = fsdp_trace(dir);
  const std::string png = dir.file("fsdp.png");
  const auto result = view(trace + " --screenshot " + png + " --frames 3");
  expect_screenshot(result, png, 3);
  EXPECT_EQ(rank_headers(load_png(png), 300), 2);
}

// Real trainings, not synthetic traces: `dpscope train` on 2 ranks with DDP, FSDP and FSDP2
// (every layer a unit), each drawn with a lane group per rank, the right panel opening on the
// Buckets tab for DDP and on the Units tab for both FSDPs. Skipped in builds without the engine.
TEST(ViewerHeadless, RealDdpAndFsdpTrainingTraces) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string bin = dpscope::testing::dpscope_bin();
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"ddp", "Buckets"}, {"fsdp --wrap-min-params 100", "Units"}, {"fsdp2 --wrap-min-params 100", "Units"}};
  for (const auto& [strategy, first_tab] : runs) {
    SCOPED_TRACE(strategy);
    const std::string traces = dir.file(strategy.substr(0, strategy.find(' ')));
    const auto train = run_command("timeout 120 " + bin + " launch -n 2 --trace-dir " + traces +
                                   " -- " + bin + " train --model mlp --hidden 64 --steps 4 "
                                   "--threads 1 --progress-every 0 --strategy " + strategy);
    if (train.output.find("built without the engine") != std::string::npos) {
      GTEST_SKIP() << "dpscope was built without the engine";
    }
    ASSERT_EQ(train.exit_code, 0) << train.output;
    const std::string png = traces + "/screenshot.png";
    const auto result = view(traces + "/run.sqlite --screenshot " + png + " --frames 3");
    expect_screenshot(result, png, 3);
    EXPECT_EQ(rank_headers(load_png(png), 300), 2) << "lanes: " << lane_list(traces + "/run.sqlite");
    EXPECT_EQ(screenshot_json(result.output)["right_tab"], first_tab) << result.output;
  }
}

// One truth: over real trainings on 3 ranks (DDP with two bucket sizes, FSDP), the viewer's Stats
// panel, as its JSON line repeats it, equals `dpscope stats --json`: every rank's whole-run
// overlap, each iteration's exposed communication and each bucket's, within 0.01 ms. And the
// memory at each rank's peak adds up to the peak. The trainings name their trace with --trace
// FILE.sqlite, which must leave the merged run at exactly that path.
TEST(ViewerHeadless, TheStatsPanelShowsWhatDpscopeStatsComputes) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string bin = dpscope::testing::dpscope_bin();
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"ddp-small-buckets", "--strategy ddp --bucket-cap-mb 0.02 --first-bucket-mb 0.01"},
      {"ddp-one-bucket", "--strategy ddp --bucket-cap-mb 25 --link-gbps 4 --link-latency-us 50"},
      {"fsdp", "--strategy fsdp --wrap-min-params 100 --eval-fraction 0.5"},
      {"ddp-straggler", "--strategy ddp --straggler 1:30"},
  };
  for (const auto& [name, flags] : runs) {
    SCOPED_TRACE(name);
    const std::string trace = dir.file(name + ".sqlite");
    const auto train = run_command("timeout 120 " + bin + " launch -n 3 -- " + bin +
                                   " train --model mlp --hidden 64 --steps 5 --threads 1 "
                                   "--progress-every 0 --trace " + trace + " " + flags);
    if (train.output.find("built without the engine") != std::string::npos) {
      GTEST_SKIP() << "dpscope was built without the engine";
    }
    ASSERT_EQ(train.exit_code, 0) << train.output;
    ASSERT_TRUE(std::filesystem::exists(trace)) << "--trace names the merged run: " << train.output;
    const auto stats_run = run_command(bin + " stats --json " + trace);
    ASSERT_EQ(stats_run.exit_code, 0) << stats_run.output;
    const auto stats = nlohmann::json::parse(stats_run.output);
    const std::string png = dir.file(name + ".png");
    const auto shown = view(trace + " --screenshot " + png + " --frames 2");
    ASSERT_EQ(shown.exit_code, 0) << shown.output;
    const auto overlap = screenshot_json(shown.output)["overlap"];
    // The header says when the link was emulated, as `dpscope stats` does.
    EXPECT_EQ(screenshot_json(shown.output)["link"],
              name == "ddp-one-bucket" ? "emulated link 4 Gb/s, 50 \u00b5s" : "");
    if (name == "ddp-one-bucket") {
      EXPECT_EQ(stats["run"]["link"]["gbps"], 4.0);
      EXPECT_EQ(stats["run"]["link"]["latency_us"], 50.0);
    } else {
      EXPECT_TRUE(stats["run"]["link"].is_null());
    }
    ASSERT_EQ(overlap.size(), 3u) << shown.output;
    ASSERT_EQ(stats["ranks"].size(), 3u);
    for (size_t r = 0; r < 3; ++r) {
      const auto& drawn = overlap[r];
      const auto& computed = stats["ranks"][r];
      EXPECT_EQ(drawn["rank"], computed["rank"]);
      for (const char* key : {"compute_ms", "comm_ms", "exposed_comm_ms"}) {
        EXPECT_NEAR(drawn[key].get<double>(), computed["overlap"][key].get<double>(), 0.01)
            << "rank " << r << " " << key;
      }
      EXPECT_GT(computed["overlap"]["compute_ms"].get<double>(), 0) << "rank " << r;
      ASSERT_EQ(drawn["iterations_exposed_comm_ms"].size(), computed["iterations"].size());
      for (size_t i = 0; i < computed["iterations"].size(); ++i) {
        EXPECT_NEAR(drawn["iterations_exposed_comm_ms"][i].get<double>(),
                    computed["iterations"][i]["overlap"]["exposed_comm_ms"].get<double>(), 0.01)
            << "rank " << r << " iteration " << i;
      }
      ASSERT_EQ(drawn["buckets"].size(), computed["buckets"].size());
      for (size_t b = 0; b < computed["buckets"].size(); ++b) {
        EXPECT_EQ(drawn["buckets"][b]["bucket"], computed["buckets"][b]["bucket"]);
        EXPECT_NEAR(drawn["buckets"][b]["exposed_comm_ms"].get<double>(),
                    computed["buckets"][b]["exposed_comm_ms"].get<double>(), 0.01);
      }
      // Memory at the peak: the categories at that moment add up to the peak.
      int64_t sum = 0;
      for (const auto& [key, value] : computed["peak_memory_bytes"].items()) {
        if (key != "total" && key != "ts_ns") sum += value.get<int64_t>();
      }
      EXPECT_EQ(sum, computed["peak_memory_bytes"]["total"].get<int64_t>()) << "rank " << r;
      // The panel's memory tables: the peak, and the peak in the steps where the FSDP run's
      // evaluation of half the rows, after the steps, peaked higher than any step.
      const nlohmann::json memory = screenshot_json(shown.output)["memory"][r];
      EXPECT_EQ(memory["peak_bytes"], computed["peak_memory_bytes"]["total"]) << "rank " << r;
      if (name == "fsdp") {
        EXPECT_EQ(memory["steps_peak_bytes"], computed["step_peak_memory_bytes"]["total"]) << "rank " << r;
        EXPECT_LT(memory["steps_peak_bytes"].get<int64_t>(), memory["peak_bytes"].get<int64_t>()) << "rank " << r;
      }
    }
    if (name == "ddp-small-buckets") {
      EXPECT_GT(stats["ranks"][0]["buckets"].size(), 1u) << "several buckets";
    }
    // The straggler line names whom `dpscope stats` names (See Note [Stragglers]).
    const std::string straggler_line = screenshot_json(shown.output)["stragglers"];
    if (stats["stragglers"].empty()) {
      EXPECT_EQ(straggler_line.rfind("none", 0), 0u) << straggler_line;
    } else {
      EXPECT_EQ(straggler_line.rfind("rank " + std::to_string(stats["stragglers"][0]["rank"].get<int>()) + " arrives last", 0), 0u)
          << straggler_line;
    }
    if (name == "ddp-straggler") {
      ASSERT_EQ(stats["stragglers"].size(), 1u) << stats["stragglers"];
      EXPECT_EQ(stats["stragglers"][0]["rank"], 1);
    }
  }
}

TEST(ViewerHeadless, ZoomSweepFromTheWholeRunToOneBucket) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 2, 50000);
  const std::string png = dir.file("sweep.png");
  expect_screenshot(view(trace + " --screenshot " + png + " --frames 30 --zoom-sweep"), png, 30);
}

TEST(ViewerHeadless, CompareDrawsBothRuns) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string a = synth(dir, "a.sqlite", 2, 10000, 1);
  const std::string b = synth(dir, "b.sqlite", 3, 10000, 2);
  const std::string png = dir.file("compare.png");
  const auto result = view(a + " --compare " + b + " --screenshot " + png + " --frames 3");
  expect_screenshot(result, png, 3);
  // Each run has its own panel, title band and ruler, both in view at once (A's 2 rank groups,
  // B's first ones).
  const Image image = load_png(png);
  int titles = 0;
  bool inside = false;
  for (int y = 0; y < image.height; ++y) {
    const unsigned char* p = image.at(300, y);
    const bool title = p[0] == 60 && p[1] == 50 && p[2] == 90;
    titles += title && !inside;
    inside = title;
  }
  EXPECT_EQ(titles, 2) << "the A: and B: title bands";
  EXPECT_GE(rank_headers(image, 300), 3);
}

// Xvfb's pointer starts at its screen's centre. On a 1600x1000 screen that is (800, 500) in the
// window, over rank 3's main lane in this trace: a headless frame that took the pointer as a mouse
// would draw that span's tooltip into the screenshot. On a 2400x1600 screen the pointer is below
// the window. Each run gets its own display so that the sizes are what this test says.
TEST(ViewerHeadless, TheScreenshotDoesNotDependOnWhereThePointerIs) {
  REQUIRE_DISPLAY();
  if (run_command("command -v xvfb-run").exit_code != 0) GTEST_SKIP() << "xvfb-run is not installed";
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 4, 20000);
  std::vector<Image> shots;
  for (const std::string screen : {"1600x1000x24", "2400x1600x24"}) {
    SCOPED_TRACE(screen);
    const std::string png = dir.file(screen + ".png");
    const auto result = run_command("xvfb-run -a -s '-screen 0 " + screen + "' " + viewer() + " " +
                                    trace + " --screenshot " + png + " --frames 3");
    expect_screenshot(result, png, 3);
    shots.push_back(load_png(png));
  }
  ASSERT_EQ(shots[0].width, shots[1].width);
  ASSERT_EQ(shots[0].height, shots[1].height);
  size_t differing = 0;
  for (size_t i = 0; i < shots[0].rgb.size(); ++i) differing += shots[0].rgb[i] != shots[1].rgb[i];
  EXPECT_EQ(differing, 0u);
}

// Dear ImGui settles a tab bar, a table's columns and an auto-sized window on their second
// frame: a screenshot of one frame lacked the tab bars and had the Stats table collapsed. Without
// --frames, and with --frames 1, the picture is the settled one, pixel for pixel.
TEST(ViewerHeadless, AScreenshotIsAFinishedFrameWithoutFrames) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth(dir, "ddp.sqlite", 2, 20000);
  std::vector<Image> shots;
  for (const std::string frames : {"", " --frames 1", " --frames 12"}) {
    SCOPED_TRACE(frames);
    const std::string png = dir.file("shot" + std::to_string(shots.size()) + ".png");
    const auto result = view(trace + " --legend --iteration 3 --step 2 --screenshot " + png + frames);
    expect_screenshot(result, png, frames == " --frames 12" ? 12 : 3);
    shots.push_back(load_png(png));
  }
  for (size_t s = 1; s < shots.size(); ++s) {
    ASSERT_EQ(shots[s].rgb.size(), shots[0].rgb.size());
    size_t differing = 0;
    for (size_t i = 0; i < shots[0].rgb.size(); ++i) differing += shots[0].rgb[i] != shots[s].rgb[i];
    EXPECT_EQ(differing, 0u) << "shot " << s;
  }
}

// A memory graph ends where its rank's trace ends: in compare mode the shorter run's graph
// stopped holding its last sample out to the right edge, which read as memory kept after the run.
// The graphs are the rows of the memory ground; each one's rightmost pixel of the parameters'
// band (every DDP rank holds its parameters throughout) must sit where its run ends.
TEST(ViewerHeadless, TheMemoryGraphEndsWhereTheRunEnds) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string short_run = synth(dir, "short.sqlite", 1, 4000);
  const std::string long_run = synth(dir, "long.sqlite", 1, 20000);
  const std::string png = dir.file("compare.png");
  const auto result = view(short_run + " --compare " + long_run + " --screenshot " + png);
  expect_screenshot(result, png, 3);
  const auto run_ms = screenshot_json(result.output)["run_ms"];
  ASSERT_EQ(run_ms.size(), 2u) << result.output;
  const double ratio = run_ms[0].get<double>() / run_ms[1].get<double>();
  ASSERT_LT(ratio, 0.5) << result.output;
  const Image image = load_png(png);
  const auto is = [&](int x, int y, int r, int g, int b) {
    const unsigned char* p = image.at(x, y);
    return p[0] == r && p[1] == g && p[2] == b;
  };
  // Per memory graph (a run of rows with a memory-ground pixel at the left of the timeline), the
  // rightmost parameters-blue pixel and the graph's left edge.
  struct Graph {
    int left = 0, right = -1;
  };
  std::vector<Graph> graphs;
  bool inside = false;
  for (int y = 0; y < image.height; ++y) {
    int left = -1, right = -1;
    for (int x = 0; x < image.width; ++x) {
      if (left < 0 && is(x, y, 24, 26, 32)) left = x;
      if (is(x, y, 66, 133, 244)) right = x;
    }
    if (left < 0) {
      inside = false;
      continue;
    }
    if (!inside) graphs.push_back({left, -1});
    inside = true;
    graphs.back().right = std::max(graphs.back().right, right);
  }
  std::vector<Graph> drawn;
  for (const Graph& g : graphs) {
    if (g.right > g.left) drawn.push_back(g);
  }
  ASSERT_EQ(drawn.size(), 2u) << "memory graphs found: " << graphs.size();
  const double short_width = drawn[0].right - drawn[0].left, long_width = drawn[1].right - drawn[1].left;
  EXPECT_NEAR(short_width / long_width, ratio, 0.05) << short_width << " px against " << long_width;
}

// FSDP's narration gives each unit its own full parameters' bytes (fp32: 4 a parameter): 3.9 KiB
// for unit 0, 11.7 KiB for unit 1, and 0 B for the root, which holds none of its own.
TEST(ViewerHeadless, FsdpNarrationGivesEachUnitItsOwnBytes) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = fsdp_trace(dir);
  std::map<std::string, std::string> gathered;  // unit's words -> the bytes the narration gave it
  for (int step = 0; step < 30 && gathered.size() < 3; ++step) {
    const std::string png = dir.file("step.png");
    const auto result = view(trace + " --screenshot " + png + " --iteration 1 --step " + std::to_string(step));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const std::string narration = screenshot_json(result.output)["narration"];
    const size_t at = narration.find(" gathered: full parameters ");
    const size_t unit = narration.find("unit ");
    if (at == std::string::npos || unit == std::string::npos) continue;
    gathered[narration.substr(unit, at - unit)] = narration.substr(at + 27);
  }
  const std::map<std::string, std::string> expected = {
      {"unit 0 (layer0)", "3.9 KiB"}, {"unit 1 (layer1)", "11.7 KiB"}, {"unit 2 (root)", "0 B"}};
  EXPECT_EQ(gathered, expected);
}

// Compare mode is two runs: stepping and the narration follow the focused one, A by default and
// B with --run B (Tab in the window), and the line under the header says which.
TEST(ViewerHeadless, CompareStepsAndNarratesTheFocusedRun) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string ddp = synth(dir, "ddp.sqlite", 2, 20000);
  const std::string fsdp = fsdp_trace(dir);
  const auto narration_of = [&](const std::string& run) {
    const std::string png = dir.file("run" + run + ".png");
    const auto result = view(ddp + " --compare " + fsdp + " --screenshot " + png + " --iteration 2 --step 1 --run " + run);
    expect_screenshot(result, png, 3);
    return screenshot_json(result.output)["narration"].get<std::string>();
  };
  const std::string a = narration_of("A"), b = narration_of("B");
  EXPECT_EQ(a.rfind("rank 0, iteration 2, ", 0), 0u) << a;
  EXPECT_NE(a.find("gradient is ready"), std::string::npos) << "A is the DDP run: " << a;
  EXPECT_EQ(b.rfind("rank 0, iteration 2, ", 0), 0u) << b;
  EXPECT_NE(b.find("unit "), std::string::npos) << "B is the FSDP run: " << b;
  // --run needs a second run to focus.
  const auto alone = view(ddp + " --screenshot " + dir.file("alone.png") + " --iteration 2 --run B");
  EXPECT_NE(alone.exit_code, 0);
  EXPECT_NE(alone.output.find("--compare"), std::string::npos) << alone.output;
}

TEST(ViewerHeadless, BadFilesGiveOneLineNamingTheFileAndExitNonZero) {
  TempDir dir;
  const std::string good = synth(dir, "good.sqlite", 2, 5000);
  const std::string random = dir.file("random.sqlite");
  {
    std::ofstream out(random, std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(char((i * 7919) & 0xff));
  }
  const std::string foreign = dir.file("foreign.sqlite");
  {
    sqlite3* db = nullptr;
    sqlite3_open(foreign.c_str(), &db);
    sqlite3_exec(db, "CREATE TABLE t (x); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  const std::string truncated = dir.file("truncated.sqlite");
  {
    std::ifstream in(good, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size() / 2));
  }
  for (const std::string& bad : {dir.file("missing.sqlite"), random, foreign, truncated}) {
    const auto result = view(bad + " --screenshot " + dir.file("x.png") + " --frames 1");
    EXPECT_EQ(result.exit_code, 1) << bad << ": " << result.output;
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
    EXPECT_EQ(result.output.rfind("dpscope-view: ", 0), 0u) << result.output;
    EXPECT_NE(result.output.find(bad), std::string::npos) << result.output;
  }
  // A bad --compare file is refused the same way.
  const auto result = view(good + " --compare " + foreign + " --screenshot " + dir.file("x.png") + " --frames 1");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find(foreign), std::string::npos) << result.output;
}

TEST(ViewerHeadless, LiveFollowsAFileThatGrows) {
  REQUIRE_DISPLAY();
  TempDir dir;
  RecorderOptions options;
  options.path = dir.file("live.sqlite");
  options.flush_on_signals = false;
  Recorder recorder(options);
  const NameId step = recorder.name("iteration");
  int64_t t = now_ns();
  auto write_iterations = [&](int count) {
    for (int i = 0; i < count; ++i, t += 1'000'000) recorder.phase(0, step, t, t + 900'000, int32_t(t / 1'000'000));
    recorder.flush();
  };
  write_iterations(20);
  // 60 frames at ~30 per second: about two seconds during which the file grows.
  auto run = std::async(std::launch::async, [&] {
    return view(options.path + " --live --screenshot " + dir.file("live.png") + " --frames 60");
  });
  // The file grows for as long as the viewer runs, however late a busy machine starts it; bounded
  // at a minute of batches (20 events every 50 ms) whatever the viewer does.
  for (int batch = 0; batch < 1200 && run.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready; ++batch) {
    write_iterations(20);
  }
  const CommandResult result = run.get();
  recorder.close();
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto live = result.output.find("live: ");
  ASSERT_NE(live, std::string::npos) << result.output;
  int reloads = 0;
  long long events = 0, rows = 0;
  ASSERT_EQ(std::sscanf(result.output.c_str() + live,
                        "live: %d reloads, %lld events in the last one, %lld rows read by the reloads",
                        &reloads, &events, &rows), 3)
      << result.output;
  EXPECT_GE(reloads, 1) << result.output;
  EXPECT_GT(events, 20) << result.output;
  // The reloads read only what was added after the first load (which had at least 20 events),
  // not the whole file each time.
  EXPECT_GT(rows, 0) << result.output;
  EXPECT_LE(rows, events - 20) << result.output;
}

// --live on a run directory that does not exist yet: the viewer waits, follows the two rank files
// (merged as they grow) while the "ranks" write them, and switches to run.sqlite when it appears.
TEST(ViewerHeadless, LiveFollowsARunDirectoryFromItsStartToItsMergedFile) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string run_dir = dir.file("run");
  // The viewer merges the rank files into dpscope-view-live-PID.sqlite in its TMPDIR: the test
  // sees there when the first merge has begun.
  const std::filesystem::path viewer_tmp = dir.file("viewer-tmp");
  std::filesystem::create_directories(viewer_tmp);
  const auto merging = [&] { return !std::filesystem::is_empty(viewer_tmp); };
  // 300 frames at ~30 per second: ten seconds, enough for what follows on a loaded machine.
  auto viewer_run = std::async(std::launch::async, [&] {
    return run_command("TMPDIR=" + viewer_tmp.string() + " " + viewer() + " " + run_dir + " --live --screenshot " +
                       dir.file("live.png") + " --frames 300");
  });
  // Meant to start the viewer before the directory exists; a viewer started late finds it there,
  // which the rest checks as well.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::filesystem::create_directories(run_dir);
  std::vector<std::unique_ptr<Recorder>> ranks;
  std::vector<std::string> files;
  for (int rank = 0; rank < 2; ++rank) {
    RecorderOptions options;
    options.path = run_dir + "/rank" + std::to_string(rank) + ".sqlite";
    options.rank = rank;
    options.flush_on_signals = false;
    files.push_back(options.path);
    ranks.push_back(std::make_unique<Recorder>(options));
  }
  int64_t t = now_ns();
  int written = 0;
  // Iterations on both ranks in batches, at least a second of them and on until the viewer has
  // begun merging the rank files, however late a busy machine starts it (bounded at a minute,
  // whatever the viewer does).
  for (int batch = 0; batch < 600 && !(batch >= 10 && merging()) &&
                      viewer_run.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready;
       ++batch) {
    for (auto& recorder : ranks) {
      const NameId step = recorder->name("iteration");
      for (int i = 0; i < 10; ++i) recorder->phase(0, step, t + i * 1'000'000, t + i * 1'000'000 + 900'000, batch * 10 + i);
      recorder->flush();
    }
    t += 10'000'000;
    written += 10;
  }
  for (auto& recorder : ranks) recorder->close();
  merge_traces(files, run_dir + "/run.sqlite");
  const CommandResult result = viewer_run.get();
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("followed " + run_dir + "/run.sqlite after "), std::string::npos) << result.output;
  int merges = 0;
  const auto after = result.output.find(" after ");
  ASSERT_NE(after, std::string::npos) << result.output;
  ASSERT_EQ(std::sscanf(result.output.c_str() + after, " after %d merges", &merges), 1) << result.output;
  EXPECT_GE(merges, 1) << "the rank files were merged while they grew: " << result.output;
  long long events = 0;
  const auto live = result.output.find("live: ");
  ASSERT_EQ(std::sscanf(result.output.c_str() + live, "live: %*d reloads, %lld events", &events), 1);
  EXPECT_EQ(events, 2 * written) << "the merged file's every event, both ranks";
}

// --whatif-cap-mb: the replay of `dpscope whatif` drawn as a lane under each rank (on its own
// band colour), and the What-if tab's figures equal to `dpscope whatif --json`'s for rank 0, its
// cap in MiB as the CLI's; the same for an FSDP trace with --whatif-backward-prefetch, which
// refuses DDP's --whatif-cap-mb.
TEST(ViewerHeadless, WhatifLanesShowWhatDpscopeWhatifPredicts) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string bin = dpscope::testing::dpscope_bin();
  const std::string trace = dir.file("ddp.sqlite");
  // On an emulated link, so that an all-reduce's time grows with its bytes and a line fits.
  const auto train = run_command("timeout 120 " + bin + " launch -n 2 --link-gbps 1 --link-latency-us 50 -- " + bin +
                                 " train --model mlp --hidden 256 --layers 3 --steps 8 --threads 1 "
                                 "--bucket-cap-mb 0.25 --first-bucket-mb 0.1 --progress-every 0 --trace " + trace);
  if (train.output.find("built without the engine") != std::string::npos) GTEST_SKIP() << "no engine";
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const auto predicted = run_command(bin + " whatif --json --bucket-cap-mb 25 " + trace);
  ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
  const auto cli = nlohmann::json::parse(predicted.output);

  const std::string png = dir.file("whatif.png"), plain_png = dir.file("plain.png");
  const auto shown = view(trace + " --whatif-cap-mb 25 --screenshot " + png + " --frames 3");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  const auto drawn = screenshot_json(shown.output)["whatif"];
  ASSERT_TRUE(drawn.is_object()) << shown.output;
  EXPECT_EQ(drawn["buckets"], cli["buckets"].size());
  for (const char* key : {"measured_step_ms", "predicted_step_ms", "measured_exposed_comm_ms", "predicted_exposed_comm_ms"}) {
    EXPECT_NEAR(drawn[key].get<double>(), cli[key].get<double>(), 1e-3) << key;
  }
  // A cap in MiB, as dpscope whatif takes it: 0.26 MiB (272,630 bytes) lets fc1's 263,168 bytes
  // of gradients share a bucket with fc0's, where 0.26 million bytes would not: 2 buckets, not 3.
  const auto predicted_026 = run_command(bin + " whatif --json --bucket-cap-mb 0.26 " + trace);
  ASSERT_EQ(predicted_026.exit_code, 0) << predicted_026.output;
  EXPECT_EQ(nlohmann::json::parse(predicted_026.output)["buckets"].size(), 2u) << predicted_026.output;
  const auto shown_026 = view(trace + " --whatif-cap-mb 0.26 --screenshot " + png + " --frames 3");
  ASSERT_EQ(shown_026.exit_code, 0) << shown_026.output;
  EXPECT_EQ(screenshot_json(shown_026.output)["whatif"]["buckets"], 2) << shown_026.output;
  const auto plain = view(trace + " --screenshot " + plain_png + " --frames 3");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_TRUE(screenshot_json(plain.output)["whatif"].is_null());
  const std::array<int, 3> band = {30, 50, 70};  // the dark theme's what-if band
  EXPECT_GT(pixels_near(load_png(png), 90, 520, band), 2000) << "no what-if lane drawn";
  EXPECT_EQ(pixels_near(load_png(plain_png), 90, 520, band), 0);

  // FSDP: another backward prefetch, the same medians as `dpscope whatif`; DDP's flag refused.
  const std::string fsdp = dir.file("fsdp.sqlite");
  ASSERT_EQ(run_command("timeout 120 " + bin + " launch -n 2 --link-gbps 1 --link-latency-us 50 -- " + bin +
                        " train --strategy fsdp --model mlp --hidden 512 --layers 4 --wrap-min-params 1000 "
                        "--steps 6 --threads 1 --progress-every 0 --trace " + fsdp)
                .exit_code,
            0);
  const auto fsdp_predicted = run_command(bin + " whatif --json --backward-prefetch none " + fsdp);
  ASSERT_EQ(fsdp_predicted.exit_code, 0) << fsdp_predicted.output;
  const auto fsdp_cli = nlohmann::json::parse(fsdp_predicted.output);
  const auto fsdp_shown = view(fsdp + " --whatif-backward-prefetch none --screenshot " + png + " --frames 3");
  ASSERT_EQ(fsdp_shown.exit_code, 0) << fsdp_shown.output;
  const auto fsdp_drawn = screenshot_json(fsdp_shown.output)["whatif"];
  ASSERT_TRUE(fsdp_drawn.is_object() && !fsdp_drawn.contains("error")) << fsdp_shown.output;
  for (const char* key : {"measured_step_ms", "predicted_step_ms", "measured_exposed_comm_ms", "predicted_exposed_comm_ms"}) {
    EXPECT_NEAR(fsdp_drawn[key].get<double>(), fsdp_cli[key].get<double>(), 1e-3) << key;
  }
  EXPECT_GT(pixels_near(load_png(png), 90, 520, band), 2000) << "no what-if lane drawn for FSDP";
  const auto refused = view(fsdp + " --whatif-cap-mb 25 --screenshot " + png + " --frames 2");
  ASSERT_EQ(refused.exit_code, 0) << refused.output;
  EXPECT_NE(screenshot_json(refused.output)["whatif"]["error"].get<std::string>().find("are for DDP traces; this one is FSDP"),
            std::string::npos)
      << refused.output;
}

// An FSDP2 trace's what-if lanes: its groups replayed as units (Note [FSDP2 in the FSDP replay]),
// the medians of `dpscope whatif --json --backward-prefetch none`; post, which FSDP2 has not,
// refused in the What-if tab's words.
TEST(ViewerHeadless, WhatifLanesOfAnFsdp2Trace) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string bin = dpscope::testing::dpscope_bin();
  const std::string trace = dir.file("fsdp2.sqlite");
  const auto train = run_command("timeout 120 " + bin + " launch -n 2 --link-gbps 1 --link-latency-us 50 -- " + bin +
                                 " train --strategy fsdp2 --model mlp --hidden 512 --layers 4 --wrap-min-params 1000 "
                                 "--steps 6 --threads 1 --progress-every 0 --trace " + trace);
  if (train.output.find("built without the engine") != std::string::npos) GTEST_SKIP() << "no engine";
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const auto predicted = run_command(bin + " whatif --json --backward-prefetch none " + trace);
  ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
  const auto cli = nlohmann::json::parse(predicted.output);
  const std::string png = dir.file("whatif.png");
  const auto shown = view(trace + " --whatif-backward-prefetch none --screenshot " + png + " --frames 3");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  const auto drawn = screenshot_json(shown.output)["whatif"];
  ASSERT_TRUE(drawn.is_object() && !drawn.contains("error")) << shown.output;
  for (const char* key : {"measured_step_ms", "predicted_step_ms", "measured_exposed_comm_ms", "predicted_exposed_comm_ms"}) {
    EXPECT_NEAR(drawn[key].get<double>(), cli[key].get<double>(), 1e-3) << key;
  }
  const std::array<int, 3> band = {30, 50, 70};  // the dark theme's what-if band
  EXPECT_GT(pixels_near(load_png(png), 90, 520, band), 2000) << "no what-if lane drawn for FSDP2";
  const auto refused = view(trace + " --whatif-backward-prefetch post --screenshot " + png + " --frames 2");
  ASSERT_EQ(refused.exit_code, 0) << refused.output;
  EXPECT_NE(screenshot_json(refused.output)["whatif"]["error"].get<std::string>().find("FSDP2 prefetches in a group's pre-backward only"),
            std::string::npos)
      << refused.output;
}
