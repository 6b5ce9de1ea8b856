// Note [Text contrast]: every text the panels draw against what it is drawn on, in both themes,
// has a WCAG 2 contrast of at least kMinTextContrast (4.5, AA for normal text): span labels on
// every fill the timeline uses, the theme's texts on its grounds, Dear ImGui's own text and greyed
// text on its window ground. The ratio itself is held to WCAG's worked values.
#include <gtest/gtest.h>
#include <imgui.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "trace/vocabulary.h"
#include "viewer/palette.h"

namespace dpscope::view {
namespace {

// Every fill a label may be drawn on: phases, collectives, unit states, hooks, waits, folded
// blocks, marks.
std::vector<std::pair<std::string, ImU32>> span_fills() {
  std::vector<std::pair<std::string, ImU32>> fills;
  for (const std::string_view phase : {trace::kPhaseIteration, trace::kPhaseForward, trace::kPhaseBackward,
                                       trace::kPhaseOptimizerStep, trace::kPhaseFinalizeBackward}) {
    fills.emplace_back(std::string(phase), phase_color(phase));
  }
  for (int op = 0; op < trace::kCollectiveOpCount; ++op) {
    const auto collective = static_cast<trace::CollectiveOp>(op);
    fills.emplace_back(std::string(trace::to_string(collective)), collective_color(collective));
  }
  for (int state = 0; state < trace::kUnitStateCount; ++state) {
    const auto unit = static_cast<trace::UnitState>(state);
    fills.emplace_back("unit " + std::string(trace::to_string(unit)), unit_state_color(unit));
  }
  fills.emplace_back("unit sharded", unit_state_color(std::nullopt));
  fills.emplace_back("hook, even bucket", hook_color(0));
  fills.emplace_back("hook, odd bucket", hook_color(1));
  fills.emplace_back("wait", kWaitColor);
  fills.emplace_back("folded block", kFoldColor);
  fills.emplace_back("mark", kMarkColor);
  return fills;
}

TEST(ViewerPalette, TheContrastRatioIsWcags) {
  EXPECT_DOUBLE_EQ(contrast_ratio(IM_COL32(0, 0, 0, 255), IM_COL32(255, 255, 255, 255)), 21.0);
  EXPECT_DOUBLE_EQ(contrast_ratio(IM_COL32(90, 90, 90, 255), IM_COL32(90, 90, 90, 255)), 1.0);
  // WCAG's own example: #767676 on white is the lightest grey that passes AA, 4.54:1.
  EXPECT_NEAR(contrast_ratio(IM_COL32(0x76, 0x76, 0x76, 255), IM_COL32(255, 255, 255, 255)), 4.54, 0.01);
  EXPECT_DOUBLE_EQ(contrast_ratio(IM_COL32(10, 200, 30, 255), IM_COL32(250, 240, 10, 255)),
                   contrast_ratio(IM_COL32(250, 240, 10, 255), IM_COL32(10, 200, 30, 255)));
}

TEST(ViewerPalette, EveryTextStandsOutFromWhatItIsDrawnOn) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  for (const ThemeKind kind : {ThemeKind::Dark, ThemeKind::Projector}) {
    set_theme(kind);
    SCOPED_TRACE(std::string("theme ") + to_string(kind));
    for (const auto& [name, fill] : span_fills()) {
      EXPECT_GE(contrast_ratio(label_color_on(fill), fill), kMinTextContrast) << "a label on " << name;
    }
    const Theme& t = theme();
    const std::vector<std::tuple<const char*, ImU32, ImU32>> pairs = {
        {"lane names on the ground", t.text, t.background},
        {"ruler labels on the ruler", t.text, t.ruler},
        {"captions on the ground", t.dim_text, t.background},
        {"captions on the ruler", t.dim_text, t.ruler},
        {"a rank's header", t.rank_header_text, t.rank_header},
        {"a compared run's title", t.run_title_text, t.run_title},
        {"the narration", t.narration, t.background},
        {"a what-if lane's name", t.whatif_text, t.background},
        {"a what-if lane's name on its band", t.whatif_text, t.whatif_band},
        {"a memory graph's peak", t.peak_text, t.background},
        {"a memory graph's peak on its ground", t.peak_text, t.memory_ground},
        {"a skew's label on its plate", t.skew, t.background},
        {"the measured range's length", t.range_text, t.background},
        {"the clock's error", t.error_text, t.background},
        {"no memory samples", t.dim_text, t.memory_ground},
        {"the critical path's line", t.critical_path, t.background},
    };
    for (const auto& [what, text, ground] : pairs) {
      EXPECT_GE(contrast_ratio(text, ground), kMinTextContrast) << what;
    }
    // Dear ImGui's text and greyed text on its windows' ground (the panels, the header).
    const ImGuiStyle& style = ImGui::GetStyle();
    const ImU32 window = ImGui::ColorConvertFloat4ToU32(style.Colors[ImGuiCol_WindowBg]);
    for (const auto& [what, colour] : {std::pair{"text", ImGuiCol_Text}, std::pair{"greyed text", ImGuiCol_TextDisabled}}) {
      EXPECT_GE(contrast_ratio(ImGui::ColorConvertFloat4ToU32(style.Colors[colour]), window), kMinTextContrast)
          << "Dear ImGui's " << what;
      EXPECT_GE(contrast_ratio(ImGui::ColorConvertFloat4ToU32(style.Colors[colour]), t.background), kMinTextContrast)
          << "Dear ImGui's " << what << " on the theme's ground";
    }
    for (const auto& [text, ground] : {std::pair{t.error_text, window}, std::pair{t.skew, window},
                                       std::pair{t.narration, window}}) {
      EXPECT_GE(contrast_ratio(text, ground), kMinTextContrast) << "a coloured line in a panel";
    }
  }
  set_theme(ThemeKind::Dark);
  ImGui::DestroyContext();
}

// The lines drawn on the lanes' and the memory graphs' ground, and their swatches in the legend
// (on its window's ground), stand out at WCAG's 3:1 for graphics in both themes: the projector's
// light ground once hid the white allocator_total and flow swatches.
TEST(ViewerPalette, LinesAndTheirLegendSwatchesStandOutInBothThemes) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  constexpr double kGraphicsContrast = 3.0;
  const auto opaque = [](ImU32 c) { return c | IM_COL32(0, 0, 0, 255); };
  for (const ThemeKind kind : {ThemeKind::Dark, ThemeKind::Projector}) {
    set_theme(kind);
    SCOPED_TRACE(std::string("theme ") + to_string(kind));
    const Theme& t = theme();
    const ImU32 legend = ImGui::ColorConvertFloat4ToU32(ImGui::GetStyle().Colors[ImGuiCol_WindowBg]);
    EXPECT_GE(contrast_ratio(opaque(t.flow), t.background), kGraphicsContrast) << "a flow on the lanes' ground";
    EXPECT_GE(contrast_ratio(opaque(t.flow), legend), kGraphicsContrast) << "the flow's swatch in the legend";
    for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
      const auto category = static_cast<trace::MemoryCategory>(c);
      if (trace::is_stacked(category)) continue;
      const std::string name(trace::to_string(category));
      EXPECT_GE(contrast_ratio(memory_color(c), t.memory_ground), kGraphicsContrast) << name << " on a memory graph";
      EXPECT_GE(contrast_ratio(memory_color(c), legend), kGraphicsContrast) << name << "'s swatch in the legend";
    }
  }
  set_theme(ThemeKind::Dark);
  ImGui::DestroyContext();
}

}  // namespace
}  // namespace dpscope::view
