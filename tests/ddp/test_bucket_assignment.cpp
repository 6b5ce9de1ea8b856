// Bucket assignment: dpscope's compute_bucket_assignment_by_size against PyTorch's own on many
// random parameter lists (sizes, dtypes, sparse flags, limits, arrival orders), and the
// documented rules on hand-made cases.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <random>
#include <sstream>

#include "engine/ddp/bucket_assignment.h"
#include "tests/test_util.h"

using dpscope::ddp::BucketAssignment;
using dpscope::ddp::compute_bucket_assignment_by_size;
using dpscope::ddp::TensorSpec;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

TensorSpec floats(int64_t numel) { return {c10::ScalarType::Float, c10::Device(c10::kCPU), numel * 4}; }

TEST(BucketAssignment, ClosesAtTheFirstLimitThenTheCap) {
  // 300k floats = 1.2 MB: the first bucket closes after one, later ones hold three (4 MB cap).
  std::vector<TensorSpec> specs(7, floats(300000));
  const BucketAssignment a = compute_bucket_assignment_by_size(specs, {1 << 20, 4 << 20});
  const std::vector<std::vector<int64_t>> expected{{0}, {1, 2, 3, 4}, {5, 6}};
  EXPECT_EQ(a.buckets, expected);
  EXPECT_EQ(a.size_limits, (std::vector<int64_t>{1 << 20, 4 << 20, 4 << 20}));
}

TEST(BucketAssignment, SparseParametersGetTheirOwnBucket) {
  std::vector<TensorSpec> specs(4, floats(10));
  const BucketAssignment a =
      compute_bucket_assignment_by_size(specs, {1 << 20}, {false, true, false, false});
  EXPECT_EQ(a.buckets, (std::vector<std::vector<int64_t>>{{0, 2, 3}, {1}}));
}

TEST(BucketAssignment, DtypesNeverShareABucket) {
  std::vector<TensorSpec> specs{floats(10), {c10::ScalarType::Double, c10::Device(c10::kCPU), 80},
                                floats(10)};
  const BucketAssignment a = compute_bucket_assignment_by_size(specs, {1 << 20});
  EXPECT_EQ(a.buckets, (std::vector<std::vector<int64_t>>{{0, 2}, {1}}));
}

TEST(BucketAssignment, RejectsBadArguments) {
  EXPECT_THROW(compute_bucket_assignment_by_size({floats(1)}, {}), std::invalid_argument);
  EXPECT_THROW(compute_bucket_assignment_by_size({floats(1)}, {1}, {}, {0, 1}),
               std::invalid_argument);
}

TEST(BucketAssignment, EqualsPyTorchOnRandomCases) {
  if (run_command("/usr/bin/python3 -c 'import torch.distributed'").exit_code != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch (apt-get install python3-torch)";
  }
  TempDir dir;
  std::mt19937 rng(1234);
  const char* dtype_names[] = {"float32", "float64", "float16"};
  const c10::ScalarType dtypes[] = {c10::ScalarType::Float, c10::ScalarType::Double,
                                    c10::ScalarType::Half};
  const int64_t element[] = {4, 8, 2};
  struct Case {
    std::vector<TensorSpec> specs;
    std::vector<int64_t> limits;
    std::vector<bool> sparse;
    std::vector<int64_t> indices;
  };
  std::vector<Case> cases;
  std::ofstream input(dir.file("cases.jsonl"));
  for (int c = 0; c < 300; ++c) {
    Case one;
    const int count = 1 + static_cast<int>(rng() % 30);
    nlohmann::json json;
    for (int i = 0; i < count; ++i) {
      const int d = (c % 3 == 0) ? static_cast<int>(rng() % 3) : 0;
      const int64_t numel = 1 + static_cast<int64_t>(rng() % (c % 2 ? 400000 : 4000));
      one.specs.push_back({dtypes[d], c10::Device(c10::kCPU), numel * element[d]});
      json["numel"].push_back(numel);
      json["dtype"].push_back(dtype_names[d]);
      const bool sparse = c % 5 == 0 && rng() % 6 == 0;
      one.sparse.push_back(sparse);
      json["sparse"].push_back(sparse);
    }
    one.limits = {static_cast<int64_t>(1 + rng() % 2000000), static_cast<int64_t>(1 + rng() % 8000000)};
    if (c % 4 == 0) one.limits.push_back(static_cast<int64_t>(1 + rng() % 100000));
    json["limits"] = one.limits;
    json["indices"] = nlohmann::json::array();
    if (c % 2 == 1) {
      for (int i = 0; i < count; ++i) one.indices.push_back(i);
      std::shuffle(one.indices.begin(), one.indices.end(), rng);
      json["indices"] = one.indices;
    }
    input << json.dump() << "\n";
    cases.push_back(std::move(one));
  }
  input.close();
  const auto result = run_command("/usr/bin/python3 " + std::string(DPSCOPE_SOURCE_DIR) +
                                  "/tests/ddp/bucket_oracle.py < " + dir.file("cases.jsonl"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::istringstream lines(result.output);
  std::string line;
  for (size_t c = 0; c < cases.size(); ++c) {
    ASSERT_TRUE(std::getline(lines, line)) << "the oracle answered only " << c << " cases";
    const nlohmann::json expected = nlohmann::json::parse(line);
    const BucketAssignment got = compute_bucket_assignment_by_size(
        cases[c].specs, cases[c].limits, cases[c].sparse, cases[c].indices);
    ASSERT_EQ(nlohmann::json(got.buckets), expected["buckets"]) << "case " << c;
    ASSERT_EQ(nlohmann::json(got.size_limits), expected["limits"]) << "case " << c;
  }
}

}  // namespace
