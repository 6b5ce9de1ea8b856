// The viewer's window-free logic: lane rows and their binary searches, folding narrow spans
// (level of detail), span measuring and labels, loading a synthetic trace, the analyses
// (the trace's analysis tied to the spans, mismatches, flows, range statistics) and find.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "formats/synth.h"
#include "tests/test_util.h"
#include "trace/error.h"
#include "trace/reader.h"
#include "trace/writer.h"
#include "viewer/analysis.h"
#include "viewer/lod.h"
#include "viewer/memory_labels.h"
#include "viewer/model.h"

using namespace dpscope::view;
using dpscope::trace::EventKind;
using dpscope::testing::TempDir;

namespace {

// A span of `kind` as the reader hands one over with none of its kind's fields set.
Span span(EventKind kind, int64_t begin, int64_t end) {
  dpscope::trace::EventSpan row;
  row.kind = kind;
  row.begin_ns = begin;
  row.end_ns = end;
  return Span::from_trace(row);
}

// A lane of `n` back-to-back 10 ns hooks starting at 0, in one row.
Lane hooks(int n) {
  Lane lane;
  for (int i = 0; i < n; ++i) lane.spans.push_back(span(EventKind::Hook, 10 * i, 10 * i + 10));
  build_rows(lane);
  return lane;
}

std::shared_ptr<const Model> synth_model(const TempDir& dir, int ranks, int64_t events) {
  dpscope::formats::SynthOptions options;
  options.events = events;
  options.ranks = ranks;
  options.out = dir.file("synth.sqlite");
  options.layers = 4;
  options.hidden = 256;
  dpscope::formats::synthesize(options);
  return load_model(options.out);
}

}  // namespace

TEST(ViewerRows, NestedSpansGoToRowsByDepthAndInstantsToTheirOwnRow) {
  Lane lane;
  // Recorded as a real lane is: children before their parents, by end.
  lane.spans = {span(EventKind::Hook, 50, 60), span(EventKind::Hook, 60, 70),
                span(EventKind::BucketReady, 70, 70), span(EventKind::Phase, 40, 80),
                span(EventKind::Phase, 0, 30), span(EventKind::Phase, 0, 100)};
  build_rows(lane);
  ASSERT_EQ(lane.rows(), 4);
  EXPECT_TRUE(lane.has_instant_row);
  EXPECT_EQ(lane.row_end(0) - lane.row_begin(0), 1u);  // the iteration
  EXPECT_EQ(lane.row_end(1) - lane.row_begin(1), 2u);  // forward and backward
  EXPECT_EQ(lane.row_end(2) - lane.row_begin(2), 2u);  // the hooks
  EXPECT_EQ(lane.spans[lane.row_begin(3)].kind(), EventKind::BucketReady);
  for (int r = 0; r < lane.rows(); ++r) {
    for (size_t i = lane.row_begin(r) + 1; i < lane.row_end(r); ++i) {
      EXPECT_LE(lane.spans[i - 1].begin_ns, lane.spans[i].begin_ns);
      EXPECT_LE(lane.end_max(r, i - 1), lane.end_max(r, i));
    }
  }
}

// A communication lane with two collectives in flight (Note [Gloo overlap]): each overlaps the
// one before but not the one before that. They alternate between two rows instead of each taking
// a row one deeper than the last.
TEST(ViewerRows, OverlappingSpansThatDoNotNestShareTwoRows) {
  Lane lane;
  for (int i = 0; i < 100; ++i) lane.spans.push_back(span(EventKind::Collective, 10 * i, 10 * i + 15));
  build_rows(lane);
  ASSERT_EQ(lane.rows(), 2);
  EXPECT_EQ(lane.row_end(0) - lane.row_begin(0), 50u);
  for (int r = 0; r < 2; ++r) {
    for (size_t i = lane.row_begin(r) + 1; i < lane.row_end(r); ++i) {
      EXPECT_LE(lane.spans[i - 1].end_ns, lane.spans[i].begin_ns);
    }
  }
}

// A span never goes above one that encloses it, even when an upper row is free by then.
TEST(ViewerRows, AChildStaysBelowItsParentWhenAnUpperRowIsFree) {
  Lane lane;
  lane.spans = {span(EventKind::Phase, 0, 10), span(EventKind::Phase, 5, 100),
                span(EventKind::Hook, 20, 30)};
  build_rows(lane);
  ASSERT_EQ(lane.rows(), 3);
  EXPECT_EQ(lane.spans[lane.row_begin(2)].begin_ns, 20);
}

