// The steady steps: which iterations a step-time summary reads, and the summary itself. Below the
// engine and the analysis, so that `dpscope train`'s closing step_ms line and `dpscope stats` are
// one computation. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dpscope::core {

// Note [Steady steps]
// A step-time summary skips the first two iterations when there are at least three: iteration 0
// builds DDP's buckets from the order gradients arrived and warms the allocator, iteration 1 is
// the first on the rebuilt plan. `dpscope train`'s closing "step_ms" line, `dpscope stats`, the
// demo, the compare panel and the tutorials all summarise this way.
struct StepSummary {
  int32_t from_iteration = 0;  // the first iteration summarised
  size_t count = 0;            // iterations with a step time among them
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

// The first steady iteration of a run of `iterations` iterations: 2 when there are at least 3,
// else 0.
int32_t steady_from(size_t iterations);

// `step_ms` by iteration; entries <= 0 (not recorded) are skipped.
StepSummary summarize_steps(const std::vector<double>& step_ms);

}  // namespace dpscope::core
