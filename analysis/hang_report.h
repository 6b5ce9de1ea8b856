// The two renderings of a HangReport (hang.h): the `hang` object of `dpscope stats --json`
// (null for a run whose collectives all completed) and the report's hang section. Pure
// functions, defined in hang_report.cpp.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "analysis/hang.h"

namespace dpscope::analysis {

// {"verdict", "verdict_group", "verdict_seq", "culprit", "culprit_reason", "missing_ranks",
//  "sentence", "first_disagreement": {"group", "group_name", "seq", "field", "verdict",
//  "missing_ranks", "collectives": [...]} or null, "groups": [{"group", "name", "ranks":
//  [{"rank", "last_completed_seq", "last_issued_seq", "pending": [...]}]}]}; a collective is
// {"rank", "seq", "kind", "bytes", "dtype", "iteration", "bucket", "unit", "state",
//  "issued_ms", "pending_ms"} (docs/trace-format.md, "Figures"). null without a report. Pure.
nlohmann::ordered_json hang_json(const std::optional<HangReport>& report);

// "hang: rank 1 never issued allreduce #41 (...); ranks 0, 2, 3 waited 5.0 s in it" then the
// verdict, the first disagreement, and each group's ranks with their pending collectives. Ends
// with a newline; empty without a report. Pure.
std::string hang_text(const std::optional<HangReport>& report);

}  // namespace dpscope::analysis
