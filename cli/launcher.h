// The launcher behind `dpscope launch`: starts the ranks of one node as child processes with
// torchrun's environment, prefixes their output with the rank, stops every rank when one fails,
// and merges the ranks' trace files when they are done.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/link_options.h"

namespace dpscope::cli {

struct LaunchOptions {
  int nproc = 1;            // ranks on this node (LOCAL_WORLD_SIZE)
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;      // 0: a free port of this host (single node only)
  // Exported as DPSCOPE_TRACE_DIR; this node's rank files `rank<N>.sqlite` found there at the
  // end are merged into `run.sqlite` (single node) or `run-node<K>.sqlite`.
  std::string trace_dir;
  int stop_grace_seconds = 10;  // SIGTERM, then SIGKILL after this long
  // The link to emulate, exported to every rank as DPSCOPE_LINK_GBPS and DPSCOPE_LINK_LATENCY_US
  // (core/link_model.h): both or neither; neither leaves the environment as it is.
  core::LinkFlags link;
  std::vector<std::string> command;  // PROGRAM ARGS...
};

// The checks run_launch makes first: a program, -n, --nnodes, --node-rank, --master-port,
// --stop-grace and the link in range. Throws CliFailure naming the option.
void validate_launch_options(const LaunchOptions& options);

// Runs the ranks to the end. Returns the launcher's exit status: 0 when every rank exited 0;
// otherwise 1, after printing which rank failed first and how (exit status or signal).
// Reacts to SIGINT/SIGTERM by passing them on to the ranks and waiting for them (the ranks
// flush their traces), then stopping like a failure.
int run_launch(const LaunchOptions& options);

}  // namespace dpscope::cli
