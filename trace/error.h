// The one error type of trace/: every failure to create, write, open or read a trace file is a
// TraceError whose message names the file and says what to do. Callers show what() as it is.
#pragma once

#include <stdexcept>
#include <string>

namespace dpscope::trace {

class TraceError : public std::runtime_error {
 public:
  explicit TraceError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace dpscope::trace
