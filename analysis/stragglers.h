// Straggler attribution: which rank the others keep waiting for at their collectives, and by how
// much per step. Part of the one analysis (stats.h): `dpscope stats`, its JSON and the viewer's
// Stats panel show what find_stragglers finds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/collective_match.h"

namespace dpscope::analysis {

// Note [Stragglers]
// In each steady iteration (Note [Steady steps]), a rank's lateness is the largest late_ns of
// the iteration's collectives that it began last (CollectiveMatch: how much later than the next
// latest rank, on the aligned clock), and 0 if it began none of them last. The rank with the
// largest lateness of a step is that step's last arriver. A rank is a straggler when it was the
// last arriver in at least two thirds of the steady iterations and its mean lateness per step
// exceeds every other rank's by more than the threshold: 1 ms, or four times the largest clock
// uncertainty of any rank (ranks.clock_uncertainty_ns) when that is more, since two ranks'
// aligned clocks may disagree by twice their uncertainty. Below that, lateness is noise or
// alignment error. Compared with the other ranks, not with zero: a step of many collectives
// (FSDP's) gives every rank some lateness from noise alone, and only a rank well ahead of the
// rest is the others' problem. One rank waiting at
// the first bucket of every backward is what a slow rank costs the others: that wait is their
// time (Note [Waiting and transfer]). Collectives of construction (no iteration) and mismatched
// ones are not counted. With fewer than 3 steady steps nobody is named: one or two steps of a
// loaded machine make a "consistent" last arriver from noise.
struct Straggler {
  int32_t rank = 0;
  double late_ms = 0;        // mean lateness per steady step
  double next_late_ms = 0;   // the largest mean lateness of any other rank
  int32_t last_in_steps = 0;  // steady steps in which it arrived last
  int32_t steps = 0;          // steady steps with matched collectives
};

inline constexpr int32_t kMinimumStragglerSteps = 3;

struct StragglerFinding {
  double threshold_ms = 0;
  int32_t steps = 0;  // steady steps with matched collectives
  std::vector<Straggler> stragglers;  // by late_ms, largest first; empty when none stands out
};

// The clock uncertainty a lateness must exceed to count (See Note [Stragglers]), in ms.
double straggler_threshold_ms(const std::vector<int64_t>& clock_uncertainty_ns);

// Finds the stragglers among `matches` (match_collectives' result) over iterations
// [from_iteration, iterations). Pure.
StragglerFinding find_stragglers(const std::vector<CollectiveMatch>& matches, int32_t from_iteration,
                                 int32_t iterations, const std::vector<int64_t>& clock_uncertainty_ns);

// "rank 2 arrives last in 18 of 18 steps, 29.8 ms late per step", or "none (no rank is
// consistently last by more than 1.0 ms)": the line the report and the viewer print.
std::string stragglers_text(const StragglerFinding& finding);

}  // namespace dpscope::analysis
