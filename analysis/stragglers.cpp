// Straggler attribution (see stragglers.h and Note [Stragglers]).
#include "analysis/stragglers.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace dpscope::analysis {

namespace {

constexpr double kMinimumLateMs = 1.0;
constexpr int32_t kLastInFractionNumerator = 2, kLastInFractionDenominator = 3;

}  // namespace

double straggler_threshold_ms(const std::vector<int64_t>& clock_uncertainty_ns) {
  int64_t worst = 0;
  for (const int64_t u : clock_uncertainty_ns) worst = std::max(worst, u);
  return std::max(kMinimumLateMs, 4.0 * double(worst) / 1e6);
}

StragglerFinding find_stragglers(const std::vector<CollectiveMatch>& matches, int32_t from_iteration,
                                 int32_t iterations, const std::vector<int64_t>& clock_uncertainty_ns) {
  StragglerFinding finding;
  finding.threshold_ms = straggler_threshold_ms(clock_uncertainty_ns);
  // iteration -> rank -> lateness (ns) in that iteration.
  std::map<int32_t, std::map<int32_t, int64_t>> lateness;
  for (const CollectiveMatch& m : matches) {
    if (m.mismatch || m.iteration == trace::kNone || m.iteration < from_iteration || m.iteration >= iterations) continue;
    auto& ranks = lateness[m.iteration];
    if (m.ranks.size() < 2) continue;
    int64_t& late = ranks[m.last_rank];
    late = std::max(late, m.late_ns);
  }
  const auto steps = static_cast<int32_t>(lateness.size());
  finding.steps = steps;
  if (steps < kMinimumStragglerSteps) return finding;
  std::map<int32_t, Straggler> by_rank;
  for (const auto& [iteration, ranks] : lateness) {
    int32_t last = trace::kNone;
    int64_t most = 0;
    for (const auto& [rank, late] : ranks) {
      Straggler& s = by_rank[rank];
      s.rank = rank;
      s.late_ms += double(late) / 1e6;
      if (late > most) last = rank, most = late;
    }
    if (last != trace::kNone) ++by_rank[last].last_in_steps;
  }
  for (auto& [rank, s] : by_rank) {
    s.steps = steps;
    s.late_ms /= double(steps);
  }
  for (auto& [rank, s] : by_rank) {
    for (const auto& [other, o] : by_rank) {
      if (other != rank) s.next_late_ms = std::max(s.next_late_ms, o.late_ms);
    }
    const bool consistently_last =
        s.last_in_steps * kLastInFractionDenominator >= steps * kLastInFractionNumerator;
    if (consistently_last && s.late_ms - s.next_late_ms > finding.threshold_ms) finding.stragglers.push_back(s);
  }
  std::sort(finding.stragglers.begin(), finding.stragglers.end(),
            [](const Straggler& a, const Straggler& b) { return a.late_ms > b.late_ms; });
  return finding;
}

std::string stragglers_text(const StragglerFinding& finding) {
  char text[160];
  if (finding.stragglers.empty() && finding.steps < kMinimumStragglerSteps) {
    std::snprintf(text, sizeof(text), "none named (%d steady steps; naming one takes at least %d)", finding.steps,
                  kMinimumStragglerSteps);
    return text;
  }
  if (finding.stragglers.empty()) {
    std::snprintf(text, sizeof(text), "none (no rank is consistently last, more than %.1f ms behind the rest)",
                  finding.threshold_ms);
    return text;
  }
  std::string out;
  for (const Straggler& s : finding.stragglers) {
    std::snprintf(text, sizeof(text), "%srank %d arrives last in %d of %d steps, %.1f ms late per step",
                  out.empty() ? "" : "; ", s.rank, s.last_in_steps, s.steps, s.late_ms);
    out += text;
  }
  return out;
}

}  // namespace dpscope::analysis
