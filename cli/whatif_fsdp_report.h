// The FSDP half of `dpscope whatif` (cmd_whatif.cpp): predicting an FSDP trace with another
// backward prefetch mode, all-gather limit or link (analysis/whatif_fsdp.h), and printing the report
// or the JSON of docs/whatif.md, "FSDP".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "analysis/cluster_clock.h"
#include "analysis/stats.h"
#include "analysis/whatif_fsdp.h"
#include "core/link_model.h"
#include "trace/reader.h"

namespace dpscope::cli {

// What the user asked of an FSDP trace; settings not given stay as recorded.
struct FsdpWhatifRequest {
  std::string trace;
  int32_t rank = 0;
  std::optional<trace::BackwardPrefetch> backward_prefetch;
  std::optional<int32_t> limit_all_gathers;
  std::optional<core::LinkSpec> link;  // cost collectives on this link instead of the fit
  // The cluster clock's replay of the trace (`dpscope whatif --clock cluster`), else null: the
  // trace is loaded on that clock and its collectives are costed by the replay's link.
  const analysis::ClusterClockRun* cluster = nullptr;
  bool sweep = false;                  // every prefetch mode x all-gather limits 0, 1, 2
  bool json = false;
};

// Reads the FSDP trace `reader` holds (`stats` = compute_stats of it, on request.cluster's clock
// when given), predicts and prints to
// stdout. Throws analysis::WhatifError (refusals) and CliFailure (--sweep with a setting).
void run_fsdp_whatif(const FsdpWhatifRequest& request, trace::Reader& reader,
                     const analysis::RunStats& stats);

}  // namespace dpscope::cli
