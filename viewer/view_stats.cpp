// The stats panel: per rank the run's compute, communication, overlap and exposed communication
// (and per iteration on demand), exposed time per bucket, collective mismatches across ranks,
// and the count / sum / average by name of the range measured on the timeline.
#include <imgui.h>

#include <algorithm>

#include "viewer/app.h"
#include "viewer/lod.h"

namespace dpscope::view {
namespace {

void overlap_cells(const Overlap& o) {
  ImGui::TableNextColumn(); ImGui::Text("%.2f", o.compute_ms);
  ImGui::TableNextColumn(); ImGui::Text("%.2f", o.comm_ms);
  ImGui::TableNextColumn(); ImGui::Text("%.2f", o.overlap_ms);
  ImGui::TableNextColumn(); ImGui::Text("%.2f", o.exposed_ms);
}

}  // namespace

void draw_overlap_table(const Model& model, const Analysis& analysis, const char* id) {
  if (!ImGui::BeginTable(id, 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) return;
  for (const char* h : {"rank", "compute ms", "comm ms", "overlap ms", "exposed ms"}) ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  for (size_t r = 0; r < analysis.ranks.size(); ++r) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%d", model.ranks[r].info.rank);
    overlap_cells(analysis.ranks[r].total);
  }
  ImGui::EndTable();
}

void draw_stats(App& app) {
  OpenTrace& t = app.traces[0];
  const Model& model = *t.model;
  if (app.has_range) {
    ImGui::Text("range %s (from %s): count / sum / avg by name", format_duration(double(app.range_t1 - app.range_t0)).c_str(),
                format_duration(double(app.range_t0 - model.t_begin)).c_str());
    if (ImGui::BeginTable("range", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
      for (const char* h : {"name", "count", "sum", "avg"}) ImGui::TableSetupColumn(h);
      ImGui::TableHeadersRow();
      for (const RangeRow& row : app.range_rows) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn(); ImGui::TextUnformatted(row.label.c_str());
        ImGui::TableNextColumn(); ImGui::Text("%lld", static_cast<long long>(row.count));
        ImGui::TableNextColumn(); ImGui::TextUnformatted(format_duration(row.sum_ns).c_str());
        ImGui::TableNextColumn(); ImGui::TextUnformatted(format_duration(row.avg_ns()).c_str());
      }
      ImGui::EndTable();
    }
    ImGui::Separator();
  } else {
    ImGui::TextDisabled("drag on the timeline to measure a range: count / sum / average by name");
  }
  if (!t.analysis) {
    ImGui::TextDisabled("analysing...");
    return;
  }
  const Analysis& a = *t.analysis;
  ImGui::Text("whole run, per rank");
  draw_overlap_table(model, a, "overlap");
  if (a.mismatches) {
    ImGui::TextColored(ImVec4(1, 0.3f, 0.3f, 1), "%lld collectives do not match across ranks", static_cast<long long>(a.mismatches));
    int shown = 0;
    for (const CollectiveMatch& m : a.collectives) {
      if (m.mismatch && shown++ < 20) ImGui::BulletText("seq %d: %s", m.seq, m.why.c_str());
    }
  } else if (!a.collectives.empty()) {
    int64_t worst = 0;
    for (const CollectiveMatch& m : a.collectives) worst = std::max(worst, m.skew_ns);
    ImGui::Text("%zu collectives matched on every rank; largest skew %s", a.collectives.size(),
                format_duration(double(worst)).c_str());
  }
  if (model.ranks.empty()) return;
  app.focus_rank = std::clamp(app.focus_rank, 0, int(model.ranks.size()) - 1);
  const RankAnalysis& ra = a.ranks[size_t(app.focus_rank)];
  if (!ra.buckets.empty() && ImGui::TreeNode("exposed communication per bucket")) {
    if (ImGui::BeginTable("buckets", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
      for (const char* h : {"bucket", "all-reduces", "comm ms", "exposed ms"}) ImGui::TableSetupColumn(h);
      ImGui::TableHeadersRow();
      for (const BucketExposure& b : ra.buckets) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn(); ImGui::Text("%d", b.bucket);
        ImGui::TableNextColumn(); ImGui::Text("%lld", static_cast<long long>(b.collectives));
        ImGui::TableNextColumn(); ImGui::Text("%.2f", b.comm_ms);
        ImGui::TableNextColumn(); ImGui::Text("%.2f", b.exposed_ms);
      }
      ImGui::EndTable();
    }
    ImGui::TreePop();
  }
  if (ImGui::TreeNode("per iteration")) {
    ImGui::Text("rank %d", model.ranks[size_t(app.focus_rank)].info.rank);
    if (ImGui::BeginTable("iterations", 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchProp,
                          ImVec2(0, 220))) {
      for (const char* h : {"iteration", "compute ms", "comm ms", "overlap ms", "exposed ms"}) ImGui::TableSetupColumn(h);
      ImGui::TableHeadersRow();
      ImGuiListClipper clipper;
      clipper.Begin(int(ra.iterations.size()));
      while (clipper.Step()) {
        for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
          ImGui::TableNextRow();
          ImGui::TableNextColumn(); ImGui::Text("%d", i);
          overlap_cells(ra.iterations[size_t(i)]);
        }
      }
      ImGui::EndTable();
    }
    ImGui::TreePop();
  }
}

}  // namespace dpscope::view
