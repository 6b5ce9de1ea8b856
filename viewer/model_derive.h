// What a model derives from its lanes and memory series once they are read: each series' order and
// peak, a rank's memory peak, iterations and extent, and the run-wide totals. Internal to the
// loader (load.cpp) and derive_from_rows (model.h); no panel includes it.
#pragma once

#include "analysis/memory_peak.h"
#include "trace/vocabulary.h"
#include "viewer/model.h"

namespace dpscope::view::detail {

// The name ids of the "forward" and "iteration" phases in `model`'s names (trace::kNone when absent).
struct PhaseNames {
  trace::NameId forward = trace::kNone;
  trace::NameId iteration = trace::kNone;
};
PhaseNames phase_names(const Model& model);

// Sorts one memory series by time where samples came out of order (stable: later wins).
void sort_series(MemorySeries& series);
// Sets the rank's memory peak from its finder's answer, and its GPU memory's peak.
void set_memory_peak(RankData& rank, const analysis::MemoryAtPeak& peak);
// The rank's memory peak from its sorted series (Note [Memory at the peak]).
void find_memory_peak(RankData& rank);
// The rank's iterations from the "iteration" phases, or failing those from one forward to the
// next. The lanes must be built (build_rows).
void build_iterations(RankData& rank, trace::NameId iteration, trace::NameId forward);
// The rank's extent, t_begin and t_end: of its events and its memory samples (0 and 0 without
// either). Writes those two fields only.
void set_rank_extent(RankData& rank);
// Run-wide totals from the ranks (events, time range, iteration count), and each rank's extent.
void summarize(Model& model);

}  // namespace dpscope::view::detail
