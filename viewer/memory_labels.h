// The words beside a rank's memory graph: its peak, labelled by whose memory the categories count
// (the CPU's, a GPU's by ownership, or the host's by tracking on a GPU run), and the other memory's
// peak or the peak in the steps under it. Pure: what the timeline draws and tests/viewer read.
#pragma once

#include <string>

#include "analysis/stats.h"
#include "viewer/model.h"

namespace dpscope::view {

struct MemoryGraphLabels {
  std::string peak;    // "peak 12.3 MiB" (CPU), "GPU 64.0 MiB" (ownership), "host 1.2 MiB" (tracking on a GPU); "" without samples
  std::string second;  // under it: the host's largest total beside a GPU's categories, the GPU's
                       // cuda_allocated beside the host's, or "steps ..." where the steps peak
                       // elsewhere; "" when none
};

// `stats` may be null (the analysis is still running): then no host line and no steps line. No
// labels while the model's memory samples are read (Note [Memory after the first frame]).
// `steps_peak_elsewhere`: the Stats panel shows the peak in the steps too (Analysis).
MemoryGraphLabels memory_graph_labels(const Model& model, const RankData& rank,
                                      const analysis::RankStats* stats, bool steps_peak_elsewhere);

}  // namespace dpscope::view
