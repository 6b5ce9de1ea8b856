// The What-if tab: another bucket cap for the open DDP trace, or another backward prefetch and
// all-gather limit for an FSDP one, predicted by the replay behind `dpscope whatif` (Note [What-if
// replay], Note [FSDP what-if replay]) and drawn as a what-if lane under each rank's lanes; the
// tab prints the prediction beside the measurement, and the model and its error.
#include <imgui.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "analysis/collective_match.h"
#include "trace/vocabulary.h"
#include "viewer/app.h"
#include "viewer/palette.h"

namespace dpscope::view {

namespace {

// What the replay keeps and what it costs, for each strategy; the cost differs by clock.
constexpr const char* kDdpIntro =
    "Replay this run with another bucket cap: each gradient's ready time and the compute as recorded, "
    "each bucket's all-reduce costed by %s (`dpscope whatif`, docs/whatif.md). The prediction is "
    "drawn as a what-if lane under each rank.";
constexpr const char* kFsdpIntro =
    "Replay this run with another backward prefetch or all-gather limit: each unit's compute as "
    "recorded, each all-gather and reduce-scatter costed by %s (`dpscope whatif`, docs/whatif.md). "
    "The prediction is drawn as a what-if lane under each rank.";
constexpr const char* kFittedCost = "a line fitted to this trace's own";
constexpr const char* kLinkCost = "the link's ring model (on the cluster clock the recorded ones cost that too)";

// The DDP settings: the bucket cap and the first bucket's.
void ddp_fields(WhatifRequest& request) {
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
  ImGui::InputDouble("bucket cap MiB", &request.bucket_cap_mb, 0, 0, "%g");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
  ImGui::InputDouble("first bucket MiB (0: as recorded)", &request.first_bucket_mb, 0, 0, "%g");
}

// The backward prefetch combo's choices: "as recorded", then trace::kBackwardPrefetches' spellings.
constexpr size_t kPrefetchChoices = 1 + trace::kBackwardPrefetches.size();
const std::array<const char*, kPrefetchChoices>& prefetch_choices() {
  static const std::array<std::string, kPrefetchChoices> names = [] {
    std::array<std::string, kPrefetchChoices> out{"as recorded"};
    for (size_t i = 0; i < trace::kBackwardPrefetches.size(); ++i) {
      out[i + 1] = std::string(trace::to_string(trace::kBackwardPrefetches[i]));
    }
    return out;
  }();
  static const std::array<const char*, kPrefetchChoices> choices = [] {
    std::array<const char*, kPrefetchChoices> out{};
    for (size_t i = 0; i < kPrefetchChoices; ++i) out[i] = names[i].c_str();
    return out;
  }();
  return choices;
}

// The FSDP settings: each "as recorded" or a value.
void fsdp_fields(WhatifRequest& request) {
  const auto& modes = trace::kBackwardPrefetches;
  int choice = request.backward_prefetch
                   ? 1 + int(std::find(modes.begin(), modes.end(), *request.backward_prefetch) - modes.begin())
                   : 0;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
  if (ImGui::Combo("backward prefetch", &choice, prefetch_choices().data(), int(kPrefetchChoices))) {
    request.backward_prefetch = choice == 0 ? std::nullopt : std::optional(modes[size_t(choice - 1)]);
  }
  ImGui::SameLine();
  int limit = request.limit_all_gathers.value_or(-1);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
  if (ImGui::InputInt("all-gather limit (0: none, -1: as recorded)", &limit)) {
    limit = std::max(-1, limit);
    request.limit_all_gathers = limit < 0 ? std::nullopt : std::optional<int32_t>(limit);
  }
}

// Predict (disabled while a prediction runs) and, with lanes shown, Clear.
void draw_buttons(App& app) {
  const bool busy = app.whatif_pending.valid();
  if (busy) ImGui::BeginDisabled();
  if (ImGui::Button(busy ? "predicting..." : "Predict")) app.request_whatif(app.whatif_input);
  if (busy) ImGui::EndDisabled();
  if (app.whatif) {
    ImGui::SameLine();
    if (ImGui::Button("Clear")) app.whatif.reset();
  }
}

// The prediction beside the measurement, with the model that made it; or the refusal.
void draw_prediction(App& app, const WhatifLanes& w) {
  ImGui::Separator();
  ImGui::Text("%s", w.title().c_str());
  if (!w.error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(theme().error_text));
    ImGui::TextWrapped("%s", w.error.c_str());  // a refusal names the file and the fix: all of it
    ImGui::PopStyleColor();
    return;
  }
  if (!w.fsdp) {
    std::string plan;
    for (size_t b = 0; b < w.bucket_bytes.size(); ++b) plan += (b ? ", " : "") + analysis::bytes_text(w.bucket_bytes[b]);
    ImGui::TextWrapped("%zu buckets in launch order: %s", w.bucket_bytes.size(), plan.c_str());
  }
  if (ImGui::BeginTable("whatif", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    for (const char* h : {"median over the steady steps", "measured ms", "predicted ms"}) ImGui::TableSetupColumn(h);
    table_headers(app);
    const auto row = [](const char* name, double measured, double predicted) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(name);
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", measured);
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", predicted);
    };
    row("step time", w.measured_step_ms, w.predicted_step_ms);
    row("exposed communication", w.measured_exposed_comm_ms, w.predicted_exposed_comm_ms);
    ImGui::EndTable();
  }
  ImGui::TextWrapped("cost: %s. A prediction, not a measurement: run it to check.", w.model_text.c_str());
}

}  // namespace

void draw_whatif(App& app) {
  const bool fsdp = app.traces[0].model->sharded_units();
  ImGui::TextWrapped(fsdp ? kFsdpIntro : kDdpIntro, app.clock() == analysis::Clock::Cluster ? kLinkCost : kFittedCost);
  if (fsdp) {
    fsdp_fields(app.whatif_input);
  } else {
    ddp_fields(app.whatif_input);
  }
  draw_buttons(app);
  if (app.whatif) draw_prediction(app, *app.whatif);
}

}  // namespace dpscope::view
