// The steady-step summary (steady_steps.h): the median, least and largest step time from the
// first steady iteration on.
#include "core/steady_steps.h"

#include <algorithm>

namespace dpscope::core {

int32_t steady_from(size_t iterations) { return iterations >= 3 ? 2 : 0; }

StepSummary summarize_steps(const std::vector<double>& step_ms) {
  StepSummary summary;
  summary.from_iteration = steady_from(step_ms.size());
  std::vector<double> steps;
  for (size_t i = static_cast<size_t>(summary.from_iteration); i < step_ms.size(); ++i) {
    if (step_ms[i] > 0) steps.push_back(step_ms[i]);
  }
  if (steps.empty()) return summary;
  std::sort(steps.begin(), steps.end());
  const size_t n = steps.size();
  summary.count = n;
  summary.median_ms = n % 2 ? steps[n / 2] : (steps[n / 2 - 1] + steps[n / 2]) / 2;
  summary.min_ms = steps.front();
  summary.max_ms = steps.back();
  return summary;
}

}  // namespace dpscope::core
