// The compare panel (--compare TRACE2): which iteration the two runs are aligned on (the
// timeline draws run B under run A, shifted so that iteration starts coincide), and the two
// runs' statistics side by side: setup, step times, overlap per rank, memory peaks.
#include <imgui.h>

#include <algorithm>

#include "trace/vocabulary.h"
#include "viewer/app.h"
#include "viewer/lod.h"

namespace dpscope::view {

namespace {

void summary(App& app, const OpenTrace& t, const char* title) {
  const Model& m = *t.model;
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme().narration), "%s", title);
  ImGui::TextWrapped("%s", m.path.c_str());
  ImGui::Text("strategy  %s (%s)", m.meta_value(trace::meta_key::kStrategy, "?").c_str(),
              m.meta_value(trace::meta_key::kBackend, "?").c_str());
  ImGui::Text("model     %s", m.meta_value(trace::meta_key::kModel, "?").c_str());
  ImGui::Text("ranks     %zu, iterations %d, events %lld", m.ranks.size(), m.iterations, static_cast<long long>(m.events));
  int gen0 = 0;
  for (const auto& b : m.buckets) gen0 += b.generation == 0;
  ImGui::Text("buckets   %d initial, units %zu", gen0, m.units.size());
  if (!t.analysis) {
    ImGui::TextDisabled("analysing...");
    return;
  }
  const analysis::RunStats& stats = t.analysis->stats;
  if (stats.ranks.empty()) return;
  // As `dpscope stats` and the demo summarise (Note [Steady steps], Note [Memory at the peak]).
  const core::StepSummary steps = analysis::step_summary(stats.ranks.front());
  ImGui::Text("step      %.3f ms median (rank %d, iterations %d..)", steps.median_ms,
              stats.ranks.front().rank, steps.from_iteration);
  // The steps' peak, as the demo compares them: construction and an evaluation are no step's
  // (Note [Work outside iterations]).
  int64_t peak = 0;
  bool in_steps = true;
  for (const analysis::RankStats& r : stats.ranks) {
    in_steps = in_steps && r.step_memory_peak.found();
    peak = std::max(peak, r.step_memory_peak.found() ? r.step_memory_peak.total_bytes : r.memory_peak.total_bytes);
  }
  ImGui::Text("memory    %s peak%s (largest rank)", format_bytes(peak).c_str(), in_steps ? " in the steps" : "");
  const std::string link = analysis::link_text(stats);
  if (!link.empty()) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme().narration), "link      %s", link.c_str());
  draw_overlap_table(app, *t.analysis, title);
  if (stats.mismatches) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme().error_text), "%lld mismatched collectives", static_cast<long long>(stats.mismatches));
  }
}

}  // namespace

void draw_compare(App& app) {
  if (app.traces.size() < 2) return;
  ImGui::SetNextItemWidth(140);
  const int last = std::max(0, std::min(app.traces[0].model->iterations, app.traces[1].model->iterations) - 1);
  // Typed (or stepped with - / +): an iteration number is something a teacher says aloud.
  if (ImGui::InputInt("align on iteration", &app.align_iteration)) {
    app.align_iteration = std::clamp(app.align_iteration, 0, last);
    app.align();
  }
  ImGui::SameLine();
  ImGui::Text("B shifted by %s", format_duration(double(app.traces[1].offset_ns)).c_str());
  if (ImGui::BeginTable("side by side", 2, ImGuiTableFlags_BordersInnerV)) {
    ImGui::TableNextColumn();
    summary(app, app.traces[0], "A");
    ImGui::TableNextColumn();
    summary(app, app.traces[1], "B");
    ImGui::EndTable();
  }
}

}  // namespace dpscope::view
