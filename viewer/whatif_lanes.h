// What-if lanes: the collectives and waits `dpscope whatif` predicts for another bucket cap (DDP)
// or another backward prefetch / all-gather limit (FSDP), as one lane per rank drawn under that
// rank's recorded lanes, so that the difference is seen on the timeline and not only read
// (docs/whatif.md, docs/viewer.md).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/cluster_clock.h"
#include "analysis/whatif.h"
#include "analysis/whatif_fsdp.h"
#include "viewer/model.h"

namespace dpscope::view {

// Which settings a request gives: the command line's flags are one strategy's (and the other
// strategy's trace refuses them); the What-if tab holds both and uses the trace's.
enum class WhatifSettings { Ddp, Fsdp, Trace };

// The settings to predict with: the DDP part for a DDP trace, the FSDP part for an FSDP one.
struct WhatifRequest {
  WhatifSettings settings = WhatifSettings::Trace;
  // DDP: the limits in MiB as the user gives them; first_bucket_mb <= 0: as recorded.
  double bucket_cap_mb = 4;
  double first_bucket_mb = 0;
  // FSDP: each setting not given stays as recorded.
  std::optional<trace::BackwardPrefetch> backward_prefetch;
  std::optional<int32_t> limit_all_gathers;
};

// One prediction for every rank of a trace. Plain value, immutable once built.
struct WhatifLanes {
  WhatifRequest request;
  bool fsdp = false;  // which part of the request was replayed
  analysis::FsdpSettings fsdp_settings;  // FSDP: the settings replayed (the request over the recorded)
  // by_rank[i] belongs to model.ranks[i]: its what-if lanes, rows built as Note [Lane rows] says;
  // empty lanes for a rank the replay refused.
  struct RankLanes {
    // The predicted collectives (EventKind::Collective: DDP's all-reduces of the new plan's
    // buckets, FSDP's all-gathers and reduce-scatters; no seq, so no flows, and no event behind).
    Lane comm;
    Lane waits;  // the main thread's predicted waits for them (EventKind::CollectiveWait)
  };
  std::vector<RankLanes> by_rank;
  // The replay of the first rank that could be replayed: its plan's bucket sizes, the medians,
  // and how the all-reduce was costed; for the panel and the headless JSON.
  std::vector<int64_t> bucket_bytes;
  double measured_step_ms = 0, predicted_step_ms = 0;
  double measured_exposed_comm_ms = 0, predicted_exposed_comm_ms = 0;
  std::string model_text;  // "86.4 µs + bytes at 3.58 Gb/s, fitted to 168 all-reduces (error 15.3 %)"
  std::string error;       // the refusal (analysis::WhatifError's message) when no rank could be replayed

  // "what-if: cap 4 MiB, first 1 MiB" or "what-if: prefetch none, limit 2", the lanes' name.
  std::string title() const;
};

// Replays every rank of the trace `model` was loaded from with `request` (Note [What-if replay]
// for DDP, Note [FSDP what-if replay] for FSDP, chosen by the meta key strategy): reads the file
// with its own trace::Reader, fits the collectives' cost to the trace's own, and builds the
// lanes. `stats` is the file's analysis when the viewer has it already (else it is computed).
// With `cluster` (the file's replay on the cluster clock, which `model` and `stats` are then on)
// the what-if is that clock with other settings, as `dpscope whatif --clock cluster`: the points
// are read on it and the collectives costed by its link's ring model instead of a fit. A trace whatif cannot replay (level summary, too few iterations, another strategy)
// gives lanes with `error` set, not an exception. Seconds on a big trace: the
// viewer runs it on a background thread. Thread-safety: any thread; reads `model` only.
std::shared_ptr<const WhatifLanes> compute_whatif_lanes(const Model& model, const WhatifRequest& request,
                                                        const analysis::RunStats* stats = nullptr,
                                                        const analysis::ClusterClockRun* cluster = nullptr);

}  // namespace dpscope::view
