// compute_bucket_assignment_by_size, as PyTorch's reducer.cpp computes it; see the header for
// the algorithm and Note [Bucket order] in reducer.h for how DDP uses the result.
#include "engine/ddp/bucket_assignment.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

namespace dpscope::ddp {

namespace {

struct OpenBucket {
  std::vector<int64_t> indices;
  int64_t bytes = 0;
  int64_t size_limit = 0;
  size_t limit_position = 0;  // where this key is in size_limits
};

using Key = std::tuple<int, int, int>;  // dtype, device type, device index

Key key_of(const TensorSpec& spec) {
  return {static_cast<int>(spec.dtype), static_cast<int>(spec.device.type()),
          static_cast<int>(spec.device.index())};
}

}  // namespace

BucketAssignment compute_bucket_assignment_by_size(const std::vector<TensorSpec>& tensors,
                                                   const std::vector<int64_t>& size_limits,
                                                   const std::vector<bool>& expect_sparse,
                                                   const std::vector<int64_t>& tensor_indices) {
  if (size_limits.empty()) {
    throw std::invalid_argument("compute_bucket_assignment_by_size: size_limits is empty; pass "
                                "[first bucket bytes, bucket cap bytes]");
  }
  if (!tensor_indices.empty() && tensor_indices.size() != tensors.size()) {
    throw std::invalid_argument("compute_bucket_assignment_by_size: " +
                                std::to_string(tensor_indices.size()) + " tensor indices for " +
                                std::to_string(tensors.size()) + " tensors");
  }
  std::vector<std::pair<std::vector<int64_t>, int64_t>> result;
  // PyTorch keeps open buckets in a std::unordered_map and closes the rest in its iteration
  // order at the end. With libstdc++ and the few (dtype, device) keys of a model, that order is
  // the reverse of first appearance (each new key goes to the front of the node list). It only
  // matters with several dtypes in the rebuild; the constructor's sort makes it irrelevant there.
  std::vector<Key> key_order;
  std::map<Key, OpenBucket> open;

  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t index = tensor_indices.empty() ? static_cast<int64_t>(i) : tensor_indices[i];
    if (!expect_sparse.empty()) {
      if (index < 0 || static_cast<size_t>(index) >= expect_sparse.size()) {
        throw std::invalid_argument("compute_bucket_assignment_by_size: parameter index " +
                                    std::to_string(index) + " has no expect_sparse entry");
      }
      if (expect_sparse[index]) {
        result.push_back({{index}, 0});
        continue;
      }
    }
    const Key key = key_of(tensors[i]);
    auto [it, inserted] = open.try_emplace(key);
    if (inserted) key_order.push_back(key);
    OpenBucket& bucket = it->second;
    bucket.indices.push_back(index);
    bucket.bytes += tensors[i].bytes;
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
  if (tensor_indices.empty()) {
    std::stable_sort(result.begin(), result.end(), [](const auto& a, const auto& b) {
      return *std::min_element(a.first.begin(), a.first.end()) <
             *std::min_element(b.first.begin(), b.first.end());
    });
  }
  BucketAssignment assignment;
  for (auto& [indices, limit] : result) {
    assignment.buckets.push_back(std::move(indices));
    assignment.size_limits.push_back(limit);
  }
  return assignment;
}

}  // namespace dpscope::ddp
