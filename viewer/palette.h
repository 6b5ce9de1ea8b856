// The viewer's colours, so that a span, its bucket bar and its legend entry agree in every
// panel: phases by name, collectives by op, unit states by state, memory by category.
#pragma once

#include <imgui.h>

#include "viewer/model.h"

namespace dpscope::view {

// The fill colour of a span on the timeline. Pure.
ImU32 span_color(const Model& model, const EventSpan& span);
// A folded block of many narrow spans.
inline constexpr ImU32 kFoldColor = IM_COL32(120, 124, 136, 255);
// A memory category's colour in the stacked graph and its legend.
ImU32 memory_color(int category);
// A unit state's colour (trace::UnitState), or the "sharded" colour for anything else.
ImU32 unit_state_color(int state);
// Highlights.
inline constexpr ImU32 kSelectedColor = IM_COL32(255, 255, 255, 255);
inline constexpr ImU32 kFoundColor = IM_COL32(255, 230, 0, 255);
inline constexpr ImU32 kMismatchColor = IM_COL32(255, 40, 40, 255);
inline constexpr ImU32 kFlowColor = IM_COL32(255, 255, 255, 200);
inline constexpr ImU32 kSkewColor = IM_COL32(255, 140, 0, 220);
inline constexpr ImU32 kRangeColor = IM_COL32(90, 160, 255, 50);
inline constexpr ImU32 kPeakColor = IM_COL32(255, 70, 70, 255);
inline constexpr ImU32 kIterationColor = IM_COL32(200, 200, 200, 70);
inline constexpr ImU32 kPlayheadColor = IM_COL32(80, 255, 120, 200);

}  // namespace dpscope::view
