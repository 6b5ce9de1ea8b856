// The text loader (`--data text`): data/opticks.txt.gz cut into samples as Python cuts it,
// characters beyond ASCII, finding the file, and clear errors for text that is not UTF-8 or too
// short for one sample.
#include <gtest/gtest.h>
#include <zlib.h>

#include <ATen/core/Tensor.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "tests/data/oracle.h"

using dpscope::data::find_text_file;
using dpscope::data::load_text;
using dpscope::data::TextSamples;
using dpscope::testing::ask_oracle;
using dpscope::testing::TempDir;
using dpscope::testing::write_file;

namespace {

const std::string kText = std::string(DPSCOPE_SOURCE_DIR) + "/data/opticks.txt.gz";

std::vector<int64_t> values(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// The message load_text throws for `path`, or "(no error)".
std::string text_error_of(const std::string& path, int64_t sequence = 4) {
  try {
    load_text(path, sequence);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Text, EqualsPythonsCutting) {
  SKIP_WITHOUT_ORACLE();
  for (const int64_t sequence : {64, 7}) {
    SCOPED_TRACE("sequence " + std::to_string(sequence));
    auto answers = ask_oracle({"text " + kText + " " + std::to_string(sequence)});
    ASSERT_EQ(answers.size(), 1u);
    const auto& a = answers[0];
    const TextSamples text = load_text(kText, sequence);
    const at::Tensor& x = text.samples.x;
    const at::Tensor& y = text.samples.y;
    ASSERT_EQ(x.sizes().vec(), a["shape"].get<std::vector<int64_t>>());
    ASSERT_EQ(y.sizes().vec(), a["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(x.scalar_type(), at::kLong);
    EXPECT_EQ(std::vector<int64_t>(text.vocabulary.begin(), text.vocabulary.end()),
              a["vocabulary"].get<std::vector<int64_t>>());
    EXPECT_EQ(values(x.slice(0, 0, 2)), a["x_first"].get<std::vector<int64_t>>());
    EXPECT_EQ(values(y.slice(0, 0, 2)), a["y_first"].get<std::vector<int64_t>>());
    EXPECT_EQ(values(x[x.size(0) - 1]), a["x_last"].get<std::vector<int64_t>>());
    EXPECT_EQ(values(y[y.size(0) - 1]), a["y_last"].get<std::vector<int64_t>>());
    EXPECT_EQ(x.sum().item<int64_t>(), a["x_sum"].get<int64_t>());
    EXPECT_EQ(y.sum().item<int64_t>(), a["y_sum"].get<int64_t>());
  }
}

TEST(Text, SamplesAreShiftedByOneWithoutPython) {
  TempDir dir;
  // 11 characters, 3 of them 2 bytes in UTF-8: vocabulary by code point, not by byte.
  write_file(dir.file("t.txt"), "ba\xc3\xa6" "c\n\xc3\x86" "ab\xc3\xa6" "cd");
  const TextSamples text = load_text(dir.file("t.txt"), 3);
  EXPECT_EQ(text.vocabulary, std::u32string(U"\nabcdÆæ"));
  // (11 - 1) / 3 = 3 samples; the last character is a target only.
  ASSERT_EQ(text.samples.x.sizes().vec(), (std::vector<int64_t>{3, 3}));
  // b a æ | c \n Æ | a b æ | c d  ->  tokens 2 1 6 | 3 0 5 | 1 2 6 | 3 4
  EXPECT_EQ(values(text.samples.x), (std::vector<int64_t>{2, 1, 6, 3, 0, 5, 1, 2, 6}));
  EXPECT_EQ(values(text.samples.y), (std::vector<int64_t>{1, 6, 3, 0, 5, 1, 2, 6, 3}));
}

TEST(Text, FindsTheFile) {
  EXPECT_GT(load_text(find_text_file(), 64).samples.size(), 3000);
  TempDir dir;
  write_file(dir.file("opticks.txt.gz"), "plain text will do");
  ::setenv("DPSCOPE_DATA_DIR", dir.path().c_str(), 1);
  EXPECT_EQ(find_text_file(), dir.file("opticks.txt.gz"));
  ::unsetenv("DPSCOPE_DATA_DIR");
}

TEST(Text, NotUtf8NamesTheOffset) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"lone continuation byte", std::string("abc\x80" "def")},
      {"cut-off sequence at the end", std::string("abcdef\xc3")},
      {"overlong form of '/'", std::string("abc\xc0\xaf" "def")},
      {"surrogate", std::string("abc\xed\xa0\x80" "def")},
      {"Latin-1, not UTF-8", std::string("abc\xe6" "def")},
  };
  for (const auto& [what, bytes] : cases) {
    write_file(dir.file("bad.txt"), bytes);
    const std::string msg = text_error_of(dir.file("bad.txt"));
    EXPECT_NE(msg.find(dir.file("bad.txt")), std::string::npos) << what << ": " << msg;
    EXPECT_NE(msg.find("not UTF-8"), std::string::npos) << what << ": " << msg;
    const std::string offset = what == "cut-off sequence at the end" ? "byte 6" : "byte 3";
    EXPECT_NE(msg.find(offset), std::string::npos) << what << ": " << msg;
  }
}

TEST(Text, TooShortNamesSeq) {
  TempDir dir;
  write_file(dir.file("short.txt"), "abcd");
  EXPECT_EQ(load_text(dir.file("short.txt"), 3).samples.size(), 1);
  const std::string msg = text_error_of(dir.file("short.txt"), 4);
  EXPECT_NE(msg.find("4 characters"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--seq at most 3"), std::string::npos) << msg;
  EXPECT_NE(text_error_of(dir.file("short.txt"), 0).find("--seq must be at least 1"), std::string::npos);
  EXPECT_NE(text_error_of(dir.file("missing.txt.gz")).find("no such file"), std::string::npos);
}
