// The stats panel: the trace's analysis (analysis/stats.h, as `dpscope stats` prints it): per rank the
// run's compute, communication, overlap and exposed communication (and per iteration on demand),
// exposed time per bucket, memory at the peak, collective mismatches across ranks; and the count /
// sum / average by name of the range measured on the timeline.
#include <imgui.h>

#include <algorithm>

#include "analysis/stragglers.h"
#include "viewer/app.h"
#include "viewer/lod.h"
#include "viewer/palette.h"

namespace dpscope::view {
namespace {

// What the columns mean, in one line (See Note [Compute and exposed communication] in
// analysis/stats.h; docs/trace-format.md, "Figures").
constexpr const char* kExposedMeaning =
    "exposed: communication during which the rank computes nothing (waiting for a collective is "
    "not compute); overlap: communication hidden behind compute. As `dpscope stats` computes them.";
// The same on a rank with GPU kernels (an imported GPU trace), where compute is the GPU's.
constexpr const char* kExposedOnTheGpuMeaning =
    "On the GPU: compute is its compute kernels, comm its NCCL kernels; exposed: communication "
    "kernels during which no compute kernel runs; overlap: the rest. As `dpscope stats` computes them.";

void overlap_cells(const analysis::OverlapStats& o) {
  ImGui::TableNextColumn(); ImGui::Text("%.2f", o.compute_ms);
  ImGui::TableNextColumn(); ImGui::Text("%.2f", o.comm_ms);
  ImGui::TableNextColumn(); ImGui::Text("%.2f", o.overlap_ms);
  ImGui::TableNextColumn(); ImGui::Text("%.2f", o.exposed_comm_ms);
}

// Each rank's memory at a peak (Note [Memory at the peak]) — the run's, or the one in the steps
// (Note [Work outside iterations]) — as a table: the total, then every category's bytes at that
// moment, so the row adds up.
void draw_peak_table(App& app, const Analysis& a, const char* id, analysis::MemoryAtPeak analysis::RankStats::*peak_of) {
  std::vector<trace::MemoryCategory> shown;
  for (const analysis::RankStats& r : a.stats.ranks) {
    for (const analysis::CategoryBytes& c : (r.*peak_of).categories) {
      if (c.bytes != 0 && std::find(shown.begin(), shown.end(), c.category) == shown.end()) shown.push_back(c.category);
    }
  }
  std::sort(shown.begin(), shown.end());
  if (!ImGui::BeginTable(id, int(shown.size()) + 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) return;
  ImGui::TableSetupColumn("rank");
  ImGui::TableSetupColumn("total");
  for (trace::MemoryCategory c : shown) ImGui::TableSetupColumn(std::string(trace::to_string(c)).c_str());
  table_headers(app);
  for (const analysis::RankStats& r : a.stats.ranks) {
    const analysis::MemoryAtPeak& peak = r.*peak_of;
    ImGui::TableNextRow();
    ImGui::TableNextColumn(); ImGui::Text("%d", r.rank);
    ImGui::TableNextColumn();
    if (!peak.found()) {
      ImGui::TextDisabled("no samples");
      continue;
    }
    ImGui::Text("%.2f", double(peak.total_bytes) / double(1 << 20));
    for (trace::MemoryCategory c : shown) {
      ImGui::TableNextColumn(); ImGui::Text("%.2f", double(peak.bytes(c)) / double(1 << 20));
    }
  }
  ImGui::EndTable();
}

// Memory at each rank's peak, and, where some rank's steps peak elsewhere (construction or an
// evaluation outside them peaked higher), at the peak in the steps too, as `dpscope stats` prints.
void draw_memory_at_peak(App& app, const Analysis& a) {
  ImGui::Text("memory at the peak (MiB; each category at the moment the rank's total peaked)");
  draw_peak_table(app, a, "memory at peak", &analysis::RankStats::memory_peak);
  if (a.steps_peak_elsewhere()) {
    ImGui::Text("peak in the steps (MiB; from the first iteration to the end of the last)");
    draw_peak_table(app, a, "memory at step peak", &analysis::RankStats::step_memory_peak);
  }
  // By ownership a GPU rank's categories split cuda_allocated; by tracking they are the host's.
  const bool gpu_categories = a.stats.memory_accounting == trace::MemoryAccounting::Ownership;
  for (const analysis::RankStats& r : a.stats.ranks) {
    if (!r.sampled_gpu_memory()) continue;
    ImGui::TextWrapped("rank %d on a GPU: the categories above are %s; GPU memory (CUDA caching "
                "allocator) peaked at %.2f MiB allocated, %.2f MiB reserved; host memory at %.2f MiB",
                r.rank, gpu_categories ? "the GPU's, by ownership" : "host memory",
                double(r.largest(trace::MemoryCategory::CudaAllocated)) / double(1 << 20),
                double(r.largest(trace::MemoryCategory::CudaReserved)) / double(1 << 20),
                double(r.largest(trace::MemoryCategory::AllocatorTotal)) / double(1 << 20));
  }
}

// Who the ranks wait for (Note [Stragglers]) and each rank's collective time split at the last
// arrival (Note [Waiting and transfer]).
void draw_waiting(App& app, const Analysis& a) {
  const std::string stragglers = analysis::stragglers_text(a.stats.stragglers);
  if (a.stats.stragglers.stragglers.empty()) {
    ImGui::TextDisabled("stragglers: %s", stragglers.c_str());
  } else {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme().skew), "straggler: %s", stragglers.c_str());
  }
  // An imported run may hold a few of its job's ranks: the last of those, not of the job.
  const bool some_ranks = a.stats.world_size > int32_t(a.stats.ranks.size());
  if (some_ranks) {
    ImGui::TextDisabled("waiting: for the last of the %zu of %d ranks in this file", a.stats.ranks.size(),
                        a.stats.world_size);
  }
  if (!ImGui::BeginTable("waiting", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) return;
  for (const char* h : {"rank", some_ranks ? "waiting for the last rank present ms" : "waiting for the last rank ms",
                        "transferring ms"}) {
    ImGui::TableSetupColumn(h);
  }
  table_headers(app);
  for (const analysis::RankStats& r : a.stats.ranks) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%d", r.rank);
    ImGui::TableNextColumn();
    ImGui::Text("%.2f", r.wait_ms);
    ImGui::TableNextColumn();
    ImGui::Text("%.2f", r.transfer_ms);
  }
  ImGui::EndTable();
}

// How to measure a range, while none is.
void draw_range_hint() {
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextDisabled("drag on the timeline to measure a range: count / sum / average by name");
  ImGui::PopTextWrapPos();
}

// The range measured on the timeline: count / sum / average by name.
void draw_range(App& app, const Model& model) {
  ImGui::Text("range %s (from %s): count / sum / avg by name", format_duration(double(app.range_t1 - app.range_t0)).c_str(),
              format_duration(double(app.range_t0 - model.t_begin)).c_str());
  if (ImGui::BeginTable("range", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    for (const char* h : {"name", "count", "sum", "avg"}) ImGui::TableSetupColumn(h);
    table_headers(app);
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
}

// Whether every collective matched across ranks: the first mismatches, or the largest skew.
void draw_matches(App& app, const Analysis& a) {
  if (a.stats.mismatches) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme().error_text), "%lld collectives do not match across ranks", static_cast<long long>(a.stats.mismatches));
    int shown = 0;
    for (const analysis::CollectiveMatch& m : a.stats.matches) {
      if (m.mismatch && shown++ < 20) ImGui::BulletText("seq %lld: %s", static_cast<long long>(m.seq), m.why.c_str());
    }
  } else if (!a.stats.matches.empty()) {
    ImGui::Text("%zu collectives matched on every rank; largest skew %s", a.stats.matches.size(),
                format_duration(double(a.stats.max_skew_ns)).c_str());
  }
}

