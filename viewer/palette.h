// The viewer's colours, so that a span, its bucket bar and its legend entry agree in every
// panel: phases by name, collectives by op, unit states by state, memory by category.
#pragma once

#include <imgui.h>

#include <optional>
#include <string>

#include "viewer/model.h"

namespace dpscope::view {

// The fill colour of a span on the timeline. Pure.
ImU32 span_color(const Model& model, const Span& span);
// A phase's colour by name ("forward", "backward", "optimizer_step", "iteration"; any other:
// construction steps, finalize_backward, ...), a collective's by op: the timeline's and the
// legend's.
ImU32 phase_color(std::string_view name);
ImU32 collective_color(trace::CollectiveOp op);
ImU32 hook_color(int bucket);  // buckets alternate between two yellows
// A folded block of many narrow spans.
inline constexpr ImU32 kFoldColor = IM_COL32(120, 124, 136, 255);
// A memory category's colour in the stacked graph and its legend.
ImU32 memory_color(int category);
// A unit state's colour, or the "sharded" colour for none (between states, or unknown).
ImU32 unit_state_color(std::optional<trace::UnitState> state);
// Bucket instants, waits.
inline constexpr ImU32 kBucketReadyColor = IM_COL32(255, 235, 120, 255);
inline constexpr ImU32 kBucketLaunchColor = IM_COL32(255, 120, 80, 255);
inline constexpr ImU32 kBucketDoneColor = IM_COL32(120, 230, 120, 255);
// The Buckets panel: a slot whose gradient is in, an imported bucket whose all-reduce is done;
// and a slot still empty.
inline constexpr ImU32 kBucketSlotFilledColor = IM_COL32(230, 200, 60, 255);
inline constexpr ImU32 kBucketSlotEmptyColor = IM_COL32(60, 62, 70, 255);
inline constexpr ImU32 kWaitColor = IM_COL32(120, 40, 40, 255);
inline constexpr ImU32 kMarkColor = IM_COL32(180, 180, 220, 255);
// The window's own colours (backgrounds, text, bands, lines) in two themes: dark (the default,
// for a screen) and projector (dark text on light ground, which a projector's washed-out blacks
// and a lit room leave readable). The spans' colours are the same in both. UI thread only.
enum class ThemeKind { Dark, Projector };
struct Theme {
  ImU32 background;      // behind everything (the GL clear colour)
  ImU32 ruler;           // the ruler's band
  ImU32 rank_header;     // a rank group's header band, and its text
  ImU32 rank_header_text;
  ImU32 run_title;       // compare: a run's title band, and its text
  ImU32 run_title_text;
  ImU32 text;            // lane names, ruler labels
  ImU32 dim_text;        // captions
  ImU32 lane_separator;
  ImU32 memory_ground;   // behind a memory graph
  ImU32 iteration_line;
  ImU32 span_text;       // a label on a span
  ImU32 narration;       // the narration line, and the keys in the help
  ImU32 whatif_band;     // behind a what-if lane (whatif_lanes.h), so it is not taken for a recording
  ImU32 whatif_text;     // a what-if lane's name: a prediction, in the colour of no recorded lane's
  ImU32 peak_text;       // a memory graph's "peak" label
  ImU32 skew;            // the flow between two ranks' parts of a collective, and its label
  ImU32 range_text;      // the measured range's length
  ImU32 error_text;      // why the cluster clock cannot be shown (under the header)
  // Lines drawn on the lanes' and the memory graphs' ground: the flows (hook -> bucket ->
  // collective) and the memory graph's totals (the allocator's, CUDA's allocated and reserved),
  // each at least 3:1 against its ground (WCAG's contrast for graphics), as the legend's
  // swatches are.
  ImU32 flow;
  ImU32 total_line;
  ImU32 cuda_allocated_line;
  ImU32 cuda_reserved_line;
  // The critical path (K): the line under each piece's lane, the jumps from lane to lane and its
  // words in the lanes' corner, at least 4.5:1 against the ground.
  ImU32 critical_path;
};
const Theme& theme();
ThemeKind theme_kind();
// Switches the theme, ImGui's style colours with it (call between frames).
void set_theme(ThemeKind kind);
// "dark" | "projector".
const char* to_string(ThemeKind kind);
bool parse_theme(const std::string& text, ThemeKind* out);

// Note [Text contrast]
// Every text is drawn in a colour whose WCAG 2 contrast with what it is drawn on is at least
// kMinTextContrast (AA for normal text), in both themes: a class reads the screen from the back
// row, often off a projector that washes the colours out. A label on a span takes the theme's
// span_text, or a light colour on the fills where that would not stand out (label_color_on);
// the theme's own text colours are chosen against its grounds. tests/viewer/test_palette.cpp
// checks every pair the panels draw.
inline constexpr double kMinTextContrast = 4.5;
// The WCAG 2 contrast ratio of two colours (their alpha ignored), from 1 to 21. Pure.
double contrast_ratio(ImU32 a, ImU32 b);
// The colour of a label drawn on `fill`: the theme's span_text, or a light one where span_text's
// contrast with the fill is below kMinTextContrast, chosen once per theme and fill (UI thread
// only). See Note [Text contrast].
ImU32 label_color_on(ImU32 fill);
// A swatch of `color` and `text` beside it in the theme's text colour, on one line (the legend,
// the memory tooltip, the Units tab's key): a colour is named by its swatch, never by colouring
// the text, which a light ground would wash out. UI thread, inside an ImGui window.
void color_entry(ImU32 color, const char* text);

// Highlights.
inline constexpr ImU32 kSelectedColor = IM_COL32(255, 255, 255, 255);
inline constexpr ImU32 kFoundColor = IM_COL32(255, 230, 0, 255);
inline constexpr ImU32 kMismatchColor = IM_COL32(255, 40, 40, 255);
inline constexpr ImU32 kRangeColor = IM_COL32(90, 160, 255, 50);
inline constexpr ImU32 kPeakColor = IM_COL32(255, 70, 70, 255);
inline constexpr ImU32 kPlayheadColor = IM_COL32(80, 255, 120, 200);

}  // namespace dpscope::view
