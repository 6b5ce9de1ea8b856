// merge: joins the per-rank trace files of one run into a single run file, the file users open
// in the viewer and pass to `dpscope stats`. `dpscope merge` and the launcher call it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dpscope::trace {

struct MergeResult {
  int ranks = 0;        // ranks in the merged file
  int64_t events = 0;   // events in the merged file
  int64_t dropped_events = 0;  // summed over ranks (recorded in each rank's row)
};

// Writes `out` (replacing it) from `inputs`: rank files or already merged files, in any order.
// Every input is validated first with a Reader, so a bad input fails with the Reader's message
// before anything is written. Two inputs holding the same rank are an error naming both files.
// Interned names are re-numbered into one table; run-wide tables (meta, params, buckets, units)
// come from the input with the lowest rank. `progress` gets the fraction done after each input.
// Thread-safety: none needed; opens its own connections.
MergeResult merge_traces(const std::vector<std::string>& inputs, const std::string& out,
                         const std::function<void(double)>& progress = {});

}  // namespace dpscope::trace