// The focus rank's exposed communication per bucket, folded until opened.
void draw_bucket_exposure(App& app, const analysis::RankStats& rank) {
  if (rank.buckets.empty() || !ImGui::TreeNode("exposed communication per bucket")) return;
  ImGui::Text("rank %d", rank.rank);
  if (ImGui::BeginTable("buckets", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    for (const char* h : {"bucket", "all-reduces", "comm ms", "exposed ms"}) ImGui::TableSetupColumn(h);
    table_headers(app);
    for (const analysis::BucketExposure& b : rank.buckets) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn(); ImGui::Text("%d", b.bucket);
      ImGui::TableNextColumn(); ImGui::Text("%lld", static_cast<long long>(b.collectives));
      ImGui::TableNextColumn(); ImGui::Text("%.2f", b.comm_ms);
      ImGui::TableNextColumn(); ImGui::Text("%.2f", b.exposed_comm_ms);
    }
    ImGui::EndTable();
  }
  ImGui::TreePop();
}

// The focus rank's overlap per iteration, folded until opened; clipped, as a run has thousands.
void draw_iterations(App& app, const analysis::RankStats& rank) {
  if (!ImGui::TreeNode("per iteration")) return;
  ImGui::Text("rank %d", rank.rank);
  if (ImGui::BeginTable("iterations", 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchProp,
                        ImVec2(0, 220))) {
    for (const char* h : {"iteration", "compute ms", "comm ms", "overlap ms", "exposed ms"}) ImGui::TableSetupColumn(h);
    table_headers(app);
    ImGuiListClipper clipper;
    clipper.Begin(int(rank.iterations.size()));
    while (clipper.Step()) {
      for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn(); ImGui::Text("%d", i);
        overlap_cells(rank.iterations[size_t(i)].overlap);
      }
    }
    ImGui::EndTable();
  }
  ImGui::TreePop();
}

}  // namespace