TEST(ViewerRows, AMalformedLaneOfAllOverlappingSpansIsCappedInRows) {
  Lane lane;
  for (int i = 0; i < 10000; ++i) lane.spans.push_back(span(EventKind::Hook, i, 1'000'000 + i));
  build_rows(lane);
  EXPECT_EQ(lane.rows(), 64);
  EXPECT_EQ(lane.spans.size(), 10000u);
  for (size_t i = lane.row_begin(63) + 1; i < lane.row_end(63); ++i) {
    EXPECT_LE(lane.end_max(63, i - 1), lane.end_max(63, i));
  }
  for (int r = 0; r < lane.rows(); ++r) EXPECT_EQ(lane.end_max_offset[size_t(r)], Lane::kEndsInOrder) << "row " << r;
}

// Spans nested a thousand deep: the capped last row holds spans that end in reverse order, the
// one row that keeps its running maxima (Note [Sparse end_max]); first_visible reads them.
TEST(ViewerRows, OnlyARowWhoseEndsAreOutOfOrderKeepsItsRunningMaxima) {
  Lane lane;
  for (int i = 0; i < 1000; ++i) lane.spans.push_back(span(EventKind::Phase, i, 2000 - i));
  build_rows(lane);
  ASSERT_EQ(lane.rows(), 64);
  for (int r = 0; r < 63; ++r) EXPECT_EQ(lane.end_max_offset[size_t(r)], Lane::kEndsInOrder) << "row " << r;
  ASSERT_EQ(lane.end_max_offset[63], 0u);
  EXPECT_EQ(lane.disordered_end_max.size(), lane.row_end(63) - lane.row_begin(63));
  for (size_t i = lane.row_begin(63); i < lane.row_end(63); ++i) EXPECT_EQ(lane.end_max(63, i), 2000 - 63);
  // Every span of the capped row still covers t = 1500 (its first ends at 1937).
  EXPECT_EQ(first_visible(lane, 63, 1500), lane.row_begin(63));
  EXPECT_EQ(first_visible(lane, 63, 1938), lane.row_end(63));
}

TEST(ViewerRows, FarFromSortedInputStillSorts) {
  Lane lane;
  for (int i = 999; i >= 0; --i) lane.spans.push_back(span(EventKind::Hook, 10 * i, 10 * i + 5));
  build_rows(lane);
  ASSERT_EQ(lane.rows(), 1);
  for (size_t i = 1; i < lane.spans.size(); ++i) EXPECT_LT(lane.spans[i - 1].begin_ns, lane.spans[i].begin_ns);
}

// Note [Span fields]: each kind keeps its own fields of the reader's packed columns, and every
// other accessor answers none.
TEST(ViewerSpans, EachKindKeepsItsOwnFieldsAndAnswersNoneForTheOthers) {
  using dpscope::trace::CollectiveOp;
  using dpscope::trace::kNone;
  using dpscope::trace::UnitState;
  auto row = [](EventKind kind, int32_t seq_or_iteration, int16_t bucket_or_unit, uint8_t op) {
    dpscope::trace::EventSpan r;
    r.kind = kind;
    r.name = 3;
    r.seq_or_iteration = seq_or_iteration;
    r.bucket_or_unit = bucket_or_unit;
    r.op = op;
    return Span::from_trace(r);
  };
  const Span phase = row(EventKind::Phase, 7, kNone, 0xff);
  EXPECT_EQ(phase.name(), 3);
  EXPECT_EQ(phase.iteration(), 7);
  EXPECT_EQ(phase.seq(), kNone);
  EXPECT_EQ(phase.bucket(), kNone);
  const Span hook = row(EventKind::Hook, 7, 2, 0xff);
  EXPECT_EQ(hook.bucket(), 2);
  EXPECT_EQ(hook.seq(), kNone);
  EXPECT_EQ(hook.iteration(), kNone);
  EXPECT_EQ(hook.name(), kNone);
  const Span launch = row(EventKind::BucketLaunch, 11, 1, 0xff);
  EXPECT_EQ(launch.bucket(), 1);
  EXPECT_EQ(launch.seq(), 11);
  const Span gather = row(EventKind::Collective, 42, 5, uint8_t(CollectiveOp::AllGather));
  EXPECT_EQ(gather.seq(), 42);
  EXPECT_EQ(gather.op(), CollectiveOp::AllGather);
  EXPECT_EQ(gather.bucket(), kNone);
  EXPECT_EQ(gather.unit(), kNone);
  EXPECT_EQ(gather.iteration(), kNone);
  EXPECT_FALSE(gather.state());
  const Span full = row(EventKind::UnitState, 7, 2, uint8_t(UnitState::Full));
  EXPECT_EQ(full.unit(), 2);
  EXPECT_EQ(full.state(), UnitState::Full);
  EXPECT_EQ(full.bucket(), kNone);
  EXPECT_FALSE(full.op());
  // An op the file lacks is none, and the span is labelled by its kind.
  Model model;
  const Span unknown = row(EventKind::Collective, 1, kNone, 0xff);
  EXPECT_FALSE(unknown.op());
  EXPECT_EQ(span_label(model, unknown), "collective");
  EXPECT_EQ(span_label(model, row(EventKind::UnitState, 1, 0, 9)), "unit_state");
}

