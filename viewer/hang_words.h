// The words of a hung run in the viewer (docs/hangs.md): who waits for whom, for the header and
// the narration; the drawing is view_hang.cpp's (draw_hang in app.h). The hang itself is the
// analysis's (analysis/hang.h, Analysis::hang), so it reads as `dpscope stats` says it.
#pragma once

#include <optional>
#include <string>

#include "analysis/hang.h"
#include "viewer/model.h"

namespace dpscope::view {

// "rank 0 waits in allreduce #4 for rank 1, which never issued it": the waiters (ranks with a
// collective never completed, the culprit aside), where the first of them waits, and the
// culprit; "" without a culprit. Pure.
std::string hang_who_waits(const analysis::HangReport& hang);

// The header's piece: "hang: <who waits>, stuck 3.0 s" (the longest pending), or "" without a
// hang. Pure.
std::string hang_header_piece(const std::optional<analysis::HangReport>& hang);

// While a run hangs (`--live`), before any rank has ended: "stuck: rank 0 in allreduce #4 for
// 12.3 s", counted from the issue of the oldest collective a rank has waited for over a second
// (its "stuck: ..." mark, Note [A stuck collective] in engine/comm/process_group.cpp) that no
// collective of that rank has finished after; `now_ns` on the trace's clock (trace::now_ns() on
// the run's host). "" when nothing is stuck. Pure.
std::string live_stuck_piece(const Model& model, int64_t now_ns);

}  // namespace dpscope::view
