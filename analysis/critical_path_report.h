// The two renderings of a CriticalPath (critical_path.h): the `critical_path` object that
// `dpscope stats --critical-path --json` adds to the stats JSON, and the readable section the
// report ends with. Pure functions, defined in critical_path_report.cpp.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "analysis/critical_path.h"

namespace dpscope::analysis {

// How many of the path's events the renderings list, longest first.
inline constexpr size_t kCriticalPathEventsShown = 10;

// {"region", "rank", "clock", "length_ms", "bound_by_ms": {key: ms}, "bound_by_pct": {key: %},
//  "longest": [{"name", "rank", "lane", "begin_ms", "ms", "bound_by"}], "notes": [...]}; keys with no
// time on the path are left out of bound_by_*. begin_ms counts from the run's start on the path's
// clock. Pure.
nlohmann::ordered_json critical_path_json(const CriticalPath& path);

// "critical path of iteration 5 (rank 1, cluster clock): 12.345 ms ..." with a line per bound key
// and per longest event. Ends with a newline. Pure.
std::string critical_path_text(const CriticalPath& path);

}  // namespace dpscope::analysis
