// The digits loader: data/digits.csv.gz against Python's reading of it, finding the file, and
// clear errors (file and line) for missing, foreign and malformed input.
#include <gtest/gtest.h>
#include <zlib.h>

#include <ATen/core/Tensor.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "tests/data/oracle.h"

using dpscope::data::Dataset;
using dpscope::data::find_digits_file;
using dpscope::data::load_digits;
using dpscope::testing::ask_oracle;
using dpscope::testing::float_bits;
using dpscope::testing::TempDir;
using dpscope::testing::write_file;

namespace {

const std::string kDigits = std::string(DPSCOPE_SOURCE_DIR) + "/data/digits.csv.gz";

void write_gzip(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string row(int label, int pixel = 3) {
  std::string s;
  for (int i = 0; i < 64; ++i) s += std::to_string(i == 0 ? pixel : (i % 17)) + ",";
  return s + std::to_string(label) + "\n";
}

// The message load_digits throws for `path`.
std::string digits_error_of(const std::string& path) {
  try {
    load_digits(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Digits, EqualsPythonsReading) {
  SKIP_WITHOUT_ORACLE();
  auto answers = ask_oracle({"digits " + kDigits});
  ASSERT_EQ(answers.size(), 1u);
  const auto& a = answers[0];
  Dataset d = load_digits(kDigits);
  ASSERT_EQ(d.x.sizes(), (std::vector<int64_t>{1797, 64}));
  ASSERT_EQ(d.x.scalar_type(), at::kFloat);
  ASSERT_EQ(d.y.sizes(), (std::vector<int64_t>{1797}));
  ASSERT_EQ(d.y.scalar_type(), at::kLong);
  EXPECT_EQ(a["shape"].get<std::vector<int64_t>>(), (std::vector<int64_t>{1797, 64}));
  EXPECT_DOUBLE_EQ(d.x.to(at::kDouble).sum().item<double>(), a["x_sum"].get<double>());
  EXPECT_EQ(float_bits(d.x.slice(0, 0, 3)), a["x_first"].get<std::vector<uint32_t>>());
  EXPECT_EQ(float_bits(d.x[1796]), a["x_last"].get<std::vector<uint32_t>>());
  auto y = d.y.slice(0, 0, 20).contiguous();
  EXPECT_EQ(std::vector<int64_t>(y.data_ptr<int64_t>(), y.data_ptr<int64_t>() + 20),
            a["y_head"].get<std::vector<int64_t>>());
  EXPECT_EQ(d.y.sum().item<int64_t>(), a["y_sum"].get<int64_t>());
  auto counts = a["y_counts"].get<std::vector<int64_t>>();
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(d.y.eq(c).sum().item<int64_t>(), counts[c]) << "class " << c;
  }
}

TEST(Digits, KnownValuesWithoutPython) {
  Dataset d = load_digits(kDigits);
  ASSERT_EQ(d.size(), 1797);
  // First row of the file: 0,0,5,13,9,1,0,0,... label 0.
  EXPECT_EQ(d.x[0][2].item<float>(), 5.0f / 16);
  EXPECT_EQ(d.x[0][3].item<float>(), 13.0f / 16);
  EXPECT_EQ(d.y[0].item<int64_t>(), 0);
  EXPECT_EQ(d.y[1].item<int64_t>(), 1);
  EXPECT_GE(d.x.min().item<float>(), 0.0f);
  EXPECT_LE(d.x.max().item<float>(), 1.0f);
}

TEST(Digits, FindsTheFile) {
  std::string found = find_digits_file();
  EXPECT_EQ(load_digits(found).size(), 1797);
  TempDir dir;
  write_gzip(dir.file("digits.csv.gz"), row(4) + row(5));
  ::setenv("DPSCOPE_DATA_DIR", dir.path().c_str(), 1);
  EXPECT_EQ(find_digits_file(), dir.file("digits.csv.gz"));
  EXPECT_EQ(load_digits(find_digits_file()).size(), 2);
  ::unsetenv("DPSCOPE_DATA_DIR");
}

TEST(Digits, PlainCsvWithHeaderAndCrlf) {
  TempDir dir;
  std::string header;
  for (int i = 0; i < 64; ++i) header += "pixel_" + std::to_string(i) + ",";
  header += "target\r\n";
  std::string r0 = row(7, 16), r1 = row(2, 0);
  r0.insert(r0.size() - 1, "\r");
  write_file(dir.file("d.csv"), header + r0 + r1 + "\n\n");
  Dataset d = load_digits(dir.file("d.csv"));
  ASSERT_EQ(d.size(), 2);
  EXPECT_EQ(d.x[0][0].item<float>(), 1.0f);
  EXPECT_EQ(d.x[1][0].item<float>(), 0.0f);
  EXPECT_EQ(d.x[0][1].item<float>(), 1.0f / 16);
  EXPECT_EQ(d.y[0].item<int64_t>(), 7);
  EXPECT_EQ(d.y[1].item<int64_t>(), 2);
}

TEST(Digits, MissingFileNamesIt) {
  TempDir dir;
  std::string msg = digits_error_of(dir.file("nope.csv.gz"));
  EXPECT_NE(msg.find(dir.file("nope.csv.gz")), std::string::npos) << msg;
  EXPECT_NE(msg.find("no such file"), std::string::npos) << msg;
}

TEST(Digits, GarbageIsRejected) {
  TempDir dir;
  // Binary bytes that are not gzip.
  std::string junk;
  for (int i = 0; i < 256; ++i) junk += static_cast<char>((i * 37) & 0xff);
  write_file(dir.file("junk.gz"), junk);
  std::string msg = digits_error_of(dir.file("junk.gz"));
  EXPECT_NE(msg.find(dir.file("junk.gz")), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a gzip file"), std::string::npos) << msg;
  // The gzip magic followed by junk.
  write_file(dir.file("bad.gz"), std::string("\x1f\x8b\x08\x00", 4) + junk);
  msg = digits_error_of(dir.file("bad.gz"));
  EXPECT_NE(msg.find(dir.file("bad.gz")), std::string::npos) << msg;
  EXPECT_NE(msg.find("gzip"), std::string::npos) << msg;
  // A gzip stream cut in half.
  std::string text;
  for (int i = 0; i < 200; ++i) text += row(i % 10);
  write_gzip(dir.file("full.gz"), text);
  std::ifstream in(dir.file("full.gz"), std::ios::binary);
  std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_file(dir.file("cut.gz"), whole.substr(0, whole.size() / 2));
  msg = digits_error_of(dir.file("cut.gz"));
  EXPECT_NE(msg.find(dir.file("cut.gz")), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  // Empty.
  write_file(dir.file("empty.csv"), "");
  msg = digits_error_of(dir.file("empty.csv"));
  EXPECT_NE(msg.find("no data rows"), std::string::npos) << msg;
}

TEST(Digits, MalformedRowsNameFileAndLine) {
  TempDir dir;
  const std::string path = dir.file("rows.csv.gz");
  // Wrong column count on line 3.
  std::string short_row = row(1);
  short_row = short_row.substr(short_row.find(',') + 1);
  write_gzip(path, row(0) + row(1) + short_row);
  std::string msg = digits_error_of(path);
  EXPECT_NE(msg.find(path + ":3:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("64 columns"), std::string::npos) << msg;
  // Not a number on line 2, column 5.
  std::string bad = row(1);
  bad.replace(bad.find(",4,"), 3, ",x4,");
  write_gzip(path, row(0) + bad);
  msg = digits_error_of(path);
  EXPECT_NE(msg.find(path + ":2:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("column 5 is not a number: 'x4'"), std::string::npos) << msg;
  // Out of range pixel and label, fractional pixel.
  write_gzip(path, row(0, 17));
  msg = digits_error_of(path);
  EXPECT_NE(msg.find(path + ":1:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pixel in column 1"), std::string::npos) << msg;
  write_gzip(path, row(0) + row(10));
  msg = digits_error_of(path);
  EXPECT_NE(msg.find(path + ":2:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("label in column 65"), std::string::npos) << msg;
  std::string frac = row(3);
  frac.replace(0, 1, "2.5");
  write_gzip(path, frac);
  msg = digits_error_of(path);
  EXPECT_NE(msg.find("'2.5', not a whole number"), std::string::npos) << msg;
  // An empty field.
  std::string empty_field = row(3);
  empty_field.replace(0, 1, "");
  write_gzip(path, empty_field);
  msg = digits_error_of(path);
  EXPECT_NE(msg.find("column 1 is not a number: ''"), std::string::npos) << msg;
}
