// The two lines over the timeline, laid out to hold at any text size (a projector's ×3 too): the
// header (the run's name and figures, the find box, the buttons), whose pieces wrap onto the next
// line instead of running off-screen, and the narration caption, at most two lines. Both report
// what they could not show in App::layout.
#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/clock_choice.h"
#include "trace/vocabulary.h"
#include "trace/clock.h"
#include "viewer/app.h"
#include "viewer/hang_words.h"

namespace dpscope::view {
namespace {

// The narration caption's height in lines; a longer narration is cut there (and reported). Where
// the header folded into one line, the caption takes one of the lines it gave up: at x3 in a
// 1280-pixel window a bucket's fill runs to three.
constexpr int kNarrationLines = 2;
constexpr int kNarrationLinesUnderAFoldedHeader = 3;

// The x of the content region's right edge, in screen coordinates.
float right_edge() { return ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x; }

// Whether an item `width` wide, put after the last one on its line, would end before the right
// edge.
bool fits_after_last(float width) {
  return ImGui::GetItemRectMax().x + ImGui::GetStyle().ItemSpacing.x + width <= right_edge();
}

// Text that wraps at the window's right edge (a piece too long for a whole line of its own).
void wrapped_text(const std::string& text) {
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextUnformatted(text.c_str());
  ImGui::PopTextWrapPos();
}

// The header's words, piece by piece ("|" between two on one line): a piece that does not fit
// after the previous one starts the next line.
void draw_pieces(const std::vector<std::string>& pieces) {
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string joined = "|  " + pieces[i];
    if (i > 0 && fits_after_last(ImGui::CalcTextSize(joined.c_str()).x)) {
      ImGui::SameLine();
      wrapped_text(joined);
    } else {
      wrapped_text(pieces[i]);
    }
  }
}

// Puts the next control `width` wide after the last item if it fits there, else on a new line.
void place_control(float width) {
  if (fits_after_last(width)) ImGui::SameLine();
}

// Whether the last item lies wholly inside the viewport.
bool last_item_on_screen() {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  const ImVec2 max = ImGui::GetItemRectMax();
  return max.x <= viewport->Pos.x + viewport->Size.x + 0.5f && max.y <= viewport->Pos.y + viewport->Size.y + 0.5f;
}

// The header's buttons, and the folded header's one, which opens a menu of them.
constexpr const char* kHeaderButtons[] = {"Fit (F)", "Legend (L)", "Help (?)"};
constexpr char kMenuButton[] = "Menu";
constexpr char kFindHint[] = "find (name or kind; Ctrl+F)";

// The width of a framed item (a button, the find box) showing `text`.
float framed_width(const char* text) { return ImGui::CalcTextSize(text).x + 2 * ImGui::GetStyle().FramePadding.x; }

// A button, placed by place_control when `in_line`; whether it was clicked.
bool header_button(const char* label, bool& controls_visible, bool in_line) {
  if (in_line) place_control(framed_width(label));
  // A full button: a small one's frame has no room under the text, which cut descenders ("Leqend").
  const bool clicked = ImGui::Button(label);
  controls_visible = controls_visible && last_item_on_screen();
  return clicked;
}

// The lines the full header takes in `width` pixels: its pieces and then its controls
// (`control_widths`), laid out as draw_pieces and place_control lay them.
int header_lines(const std::vector<std::string>& pieces, const std::vector<float>& control_widths, float width) {
  const float spacing = ImGui::GetStyle().ItemSpacing.x;
  int lines = 0;
  float x = 0;
  const auto place = [&](float item, float alone, bool first) {
    if (!first && x + spacing + item <= width) {
      x += spacing + item;
    } else {
      const int wrapped = std::max(1, int(std::ceil(alone / width)));  // a piece wider than a line wraps
      lines += wrapped;
      x = alone - float(wrapped - 1) * width;
    }
  };
  for (size_t i = 0; i < pieces.size(); ++i) {
    place(ImGui::CalcTextSize(("|  " + pieces[i]).c_str()).x, ImGui::CalcTextSize(pieces[i].c_str()).x, i == 0);
  }
  for (const float control : control_widths) place(control, control, false);
  return lines;
}

// The full header at a projector's text size in a narrow window (three lines and more) leaves the
// lanes too little height: it folds into one line, from kAutoFoldFontScale on, when it would
// take more than two (more than one with --compare).
constexpr int kFullHeaderLines = 2;

}  // namespace

