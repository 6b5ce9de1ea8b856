// The legend (L) and the help overlay (?): what every colour on the timeline, the panels and the
// memory graphs means, drawn from the palette the panels draw with, and every mouse and key
// control. Both are floating windows over the layout, so a class can keep them open.
#include <imgui.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "trace/vocabulary.h"
#include "viewer/app.h"
#include "viewer/palette.h"

namespace dpscope::view {
namespace {

// A marker drawn as a line (playhead, iteration starts, flows, line-drawn memory series).
void line_entry(ImU32 color, const char* text) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float h = ImGui::GetTextLineHeight();
  ImGui::GetWindowDrawList()->AddLine(ImVec2(p.x, p.y + h / 2), ImVec2(p.x + 2 * h, p.y + h / 2), color, 2);
  ImGui::Dummy(ImVec2(2 * h, h));
  ImGui::SameLine();
  ImGui::TextUnformatted(text);
}

// A phase's swatch, named as the trace records it.
void phase_entry(std::string_view phase) { color_entry(phase_color(phase), std::string(phase).c_str()); }

// Opens a floating window at `pos` (its `pivot` there) when it first appears; false, and ended,
// when it is collapsed. It sizes itself to its content but never past the viewport (less a
// margin): at a projector's text size what does not fit scrolls.
bool begin_floating(const char* title, bool* open, ImVec2 pos, ImVec2 pivot, float alpha) {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(pos, ImGuiCond_Appearing, pivot);
  // Hung from its top (pivot y 0) it has the room below `pos`; centred, the whole height.
  const float room = pivot.y == 0 ? viewport->Pos.y + viewport->Size.y - pos.y - 12 : viewport->Size.y - 24;
  ImGui::SetNextWindowSizeConstraints(ImVec2(0, 0), ImVec2(viewport->Size.x - 24, room));
  ImGui::SetNextWindowBgAlpha(alpha);
  if (ImGui::Begin(title, open, ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings)) return true;
  ImGui::End();
  return false;
}

void heading(const char* text) {
  ImGui::Spacing();
  ImGui::TextDisabled("%s", text);
}

}  // namespace

void draw_legend(App& app) {
  if (!app.show_legend) return;
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  if (!begin_floating("Legend (L)", &app.show_legend,
                      ImVec2(viewport->Pos.x + viewport->Size.x - 12, viewport->Pos.y + 60), ImVec2(1, 0), 0.94f)) {
    return;
  }
  ImGui::BeginGroup();
  heading("phases (main lane)");
  for (const std::string_view phase :
       {trace::kPhaseIteration, trace::kPhaseForward, trace::kPhaseBackward, trace::kPhaseOptimizerStep}) {
    phase_entry(phase);
  }
  color_entry(phase_color(trace::kPhaseFinalizeBackward), "finalize_backward, construction, other");
  heading("inside backward");
  color_entry(hook_color(0), "gradient hook (buckets alternate");
  color_entry(hook_color(1), "  between two yellows)");
  color_entry(kWaitColor, "wait for a collective");
  color_entry(kBucketReadyColor, "bucket ready (all its gradients in)");
  color_entry(kBucketLaunchColor, "bucket launched");
  color_entry(kBucketDoneColor, "bucket done (written back)");
  heading("collectives (comm lanes)");
  for (const trace::CollectiveOp op :
       {trace::CollectiveOp::AllReduce, trace::CollectiveOp::Broadcast, trace::CollectiveOp::AllGather,
        trace::CollectiveOp::ReduceScatter, trace::CollectiveOp::Barrier}) {
    color_entry(collective_color(op), std::string(trace::to_string(op)).c_str());
  }
  ImGui::EndGroup();
  ImGui::SameLine(0, 24);
  ImGui::BeginGroup();
  heading("FSDP unit states");
  for (int state = 0; state < trace::kUnitStateCount; ++state) {
    const auto unit_state = static_cast<trace::UnitState>(state);
    color_entry(unit_state_color(unit_state), std::string(trace::to_string(unit_state)).c_str());
  }
  color_entry(unit_state_color(std::nullopt), "sharded (between states)");
  heading("memory (stacked; lines: totals)");
  for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
    const auto category = static_cast<trace::MemoryCategory>(c);
    const std::string name(trace::to_string(category));
    if (trace::is_stacked(category)) {
      color_entry(memory_color(c), name.c_str());
    } else {
      line_entry(memory_color(c), name.c_str());
    }
  }
  heading("markers");
  line_entry(kPlayheadColor, "playhead (drag its handle on the ruler)");
  color_entry(kPeakColor, "a rank's memory peak");
  line_entry(theme().flow, "flow: hook -> bucket -> collective");
  line_entry(theme().skew, "skew between ranks");
  color_entry(kFoundColor, "found (find box)");
  color_entry(kMismatchColor, "collective that differs across ranks");
  color_entry(kFoldColor, "many narrow spans folded (xN)");
  line_entry(theme().critical_path, "critical path of the narrated iteration (K)");
  heading("keys (all of them: ? or F1)");
  ImGui::TextUnformatted("-> <- step, space play, I fit the iteration");
  ImGui::EndGroup();
  ImGui::End();
}

