// The one error type of trace/: every failure to create, write, open or read a trace file is a
// TraceError whose message names the file and says what to do. Callers show what() as it is.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>

namespace dpscope::trace {

class TraceError : public std::runtime_error {
 public:
  // The message is kept on one line, as the CLI prints it: control characters (a newline in a
  // path, or in SQLite's report of a damaged schema, which quotes the file's own bytes) are
  // written as \n, \r, \t or \xNN.
  explicit TraceError(const std::string& message) : std::runtime_error(one_line(message)) {}

 private:
  static std::string one_line(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte >= 0x20 && byte != 0x7f) {
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c == '\t') {
        out += "\\t";
      } else {
        char escaped[8];
        std::snprintf(escaped, sizeof(escaped), "\\x%02x", byte);
        out += escaped;
      }
    }
    return out;
  }
};

}  // namespace dpscope::trace