// Note [Span to event]: spans that begin together are numbered in the order the file holds
// them, whatever their rows; a span ending before it begins has no event to look up; spans
// added to a numbered lane (update_model) come after the ones it had.
TEST(ViewerRows, SpansThatBeginTogetherAreNumberedInFileOrder) {
  Lane lane;
  // File order. Buckets name the spans here.
  lane.spans = {Span::hook(10, 20, 0), Span::hook(10, 20, 1), Span::phase(10, 30, 0, 0),
                Span::bucket_ready(10, 10, 3), Span::hook(10, 5, 4), Span::hook(40, 50, 5)};
  build_rows(lane);
  std::map<int32_t, uint32_t> index_of;  // by bucket
  for (const Span& s : lane.spans) index_of[s.kind() == EventKind::Phase ? -2 : s.bucket()] = s.same_begin_index();
  EXPECT_EQ(index_of[0], 0u);
  EXPECT_EQ(index_of[1], 1u);
  EXPECT_EQ(index_of[-2], 2u);  // the phase: first in its rows, third in the file
  EXPECT_EQ(index_of[3], 3u);
  EXPECT_EQ(index_of[4], Span::kNoEvent);
  EXPECT_EQ(index_of[5], 0u);

  std::vector<Span> grown = lane.spans;
  grown.push_back(Span::hook(10, 20, 6));
  grown.push_back(Span::hook(40, 45, 7));
  std::vector<uint16_t> rows;
  build_rows(lane, grown, rows, lane.spans.size());
  index_of.clear();
  for (const Span& s : lane.spans) index_of[s.kind() == EventKind::Phase ? -2 : s.bucket()] = s.same_begin_index();
  EXPECT_EQ(index_of[0], 0u);
  EXPECT_EQ(index_of[-2], 2u);
  EXPECT_EQ(index_of[3], 3u);
  EXPECT_EQ(index_of[6], 4u);
  EXPECT_EQ(index_of[5], 0u);
  EXPECT_EQ(index_of[7], 1u);
}

TEST(ViewerLod, FirstVisibleIsABinarySearchOnEndMax) {
  const Lane lane = hooks(1000);
  EXPECT_EQ(first_visible(lane, 0, 0), 0u);
  EXPECT_EQ(first_visible(lane, 0, 55), 5u);     // [50, 60] still visible at 55
  EXPECT_EQ(first_visible(lane, 0, 60), 5u);     // ends exactly at 60
  EXPECT_EQ(first_visible(lane, 0, 61), 6u);
  EXPECT_EQ(first_visible(lane, 0, 1'000'000), 1000u);
}

TEST(ViewerLod, ZoomedOutFoldsIntoFewBlocksThatCountEverySpan) {
  const Lane lane = hooks(100000);  // 1 ms of 10 ns hooks
  std::vector<DrawItem> items;
  fold_row(lane, 0, TimeMap{0, 1'000'000, 0, 1000}, 3, items);
  EXPECT_LE(items.size(), 1000u / 3 + 2);
  uint64_t counted = 0;
  for (const DrawItem& item : items) counted += item.count;
  EXPECT_EQ(counted, 100000u);
}

TEST(ViewerLod, ZoomedInDrawsSpansOneByOne) {
  const Lane lane = hooks(100000);
  std::vector<DrawItem> items;
  fold_row(lane, 0, TimeMap{5000, 5100, 0, 1000}, 3, items);  // 10 px per ns
  ASSERT_GE(items.size(), 10u);
  for (const DrawItem& item : items) EXPECT_EQ(item.count, 1u);
  EXPECT_EQ(items.front().first, 499u);  // [4990, 5000] touches the left edge
}

TEST(ViewerLod, SpanAtFindsTheSpanUnderTheMouse) {
  const Lane lane = hooks(100);
  EXPECT_EQ(span_at(lane, 0, 55, 0), 5);
  EXPECT_EQ(span_at(lane, 0, 5000, 0), -1);
  EXPECT_EQ(span_at(lane, 0, 1003, 5), 99);  // within the slack after the last one
}

