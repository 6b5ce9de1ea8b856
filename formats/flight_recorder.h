// PyTorch's flight-recorder dumps, both ways: `dpscope export --format flight-recorder DIR TRACE`
// writes one dump per rank (DIR/rank_N, the JSON form, version "2.10" of FlightRecorder.hpp), and
// `dpscope import` reads dumps (that JSON form, or the plain pickle the recorder writes by
// default) into a run file whose collectives carry their states (docs/hangs.md).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dpscope::trace {
class Reader;
}

namespace dpscope::formats {

// A dump the import refuses, or an export that cannot be written: one line naming the file and
// what is wrong.
class FlightRecorderError : public std::runtime_error {
 public:
  explicit FlightRecorderError(const std::string& message) : std::runtime_error(message) {}
};

// The dump's version, as FlightRecorder.hpp's version_val.
inline constexpr std::string_view kFlightRecorderVersion = "2.10";

// Note [Flight-recorder fields]
// How a dpscope collective and a flight-recorder entry map to each other (docs/hangs.md has the
// table and what each side cannot know):
//   collective_seq_id = seq + 1 (PyTorch counts a group's collectives from 1, dpscope from 0);
//   op_id = collective_seq_id (no coalescing); p2p_seq_id = 0; record_id = the entry's place in
//   the rank's issue order over all its groups;
//   pg_id = events.grp; process_group = [str(grp), the group's name]; pg_config[str(grp)] =
//   {name, desc, ranks} with the ranks that recorded the group's collectives (every rank for the
//   world group);
//   profiling_name = "nccl:" + all_reduce | broadcast | _all_gather_base | _reduce_scatter_base |
//   all_reduce_barrier: the analyzer accepts only NCCL's (or XCCL's) names, so a Gloo run is named
//   so too, and `comm_lib_version` says which library ran it;
//   input_sizes / output_sizes = [[elements]], elements = bytes / the dtype's size: a broadcast's
//   or all-reduce's tensor both ways, an all-gather's chunk in and world x chunk out, a
//   reduce-scatter's whole input in and its chunk out; a barrier moves [[0]];
//   input_dtypes / output_dtypes = LibTorch's names ("Float", "BFloat16", ...);
//   state = completed | started | scheduled (issued, never started) from the end state (Note
//   [Collective end state]); time_created_ns = enqueue_ns; time_discovered_started_ns = begin_ns
//   once started, time_discovered_completed_ns = end_ns once completed (0 otherwise, as the JSON
//   dump writes); duration_ms = end - begin of a completed one; retired = completed;
//   timeout_ms = 0 (the trace does not keep the timeout); frames = []; is_p2p = false;
//   pg_status[str(grp)] = the last enqueued, started and completed collective_seq_id (-1: none).
// The import reads the same fields back; times stay on the dump's clock (each rank's own), the
// end of an entry never completed is the last time its rank's dump holds, and a rank that group
// membership names but no dump holds gets a ranks row without events, its status "no
// flight-recorder dump".

// Writes DIR/rank_N for every rank of `reader`'s trace (DIR is created; each file is written
// under a temporary name and renamed, so a failure leaves no half file). Returns the paths, by
// rank. Throws FlightRecorderError naming the path when it cannot write, trace::TraceError as the
// Reader does.
std::vector<std::string> export_flight_recorder(trace::Reader& reader, const std::string& dir);

struct FlightRecorderImportResult {
  int32_t ranks = 0;          // ranks with a dump
  int32_t missing_ranks = 0;  // ranks the groups name that no dump holds
  int64_t entries = 0;        // collectives imported
};

// Imports dumps, one per rank (its rank the trailing number of the file's name, as PyTorch's
// analyzer reads it: rank_3, nccl_trace_rank_3), JSON or pickle by their first byte, into `out`,
// written under a temporary name and renamed only when complete. `command_line` goes into meta.
// Throws FlightRecorderError naming the file for a truncated, malformed or foreign dump, a name
// without a rank, two dumps of one rank; nothing is left at `out` then.
FlightRecorderImportResult import_flight_recorder(const std::vector<std::string>& inputs,
                                                  const std::string& out, const std::string& command_line);

// Whether `path` holds a flight-recorder dump rather than a profiler trace: a pickle (its first
// byte 0x80), or JSON whose first 64 KiB name "pg_config". Reads at most that much.
bool is_flight_recorder_dump(const std::string& path);

}  // namespace dpscope::formats
