// Bucket plans: which gradients travel together in one DDP all-reduce. PyTorch's
// compute_bucket_assignment_by_size (torch/csrc/distributed/c10d/reducer.cpp) on plain
// descriptions of gradients, with no LibTorch: the engine's DDP (engine/ddp/bucket_assignment.h
// wraps it for c10 types) and `dpscope whatif` (analysis/whatif.h) share this one implementation.
#pragma once

#include <cstdint>
#include <vector>

namespace dpscope::core {

// What bucketing needs to know of one gradient. Two gradients may share a bucket only when both
// keys are equal, so the keys only have to tell dtypes and devices apart: `dpscope whatif` passes
// the trace's DType (trace/schema.h) and device 0; the engine passes c10's ScalarType and a code
// of the device's type and index.
struct GradientDesc {
  int32_t dtype_key = 0;
  int32_t device_key = 0;
  int64_t bytes = 0;           // numel * element size
  bool expect_sparse = false;  // a sparse gradient: always a bucket of its own
};

struct BucketPlan {
  std::vector<std::vector<int64_t>> buckets;  // parameter indices of each bucket, in slot order
  std::vector<int64_t> size_limits;           // the limit each bucket was closed under
};

// PyTorch's defaults: the first bucket closes at 1 MiB (so the first all-reduce starts early;
// dist._DEFAULT_FIRST_BUCKET_BYTES, whatever bucket_cap_mb is), later ones at bucket_cap_mb
// (25 MiB).
inline constexpr int64_t kDefaultFirstBucketBytes = 1024 * 1024;
inline constexpr int64_t kDefaultBucketBytes = 25 * 1024 * 1024;

// PyTorch's algorithm, step by step: walk `gradients` in order (gradients[i] is parameter i, or,
// when `indices` is given, parameter indices[i]: the walk is then in the order gradients arrived,
// for the rebuild); a gradient expecting sparseness gets a bucket of its own; the others
// accumulate in one open bucket per (dtype_key, device_key), which closes when its bytes reach
// the current limit of its key; each key moves through `size_limits` ([first, cap]: the last
// limit repeats). Open buckets are closed at the end, keys in the reverse order of their first
// appearance (libstdc++'s unordered_map order in PyTorch). Without `indices` the buckets are then
// sorted by their smallest parameter index. DDP's constructor reverses that result (Note [Bucket
// order] in engine/ddp/reducer.h); the rebuild does not.
// Throws std::invalid_argument for empty size_limits or when indices and gradients differ in
// length. Pure function; thread-safe.
BucketPlan plan_buckets(const std::vector<GradientDesc>& gradients,
                        const std::vector<int64_t>& size_limits,
                        const std::vector<int64_t>& indices = {});

}  // namespace dpscope::core