TEST(ViewerLod, MeasuringFormatsDurationsTicksAndBytes) {
  EXPECT_EQ(format_duration(812), "812 ns");
  EXPECT_EQ(format_duration(56'700), "56.7 us");
  EXPECT_EQ(format_duration(1'234'000), "1.234 ms");
  EXPECT_EQ(format_duration(2.5e9), "2.5 s");
  EXPECT_EQ(format_duration(1170.4e9), "1170 s");  // not "1.17e+03 s"
  EXPECT_EQ(format_tick(10.8412e9, 1e5), "10.8412 s");
  EXPECT_EQ(format_tick(10.84e9, 1e9), "11 s");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(12 << 20), "12.0 MiB");
  const TimeMap map{0, 1000, 100, 500};
  EXPECT_DOUBLE_EQ(map.x(500), 350);
  EXPECT_DOUBLE_EQ(map.t(350), 500);
  EXPECT_GE(tick_step(map, 100), 200);
}

// The ruler's labels never collide: at 20 zoom levels from the whole run down to 2 us, in three
// window widths (1024, 1280 and 1920 px), no two labels of a row come within the gap, none leaves
// the timeline, time labels never use an exponent, and the iterations in view are named (on a
// row of their own) wherever there is room.
TEST(ViewerLod, RulerLabelsNeverOverlapAtAnyZoomOrWidth) {
  TempDir dir;
  auto model = synth_model(dir, 2, 40000);
  const auto& iterations = model->ranks.at(0).iterations;
  ASSERT_GT(iterations.size(), 10u);
  // Dear ImGui's built-in font: 7 px a character.
  const auto width_of = [](const std::string& text) { return 7.0f * float(text.size()); };
  const double whole = double(model->t_end - model->t_begin);
  const double centre = double(iterations[iterations.size() / 2].begin_ns);
  for (const double window : {1024.0, 1280.0, 1920.0}) {
    for (int zoom = 0; zoom < 20; ++zoom) {
      const double span = whole * std::pow(2e3 / whole, zoom / 19.0);
      const double t0 = zoom == 0 ? double(model->t_begin) : centre - span / 2;
      const TimeMap map{t0, t0 + span, 132, window - 132 - 14};
      const Ruler ruler = layout_ruler(map, double(model->t_begin), iterations, width_of);
      const std::string at = "window " + std::to_string(int(window)) + ", zoom " + std::to_string(zoom);
      std::map<int, float> row_end = {{0, -1e9f}, {1, -1e9f}};
      int time_labels = 0;
      for (const RulerLabel& label : ruler.labels) {
        EXPECT_GE(label.x, map.x0) << at;
        EXPECT_LE(label.x + label.width, map.x0 + map.width) << at;
        EXPECT_GE(label.x, row_end[label.row] + kRulerLabelGap) << at << ": '" << label.text << "'";
        row_end[label.row] = label.x + label.width;
        EXPECT_EQ(label.text.find("e+"), std::string::npos) << at << ": " << label.text;
        time_labels += label.row == 0;
      }
      EXPECT_GE(time_labels, 2) << at;
      EXPECT_LE(ruler.ticks.size(), size_t(window / 40)) << at;
      // Zoomed in on one iteration's start, its name is on the ruler.
      if (span < double(iterations[1].begin_ns - iterations[0].begin_ns)) {
        bool named = false;
        for (const RulerLabel& label : ruler.labels) named = named || label.row == 1;
        const bool in_view = centre >= t0 && centre <= t0 + span;
        if (in_view && map.x(centre) + 7 * 6 < map.x0 + map.width) {
          EXPECT_TRUE(named) << at;
        }
      }
    }
  }
}

// Zoomed into the middle of one iteration, the iterations row names it at the left edge: no
// iteration begins in view, and a blank row left the class guessing which one it was.
TEST(ViewerLod, ZoomedIntoAnIterationTheRowNamesIt) {
  TempDir dir;
  auto model = synth_model(dir, 2, 40000);
  const auto& iterations = model->ranks.at(0).iterations;
  ASSERT_GT(iterations.size(), 10u);
  const auto width_of = [](const std::string& text) { return 7.0f * float(text.size()); };
  const IterationSpan& shown = iterations[5];
  const double length = double(shown.end_ns - shown.begin_ns);
  const double t0 = double(shown.begin_ns) + 0.3 * length;
  const TimeMap map{t0, t0 + 0.4 * length, 132, 1000};
  const Ruler ruler = layout_ruler(map, double(model->t_begin), iterations, width_of);
  std::vector<RulerLabel> row;
  for (const RulerLabel& label : ruler.labels) {
    if (label.row == 1) row.push_back(label);
  }
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0].text, "it " + std::to_string(shown.iteration));
  EXPECT_FLOAT_EQ(row[0].x, 134.0f);
  // With the next iteration's start in view too, both are named, the pinned one first.
  const TimeMap across{t0, double(shown.end_ns) + 0.3 * length, 132, 1000};
  std::vector<std::string> names;
  for (const RulerLabel& label : layout_ruler(across, double(model->t_begin), iterations, width_of).labels) {
    if (label.row == 1) names.push_back(label.text);
  }
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0], "it " + std::to_string(shown.iteration));
  EXPECT_EQ(names[1], "it " + std::to_string(shown.iteration + 1));
}

