// The spellings and labels of the two clocks (clock_choice.h).
#include "analysis/clock_choice.h"

#include "analysis/link_model.h"

namespace dpscope::analysis {

std::string_view to_string(Clock clock) {
  switch (clock) {
    case Clock::Measured: return "measured";
    case Clock::Cluster: return "cluster";
  }
  return "measured";
}

std::optional<Clock> parse_clock(std::string_view text) {
  for (const Clock clock : {Clock::Measured, Clock::Cluster}) {
    if (text == to_string(clock)) return clock;
  }
  return std::nullopt;
}

std::string clock_text(const ClockLabel& label) {
  if (label.clock == Clock::Measured) return "measured (this machine)";
  return "cluster clock (modeled: compute as CPU time, link " + link_value_text(label.link_gbps) +
         " Gb/s, " + link_value_text(label.link_latency_us) + " µs)";
}

}  // namespace dpscope::analysis
