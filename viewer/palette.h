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
};
const Theme& theme();
ThemeKind theme_kind();
// Switches the theme, ImGui's style colours with it (call between frames).
void set_theme(ThemeKind kind);
// "dark" | "projector".
const char* to_string(ThemeKind kind);
bool parse_theme(const std::string& text, ThemeKind* out);

// A what-if lane's name: a prediction, in the colour of neither theme's recorded lanes.
inline constexpr ImU32 kWhatifTextColor = IM_COL32(120, 200, 255, 255);

// Highlights.
inline constexpr ImU32 kSelectedColor = IM_COL32(255, 255, 255, 255);
inline constexpr ImU32 kFoundColor = IM_COL32(255, 230, 0, 255);
inline constexpr ImU32 kMismatchColor = IM_COL32(255, 40, 40, 255);
inline constexpr ImU32 kFlowColor = IM_COL32(255, 255, 255, 200);
inline constexpr ImU32 kSkewColor = IM_COL32(255, 140, 0, 220);
inline constexpr ImU32 kRangeColor = IM_COL32(90, 160, 255, 50);
inline constexpr ImU32 kPeakColor = IM_COL32(255, 70, 70, 255);
inline constexpr ImU32 kPlayheadColor = IM_COL32(80, 255, 120, 200);

}  // namespace dpscope::view