// Zoomed out so far that the iterations row names only every few iterations, the label nearest
// the playhead on its left still names the playhead's own iteration, wherever it stands ("it 27"
// beside a playhead in 28 told a class the wrong one), and the row's labels still keep apart.
TEST(ViewerLod, TheRulerNamesThePlayheadsIteration) {
  TempDir dir;
  auto model = synth_model(dir, 2, 40000);
  const auto& iterations = model->ranks.at(0).iterations;
  ASSERT_GT(iterations.size(), 30u);
  const auto width_of = [](const std::string& text) { return 7.0f * float(text.size()); };
  const TimeMap map{double(iterations[2].begin_ns), double(iterations[30].end_ns), 132, 1000};
  int skipped = 0;
  for (size_t i = 2; i <= 30; ++i) {
    const IterationSpan& own = iterations[i];
    const double playhead = double(own.begin_ns) + 0.6 * double(own.end_ns - own.begin_ns);
    const Ruler ruler = layout_ruler(map, double(model->t_begin), iterations, width_of, playhead);
    const RulerLabel* nearest = nullptr;
    float row_end = -1e9f;
    for (const RulerLabel& label : ruler.labels) {
      if (label.row != 1) continue;
      EXPECT_GE(label.x, row_end + kRulerLabelGap) << "playhead in iteration " << own.iteration << ": " << label.text;
      row_end = label.x + label.width;
      if (label.x <= map.x(playhead)) nearest = &label;
    }
    ASSERT_NE(nearest, nullptr) << "iteration " << own.iteration;
    EXPECT_EQ(nearest->text, "it " + std::to_string(own.iteration));
    // Without the playhead the row leaves this iteration out (the case this guards).
    bool named_without = false;
    for (const RulerLabel& label : layout_ruler(map, double(model->t_begin), iterations, width_of).labels) {
      named_without = named_without || (label.row == 1 && label.text == "it " + std::to_string(own.iteration));
    }
    skipped += !named_without;
  }
  EXPECT_GT(skipped, 10) << "the view should be zoomed out far enough to skip iterations";
}

// A skew's label goes to the first place that covers no span's label (the timeline's skew
// labels once sat on top of the all-reduce's own), and nowhere when every place would.
TEST(ViewerLod, ALabelTakesTheFirstPlaceClearOfTheOthers) {
  const std::vector<ScreenRect> taken = {{100, 10, 160, 25}, {200, 10, 260, 25}};
  EXPECT_EQ(first_clear_place({{120, 12, 150, 24}, {170, 12, 195, 24}}, taken), 1);
  EXPECT_EQ(first_clear_place({{170, 12, 195, 24}, {120, 12, 150, 24}}, taken), 0);
  EXPECT_EQ(first_clear_place({{150, 0, 210, 30}, {90, 20, 110, 40}}, taken), -1);
  // Touching edges do not overlap: [x0, x1) x [y0, y1).
  EXPECT_EQ(first_clear_place({{160, 10, 200, 25}}, taken), 0);
  EXPECT_EQ(first_clear_place({{100, 25, 160, 40}}, taken), 0);
  EXPECT_EQ(first_clear_place({}, taken), -1);
  EXPECT_EQ(first_clear_place({{0, 0, 5, 5}}, {}), 0);
}

// Span labels are whole or cut with "..", never clipped mid-letter or shorter than 3 letters.
TEST(ViewerLod, LabelsElideCleanly) {
  const auto width_of = [](const std::string& text) { return 7.0f * float(text.size()); };
  EXPECT_EQ(elide("backward", 56, width_of), "backward");
  EXPECT_EQ(elide("finalize_backward", 100, width_of), "finalize_bac..");  // 14 of 7 px
  EXPECT_EQ(elide("finalize_backward", 35, width_of), "fin..");
  EXPECT_EQ(elide("finalize_backward", 34, width_of), "");
  EXPECT_EQ(elide("", 10, width_of), "");
}

// Pan and zoom stay on the run (1000 to 2000 ns here, margins of 100).
TEST(ViewerLod, TheViewStaysOnTheRun) {
  EXPECT_EQ(clamp_view(1200, 1300, 1000, 2000), std::make_pair(1200.0, 1300.0));
  EXPECT_EQ(clamp_view(2550, 2650, 1000, 2000), std::make_pair(2000.0, 2100.0)) << "panned far right";
  EXPECT_EQ(clamp_view(-5000, -4000, 1000, 2000), std::make_pair(900.0, 1900.0)) << "panned far left";
  EXPECT_EQ(clamp_view(0, 1e12, 1000, 2000), std::make_pair(900.0, 2100.0)) << "zoomed far out";
}

