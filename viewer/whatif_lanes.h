// What-if lanes: the bucket all-reduces and backward-tail waits `dpscope whatif` predicts for
// another bucket cap, as one lane per rank drawn under that rank's recorded lanes, so that the
// difference is seen on the timeline and not only read (docs/whatif.md, docs/viewer.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "trace/whatif.h"
#include "viewer/model.h"

namespace dpscope::view {

// The limits to predict with, in MiB as the user gives them; first_bucket_mb <= 0: as recorded.
struct WhatifRequest {
  double bucket_cap_mb = 0;
  double first_bucket_mb = 0;
};

// One prediction for every rank of a trace. Plain value, immutable once built.
struct WhatifLanes {
  WhatifRequest request;
  // by_rank[i] belongs to model.ranks[i]: the predicted all-reduces (EventKind::Collective, op
  // AllReduce, bucket = the new plan's bucket index, no seq, so no flows) and the tail's waits
  // (EventKind::CollectiveWait), rows built as Note [Lane rows] says. Empty for a rank the
  // replay refused.
  std::vector<Lane> by_rank;
  // The replay of the first rank that could be replayed: its plan's bucket sizes, the medians,
  // and how the all-reduce was costed; for the panel and the headless JSON.
  std::vector<int64_t> bucket_bytes;
  double measured_step_ms = 0, predicted_step_ms = 0;
  double measured_exposed_comm_ms = 0, predicted_exposed_comm_ms = 0;
  std::string model_text;  // "86.4 µs + bytes at 3.58 Gb/s, fitted to 168 all-reduces (error 15.3 %)"
  std::string error;       // the refusal (trace::WhatifError's message) when no rank could be replayed

  // "what-if: cap 4 MiB, first 1 MiB", the lanes' name.
  std::string title() const;
};

// Replays every rank of the DDP trace `model` was loaded from with `request` (Note [What-if
// replay]): reads the file with its own trace::Reader, fits the all-reduce cost to the trace's
// own all-reduces, and builds the lanes. A trace whatif cannot replay (FSDP, level summary, too
// few iterations) gives lanes with `error` set, not an exception. Seconds on a big trace: the
// viewer runs it on a background thread. Thread-safety: any thread; reads `model` only.
std::shared_ptr<const WhatifLanes> compute_whatif_lanes(const Model& model, const WhatifRequest& request);

}  // namespace dpscope::view
