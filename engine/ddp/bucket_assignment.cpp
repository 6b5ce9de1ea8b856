// compute_bucket_assignment_by_size: converts c10's dtypes and devices into the keys of
// core::plan_buckets, the one implementation of PyTorch's algorithm (core/bucket_plan.h).
#include "engine/ddp/bucket_assignment.h"

#include <stdexcept>
#include <string>

namespace dpscope::ddp {

namespace {

// Tells devices apart: the type in the high bits, the index (-1 for "the current one") + 1 low.
int32_t device_key(const c10::Device& device) {
  return (static_cast<int32_t>(device.type()) << 16) | (static_cast<int32_t>(device.index()) + 1);
}

}  // namespace

BucketAssignment compute_bucket_assignment_by_size(const std::vector<TensorSpec>& tensors,
                                                   const std::vector<int64_t>& size_limits,
                                                   const std::vector<bool>& expect_sparse,
                                                   const std::vector<int64_t>& tensor_indices) {
  std::vector<core::GradientDesc> gradients;
  gradients.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t index =
        i < tensor_indices.size() ? tensor_indices[i] : static_cast<int64_t>(i);
    bool sparse = false;
    if (!expect_sparse.empty()) {
      if (index < 0 || static_cast<size_t>(index) >= expect_sparse.size()) {
        throw std::invalid_argument("compute_bucket_assignment_by_size: parameter index " +
                                    std::to_string(index) + " has no expect_sparse entry");
      }
      sparse = expect_sparse[static_cast<size_t>(index)];
    }
    gradients.push_back({static_cast<int32_t>(tensors[i].dtype), device_key(tensors[i].device),
                         tensors[i].bytes, sparse});
  }
  core::BucketPlan plan = core::plan_buckets(gradients, size_limits, tensor_indices);
  return BucketAssignment{std::move(plan.buckets), std::move(plan.size_limits)};
}

}  // namespace dpscope::ddp