void App::draw_header() {
  const Model& m = *traces[0].model;
  // An emulated link is said where the run is named, so that nobody reads its collectives'
  // lengths as this machine's (docs/communication.md).
  const std::string link = this->link();
  // Following a run directory, the file is a scratch merge: name what is followed instead.
  const std::string& name = options_.shown_name.empty() ? m.path : options_.shown_name;
  std::vector<std::string> pieces = {live_source_ ? "live: " + live_source_->status() : name};
  char figures[256];
  std::snprintf(figures, sizeof(figures), "%s %s, %zu ranks, %lld events, %d iterations",
                m.meta_value(trace::meta_key::kStrategy, "?").c_str(), m.meta_value(trace::meta_key::kBackend).c_str(),
                m.ranks.size(), static_cast<long long>(m.events), m.iterations);
  pieces.emplace_back(figures);
  if (!link.empty()) pieces.push_back(link);
  const std::string alignment = analysis::alignment_label(analysis::recorded_alignment(
      m.meta_value(trace::meta_key::kClockAlignment), !m.meta_value(trace::meta_key::kImportedFrom).empty()));
  if (!alignment.empty()) pieces.push_back(alignment);
  if (live_ && !live_source_) pieces.emplace_back("live");
  pieces.push_back(clock_label());
  // A hung run says who waits for whom, and how long (docs/hangs.md); followed live, how long its
  // stuck collective has waited so far, counting up.
  if (live_) {
    if (std::string stuck = live_stuck_piece(m, trace::now_ns()); !stuck.empty()) pieces.push_back(std::move(stuck));
  }
  if (traces[0].analysis) {
    if (std::string hang = hang_header_piece(traces[0].analysis->hang); !hang.empty()) pieces.push_back(std::move(hang));
  }

  // The find box as wide as its hint, so that the hint is never cut.
  const float find_width = framed_width(kFindHint);
  std::vector<float> controls = {find_width};
  for (const char* label : kHeaderButtons) controls.push_back(framed_width(label));
  // Two compared runs share the timeline: there the header folds where it needs a second line.
  const int lines = traces.size() > 1 ? 1 : kFullHeaderLines;
  const bool folded = font_scale >= kAutoFoldFontScale && header_lines(pieces, controls, ImGui::GetContentRegionAvail().x) > lines;
  header_folded_ = folded;
  if (folded) {
    draw_folded_header(pieces, find_width);
  } else {
    draw_pieces(pieces);
    place_control(find_width);
    draw_header_controls(find_width, true);
  }
  // A switch to the cluster clock that failed says why under the line that names the clock (C
  // tries again), wrapped: the message names the file and the fix.
  if (!clock_error_.empty()) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme().error_text), "C: %s", clock_error_.c_str());
    ImGui::PopTextWrapPos();
  }
}

// The find box (Ctrl+F focuses it), what it found, and the buttons: after one another on the
// header's lines (`in_line`), or one under the other in the folded header's menu.
void App::draw_header_controls(float find_width, bool in_line) {
  ImGui::SetNextItemWidth(find_width);
  // Ctrl+F: type a query without reaching for the mouse.
  if (ImGui::GetIO().KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_F, false)) ImGui::SetKeyboardFocusHere();
  if (ImGui::InputTextWithHint("##find", kFindHint, find_buffer_, sizeof(find_buffer_))) {
    find_text = find_buffer_;
    update_find();
  }
  if (in_line) layout.controls_visible = last_item_on_screen();
  if (!find.empty()) {
    const std::string found = std::to_string(find_result.total) + " found";
    if (in_line) place_control(ImGui::CalcTextSize(found.c_str()).x);
    ImGui::TextUnformatted(found.c_str());
  }
  bool on_screen = true;
  bool& visible = in_line ? layout.controls_visible : on_screen;
  if (header_button(kHeaderButtons[0], visible, in_line)) fit();
  if (header_button(kHeaderButtons[1], visible, in_line)) show_legend = !show_legend;
  if (header_button(kHeaderButtons[2], visible, in_line)) show_help = !show_help;
}

