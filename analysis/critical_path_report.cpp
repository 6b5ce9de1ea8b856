// critical_path_report.h: the critical path as `stats --json`'s `critical_path` object and as the
// report's closing section.
#include "analysis/critical_path_report.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace dpscope::analysis {
namespace {

double ms(int64_t ns) { return double(ns) / 1e6; }
double share_percent(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * double(part) / double(whole) : 0.0; }

}  // namespace

nlohmann::ordered_json critical_path_json(const CriticalPath& path) {
  using nlohmann::ordered_json;
  ordered_json by_ms = ordered_json::object(), by_pct = ordered_json::object();
  for (const BoundBy key : kBoundKeys) {
    const auto found = path.bound_ns.find(key);
    if (found == path.bound_ns.end() || found->second == 0) continue;
    by_ms[std::string(to_string(key))] = ms(found->second);
    by_pct[std::string(to_string(key))] = share_percent(found->second, path.length_ns);
  }
  ordered_json longest = ordered_json::array();
  for (size_t i = 0; i < path.events.size() && i < kCriticalPathEventsShown; ++i) {
    const PathEvent& e = path.events[i];
    longest.push_back({{"name", e.name}, {"rank", e.rank}, {"lane", e.lane}, {"begin_ms", ms(e.begin_ns)},
                       {"ms", ms(e.on_path_ns)}, {"bound_by", std::string(to_string(e.bound))}});
  }
  return {{"region", path.region}, {"rank", path.rank}, {"clock", path.clock},
          {"length_ms", ms(path.length_ns)}, {"region_ms", ms(path.region_ns)},
          {"bound_by_ms", by_ms}, {"bound_by_pct", by_pct}, {"longest", longest}, {"notes", path.notes}};
}

std::string critical_path_text(const CriticalPath& path) {
  char line[512];
  std::string text;
  std::snprintf(line, sizeof line, "critical path of %s (rank %d, %s clock): %.3f ms, the region %.3f ms\n",
                path.region.c_str(), path.rank, path.clock.c_str(), ms(path.length_ns), ms(path.region_ns));
  text += line;
  for (const BoundBy key : kBoundKeys) {
    const auto found = path.bound_ns.find(key);
    if (found == path.bound_ns.end() || found->second == 0) continue;
    std::snprintf(line, sizeof line, "  %-28s %10.3f ms  %6.2f %%\n", std::string(to_string(key)).c_str(),
                  ms(found->second), share_percent(found->second, path.length_ns));
    text += line;
  }
  if (!path.events.empty()) text += "  longest on the path (its own time there):\n";
  for (size_t i = 0; i < path.events.size() && i < kCriticalPathEventsShown; ++i) {
    const PathEvent& e = path.events[i];
    std::snprintf(line, sizeof line, "    %10.3f ms  %-26s rank %d, %s, begins at %.3f ms: %.120s\n", ms(e.on_path_ns),
                  std::string(to_string(e.bound)).c_str(), e.rank, e.lane.c_str(), ms(e.begin_ns), e.name.c_str());
    text += line;
  }
  for (const std::string& note : path.notes) text += "  note: " + note + "\n";
  return text;
}

}  // namespace dpscope::analysis