TEST(ViewerModel, LoadsASyntheticRunCompletely) {
  TempDir dir;
  auto model = synth_model(dir, 3, 20000);
  dpscope::trace::Reader reader(model->path);
  EXPECT_EQ(model->events, reader.event_count());
  ASSERT_EQ(model->ranks.size(), 3u);
  EXPECT_GT(model->iterations, 10);
  for (const RankData& r : model->ranks) {
    EXPECT_EQ(int(r.iterations.size()), model->iterations);
    EXPECT_GT(r.memory_peak_bytes, 0);
    EXPECT_GE(r.lanes.size(), 2u);
  }
  EXPECT_LT(model->t_begin, model->t_end);
  EXPECT_EQ(model->ranks[1].iteration_at(model->ranks[1].iterations[3].begin_ns + 1), 3);
  // Each rank's extent (where its memory graph is drawn): its events' and samples' own.
  std::map<int32_t, std::pair<int64_t, int64_t>> extent;
  const auto extend = [&](int32_t rank, int64_t first, int64_t last) {
    auto [it, fresh] = extent.try_emplace(rank, first, last);
    it->second = {std::min(it->second.first, first), std::max(it->second.second, last)};
  };
  reader.for_each_event([&](const dpscope::trace::Event& e) {
    extend(e.rank, e.begin_ns, e.end_ns);
    return true;
  });
  for (const auto& sample : reader.memory()) extend(sample.rank, sample.ts_ns, sample.ts_ns);
  for (const RankData& r : model->ranks) {
    EXPECT_EQ(r.t_begin, extent.at(r.info.rank).first) << "rank " << r.info.rank;
    EXPECT_EQ(r.t_end, extent.at(r.info.rank).second) << "rank " << r.info.rank;
  }
}

// On a GPU the categories are host memory; the model keeps the GPU's own peak (cuda_allocated)
// beside it, which the memory graph's labels and the Stats panel show. A CPU run has none.
TEST(ViewerModel, GpuMemoryPeakBesideTheHostPeak) {
  namespace trace = dpscope::trace;
  TempDir dir;
  const std::string path = dir.file("gpu.sqlite");
  {
    trace::Writer w(path);
    w.begin();
    trace::RankInfo rank;
    rank.rank = 0;
    rank.host = "localhost";
    rank.device = "cuda:0";
    rank.status = "complete";
    w.put_rank(rank);
    w.add_memory(trace::MemorySample{0, 1000, trace::MemoryCategory::Data, 1 << 20});
    w.add_memory(trace::MemorySample{0, 1000, trace::MemoryCategory::CudaAllocated, 64 << 20});
    w.add_memory(trace::MemorySample{0, 2000, trace::MemoryCategory::CudaAllocated, 66 << 20});
    w.add_memory(trace::MemorySample{0, 3000, trace::MemoryCategory::CudaAllocated, 65 << 20});
    w.commit();
    w.finish();
  }
  const auto gpu = load_model(path);
  ASSERT_EQ(gpu->ranks.size(), 1u);
  EXPECT_EQ(gpu->ranks[0].memory_peak_bytes, 1 << 20);
  EXPECT_EQ(gpu->ranks[0].gpu_memory_peak_bytes, 66 << 20);
  // The graph's labels: the categories' peak as the host's, the GPU's cuda_allocated under it.
  const MemoryGraphLabels labels = memory_graph_labels(*gpu, gpu->ranks[0], nullptr, false);
  EXPECT_EQ(labels.peak, "host " + format_bytes(1 << 20));
  EXPECT_EQ(labels.second, "GPU " + format_bytes(66 << 20));
  const auto cpu = synth_model(dir, 1, 2000);
  EXPECT_EQ(cpu->ranks[0].gpu_memory_peak_bytes, -1);
  EXPECT_EQ(memory_graph_labels(*cpu, cpu->ranks[0], nullptr, false).peak.rfind("peak ", 0), 0u);
}

