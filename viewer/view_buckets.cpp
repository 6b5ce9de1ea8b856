// The buckets panel (DDP): every bucket of the initial and the rebuilt plan side by side, each a
// bar of its parameters in slot order; the plan in force at the playhead's iteration fills as the
// playhead moves through backward (a parameter fills when its hook has fired), with the bucket's
// ready / launched / all-reduce running / done state. A run imported from a profiler trace has
// the rebuilt plan alone, read from its all-reduces, without parameters (Note [DDP's buckets from
// PyTorch's records]): each bucket a bar of its bytes, its all-reduce running or done.
#include <imgui.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "trace/vocabulary.h"
#include "viewer/app.h"
#include "viewer/lod.h"
#include "viewer/palette.h"

namespace dpscope::view {
namespace {

using trace::EventKind;

struct Progress {
  std::set<int32_t> filled;  // params whose hook fired by the playhead
  std::map<int32_t, int> state;  // bucket -> 1 ready, 2 launched, 3 done
};

// Draws plan `generation`'s buckets; returns the index of the bucket whose line was clicked, or
// -1.
int32_t draw_plan(const Model& model, int generation, const Progress* progress, float width) {
  int32_t clicked = -1;
  int64_t largest = 1;
  for (const auto& b : model.buckets) {
    if (b.generation == generation) largest = std::max(largest, b.bytes);
  }
  ImDrawList* draw = ImGui::GetWindowDrawList();
  for (const auto& b : model.buckets) {
    if (b.generation != generation) continue;
    const int state = progress && progress->state.count(b.index) ? progress->state.at(b.index) : 0;
    static const char* kStates[] = {"", "ready", "launched", "done"};
    const bool size_unknown = b.numel == 0 && b.params.empty();
    const std::string line = "b" + std::to_string(b.index) + " " +
                             (size_unknown ? std::string("(size not in the trace)") : format_bytes(b.bytes)) + " " +
                             kStates[state];
    ImGui::PushID(b.index);
    if (ImGui::Selectable(line.c_str())) clicked = b.index;
    ImGui::PopID();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float bar = size_unknown ? width * 0.5f : std::max(20.0f, width * float(double(b.bytes) / double(largest)));
    const float h = 12;
    double offset = 0;
    for (size_t k = 0; k < b.params.size(); ++k) {
      const int32_t param = b.params[k];
      const double numel = size_t(param) < model.params.size() ? double(model.params[size_t(param)].numel) : 0;
      const float x0 = p.x + bar * float(offset / double(std::max<int64_t>(1, b.numel)));
      offset += numel;
      const float x1 = p.x + bar * float(offset / double(std::max<int64_t>(1, b.numel)));
      const bool filled = progress && progress->filled.count(param);
      draw->AddRectFilled(ImVec2(x0, p.y), ImVec2(std::max(x1, x0 + 1), p.y + h),
                          filled ? kBucketSlotFilledColor : kBucketSlotEmptyColor);
      draw->AddRect(ImVec2(x0, p.y), ImVec2(std::max(x1, x0 + 1), p.y + h), IM_COL32(20, 20, 20, 255));
      if (ImGui::IsMouseHoveringRect(ImVec2(x0, p.y), ImVec2(x1, p.y + h)) && size_t(param) < model.params.size()) {
        const auto& info = model.params[size_t(param)];
        ImGui::SetTooltip("%s  %s  %lld elements%s", info.name.c_str(), trace::shape_to_json(info.shape).c_str(),
                          static_cast<long long>(info.numel), filled ? "  (gradient in)" : "");
      }
    }
    if (b.params.empty()) {  // a plan read from a profiler's all-reduces: one bar, its bytes
      draw->AddRectFilled(p, ImVec2(p.x + bar, p.y + h), state == 3 ? kBucketSlotFilledColor : kBucketSlotEmptyColor);
    }
    const ImU32 state_color = state == 3 ? kBucketDoneColor
                              : state == 2 ? kBucketLaunchColor
                              : state == 1 ? kBucketReadyColor
                                           : IM_COL32(90, 90, 90, 255);
    draw->AddRect(ImVec2(p.x - 1, p.y - 1), ImVec2(p.x + bar + 1, p.y + h + 1), state_color, 0, 0, state ? 2.0f : 1.0f);
    ImGui::Dummy(ImVec2(bar, h + 2));
  }
  return clicked;
}

// What iteration `iteration` of the focus rank did on its main lanes up to `playhead` (the
// trace's time): hooks, bucket instants.
Progress progress_until(App& app, int32_t iteration, int64_t playhead) {
  Progress progress;
  for (const trace::Event& e : app.focus_iteration_events(iteration)) {
    // A gradient counts from its hook's start (when autograd hands it over), as the narration
    // line says (playback.h); the bucket instants inside the hook come after it.
    if (e.begin_ns > playhead) continue;
    if (e.kind == EventKind::Hook) progress.filled.insert(e.param);
    int level = e.kind == EventKind::BucketReady ? 1 : e.kind == EventKind::BucketLaunch ? 2
              : e.kind == EventKind::BucketDone ? 3 : 0;
    // A run imported from a profiler has the all-reduces alone: running is launched, ended done.
    if (e.kind == EventKind::Collective && e.bucket != trace::kNone) level = e.end_ns <= playhead ? 3 : 2;
    if (level) progress.state[e.bucket] = std::max(progress.state[e.bucket], level);
  }
  return progress;
}

// The two plans side by side under their header, the one in force filling with `progress`;
// returns the bucket of the plan in force whose line was clicked, or -1.
int32_t draw_plans(App& app, const Model& model, int32_t iteration, int in_force, const Progress& progress,
                   const std::vector<int>& generations) {
  const int columns = int(generations.size());
  const float column = ImGui::GetContentRegionAvail().x / float(columns) - 12;
  // The plans scroll under their header; at least the header and a bucket high, so that a short
  // panel (a projector's text) scrolls rather than cuts the header.
  const float least = ImGui::GetTextLineHeightWithSpacing() * 2 + ImGui::GetStyle().CellPadding.y * 4 + 16;
  const ImVec2 size(0, std::max(ImGui::GetContentRegionAvail().y, least));
  if (!ImGui::BeginTable("plans", columns, ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY, size)) {
    ++app.layout.clipped_headers;  // wholly out of view: the panel shows no plan
    return -1;
  }
  const bool known = iteration != trace::kNone;
  const bool read_from_records = std::all_of(model.buckets.begin(), model.buckets.end(),
                                             [](const trace::BucketInfo& b) { return b.params.empty(); });
  for (const int generation : generations) {
    std::string title = generation == 0 ? "plan 0 (initial)"
                        : read_from_records ? "plan 1 (rebuilt; read from the profiler's all-reduces)"
                                            : "plan 1 (rebuilt)";
    if (known && in_force == generation) title += ", in force";
    ImGui::TableSetupColumn(title.c_str());
  }
  ImGui::TableSetupScrollFreeze(0, 1);
  table_headers(app, true);
  int32_t clicked = -1;
  for (const int generation : generations) {
    ImGui::TableNextColumn();
    const bool filling = in_force == generation && known;
    const int32_t bucket = draw_plan(model, generation, filling ? &progress : nullptr, column);
    if (in_force == generation) clicked = bucket;
  }
  ImGui::EndTable();
  return clicked;
}

// A click on a bucket of the plan in force: the playhead to its launch in the iteration (or its
// ready, before a launch), the iteration kept in view (Note [Following the narrated iteration]).
void move_to_bucket(App& app, int32_t iteration, int32_t bucket) {
  std::optional<int64_t> at;
  std::optional<int64_t> collective;  // an imported run's: its all-reduce's begin
  for (const trace::Event& e : app.focus_iteration_events(iteration)) {
    if (e.bucket != bucket) continue;
    if (e.kind == EventKind::BucketLaunch) at = e.begin_ns;
    if (e.kind == EventKind::BucketReady && !at) at = e.begin_ns;
    if (e.kind == EventKind::Collective && !collective) collective = e.begin_ns;
  }
  if (!at) at = collective;
  if (at) app.move_playhead(*at + app.focused_trace().offset_ns);
}

}  // namespace

void draw_buckets(App& app) {
  OpenTrace& t = app.focused_trace();
  const Model& model = *t.model;
  std::vector<int> generations;  // the plans the run has: 0 and 1, or 1 alone (an imported run)
  for (const int generation : {0, 1}) {
    if (std::any_of(model.buckets.begin(), model.buckets.end(),
                    [&](const trace::BucketInfo& b) { return b.generation == generation; })) {
      generations.push_back(generation);
    }
  }
  if (generations.empty()) {
    if (model.strategy() == trace::Strategy::Fsdp) {
      ImGui::TextWrapped("No DDP buckets in this trace: an FSDP run keeps its flat parameters in the Units tab.");
    } else if (model.strategy() == trace::Strategy::Fsdp2) {
      ImGui::TextWrapped("No DDP buckets in this trace: an FSDP2 run's parameter groups are in the Units tab.");
    } else {
      ImGui::TextWrapped("No DDP buckets in this trace (strategy %s): its collectives are in the timeline.",
                         model.meta_value(trace::meta_key::kStrategy, "?").c_str());
    }
    return;
  }
  if (model.ranks.empty()) return;
  app.focus_rank = std::clamp(app.focus_rank, 0, int(model.ranks.size()) - 1);
  // A panel a few lines high (two compared runs at a projector's text size) keeps the plans: the
  // narration line names the rank and the iteration there.
  const bool short_panel = ImGui::GetContentRegionAvail().y < 4 * ImGui::GetFrameHeightWithSpacing();
  if (!short_panel) {
    ImGui::SetNextItemWidth(90);
    ImGui::SliderInt("rank", &app.focus_rank, 0, int(model.ranks.size()) - 1);
  }
  const RankData& rank = model.ranks[size_t(app.focus_rank)];
  const int64_t playhead = app.playhead - t.offset_ns;
  const int32_t iteration = rank.iteration_at(playhead);
  const bool rebuilt_exists = generations.back() == 1;
  const int in_force = (iteration == 0 && generations.front() == 0) || !rebuilt_exists ? 0 : 1;
  // Beside the rank's slider when it fits, wrapped under it otherwise (a projector's text size);
  // the plan in force is said in its column's header, so that the line stays short.
  if (!short_panel) {
    ImGui::SameLine();
    ImGui::PushTextWrapPos(0.0f);
    if (iteration == trace::kNone) {
      ImGui::TextDisabled("playhead outside an iteration (click the timeline to move it)");
    } else {
      ImGui::Text("iteration %d at %s", iteration, format_duration(double(playhead - model.t_begin)).c_str());
    }
    ImGui::PopTextWrapPos();
  }
  const Progress progress = iteration == trace::kNone ? Progress{} : progress_until(app, iteration, playhead);
  const int32_t clicked = draw_plans(app, model, iteration, in_force, progress, generations);
  if (clicked >= 0 && iteration != trace::kNone) move_to_bucket(app, iteration, clicked);
}

}  // namespace dpscope::view
