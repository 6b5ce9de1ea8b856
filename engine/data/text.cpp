// The text data set (dataset.h, load_text): a UTF-8 text cut into samples of T + 1 characters
// for a character-level language model, `dpscope train --model gpt --data text`.
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/data/data_file.h"
#include "engine/data/dataset.h"
#include "engine/memory/tracking_allocator.h"

namespace dpscope::data {

namespace {

[[noreturn]] void not_utf8(const std::string& path, size_t offset) {
  throw std::runtime_error("text: " + path + ": not UTF-8 text (a malformed sequence at byte " +
                           std::to_string(offset) + "); save the file as UTF-8");
}

// Strict UTF-8, as Python's bytes.decode("utf-8") reads it: no overlong forms, no surrogates,
// nothing above U+10FFFF — what Python refuses, this refuses, so the twins see the same text.
std::u32string decode_utf8(const std::string& bytes, const std::string& path) {
  std::u32string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    if (lead < 0x80) {
      out.push_back(lead);
      ++i;
      continue;
    }
    int extra = 0;      // continuation bytes
    char32_t cp = 0;
    char32_t min = 0;   // the smallest code point that needs this many bytes (no overlong forms)
    if ((lead & 0xE0) == 0xC0) {
      extra = 1;
      cp = lead & 0x1F;
      min = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      extra = 2;
      cp = lead & 0x0F;
      min = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      extra = 3;
      cp = lead & 0x07;
      min = 0x10000;
    } else {
      not_utf8(path, i);
    }
    if (i + static_cast<size_t>(extra) >= bytes.size()) not_utf8(path, i);
    for (int k = 1; k <= extra; ++k) {
      const auto cont = static_cast<unsigned char>(bytes[i + k]);
      if ((cont & 0xC0) != 0x80) not_utf8(path, i);
      cp = (cp << 6) | (cont & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) not_utf8(path, i);
    out.push_back(cp);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

}  // namespace

TextSamples load_text(const std::string& path, int64_t sequence) {
  if (sequence < 1) {
    throw std::invalid_argument("text: --seq must be at least 1 (got " +
                                std::to_string(sequence) + ")");
  }
  const std::u32string text = decode_utf8(read_data_file(path, "text"), path);
  const auto length = static_cast<int64_t>(text.size());
  if (length < sequence + 1) {
    throw std::invalid_argument(
        "text: " + path + " has " + std::to_string(length) + " characters, too few for one "
        "sample of --seq " + std::to_string(sequence) + " (each takes --seq + 1 characters); "
        "choose --seq " + (length > 1 ? "at most " + std::to_string(length - 1) : "1 with a longer text"));
  }
  TextSamples out;
  out.vocabulary = text;
  std::sort(out.vocabulary.begin(), out.vocabulary.end());
  out.vocabulary.erase(std::unique(out.vocabulary.begin(), out.vocabulary.end()),
                       out.vocabulary.end());
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    ids[i] = std::lower_bound(out.vocabulary.begin(), out.vocabulary.end(), text[i]) -
             out.vocabulary.begin();
  }
  const int64_t n = (length - 1) / sequence;
  memory::CategoryScope data(memory::MemoryCategory::Data);
  out.samples.x = at::empty({n, sequence}, at::kLong);
  out.samples.y = at::empty({n, sequence}, at::kLong);
  const size_t count = static_cast<size_t>(n * sequence);
  std::memcpy(out.samples.x.data_ptr<int64_t>(), ids.data(), count * sizeof(int64_t));
  std::memcpy(out.samples.y.data_ptr<int64_t>(), ids.data() + 1, count * sizeof(int64_t));
  out.samples.owned_as_data();
  return out;
}

std::string find_text_file() { return find_data_file("opticks.txt.gz", "text"); }

}  // namespace dpscope::data
