// PackedColumn (viewer/packed_column.h, Note [Packed memory series]): every value comes back
// exact, in narrow and wide blocks, at int64's edges and in the unfilled last block; a memory
// series' times and bytes take about half of plain int64s; MemorySeries::at answers as a plain
// search does, with and without a hint.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "viewer/model.h"
#include "viewer/packed_column.h"

namespace {

using dpscope::view::MemorySeries;
using dpscope::view::PackedColumn;

void expect_same(const PackedColumn& column, const std::vector<int64_t>& values) {
  ASSERT_EQ(column.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(column[i], values[i]) << "value " << i;
  size_t i = 0;
  for (const int64_t v : column) ASSERT_EQ(v, values[i++]);
  EXPECT_EQ(i, values.size());
  if (!values.empty()) {
    EXPECT_EQ(column.front(), values.front());
    EXPECT_EQ(column.back(), values.back());
  }
}

TEST(PackedColumn, EveryValueComesBackAtEverySize) {
  std::mt19937_64 random(7);
  std::vector<int64_t> values;
  PackedColumn column;
  EXPECT_TRUE(column.empty());
  int64_t t = 1'000'000'000'000;
  // Close neighbours (narrow blocks), then jumps past 2^32 (wide ones), then int64's edges.
  for (int i = 0; i < 5 * int(PackedColumn::kBlock) + 7; ++i) {
    t += int64_t(random() % 5'000'000);
    values.push_back(t);
    column.push_back(t);
    expect_same(column, values);
  }
  for (int i = 0; i < 3 * int(PackedColumn::kBlock); ++i) {
    const int64_t v = int64_t(random() >> 1) * (i % 2 ? 1 : -1);
    values.push_back(v);
    column.push_back(v);
  }
  for (const int64_t v : {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), int64_t{0},
                          std::numeric_limits<int64_t>::min() + 1, int64_t{-1}}) {
    values.push_back(v);
    column.push_back(v);
  }
  expect_same(column, values);
  PackedColumn copy = column;
  EXPECT_TRUE(copy == column);
  copy.push_back(3);
  EXPECT_TRUE(copy != column);
  column.clear();
  EXPECT_TRUE(column.empty());
}

// A block whose values span exactly 2^32 - 1 packs; one more and it is kept wide, still exact.
TEST(PackedColumn, TheBlocksEdgeBetweenNarrowAndWide) {
  for (const uint64_t span : {uint64_t{UINT32_MAX}, uint64_t{UINT32_MAX} + 1}) {
    std::vector<int64_t> values(PackedColumn::kBlock, -5);
    values[17] = static_cast<int64_t>(static_cast<uint64_t>(-5) + span);
    PackedColumn column;
    for (const int64_t v : values) column.push_back(v);
    expect_same(column, values);
  }
}

// A memory series as a trace has them: a sample every few milliseconds, bytes near a GiB.
TEST(PackedColumn, ASeriesTakesAboutHalfOfPlainValues) {
  std::mt19937_64 random(11);
  PackedColumn ts, bytes;
  const size_t n = 100'000;
  ts.reserve(n);
  bytes.reserve(n);
  int64_t t = 0, held = int64_t{1} << 30;
  for (size_t i = 0; i < n; ++i) {
    t += 1'000'000 + int64_t(random() % 20'000'000);
    held += int64_t(random() % (64 << 20)) - (32 << 20);
    ts.push_back(t);
    bytes.push_back(held);
  }
  const double per_sample = double(ts.bytes() + bytes.bytes()) / double(n);
  EXPECT_LT(per_sample, 9.1) << "plain int64 columns take 16";
  EXPECT_GT(per_sample, 8.0);
}

TEST(PackedColumn, MemorySeriesAtMatchesAPlainSearch) {
  std::mt19937_64 random(3);
  MemorySeries series;
  std::vector<int64_t> ts, bytes;
  int64_t t = 100;
  for (int i = 0; i < 1000; ++i) {
    t += int64_t(random() % 3) * (i % 97 == 0 ? int64_t{10'000'000'000} : 1000);  // ties and gaps
    ts.push_back(t);
    bytes.push_back(int64_t(random() % 1'000'000));
    series.ts.push_back(ts.back());
    series.bytes.push_back(bytes.back());
  }
  size_t hint = 0;
  for (int q = 0; q < 5000; ++q) {
    const int64_t at = q < 2500 ? 50 + int64_t(q) * (t / 2400) : int64_t(random() % uint64_t(t + 200));
    const auto later = std::upper_bound(ts.begin(), ts.end(), at);
    const int64_t expected = later == ts.begin() ? 0 : bytes[size_t(later - ts.begin()) - 1];
    EXPECT_EQ(series.at(at, nullptr), expected) << "t " << at;
    EXPECT_EQ(series.at(at, &hint), expected) << "t " << at << " walking forward";
  }
}

}  // namespace
