// Dataset row selection, and the synthetic generators bit for bit against Python's torch.
#include <gtest/gtest.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "engine/data/dataset.h"
#include "tests/data/oracle.h"

using dpscope::data::Dataset;
using dpscope::data::make_synthetic_classification;
using dpscope::data::make_synthetic_sequences;
using dpscope::testing::ask_oracle;
using dpscope::testing::float_bits;

namespace {

std::vector<int64_t> longs(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

}  // namespace

TEST(SyntheticClassification, EqualsPythonBitForBit) {
  SKIP_WITHOUT_ORACLE();
  struct Spec { int64_t n, f, c; uint64_t seed; };
  const std::vector<Spec> specs = {{64, 10, 5, 0}, {100, 20, 10, 42}, {1, 3, 2, 7}, {257, 64, 10, 1234}};
  std::vector<std::string> queries;
  for (auto s : specs) {
    queries.push_back("classification " + std::to_string(s.n) + " " + std::to_string(s.f) + " " +
                      std::to_string(s.c) + " " + std::to_string(s.seed));
  }
  auto answers = ask_oracle(queries);
  ASSERT_EQ(answers.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    auto s = specs[i];
    Dataset d = make_synthetic_classification(s.n, s.f, s.c, s.seed);
    ASSERT_EQ(d.x.sizes(), (std::vector<int64_t>{s.n, s.f}));
    ASSERT_EQ(d.x.scalar_type(), at::kFloat);
    ASSERT_EQ(d.y.sizes(), (std::vector<int64_t>{s.n}));
    ASSERT_EQ(d.y.scalar_type(), at::kLong);
    EXPECT_EQ(float_bits(d.x), answers[i]["x"].get<std::vector<uint32_t>>()) << "spec " << i;
    EXPECT_EQ(longs(d.y), answers[i]["y"].get<std::vector<int64_t>>()) << "spec " << i;
  }
}

TEST(SyntheticSequences, EqualsPython) {
  SKIP_WITHOUT_ORACLE();
  struct Spec { int64_t n, length, vocab; uint64_t seed; };
  const std::vector<Spec> specs = {{32, 8, 16, 0}, {5, 12, 100, 99}, {3, 1, 2, 5}};
  std::vector<std::string> queries;
  for (auto s : specs) {
    queries.push_back("sequences " + std::to_string(s.n) + " " + std::to_string(s.length) + " " +
                      std::to_string(s.vocab) + " " + std::to_string(s.seed));
  }
  auto answers = ask_oracle(queries);
  ASSERT_EQ(answers.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    auto s = specs[i];
    Dataset d = make_synthetic_sequences(s.n, s.length, s.vocab, s.seed);
    ASSERT_EQ(d.x.sizes(), (std::vector<int64_t>{s.n, s.length}));
    ASSERT_EQ(d.x.scalar_type(), at::kLong);
    ASSERT_EQ(d.y.sizes(), (std::vector<int64_t>{s.n, s.length}));
    EXPECT_EQ(answers[i]["dtype"], "torch.int64");
    EXPECT_EQ(longs(d.x), answers[i]["x"].get<std::vector<int64_t>>()) << "spec " << i;
    EXPECT_EQ(longs(d.y), answers[i]["y"].get<std::vector<int64_t>>()) << "spec " << i;
  }
}

TEST(Synthetic, SameSeedSameDataOtherSeedOtherData) {
  Dataset a = make_synthetic_classification(50, 10, 5, 3);
  Dataset b = make_synthetic_classification(50, 10, 5, 3);
  Dataset c = make_synthetic_classification(50, 10, 5, 4);
  EXPECT_TRUE(at::equal(a.x, b.x));
  EXPECT_TRUE(at::equal(a.y, b.y));
  EXPECT_FALSE(at::equal(a.x, c.x));
  Dataset s = make_synthetic_sequences(10, 6, 20, 1);
  EXPECT_GE(s.x.min().item<int64_t>(), 0);
  EXPECT_LT(s.x.max().item<int64_t>(), 20);
  EXPECT_TRUE(at::equal(s.y, s.x.flip({1})));
  EXPECT_THROW(make_synthetic_classification(10, 0, 5, 0), std::invalid_argument);
  EXPECT_THROW(make_synthetic_sequences(10, 4, 0, 0), std::invalid_argument);
  EXPECT_EQ(make_synthetic_classification(0, 4, 3, 0).size(), 0);
}

TEST(Dataset, RowsAndSlice) {
  Dataset d;
  d.x = at::arange(20, at::kFloat).reshape({10, 2});
  d.y = at::arange(10, at::kLong);
  Dataset r = d.rows({3, 0, 3, 9});
  ASSERT_EQ(r.size(), 4);
  EXPECT_TRUE(r.x.is_contiguous());
  EXPECT_EQ(longs(r.y), (std::vector<int64_t>{3, 0, 3, 9}));
  EXPECT_EQ(r.x[0][1].item<float>(), 7.0f);
  EXPECT_EQ(r.x[3][0].item<float>(), 18.0f);
  Dataset s = d.slice(2, 5);
  ASSERT_EQ(s.size(), 3);
  EXPECT_EQ(longs(s.y), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(d.rows({}).size(), 0);
  EXPECT_EQ(Dataset{}.size(), 0);
  try {
    d.rows({1, 10});
    FAIL() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("index 10"), std::string::npos) << e.what();
  }
  EXPECT_THROW(d.rows({-1}), std::out_of_range);
  EXPECT_THROW(d.slice(5, 11), std::out_of_range);
  EXPECT_THROW(d.slice(6, 5), std::out_of_range);
}