// By ownership (a GPU run's default) the categories split cuda_allocated: the graph is labelled
// GPU, with the host's largest total beside it.
TEST(ViewerModel, GpuCategoriesByOwnershipLabelTheGraphGpu) {
  namespace trace = dpscope::trace;
  TempDir dir;
  const std::string path = dir.file("gpu-ownership.sqlite");
  {
    trace::Writer w(path);
    w.begin();
    w.set_meta(trace::meta_key::kMemoryAccounting, trace::to_string(trace::MemoryAccounting::Ownership));
    trace::RankInfo rank;
    rank.rank = 0;
    rank.host = "localhost";
    rank.device = "cuda:0";
    rank.status = "complete";
    w.put_rank(rank);
    for (const auto& [ts, params, activations, host] :
         std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{{1000, 8 << 20, 56 << 20, 3 << 20},
                                                                     {2000, 8 << 20, 58 << 20, 5 << 20}}) {
      w.add_memory(trace::MemorySample{0, ts, trace::MemoryCategory::Parameters, params});
      w.add_memory(trace::MemorySample{0, ts, trace::MemoryCategory::Activations, activations});
      w.add_memory(trace::MemorySample{0, ts, trace::MemoryCategory::AllocatorTotal, host});
      w.add_memory(trace::MemorySample{0, ts, trace::MemoryCategory::CudaAllocated, params + activations});
    }
    w.commit();
    w.finish();
  }
  const auto model = load_model(path);
  const Analysis analysis = analyze_file(*model);
  const auto* stats = analysis.rank(*model, 0);
  ASSERT_NE(stats, nullptr);
  const MemoryGraphLabels labels = memory_graph_labels(*model, model->ranks[0], stats, false);
  EXPECT_EQ(model->ranks[0].memory_peak_bytes, 66 << 20) << "the categories add up to cuda_allocated";
  EXPECT_EQ(labels.peak, "GPU " + format_bytes(66 << 20));
  EXPECT_EQ(labels.second, "host " + format_bytes(5 << 20));
  EXPECT_EQ(analysis.stats.memory_accounting, trace::MemoryAccounting::Ownership);
}

TEST(ViewerModel, BadFilesThrowNamingTheFile) {
  TempDir dir;
  EXPECT_THROW(load_model(dir.file("missing.sqlite")), dpscope::trace::TraceError);
  try {
    load_model(dir.file("missing.sqlite"));
  } catch (const dpscope::trace::TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.sqlite"), std::string::npos);
  }
}

TEST(ViewerAnalysis, SyntheticCollectivesMatchOnEveryRankAndFlowsLeadThere) {
  TempDir dir;
  auto model = synth_model(dir, 3, 20000);
  const Analysis a = analyze_file(*model);
  EXPECT_EQ(a.stats.mismatches, 0);
  ASSERT_FALSE(a.collectives.empty());
  for (const CollectiveSpans& c : a.collectives) {
    EXPECT_EQ(c.spans.size(), 3u);
    ASSERT_NE(a.trace_match(c), nullptr) << "seq " << c.seq;
    EXPECT_EQ(a.trace_match(c)->ranks.size(), 3u);
  }
  for (size_t r = 0; r < model->ranks.size(); ++r) {
    const dpscope::analysis::RankStats* stats = a.rank(*model, r);
    ASSERT_NE(stats, nullptr);
    EXPECT_GT(stats->overlap.compute_ms, 0);
    EXPECT_GT(stats->overlap.comm_ms, 0);
    EXPECT_GE(stats->overlap.exposed_comm_ms, 0);
    EXPECT_LE(stats->overlap.overlap_ms, stats->overlap.comm_ms + 1e-9);
    EXPECT_FALSE(stats->buckets.empty());
  }
  // A hook in iteration 2 of rank 1 flows to its bucket, the launch, the all-reduce, and the
  // same all-reduce on the two other ranks.
  const RankData& rank = model->ranks[1];
  const IterationSpan* it = rank.find_iteration(2);
  ASSERT_NE(it, nullptr);
  SpanRef hook;
  const Lane& main = rank.lanes[0];
  for (size_t i = 0; i < main.spans.size() && !hook.valid(); ++i) {
    if (main.spans[i].kind() == EventKind::Hook && main.spans[i].begin_ns > it->begin_ns) hook = {1, 0, int64_t(i)};
  }
  ASSERT_TRUE(hook.valid());
  const auto flows = flows_of(*model, a, hook);
  ASSERT_EQ(flows.size(), 5u);
  EXPECT_EQ(flows[0].kind, Flow::HookToBucket);
  EXPECT_EQ(flows[1].kind, Flow::BucketToLaunch);
  EXPECT_EQ(flows[2].kind, Flow::LaunchToCollective);
  EXPECT_EQ(span_of(*model, flows[2].to).kind(), EventKind::Collective);
  EXPECT_EQ(flows[3].kind, Flow::SameCollective);
  EXPECT_NE(flows[3].to.rank, 1);
  // Every hook of the iteration has its flows, also the one that completes its bucket (which
  // marks the bucket ready and launches it before it returns: the instants lie inside it).
  int completing = 0;
  for (size_t i = 0; i < main.spans.size(); ++i) {
    const Span& s = main.spans[i];
    if (s.kind() != EventKind::Hook || s.begin_ns < it->begin_ns || s.end_ns > it->end_ns) continue;
    const auto hook_flows = flows_of(*model, a, {1, 0, int64_t(i)});
    ASSERT_GE(hook_flows.size(), 3u) << "hook at " << s.begin_ns;
    EXPECT_EQ(hook_flows[0].kind, Flow::HookToBucket);
    const Span& ready = span_of(*model, hook_flows[0].to);
    EXPECT_EQ(ready.bucket(), s.bucket());
    completing += ready.begin_ns <= s.end_ns;
  }
  EXPECT_GT(completing, 0) << "no hook completed its bucket inside its span";
}