void draw_overlap_table(App& app, const Analysis& analysis, const char* id) {
  if (!ImGui::BeginTable(id, 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    ++app.layout.clipped_headers;  // wholly out of view: the panel shows no table
    return;
  }
  for (const char* h : {"rank", "compute ms", "comm ms", "overlap ms", "exposed ms"}) ImGui::TableSetupColumn(h);
  table_headers(app, true);
  for (const analysis::RankStats& r : analysis.stats.ranks) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%d%s", r.rank, r.complete() ? "" : " (incomplete)");
    overlap_cells(r.overlap);
  }
  ImGui::EndTable();
}

void draw_stats(App& app) {
  OpenTrace& t = app.traces[0];
  const Model& model = *t.model;
  // A measured range first, as the user asked for it; else the whole run's table first, the
  // hint after it, so that a short panel (a projector's text) still shows the table.
  if (app.has_range) draw_range(app, model);
  if (!t.analysis) {
    ImGui::TextDisabled("analysing...");
    return;
  }
  const Analysis& a = *t.analysis;
  if (a.stats.ranks.empty()) {
    ImGui::TextDisabled("no analysis: the file could not be read as a whole (still being written?)");
    return;
  }
  // A panel a few lines high (two compared runs at a projector's text size) keeps the table.
  if (ImGui::GetContentRegionAvail().y >= 4 * ImGui::GetTextLineHeightWithSpacing()) ImGui::Text("whole run, per rank");
  draw_overlap_table(app, a, "overlap");
  if (!app.has_range) draw_range_hint();
  const bool on_gpu = std::any_of(a.stats.ranks.begin(), a.stats.ranks.end(), [](const analysis::RankStats& r) {
    return r.compute_source == analysis::RankStats::ComputeSource::GpuKernels;
  });
  ImGui::TextWrapped("%s", on_gpu ? kExposedOnTheGpuMeaning : kExposedMeaning);
  draw_matches(app, a);
  if (a.stats.ranks.size() > 1 && !a.stats.matches.empty()) draw_waiting(app, a);
  draw_memory_at_peak(app, a);
  if (model.ranks.empty()) return;
  app.focus_rank = std::clamp(app.focus_rank, 0, int(model.ranks.size()) - 1);
  const analysis::RankStats* rank = a.rank(model, size_t(app.focus_rank));
  if (!rank) return;
  draw_bucket_exposure(app, *rank);
  draw_iterations(app, *rank);
}

}  // namespace dpscope::view
