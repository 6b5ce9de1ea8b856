// The text forms of records.h's plain values: a parameter's shape as the params table stores it.
#include "trace/records.h"

#include <charconv>

namespace dpscope::trace {

std::string shape_to_json(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::vector<int64_t> shape_from_json(const std::string& text) {
  // A damaged file's shape may hold anything ("[-]", "[99999999999999999999]"): a number that
  // does not parse as an int64_t is left out rather than thrown at the reader's caller.
  std::vector<int64_t> shape;
  std::string digits;
  for (char c : text) {
    if ((c >= '0' && c <= '9') || c == '-') {
      digits += c;
    } else if (!digits.empty()) {
      int64_t value = 0;
      const char* end = digits.data() + digits.size();
      const auto result = std::from_chars(digits.data(), end, value);
      if (result.ec == std::errc() && result.ptr == end) shape.push_back(value);
      digits.clear();
    }
  }
  return shape;
}

}  // namespace dpscope::trace
