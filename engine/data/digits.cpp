// The digits data set: reads data/digits.csv.gz (UCI optical digits, 64 pixels 0..16 then the
// label; gzip or plain CSV) into x = pixels / 16 and y = label, and finds the file on disk.
#include <zlib.h>

#include <ATen/ops/empty.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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

// The whole file, decompressed when it is gzip (zlib reads plain files unchanged).
std::string read_all(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    fail(path, "no such file (set DPSCOPE_DATA_DIR to the folder that holds digits.csv.gz, or "
               "run from the repository)");
  }
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not a file");
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) fail(path, std::string("cannot open: ") + std::strerror(errno));
  const bool compressed = gzdirect(file) == 0;
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    int n = gzread(file, buffer, sizeof(buffer));
    if (n < 0) {
      int code = 0;
      std::string message = gzerror(file, &code);
      gzclose(file);
      fail(path, "corrupt gzip data (" + message + "); re-copy the file (data/README.md)");
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  // A gzip stream cut short reads as a clean end; gzclose_r reports it.
  int rc = gzclose(file);
  if (rc != Z_OK && rc != Z_BUF_ERROR) fail(path, "error closing the gzip stream");
  if (rc == Z_BUF_ERROR) fail(path, "the gzip stream is truncated; re-copy the file");
  if (!compressed) {
    // Plain input must be text: a NUL or other control byte means it is neither gzip nor CSV.
    for (size_t i = 0; i < text.size(); ++i) {
      auto c = static_cast<unsigned char>(text[i]);
      if (c < 0x20 && c != '\n' && c != '\r' && c != '\t') {
        fail(path, "not a gzip file and not a text CSV (binary byte 0x" +
                       std::string(1, "0123456789abcdef"[c >> 4]) +
                       std::string(1, "0123456789abcdef"[c & 15]) + " at offset " +
                       std::to_string(i) + ")");
      }
    }
  }
  return text;
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
  const std::string text = read_all(path);
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
  return out;
}

std::string find_digits_file() {
  namespace fs = std::filesystem;
  const char* name = "digits.csv.gz";
  std::vector<fs::path> candidates;
  if (const char* dir = std::getenv("DPSCOPE_DATA_DIR"); dir && *dir) {
    candidates.push_back(fs::path(dir) / name);
  }
  std::error_code ec;
  fs::path cwd = fs::current_path(ec);
  if (!ec) candidates.push_back(cwd / "data" / name);
  char exe[4096];
  ssize_t len = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len > 0) {
    exe[len] = '\0';
    candidates.push_back(fs::path(exe).parent_path() / ".." / ".." / "data" / name);
  }
  // The source tree this file was compiled from (engine/data/digits.cpp -> data/).
  candidates.push_back(fs::path(__FILE__).parent_path() / ".." / ".." / "data" / name);
  std::string looked;
  for (const fs::path& p : candidates) {
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
    looked += "\n  " + p.lexically_normal().string();
  }
  throw std::runtime_error(std::string("digits: cannot find ") + name + "; looked in:" + looked +
                           "\nset DPSCOPE_DATA_DIR to the folder that holds it (data/README.md "
                           "says where it comes from)");
}

}  // namespace dpscope::data
