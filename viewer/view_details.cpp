// Details of one event: the hover tooltip and the Details tab list every column of the event
// behind a span (read on demand through DetailSource), with names spelled out, and for the
// selection its flows: the bucket it filled, the collective it launched, that collective's skew
// across ranks and any mismatch.
#include <imgui.h>

#include "analysis/bandwidth.h"
#include "analysis/collective_match.h"
#include "viewer/app.h"
#include "viewer/lod.h"

namespace dpscope::view {
namespace {

using trace::kNone;
using trace::kNone64;

void field(const char* name, const std::string& value) { ImGui::Text("%-11s %s", name, value.c_str()); }
void field(const char* name, int64_t value) {
  if (value != kNone64) ImGui::Text("%-11s %lld", name, static_cast<long long>(value));
}

// A collective's place among the ranks: its skew, this rank's wait and transfer, its bandwidth.
void collective_fields(const Analysis& matched, const Span& s, const trace::Event& e, int32_t rank) {
  const CollectiveSpans* c = matched.match(s.seq());
  if (const analysis::CollectiveMatch* m = c ? matched.trace_match(*c) : nullptr) {
    field("skew", format_duration(double(m->skew_ns)) + " across " + std::to_string(m->ranks.size()) + " ranks");
    if (!m->mismatch && m->ranks.size() > 1) {
      // See Note [Waiting and transfer].
      analysis::CollectiveStats mine;
      mine.begin_ns = s.begin_ns;
      mine.end_ns = s.end_ns;
      const analysis::ArrivalSplit split = analysis::split_at_arrival(mine, m->last_begin_ns);
      if (m->last_rank == rank) {
        field("arrival", "last, " + format_duration(double(m->late_ns)) + " after the next latest rank");
      } else {
        field("arrival", "waited " + format_duration(double(split.wait_ns)) + " for rank " +
                             std::to_string(m->last_rank) + ", the last to arrive");
      }
      field("transfer", format_duration(double(split.transfer_ns)));
      // See Note [Bus bandwidth]: nccl-tests' figures, in gigabits as the link is given.
      if (const std::optional<analysis::Bandwidth> bw = analysis::bandwidth_of(
              m->op, e.bytes, static_cast<int>(m->ranks.size()), split.transfer_ns)) {
        char text[96];
        std::snprintf(text, sizeof(text), "algbw %.2f Gb/s, busbw %.2f Gb/s", bw->algbw_gbps, bw->busbw_gbps);
        field("bandwidth", text);
      }
    }
    if (m->mismatch) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme().error_text), "MISMATCH: %s", m->why.c_str());
  }
}

void event_fields(App& app, const Pick& pick) {
  OpenTrace& t = app.traces[size_t(pick.trace)];
  const Model& model = *t.model;
  const Span& s = span_of(model, pick.span);
  const RankData& rank = model.ranks[size_t(pick.span.rank)];
  const Lane& lane = rank.lanes[size_t(pick.span.lane)];
  ImGui::Text("%s", span_label(model, s).c_str());
  ImGui::Separator();
  field("kind", std::string(trace::to_string(s.kind())));
  field("rank", rank.info.rank);
  field("lane", lane_label(rank, size_t(pick.span.lane)) + " (" + std::to_string(lane.info.lane) + ")");
  field("begin", format_duration(double(s.begin_ns - model.t_begin)) + " (" + std::to_string(s.begin_ns) + " ns)");
  field("duration", format_duration(double(s.end_ns - s.begin_ns)));
  const trace::Event* e = t.details ? t.details->event(model, pick.span) : nullptr;
  if (!e) return;
  if (e->name != kNone) field("name", model.name(e->name));
  field("iteration", e->iteration == kNone ? std::string("construction") : std::to_string(e->iteration));
  if (e->param != kNone) {
    const std::string pname = size_t(e->param) < model.params.size() ? model.params[size_t(e->param)].name : "?";
    field("param", std::to_string(e->param) + " " + pname);
  }
  field("bucket", e->bucket);
  if (e->unit != kNone) {
    const std::string uname = size_t(e->unit) < model.units.size() ? model.units[size_t(e->unit)].name : "?";
    field("unit", std::to_string(e->unit) + " " + uname);
  }
  if (e->op != 0xff) {
    field("op", e->kind == trace::EventKind::UnitState
                    ? std::string(trace::to_string(static_cast<trace::UnitState>(e->op)))
                    : std::string(trace::to_string(static_cast<trace::CollectiveOp>(e->op))));
  }
  field("group", e->grp);
  field("seq", e->seq);
  if (e->bytes != kNone64) field("bytes", format_bytes(e->bytes) + " (" + std::to_string(e->bytes) + ")");
  if (e->dtype != 0xff) field("dtype", std::string(trace::to_string(static_cast<trace::DType>(e->dtype))));
  if (e->value != kNone64) {
    field(e->kind == trace::EventKind::Hook ? "fill" : "value",
          e->kind == trace::EventKind::Hook ? format_bytes(e->value) : std::to_string(e->value));
  }
  if (e->enqueue_ns != kNone64) field("queued", format_duration(double(e->begin_ns - e->enqueue_ns)));
  // The thread's own CPU time over the span (Note [Thread CPU time]): what it computed, against
  // the wall time the span took on this machine.
  if (e->cpu_begin_ns != kNone64 && e->cpu_end_ns != kNone64 && e->end_ns > e->begin_ns) {
    field("CPU time", format_duration(double(e->cpu_end_ns - e->cpu_begin_ns)));
  }
  if (e->flags) {
    std::string flags;
    if (e->flags & trace::kFlagPrefetch) flags += "prefetch ";
    if (e->flags & trace::kFlagBackward) flags += "backward ";
    if (e->flags & trace::kFlagBucketed) flags += "bucketed ";
    if (e->flags & trace::kFlagGpuTime) flags += "gpu-time ";
    if (e->flags & trace::kFlagRanOnWaiter) flags += "ran-on-waiter ";
    field("flags", flags);
  }
  if (t.analysis && s.kind() == trace::EventKind::Collective) collective_fields(*t.analysis, s, *e, rank.info.rank);
}

}  // namespace

void draw_span_tooltip(App& app, const Pick& pick) {
  ImGui::BeginTooltip();
  event_fields(app, pick);
  ImGui::EndTooltip();
}

void draw_details(App& app) {
  if (!app.selected.valid()) {
    ImGui::TextWrapped("Click a span on the timeline to see every field of its event and its flows "
                       "(hook -> bucket ready -> launch -> all-reduce -> the same collective on the other ranks).");
    return;
  }
  event_fields(app, app.selected);
  OpenTrace& t = app.traces[size_t(app.selected.trace)];
  if (!t.analysis) {
    ImGui::TextDisabled("analysing...");
    return;
  }
  const auto flows = flows_of(*t.model, *t.analysis, app.selected.span);
  if (flows.empty()) return;
  ImGui::Separator();
  ImGui::Text("flows");
  for (const Flow& flow : flows) {
    const Span& to = span_of(*t.model, flow.to);
    const char* what = flow.kind == Flow::HookToBucket ? "bucket ready"
                       : flow.kind == Flow::BucketToLaunch ? "launched"
                       : flow.kind == Flow::LaunchToCollective ? "runs as"
                                                               : "same collective on";
    ImGui::BulletText("%s rank %d %s at %s", what, t.model->ranks[size_t(flow.to.rank)].info.rank,
                      span_label(*t.model, to).c_str(),
                      format_duration(double(to.begin_ns - t.model->t_begin)).c_str());
  }
}

}  // namespace dpscope::view
