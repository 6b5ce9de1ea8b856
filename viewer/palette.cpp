// The viewer's colours (see palette.h): the tables behind each colour function, and the two
// themes' window colours with the switch between them.
#include "viewer/palette.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "trace/vocabulary.h"

namespace dpscope::view {

using trace::EventKind;

ImU32 phase_color(std::string_view n) {
  if (n == trace::kPhaseForward) return IM_COL32(66, 133, 244, 255);
  if (n == trace::kPhaseBackward) return IM_COL32(244, 160, 0, 255);
  if (n == trace::kPhaseOptimizerStep) return IM_COL32(15, 157, 88, 255);
  if (n == trace::kPhaseIteration) return IM_COL32(70, 74, 92, 255);
  return IM_COL32(150, 100, 200, 255);  // construction steps and the rest
}

ImU32 collective_color(trace::CollectiveOp op) {
  switch (op) {
    case trace::CollectiveOp::Broadcast: return IM_COL32(0, 170, 170, 255);
    case trace::CollectiveOp::AllReduce: return IM_COL32(219, 68, 55, 255);
    case trace::CollectiveOp::AllGather: return IM_COL32(0, 150, 220, 255);
    case trace::CollectiveOp::ReduceScatter: return IM_COL32(210, 70, 180, 255);
    case trace::CollectiveOp::Barrier: return IM_COL32(140, 140, 140, 255);
    case trace::CollectiveOp::AllToAll: return IM_COL32(230, 120, 20, 255);
    case trace::CollectiveOp::SendRecv: return IM_COL32(120, 90, 200, 255);
  }
  return IM_COL32(219, 68, 55, 255);
}

ImU32 hook_color(int bucket) {
  return bucket % 2 ? IM_COL32(230, 200, 60, 255) : IM_COL32(200, 170, 30, 255);
}

ImU32 span_color(const Model& model, const Span& s) {
  switch (s.kind()) {
    case EventKind::Phase: return phase_color(model.name(s.name()));
    case EventKind::Hook: return hook_color(s.bucket());
    case EventKind::BucketReady: return kBucketReadyColor;
    case EventKind::BucketLaunch: return kBucketLaunchColor;
    case EventKind::BucketDone: return kBucketDoneColor;
    case EventKind::Collective: return collective_color(s.op().value_or(trace::CollectiveOp::AllReduce));
    case EventKind::CollectiveWait: return kWaitColor;
    case EventKind::UnitState: return unit_state_color(s.state());
    case EventKind::Mark: return kMarkColor;
  }
  return IM_COL32(128, 128, 128, 255);
}

ImU32 memory_color(int category) {
  static const ImU32 colors[trace::kMemoryCategoryCount] = {
      IM_COL32(66, 133, 244, 255),   // parameters
      IM_COL32(244, 160, 0, 255),    // gradients
      IM_COL32(219, 68, 55, 255),    // buckets
      IM_COL32(0, 150, 220, 255),    // full_parameters
      IM_COL32(15, 157, 88, 255),    // shards
      IM_COL32(120, 200, 120, 255),  // gradient_shards
      IM_COL32(210, 70, 180, 255),   // full_gradients
      IM_COL32(150, 100, 200, 255),  // optimizer_state
      IM_COL32(0, 170, 170, 255),    // activations
      IM_COL32(140, 140, 140, 255),  // other
      0,                             // allocator_total (line): the theme's, below
      0,                             // cuda_allocated (line): the theme's
      0,                             // cuda_reserved (line): the theme's
      IM_COL32(170, 130, 90, 255),   // data
  };
  // The totals are lines on the memory graph's ground, whose lightness the theme sets.
  if (category == int(trace::MemoryCategory::AllocatorTotal)) return theme().total_line;
  if (category == int(trace::MemoryCategory::CudaAllocated)) return theme().cuda_allocated_line;
  if (category == int(trace::MemoryCategory::CudaReserved)) return theme().cuda_reserved_line;
  return category >= 0 && category < trace::kMemoryCategoryCount ? colors[category]
                                                                  : IM_COL32(128, 128, 128, 255);
}

ImU32 unit_state_color(std::optional<trace::UnitState> state) {
  if (!state) return IM_COL32(105, 110, 128, 255);  // sharded: readable against the dark panels
  switch (*state) {
    case trace::UnitState::Gathering: return IM_COL32(0, 150, 220, 255);
    case trace::UnitState::Full: return IM_COL32(15, 157, 88, 255);
    case trace::UnitState::Reducing: return IM_COL32(210, 70, 180, 255);
  }
  return IM_COL32(105, 110, 128, 255);
}

namespace {

constexpr Theme kDark = {
    IM_COL32(20, 20, 26, 255),   IM_COL32(30, 32, 40, 255),   IM_COL32(44, 48, 62, 255),
    IM_COL32(235, 235, 235, 255), IM_COL32(60, 50, 90, 255),  IM_COL32(255, 255, 255, 255),
    IM_COL32(190, 190, 200, 255), IM_COL32(150, 150, 160, 255), IM_COL32(60, 60, 70, 255),
    IM_COL32(24, 26, 32, 255),   IM_COL32(200, 200, 200, 70), IM_COL32(10, 10, 10, 255),
    IM_COL32(255, 219, 115, 255), IM_COL32(30, 50, 70, 255),     IM_COL32(120, 200, 255, 255),
    IM_COL32(255, 70, 70, 255),   IM_COL32(255, 140, 0, 220),   IM_COL32(140, 200, 255, 255),
    IM_COL32(255, 115, 89, 255),  IM_COL32(255, 255, 255, 200), IM_COL32(255, 255, 255, 255),
    IM_COL32(255, 230, 0, 255),   IM_COL32(255, 120, 80, 255),  IM_COL32(255, 60, 220, 255),
};
constexpr Theme kProjector = {
    IM_COL32(250, 250, 250, 255), IM_COL32(228, 230, 236, 255), IM_COL32(40, 44, 60, 255),
    IM_COL32(255, 255, 255, 255), IM_COL32(70, 40, 120, 255),   IM_COL32(255, 255, 255, 255),
    IM_COL32(10, 10, 10, 255),    IM_COL32(70, 70, 80, 255),    IM_COL32(170, 170, 180, 255),
    IM_COL32(236, 238, 242, 255), IM_COL32(40, 40, 40, 110),   IM_COL32(0, 0, 0, 255),
    IM_COL32(150, 70, 0, 255),    IM_COL32(215, 232, 248, 255), IM_COL32(0, 90, 170, 255),
    IM_COL32(190, 30, 30, 255),   IM_COL32(170, 75, 0, 230),    IM_COL32(0, 80, 170, 255),
    IM_COL32(190, 30, 30, 255),   IM_COL32(20, 20, 30, 200),    IM_COL32(20, 20, 30, 255),
    IM_COL32(130, 100, 0, 255),   IM_COL32(180, 60, 20, 255),   IM_COL32(170, 0, 150, 255),
};
ThemeKind current = ThemeKind::Dark;

}  // namespace

const Theme& theme() { return current == ThemeKind::Dark ? kDark : kProjector; }

double contrast_ratio(ImU32 a, ImU32 b) {
  // Relative luminance of an sRGB colour (WCAG 2).
  const auto luminance = [](ImU32 c) {
    const auto channel = [](unsigned v) {
      const double x = double(v) / 255;
      return x <= 0.03928 ? x / 12.92 : std::pow((x + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * channel((c >> IM_COL32_R_SHIFT) & 0xFF) + 0.7152 * channel((c >> IM_COL32_G_SHIFT) & 0xFF) +
           0.0722 * channel((c >> IM_COL32_B_SHIFT) & 0xFF);
  };
  const double la = luminance(a), lb = luminance(b);
  return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

void color_entry(ImU32 color, const char* text) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float h = ImGui::GetTextLineHeight();
  ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + 2 * h, p.y + h - 1), color);
  ImGui::Dummy(ImVec2(2 * h, h));
  ImGui::SameLine();
  ImGui::TextUnformatted(text);
}

ImU32 label_color_on(ImU32 fill) {
  constexpr ImU32 kLightLabel = IM_COL32(245, 245, 245, 255);
  // Called for every label of every frame, over a palette of a few dozen fills: the choice is
  // made once per (theme, fill).
  static std::unordered_map<uint64_t, ImU32> chosen;
  const uint64_t key = uint64_t(current) << 32 | fill;
  const auto found = chosen.find(key);
  if (found != chosen.end()) return found->second;
  const ImU32 label = contrast_ratio(theme().span_text, fill) >= kMinTextContrast ? theme().span_text : kLightLabel;
  chosen.emplace(key, label);
  return label;
}
ThemeKind theme_kind() { return current; }

void set_theme(ThemeKind kind) {
  current = kind;
  if (kind == ThemeKind::Dark) {
    ImGui::StyleColorsDark();
  } else {
    ImGui::StyleColorsLight();
  }
  // Dear ImGui's greyed text is too faint on the light style's ground (2.6:1): the theme's
  // captions' colour instead (Note [Text contrast]).
  ImGui::GetStyle().Colors[ImGuiCol_TextDisabled] = ImGui::ColorConvertU32ToFloat4(theme().dim_text);
  // A menu's ground is opaque: the lanes' labels showed through the dark style's (94 % alpha).
  ImGui::GetStyle().Colors[ImGuiCol_PopupBg].w = 1;
}

const char* to_string(ThemeKind kind) { return kind == ThemeKind::Dark ? "dark" : "projector"; }

bool parse_theme(const std::string& text, ThemeKind* out) {
  for (const ThemeKind kind : {ThemeKind::Dark, ThemeKind::Projector}) {
    if (text == to_string(kind)) {
      *out = kind;
      return true;
    }
  }
  return false;
}

}  // namespace dpscope::view
