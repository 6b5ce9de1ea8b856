// The --screenshot contract's JSON line (docs/viewer.md, "Headless mode"), read back from
// dpscope-view's output by the viewer's tests (and the demo's).
#pragma once

#include <nlohmann/json.hpp>

#include <sstream>
#include <string>

namespace dpscope::testing {

// The last line of `output` that opens an object, parsed; a discarded value (is_discarded())
// when there is none or it does not parse.
inline nlohmann::json screenshot_json(const std::string& output) {
  std::istringstream lines(output);
  std::string line, found;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] == '{') found = line;
  }
  return nlohmann::json::parse(found, nullptr, false);
}

}  // namespace dpscope::testing
