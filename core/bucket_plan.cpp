// plan_buckets, as PyTorch's reducer.cpp computes its bucket assignment; see the header for the
// algorithm and Note [Bucket order] in engine/ddp/reducer.h for how DDP uses the result.
#include "core/bucket_plan.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace dpscope::core {

namespace {

struct OpenBucket {
  std::vector<int64_t> indices;
  int64_t bytes = 0;
  int64_t size_limit = 0;
  size_t limit_position = 0;  // where this key is in size_limits
};

using Key = std::pair<int32_t, int32_t>;  // dtype, device

}  // namespace

BucketPlan plan_buckets(const std::vector<GradientDesc>& gradients,
                        const std::vector<int64_t>& size_limits,
                        const std::vector<int64_t>& indices) {
  if (size_limits.empty()) {
    throw std::invalid_argument("compute_bucket_assignment_by_size: size_limits is empty; pass "
                                "[first bucket bytes, bucket cap bytes]");
  }
  if (!indices.empty() && indices.size() != gradients.size()) {
    throw std::invalid_argument("compute_bucket_assignment_by_size: " +
                                std::to_string(indices.size()) + " tensor indices for " +
                                std::to_string(gradients.size()) + " tensors");
  }
  std::vector<std::pair<std::vector<int64_t>, int64_t>> result;
  // PyTorch keeps open buckets in a std::unordered_map and closes the rest in its iteration
  // order at the end. With libstdc++ and the few (dtype, device) keys of a model, that order is
  // the reverse of first appearance (each new key goes to the front of the node list). It only
  // matters with several dtypes in the rebuild; the constructor's sort makes it irrelevant there.
  std::vector<Key> key_order;
  std::map<Key, OpenBucket> open;

  for (size_t i = 0; i < gradients.size(); ++i) {
    const int64_t index = indices.empty() ? static_cast<int64_t>(i) : indices[i];
    const GradientDesc& gradient = gradients[i];
    if (gradient.expect_sparse) {
      result.push_back({{index}, 0});
      continue;
    }
    const Key key{gradient.dtype_key, gradient.device_key};
    auto [it, inserted] = open.try_emplace(key);
    if (inserted) key_order.push_back(key);
    OpenBucket& bucket = it->second;
    bucket.indices.push_back(index);
    bucket.bytes += gradient.bytes;
    bucket.size_limit = size_limits[bucket.limit_position];
    if (bucket.bytes >= bucket.size_limit) {
      result.push_back({std::move(bucket.indices), bucket.size_limit});
      const size_t next = std::min(bucket.limit_position + 1, size_limits.size() - 1);
      bucket = OpenBucket{};
      bucket.limit_position = next;
    }
  }
  for (auto key = key_order.rbegin(); key != key_order.rend(); ++key) {
    OpenBucket& bucket = open[*key];
    if (!bucket.indices.empty()) result.push_back({std::move(bucket.indices), bucket.size_limit});
  }
  if (indices.empty()) {
    std::stable_sort(result.begin(), result.end(), [](const auto& a, const auto& b) {
      return *std::min_element(a.first.begin(), a.first.end()) <
             *std::min_element(b.first.begin(), b.first.end());
    });
  }
  BucketPlan plan;
  for (auto& [bucket_indices, limit] : result) {
    plan.buckets.push_back(std::move(bucket_indices));
    plan.size_limits.push_back(limit);
  }
  return plan;
}

}  // namespace dpscope::core
