// Bucket assignment: which gradients travel together in one all-reduce. PyTorch's
// compute_bucket_assignment_by_size on c10 descriptions of tensors: a thin wrapper over the one
// implementation, core::plan_buckets (core/bucket_plan.h), which `dpscope whatif` shares.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

#include "core/bucket_plan.h"

namespace dpscope::ddp {

// What bucketing needs to know of one parameter.
struct TensorSpec {
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::Device device = c10::Device(c10::kCPU);
  int64_t bytes = 0;  // numel * element size
};

struct BucketAssignment {
  std::vector<std::vector<int64_t>> buckets;  // parameter indices of each bucket, in slot order
  std::vector<int64_t> size_limits;           // the limit each bucket was closed under
};

// The default limits: the first bucket closes at 1 MiB (so the first all-reduce starts early),
// later ones at bucket_cap_mb (25 MiB).
inline constexpr int64_t kDefaultFirstBucketBytes = core::kDefaultFirstBucketBytes;
inline constexpr int64_t kDefaultBucketBytes = core::kDefaultBucketBytes;

// core::plan_buckets on these specs (its header has the algorithm): walk `tensors` in order (or, when `tensor_indices` is given,
// tensors[i] is parameter tensor_indices[i] and the walk is in that order — the arrival order of
// gradients, for the rebuild); a parameter expecting a sparse gradient gets a bucket of its own;
// the others accumulate in one open bucket per (dtype, device), which closes when its bytes reach
// the current limit of its key; each key moves through `size_limits` ([first, cap]: the last
// limit repeats). Open buckets are closed at the end. Without tensor_indices the buckets are then
// sorted by their smallest parameter index. The DDP constructor reverses the result
// (See Note [Bucket order]); the rebuild does not.
// `expect_sparse` is empty or indexed by parameter index. Throws std::invalid_argument for empty
// size_limits, mismatched lengths or a parameter index without an expect_sparse entry.
// Pure function; thread-safe.
BucketAssignment compute_bucket_assignment_by_size(const std::vector<TensorSpec>& tensors,
                                                   const std::vector<int64_t>& size_limits,
                                                   const std::vector<bool>& expect_sparse = {},
                                                   const std::vector<int64_t>& tensor_indices = {});

}  // namespace dpscope::ddp