// The header folded: a Menu button, whose window holds the run's pieces, the find box and the
// buttons, then the clock shown (and what a query found), wrapped at the window's edge: which
// clock the lanes are on is never hidden.
void App::draw_folded_header(const std::vector<std::string>& pieces, float find_width) {
  const bool ctrl_f = ImGui::GetIO().KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_F, false);
  if (ImGui::Button(kMenuButton) || ctrl_f) ImGui::OpenPopup("header menu");
  layout.controls_visible = last_item_on_screen();
  const ImVec2 under_button(ImGui::GetItemRectMin().x, ImGui::GetItemRectMax().y);
  std::string line = pieces.back();
  if (!find.empty()) line += "  |  " + std::to_string(find_result.total) + " found";
  ImGui::SameLine();
  wrapped_text(line);
  // The menu opens under its button, not where the pointer is; Escape closes it.
  ImGui::SetNextWindowPos(under_button, ImGuiCond_Appearing);
  if (ImGui::BeginPopup("header menu")) {
    for (size_t i = 0; i + 1 < pieces.size(); ++i) ImGui::TextUnformatted(pieces[i].c_str());
    if (ctrl_f) ImGui::SetKeyboardFocusHere();
    draw_header_controls(find_width, false);
    if (ImGui::IsKeyPressed(GLFW_KEY_ESCAPE, false)) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
}

void App::draw_narration_line() {
  const double seconds = kPlaySecondsPerIteration[play_speed];
  bool first = true;
  // A dim piece of the line's keys and state, wrapping like the header's.
  const auto hint = [&](const std::string& text) {
    if (!first) place_control(ImGui::CalcTextSize(text.c_str()).x);
    first = false;
    ImGui::TextDisabled("%s", text.c_str());
  };
  if (traces.size() > 1) {
    // Compare: which run the keys and the narration follow.
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme().narration), "run %c", 'A' + focus_trace);
    first = false;
    hint("(Tab: run " + std::string(1, char('A' + (1 - focus_trace))) + ")  |");
  }
  char keys[128];
  if (header_folded_) {
    // The folded header's line: the play speed alone (Help lists the keys).
    std::snprintf(keys, sizeof(keys), "%s %g s/iteration", playing ? "playing:" : "space:", seconds);
    first = false;
  } else if (font_scale >= kAutoFoldFontScale) {
    // A projector's text: the short form, which may join the header's last line (after its
    // buttons, when it fits there), so that the lanes keep the line.
    std::snprintf(keys, sizeof(keys), "%s %g s  [ ] speed  |", playing ? "playing:" : "<- -> step  space: play in", seconds);
    first = false;
  } else if (playing) {
    std::snprintf(keys, sizeof(keys), "playing, an iteration in %g s (space pauses, [ ] slower / faster)  |", seconds);
  } else {
    std::snprintf(keys, sizeof(keys), "<- -> step, space plays an iteration in %g s, [ ] speed  |", seconds);
  }
  hint(keys);

  std::string text;
  if (narration.empty() && narrated_iteration_ != trace::kNone) {
    text = "rank " + std::to_string(focus_rank) + ", iteration " + std::to_string(narrated_iteration_) +
           ": before its first step (press -> to go to it)";
  } else if (narration.empty()) {
    text = "rank " + std::to_string(focus_rank) + ": put the playhead in an iteration (click the timeline or press ->)";
  }
  const ImU32 color = narration.empty() ? ImGui::GetColorU32(ImGuiCol_TextDisabled) : theme().narration;
  if (!narration.empty()) text = narration;
  // The caption: after the keys when it fits there on one line, else from the next line on,
  // wrapped at the window's edge and cut after its lines.
  const float line = ImGui::GetTextLineHeightWithSpacing();
  if (fits_after_last(ImGui::CalcTextSize(text.c_str()).x)) {
    ImGui::SameLine();
    ImGui::PushStyleColor(ImGuiCol_Text, color);
    ImGui::TextUnformatted(text.c_str());
    ImGui::PopStyleColor();
    layout.narration_clipped = false;
    return;
  }
  const float width = right_edge() - ImGui::GetCursorScreenPos().x;
  const float needed = ImGui::CalcTextSize(text.c_str(), nullptr, false, width).y;
  const int lines = header_folded_ ? kNarrationLinesUnderAFoldedHeader : kNarrationLines;
  const float shown = std::min(needed, float(lines) * ImGui::GetTextLineHeight());
  layout.narration_clipped = needed > float(lines) * ImGui::GetTextLineHeight() + 0.5f;
  const ImVec2 at = ImGui::GetCursorScreenPos();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  // Cut only a caption too long for its lines, and below the last one's descenders ("g").
  if (layout.narration_clipped) draw->PushClipRect(at, ImVec2(at.x + width, at.y + shown + ImGui::GetFontSize() / 4), true);
  draw->AddText(ImGui::GetFont(), ImGui::GetFontSize(), at, color, text.c_str(), nullptr, width);
  if (layout.narration_clipped) draw->PopClipRect();
  ImGui::Dummy(ImVec2(width, std::max(shown, line - ImGui::GetStyle().ItemSpacing.y)));
}

}  // namespace dpscope::view
