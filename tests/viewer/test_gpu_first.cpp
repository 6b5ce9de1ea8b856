// Note [GPU first] (viewer/lane_order.h): a profiler trace's GPU streams drawn first, by role,
// its CPU threads after them with all but the main one folded; dpscope's own runs as recorded.
// The rule on hand-made lanes, the order the headless JSON's layout.lanes reports on the three
// shipped GPU traces, and a real 1280x800 window (Xvfb, xdotool) with every rank's GPU lanes in view.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "trace/reader.h"
#include "tests/viewer/window_driver.h"
#include "viewer/model.h"

namespace {

using namespace dpscope::testing;
using dpscope::trace::CollectiveOp;
using dpscope::trace::LaneKind;
using dpscope::view::DrawnLane;
using dpscope::view::LaneArrangement;
using dpscope::view::LanePriority;
using dpscope::view::LaneRole;
using dpscope::view::Span;
using nlohmann::json;

std::string viewer() { return std::string(DPSCOPE_BIN_DIR) + "/dpscope-view"; }
std::string shipped(const std::string& name) { return std::string(DPSCOPE_SOURCE_DIR) + "/tests/data/kineto/" + name; }

// The names a model's kernels and annotations use (NameIds 0..3).
enum Name : dpscope::trace::NameId { Op, Kernel, Memcpy, Annotation };

dpscope::view::Model model_with(std::vector<dpscope::view::Lane> lanes) {
  dpscope::view::Model model;
  model.names = {"aten::mm", "ampere_sgemm_128x64_nn", "Memcpy HtoD (Pinned -> Device)", "nccl:all_reduce"};
  model.ranks.emplace_back();
  for (dpscope::view::Lane& lane : lanes) {
    lane.info.lane = dpscope::trace::LaneId(model.ranks[0].lanes.size());
    dpscope::view::build_rows(lane);
    model.ranks[0].lanes.push_back(std::move(lane));
  }
  dpscope::view::arrange_lanes(model);
  return model;
}

dpscope::view::Lane lane(const std::string& name, LaneKind kind, std::vector<Span> spans) {
  dpscope::view::Lane l;
  l.info.name = name;
  l.info.kind = kind;
  l.spans = std::move(spans);
  return l;
}
Span kernel(int64_t begin, int64_t end, Name name = Kernel) { return Span::mark(begin, end, name, 0); }
Span nccl(int64_t begin, int64_t end) { return Span::collective(begin, end, CollectiveOp::AllReduce, 0); }

std::vector<std::string> labels(const dpscope::view::RankData& rank) {
  std::vector<std::string> out;
  for (const DrawnLane& d : rank.drawn_lanes) out.push_back(d.label);
  return out;
}

// A stream is what most of its busy time does (an annotation around a kernel counting once); the
// busiest compute stream leads, the NCCL streams follow it, then the others; then lane 0, then
// the other CPU threads, which U folds.
TEST(ViewerGpuFirst, StreamsAreOrderedByTheRoleTheirBusyTimeGives) {
  const auto model = model_with({
      lane("main thread", LaneKind::Host, {kernel(0, 100, Op)}),
      lane("worker thread", LaneKind::Host, {kernel(0, 50, Op)}),
      lane("GPU 0 stream 7", LaneKind::Stream, {kernel(0, 100)}),
      lane("GPU 0 stream 9", LaneKind::Stream, {nccl(0, 60), kernel(60, 100)}),    // 60 % NCCL
      lane("GPU 0 stream 11", LaneKind::Stream, {kernel(0, 60), nccl(60, 90)}),    // a third NCCL
      lane("GPU 0 stream 13", LaneKind::Stream, {kernel(0, 10, Memcpy)}),
      lane("GPU 0 stream 20", LaneKind::Stream, {kernel(0, 10, Annotation), nccl(0, 10)}),
  });
  const dpscope::view::RankData& rank = model.ranks[0];
  EXPECT_EQ(rank.arrangement, LaneArrangement::GpuFirst);
  EXPECT_EQ(labels(rank), (std::vector<std::string>{"GPU 0 compute (stream 7)", "GPU 0 NCCL (stream 9)",
                                                    "GPU 0 NCCL (stream 20)", "GPU 0 compute (stream 11)",
                                                    "GPU 0 memcpy (stream 13)", "main thread", "worker thread"}));
  ASSERT_EQ(rank.drawn_lanes.size(), 7u);
  EXPECT_EQ(rank.drawn_lanes[5].role, LaneRole::MainThread);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(rank.drawn_lanes[i].priority, LanePriority::Primary) << i;
  EXPECT_EQ(rank.drawn_lanes[5].priority, LanePriority::Supporting);
  EXPECT_EQ(rank.drawn_lanes[6].priority, LanePriority::Secondary);
  EXPECT_EQ(dpscope::view::lane_label(rank, 3), "GPU 0 NCCL (stream 9)");
}

// dpscope's own NCCL run has a stream lane too ("nccl stream"), not one the import names: its
// lanes keep their order and names.
TEST(ViewerGpuFirst, DpscopesOwnStreamLaneKeepsTheRecordedOrder) {
  const auto model = model_with({
      lane("main", LaneKind::Host, {kernel(0, 100, Op)}),
      lane("nccl stream", LaneKind::Stream, {nccl(10, 90)}),
      lane("unit 0", LaneKind::Unit, {kernel(0, 10, Op)}),
  });
  const dpscope::view::RankData& rank = model.ranks[0];
  EXPECT_EQ(rank.arrangement, LaneArrangement::AsRecorded);
  EXPECT_EQ(labels(rank), (std::vector<std::string>{"main", "nccl stream", "unit 0"}));
  EXPECT_EQ(rank.drawn_lanes[2].priority, LanePriority::Secondary);
}

#define REQUIRE_DISPLAY() \
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`"

// dpscope-view's headless JSON line for `files` at x1 in 1280x800.
json headless(const TempDir& dir, const std::string& files) {
  const auto result = run_command("TMPDIR=" + dir.path().string() + " " + viewer() + " " + files +
                                  " --size 1280x800 --font-scale 1 --screenshot " + dir.file("shot.png"));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return screenshot_json(result.output);
}

std::vector<std::string> strings(const json& array) { return array.get<std::vector<std::string>>(); }

// HTA's two sampled ranks: five streams each, two of them NCCL's send/recv, and two CPU threads;
// every rank's GPU lanes in view at x1 in 1280x800.
TEST(ViewerGpuFirst, SampledRanksDrawTheirGpuLanesFirstAndAllInView) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const json report = headless(dir, shipped("sampled_rank-0.json.gz") + " " + shipped("sampled_rank-1.json.gz"));
  ASSERT_FALSE(report.is_discarded());
  const json& lanes = report["layout"]["lanes"];
  ASSERT_EQ(lanes.size(), 2u) << report["layout"];
  const std::vector<std::string> threads[2] = {{"thread 4037 (python3.8)", "thread 23695 (python3.8)"},
                                               {"thread 4045 (python3.8)", "thread 23704 (python3.8)"}};
  for (int r = 0; r < 2; ++r) {
    const std::string gpu = "GPU " + std::to_string(r) + " ";
    EXPECT_EQ(lanes[r]["rank"], r);
    EXPECT_EQ(strings(lanes[r]["lanes"]),
              (std::vector<std::string>{gpu + "compute (stream 7)", gpu + "NCCL (stream 84)", gpu + "NCCL (stream 203)",
                                        gpu + "compute (stream 23)", gpu + "memcpy (stream 25)", threads[r][0],
                                        threads[r][1]}));
    EXPECT_EQ(strings(lanes[r]["folded"]), std::vector<std::string>{threads[r][1]});
  }
  EXPECT_EQ(report["layout"]["ranks_visible"], 2) << "a rank's GPU lanes are out of view";
  EXPECT_EQ(report["layout"]["clipped_labels"], 0);
}

// On a projector, from x1.5, the main threads fold with the others (LanePriority::Supporting), so
// that both ranks' GPU lanes stay in view at every text size up to x3 in 1280x800.
TEST(ViewerGpuFirst, AProjectorsTextKeepsBothRanksGpuLanesInView) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string files = shipped("sampled_rank-0.json.gz") + " " + shipped("sampled_rank-1.json.gz");
  for (const char* scale : {"1.5", "2", "2.5", "3"}) {
    const auto result = run_command("TMPDIR=" + dir.path().string() + " " + viewer() + " " + files +
                                    " --size 1280x800 --font-scale " + scale + " --screenshot " + dir.file("shot.png"));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const json layout = screenshot_json(result.output)["layout"];
    EXPECT_EQ(layout["ranks_visible"], 2) << "x" << scale << ": " << layout;
    EXPECT_EQ(layout["clipped_labels"], 0) << "x" << scale << ": " << layout;
    EXPECT_EQ(strings(layout["lanes"][0]["folded"]),
              (std::vector<std::string>{"thread 4037 (python3.8)", "thread 23695 (python3.8)"}))
        << "x" << scale;
  }
}

// nccl_data: DDP on one A100, its NCCL kernels and their annotations on stream 40.
TEST(ViewerGpuFirst, NcclDataDrawsComputeThenNcclThenTheMainThread) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const json report = headless(dir, shipped("nccl_data.json.gz"));
  ASSERT_FALSE(report.is_discarded());
  const json& rank = report["layout"]["lanes"].at(0);
  EXPECT_EQ(strings(rank["lanes"]),
            (std::vector<std::string>{"GPU 0 compute (stream 7)", "GPU 0 NCCL (stream 40)", "thread 2910249 (pt_main_thread)",
                                      "thread 2919752 (pt_autograd_0)", "thread -549452224"}));
  EXPECT_EQ(strings(rank["folded"]), (std::vector<std::string>{"thread 2919752 (pt_autograd_0)", "thread -549452224"}));
  EXPECT_EQ(report["layout"]["ranks_visible"], 1);
}

// dpscope's own runs: every lane with events in lane order, under its recorded name, none folded
// at x1.
TEST(ViewerGpuFirst, OwnRunsKeepTheirLaneOrder) {
  REQUIRE_DISPLAY();
  TempDir dir;
  const std::string trace = synth_trace(dir, 2, 5000);
  const json report = headless(dir, trace);
  ASSERT_FALSE(report.is_discarded());
  const auto model = dpscope::view::load_model(trace);
  const json& lanes = report["layout"]["lanes"];
  ASSERT_EQ(lanes.size(), model->ranks.size());
  for (size_t r = 0; r < model->ranks.size(); ++r) {
    std::vector<std::string> recorded;
    for (const dpscope::view::Lane& l : model->ranks[r].lanes) {
      if (!l.spans.empty()) recorded.push_back(l.info.name);
    }
    EXPECT_EQ(strings(lanes[r]["lanes"]), recorded) << "rank " << r;
    EXPECT_TRUE(lanes[r]["folded"].empty()) << "rank " << r;
  }
}

// In a real 1280x800 window at x1, as a teacher opens the sampled pair: both ranks' GPU lanes in
// view, the CPU threads after them; stepping keeps them so; U unfolds the other threads and again
// folds them.
TEST(ViewerGpuFirst, AWindowOf1280x800ShowsEveryRanksGpuLanes) {
  REQUIRE_DISPLAY();
  if (!have_xdotool() || !have_xwd()) GTEST_SKIP() << "xdotool or xwd is missing: apt-get install xdotool x11-apps";
  TempDir dir;
  const std::string out = dir.file("stdout.txt");
  setenv("TMPDIR", dir.path().c_str(), 1);
  ViewerProcess viewer(shipped("sampled_rank-0.json.gz"),
                       {shipped("sampled_rank-1.json.gz"), "--size", "1280x800", "--font-scale", "1"}, out);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  take_keyboard(window);
  const json opened = f9_report(viewer, window, out);
  ASSERT_FALSE(opened.is_discarded()) << "F9 wrote no JSON line:\n" << read_text(out);
  EXPECT_EQ(opened["layout"]["ranks_visible"], 2) << opened["layout"];
  EXPECT_EQ(opened["layout"]["lanes"][1]["lanes"][0], "GPU 1 compute (stream 7)");
  const Image shot = capture(window, dir.file("window.xwd"));
  EXPECT_EQ(shot.width, 1280);
  EXPECT_EQ(shot.height, 800);

  run_command("xdotool key --delay 80 Right Right Right");
  const json stepped = f9_report(viewer, window, out);
  EXPECT_EQ(stepped["layout"]["ranks_visible"], 2) << stepped["layout"];

  run_command("xdotool key --delay 80 u");
  const json unfolded = f9_report(viewer, window, out);
  EXPECT_TRUE(unfolded["layout"]["lanes"][0]["folded"].empty()) << unfolded["layout"];
  run_command("xdotool key --delay 80 u");
  const json folded = f9_report(viewer, window, out);
  EXPECT_EQ(strings(folded["layout"]["lanes"][0]["folded"]), std::vector<std::string>{"thread 23695 (python3.8)"});
}

}  // namespace