void draw_help(App& app) {
  if (!app.show_help) return;
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  if (!begin_floating("Mouse and keys (?)", &app.show_help,
                      ImVec2(viewport->Pos.x + viewport->Size.x / 2, viewport->Pos.y + viewport->Size.y / 2),
                      ImVec2(0.5f, 0.5f), 0.96f)) {
    return;
  }
  static const char* const kControls[][2] = {
      {"wheel", "zoom around the mouse"},
      {"shift + wheel", "scroll the rank groups"},
      {"right or middle drag", "pan (and scroll)"},
      {"left drag on the lanes", "measure a range (Stats tab: count / sum / average by name)"},
      {"left click on a span", "select it (Details, flows) and put the playhead there"},
      {"click or drag on the ruler", "move the playhead"},
      {"click a rank's header", "fold or unfold its lanes"},
      {"W / S", "zoom in / out"},
      {"A / D", "pan left / right"},
      {"F", "fit the whole run"},
      {"I", "fit the narrated iteration (stepping zooms to it from a wider view)"},
      {"Ctrl+F", "type in the find box"},
      {"-> or N / <- or P", "next / previous step of the focus rank (narration line)"},
      {"space", "play the playhead's iteration in slow motion; again: pause"},
      {"[ / ]", "slower / faster: an iteration plays in 2.5, 5, 10 (the default), 20 or 40 s"},
      {"L", "legend: every colour"},
      {"U", "fold / unfold every rank's secondary lanes (FSDP units, every comm lane but the busiest; a profiler trace's CPU threads, "
            "which start folded but the main one); from text x1.5 they start folded (the main thread too)"},
      {"Tab", "compare: step, narrate and show Buckets / Units for the other run (a click focuses one too)"},
      {"T", "theme: dark, or projector (dark text on light ground)"},
      {"Ctrl + / Ctrl - / Ctrl 0", "text larger / smaller / back to the start's size (x0.75 to x3)"},
      {"C", "clock: measured, or the cluster clock (the run replayed as a cluster would run it)"},
      {"K", "the narrated iteration's critical path over the lanes, its length and what bounds it "
            "(a dpscope run's on the cluster clock, an imported trace's on the measured; docs/critical-path.md)"},
      {"? or F1", "this help"},
      {"F9", "print the window's state as one JSON line on stdout (as --screenshot does)"},
      {"Esc", "clear selection and range, stop playing, close this help"},
  };
  // The descriptions wrap where the whole table would be wider than the window may be (the
  // viewport less its margin): at x3 in 1280 pixels a line of them is twice as wide.
  const ImGuiStyle& style = ImGui::GetStyle();
  float keys_width = 0, words_width = 0;
  for (const auto& control : kControls) {
    keys_width = std::max(keys_width, ImGui::CalcTextSize(control[0]).x);
    words_width = std::max(words_width, ImGui::CalcTextSize(control[1]).x);
  }
  const float room = viewport->Size.x - 24 - 2 * style.WindowPadding.x - 4 * style.CellPadding.x - style.ScrollbarSize;
  words_width = std::max(std::min(words_width, room - keys_width), 8 * ImGui::GetFontSize());
  if (ImGui::BeginTable("controls", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
    ImGui::TableSetupColumn("keys", ImGuiTableColumnFlags_WidthFixed, keys_width);
    ImGui::TableSetupColumn("what", ImGuiTableColumnFlags_WidthFixed, words_width);
    for (const auto& control : kControls) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme().narration), "%s", control[0]);
      ImGui::TableNextColumn();
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextUnformatted(control[1]);
      ImGui::PopTextWrapPos();
    }
    ImGui::EndTable();
  }
  ImGui::TextDisabled("More: docs/viewer.md");
  ImGui::End();
}

}  // namespace dpscope::view
