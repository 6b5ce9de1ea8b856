// The FSDP half of `dpscope whatif` (cmd_whatif.cpp): predicting an FSDP trace with another
// backward prefetch mode, all-gather limit or link (trace/whatif_fsdp.h), and printing the report
// or the JSON of docs/whatif.md, "FSDP".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/comm/link_model.h"
#include "trace/reader.h"
#include "trace/stats.h"
#include "trace/whatif_fsdp.h"

namespace dpscope::cli {

// What the user asked of an FSDP trace; settings not given stay as recorded.
struct FsdpWhatifRequest {
  std::string trace;
  int32_t rank = 0;
  std::optional<trace::BackwardPrefetchMode> backward_prefetch;
  std::optional<int32_t> limit_all_gathers;
  std::optional<comm::LinkSpec> link;  // cost collectives on this link instead of the fit
  bool sweep = false;                  // every prefetch mode x all-gather limits 0, 1, 2
  bool json = false;
};

// Reads the FSDP trace `reader` holds (`stats` = compute_stats of it), predicts and prints to
// stdout. Throws trace::WhatifError (refusals) and CliFailure (--sweep with a setting).
void run_fsdp_whatif(const FsdpWhatifRequest& request, trace::Reader& reader,
                     const trace::RunStats& stats);

}  // namespace dpscope::cli
