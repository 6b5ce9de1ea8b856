// The compare panel (--compare TRACE2): which iteration the two runs are aligned on (the
// timeline draws run B under run A, shifted so that iteration starts coincide), and the two
// runs' statistics side by side: setup, step times, overlap per rank, memory peaks.
#include <imgui.h>

#include <algorithm>

#include "viewer/app.h"
#include "viewer/lod.h"

namespace dpscope::view {

namespace {

double median_step_ms(const Model& model) {
  if (model.ranks.empty() || model.ranks[0].iterations.empty()) return 0;
  std::vector<double> steps;
  for (const IterationSpan& s : model.ranks[0].iterations) steps.push_back(double(s.end_ns - s.begin_ns) / 1e6);
  std::nth_element(steps.begin(), steps.begin() + std::ptrdiff_t(steps.size() / 2), steps.end());
  return steps[steps.size() / 2];
}

void summary(const OpenTrace& t, const char* title) {
  const Model& m = *t.model;
  ImGui::TextColored(ImVec4(0.7f, 0.6f, 1, 1), "%s", title);
  ImGui::TextWrapped("%s", m.path.c_str());
  ImGui::Text("strategy  %s (%s)", m.meta_value("strategy", "?").c_str(), m.meta_value("backend", "?").c_str());
  ImGui::Text("model     %s", m.meta_value("model", "?").c_str());
  ImGui::Text("ranks     %zu, iterations %d, events %lld", m.ranks.size(), m.iterations, static_cast<long long>(m.events));
  int gen0 = 0;
  for (const auto& b : m.buckets) gen0 += b.generation == 0;
  ImGui::Text("buckets   %d initial, units %zu", gen0, m.units.size());
  ImGui::Text("step      %.3f ms median (rank 0)", median_step_ms(m));
  int64_t peak = 0;
  for (const RankData& r : m.ranks) peak = std::max(peak, r.memory_peak_bytes);
  ImGui::Text("memory    %s peak (largest rank)", format_bytes(peak).c_str());
  if (t.analysis) {
    draw_overlap_table(m, *t.analysis, title);
    if (t.analysis->mismatches) ImGui::TextColored(ImVec4(1, 0.3f, 0.3f, 1), "%lld mismatched collectives", static_cast<long long>(t.analysis->mismatches));
  } else {
    ImGui::TextDisabled("analysing...");
  }
}

}  // namespace

void draw_compare(App& app) {
  if (app.traces.size() < 2) return;
  ImGui::SetNextItemWidth(140);
  const int last = std::max(0, std::min(app.traces[0].model->iterations, app.traces[1].model->iterations) - 1);
  if (ImGui::SliderInt("align on iteration", &app.align_iteration, 0, last)) app.align();
  ImGui::SameLine();
  ImGui::Text("B shifted by %s", format_duration(double(app.traces[1].offset_ns)).c_str());
  if (ImGui::BeginTable("side by side", 2, ImGuiTableFlags_BordersInnerV)) {
    ImGui::TableNextColumn();
    summary(app.traces[0], "A");
    ImGui::TableNextColumn();
    summary(app.traces[1], "B");
    ImGui::EndTable();
  }
}

}  // namespace dpscope::view
