// Where a training rank writes its trace and where the run's merged file is left: the file a
// user names (`--trace t.sqlite`, `--trace DIR`) is the file they get, on one rank or many.
#pragma once

#include <string>
#include <vector>

#include "engine/comm/rendezvous.h"

namespace dpscope::train {

// Note [Trace files of a run]
// One rank writes its trace straight to the named file. Several ranks each write a rank file and
// the run is merged into one file at the end: `--trace t.sqlite` gives t.rank<R>.sqlite and then
// t.sqlite; `--trace DIR` gives DIR/rank<R>.sqlite and then DIR/run.sqlite; with neither, under
// `dpscope launch`, DIR is $DPSCOPE_TRACE_DIR and the launcher merges (it also marks ranks that
// died); with neither and no launcher (torchrun), the default traces/train-<model>.sqlite is a
// named file as above. Rank 0 merges after every rank has closed its file, when every rank ran on
// its host; ranks on several hosts leave their rank files, and rank 0 prints the one `dpscope
// merge` command that joins them.
struct TraceFiles {
  std::string rank_file;                // this rank's trace
  std::string run_file;                 // the merged run; "" when the launcher merges
  std::vector<std::string> rank_files;  // every rank's file, by rank (what run_file merges)
};

// `trace_option` is --trace ("" when not given); `model_name` names the default file. Reads
// DPSCOPE_TRACE_DIR. Pure but for the environment.
TraceFiles plan_trace_files(const std::string& trace_option, const std::string& model_name,
                            const comm::LaunchEnv& env);

// What finish_trace_files did: the line to print ("trace t.sqlite (merged from 3 rank files)", or
// where the rank files are and the command that merges them; "" when nothing was merged), and
// the file that now holds the whole run on rank 0 (the merged file, or a single rank's own), ""
// elsewhere and when the launcher merges.
struct FinishedTrace {
  std::string line;
  std::string run_file;
};

// Rank 0, once every rank's file is closed: merges the rank files into run_file when all ranks
// ran on this host. Throws trace::TraceError when the merge fails.
FinishedTrace finish_trace_files(const TraceFiles& files, const comm::LaunchEnv& env);

}  // namespace dpscope::train