// The viewer ties the trace's matches to its spans by sequence number; a collective the trace
// calls a mismatch is one in the viewer too (the matching itself: tests/analysis/test_stats_ddp.cpp).
TEST(ViewerAnalysis, TheTracesMismatchesMarkTheSpans) {
  auto model = std::make_shared<Model>();
  dpscope::analysis::RunStats stats;
  std::vector<std::vector<dpscope::analysis::CollectiveStats>> by_rank(2);
  for (int16_t r = 0; r < 2; ++r) {
    RankData rank;
    rank.info.rank = r;
    rank.lanes.resize(2);
    for (int16_t seq = 0; seq < (r == 0 ? 3 : 2); ++seq) {
      const Span s = Span::collective(100 * seq, 100 * seq + 50, dpscope::trace::CollectiveOp::AllReduce, seq);
      rank.lanes[1].spans.push_back(s);
      dpscope::analysis::CollectiveStats c;
      c.grp = 0;
      c.seq = seq;
      c.bytes = 4096;
      c.begin_ns = s.begin_ns;
      by_rank[size_t(r)].push_back(c);
    }
    for (Lane& lane : rank.lanes) build_rows(lane);
    model->ranks.push_back(std::move(rank));
  }
  stats.matches = dpscope::analysis::match_collectives({0, 1}, by_rank, 2);
  const Analysis a = analyze(*model, stats);
  ASSERT_NE(a.match(2), nullptr);
  EXPECT_TRUE(a.mismatch(*a.match(2)));
  EXPECT_NE(a.trace_match(*a.match(2))->why.find("1 of 2"), std::string::npos);
  EXPECT_FALSE(a.mismatch(*a.match(0)));
  EXPECT_EQ(a.match(0)->spans.size(), 2u);
}

TEST(ViewerAnalysis, RangeSummaryAndFindCountEverySpan) {
  TempDir dir;
  auto model = synth_model(dir, 2, 10000);
  int64_t total = 0;
  for (const RangeRow& row : summarize_range(*model, model->t_begin, model->t_end)) {
    total += row.count;
    EXPECT_NEAR(row.avg_ns() * double(row.count), row.sum_ns, 1e-6 * row.sum_ns + 1);
  }
  EXPECT_EQ(total, model->events);
  const auto hooks = find_spans(*model, FindQuery(*model, "kind:hook"), 10);
  dpscope::trace::Reader reader(model->path);
  EXPECT_EQ(hooks.total, int64_t(reader.events_of_kind(EventKind::Hook).size()));
  EXPECT_EQ(hooks.first.size(), 10u);
  const auto allreduce = find_spans(*model, FindQuery(*model, "AllReduce"), 5);
  EXPECT_GT(allreduce.total, 0);
  for (const SpanRef& r : allreduce.first) {
    const Span& s = span_of(*model, r);
    EXPECT_TRUE(s.kind() == EventKind::Collective || s.kind() == EventKind::CollectiveWait);
  }
  EXPECT_EQ(find_spans(*model, FindQuery(*model, "forward"), 0).total, model->iterations * 2);
  EXPECT_EQ(find_spans(*model, FindQuery(), 10).total, 0);
  // Spaces around the text are ignored; only spaces find nothing.
  EXPECT_EQ(find_spans(*model, FindQuery(*model, " forward "), 0).total, model->iterations * 2);
  EXPECT_EQ(find_spans(*model, FindQuery(*model, "   "), 10).total, 0);
  // The listed matches are the earliest, in time order, across ranks and lanes.
  const auto waits = find_spans(*model, FindQuery(*model, "allreduce"), 50);
  ASSERT_EQ(waits.first.size(), 50u);
  int64_t latest_listed = 0;
  for (size_t i = 0; i < waits.first.size(); ++i) {
    const Span& s = span_of(*model, waits.first[i]);
    if (i > 0) {
      EXPECT_GE(s.begin_ns, latest_listed) << "match " << i;
    }
    latest_listed = s.begin_ns;
  }
  const auto all = find_spans(*model, FindQuery(*model, "allreduce"), size_t(waits.total));
  int64_t earlier_unlisted = 0;
  for (const SpanRef& r : all.first) earlier_unlisted += span_of(*model, r).begin_ns < latest_listed;
  EXPECT_LE(earlier_unlisted, 50);
}
