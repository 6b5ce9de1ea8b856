// The two renderings of RunStats (stats.h): stats_json, the `dpscope stats --json` contract of
// docs/trace-format.md, and stats_text, the readable report. Both are pure functions of the
// statistics, defined in stats_report.cpp.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "analysis/clock_choice.h"
#include "analysis/stats.h"

namespace dpscope::analysis {

// The `dpscope stats --json` object of docs/trace-format.md, on one line without a newline:
// exactly the contract's keys, in its order; absent values (loss, iteration, bucket, ...) are
// null. Pure function of `stats`.
std::string stats_json(const RunStats& stats);

// The contract's "clock" object, which `dpscope whatif --json` carries too: {"name",
// "link_gbps", "link_latency_us", "compute"}, the last three null on the measured clock. Pure.
nlohmann::ordered_json clock_json(const ClockLabel& clock);

// The readable report of `dpscope stats`: the run, a warning line for each rank that dropped
// events or did not complete, the buckets and units, and per rank its iterations (step time,
// loss, hooks, collectives, overlap), the median, min and max step time, overall overlap and
// peak memory by category in MiB. Long runs show their first and last iterations only (the
// step time summary still covers all). Ends with a newline. Pure function.
std::string stats_text(const RunStats& stats);

}  // namespace dpscope::analysis
