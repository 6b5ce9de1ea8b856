// merge: joins the per-rank trace files of one run into a single run file, the file users open
// in the viewer and pass to `dpscope stats`. `dpscope merge` and the launcher call it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
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
// `out` appears only when the merge is whole: it is written as `out`.partial and renamed.
MergeResult merge_traces(const std::vector<std::string>& inputs, const std::string& out,
                         const std::function<void(double)>& progress = {});

// The checks merge_traces makes before it opens anything: at least one input, and the output
// not among them. Throws the same TraceError.
void check_merge_arguments(const std::vector<std::string>& inputs, const std::string& out);

// A rank killed before it could close its trace leaves status 'running' (RankStatus::Running)
// in its file. The launcher, which saw how the process ended, writes that here ("killed by
// signal 9 (SIGKILL)") so the file and the merge say it. A closed rank's status is left alone;
// returns whether the file changed. Throws TraceError naming the file if it is not a readable
// trace.
bool mark_unfinished_rank(const std::string& rank_file, std::string_view how_it_ended);

}  // namespace dpscope::trace
