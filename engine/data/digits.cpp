// The digits data set: reads data/digits.csv.gz (UCI optical digits, 64 pixels 0..16 then the
// label; gzip or plain CSV, through data_file.h) into x = pixels / 16 and y = label.
#include <ATen/ops/empty.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/data/data_file.h"
#include "engine/data/dataset.h"
#include "engine/memory/tracking_allocator.h"

namespace dpscope::data {

namespace {

constexpr int kPixels = 64;
constexpr int kColumns = kPixels + 1;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("digits: " + path + ": " + what);
}

[[noreturn]] void fail_line(const std::string& path, int64_t line, const std::string& what) {
  throw std::runtime_error("digits: " + path + ":" + std::to_string(line) + ": " + what +
                           " (expected " + std::to_string(kColumns) +
                           " comma-separated numbers a line: 64 pixels 0..16, then the label "
                           "0..9; see data/README.md for the file's source)");
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (;;) {
    size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma == std::string_view::npos ? line.size() - start
                                                                            : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

// A whole number written as "7", "7.0" or "7e0"; false for anything else.
bool parse_integer(std::string_view field, double* out) {
  if (field.empty()) return false;
  std::string copy(field);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(copy.c_str(), &end);
  if (errno != 0 || end != copy.c_str() + copy.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

std::string quoted(std::string_view field) {
  std::string s(field.substr(0, 40));
  return "'" + s + (field.size() > 40 ? "...'" : "'");
}

}  // namespace

Dataset load_digits(const std::string& path) {
  const std::string text = read_data_file(path, "digits");
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  pixels.reserve(1797 * kPixels);
  labels.reserve(1797);
  int64_t line_no = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t newline = text.find('\n', start);
    if (newline == std::string::npos) newline = text.size();
    std::string_view line = trim(std::string_view(text).substr(start, newline - start));
    start = newline + 1;
    ++line_no;
    if (line.empty()) continue;
    std::vector<std::string_view> fields = split(line);
    // An optional header: a first line none of whose fields is a number.
    if (labels.empty() && line_no == 1) {
      bool any_number = false;
      double ignored;
      for (auto f : fields) any_number = any_number || parse_integer(f, &ignored);
      if (!any_number) continue;
    }
    if (fields.size() != kColumns) {
      fail_line(path, line_no, std::to_string(fields.size()) + " columns");
    }
    for (int c = 0; c < kColumns; ++c) {
      double v;
      if (!parse_integer(fields[c], &v)) {
        fail_line(path, line_no, "column " + std::to_string(c + 1) + " is not a number: " +
                                     quoted(fields[c]));
      }
      const double max = c < kPixels ? 16 : 9;
      if (v != std::floor(v) || v < 0 || v > max) {
        fail_line(path, line_no, std::string(c < kPixels ? "pixel" : "label") + " in column " +
                                     std::to_string(c + 1) + " is " + quoted(fields[c]) +
                                     ", not a whole number in 0.." +
                                     std::to_string(static_cast<int>(max)));
      }
      if (c < kPixels) pixels.push_back(static_cast<float>(v) / 16.0f);
      else labels.push_back(static_cast<int64_t>(v));
    }
  }
  if (labels.empty()) fail(path, "no data rows (the file is empty)");
  const auto n = static_cast<int64_t>(labels.size());
  memory::CategoryScope data(memory::MemoryCategory::Data);
  Dataset out;
  out.x = at::empty({n, kPixels}, at::kFloat);
  out.y = at::empty({n}, at::kLong);
  std::memcpy(out.x.data_ptr<float>(), pixels.data(), pixels.size() * sizeof(float));
  std::memcpy(out.y.data_ptr<int64_t>(), labels.data(), labels.size() * sizeof(int64_t));
  return out.owned_as_data();
}

std::string find_digits_file() { return find_data_file("digits.csv.gz", "digits"); }

}  // namespace dpscope::data
