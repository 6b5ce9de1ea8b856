// How DDP buckets its first iteration, before it has seen the order gradients arrive in:
// PyTorch >= 1.12's single bucket (the default) or the older guess by size (trace::InitialBuckets,
// the vocabulary's). Needs no LibTorch, so the command line's checks can use it.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "trace/vocabulary.h"

namespace dpscope::ddp {

// Note [The first iteration's buckets]
// The buckets exist to overlap communication with backward, which needs the order gradients
// become ready in; before the first backward that order is unknown. PyTorch <= 1.11 (and the seed
// article) guessed it: [first_bucket, cap] buckets in reverse registration order. A wrong guess
// has a bucket wait for a gradient that comes late while later buckets are full; worse, in a
// model whose backward runs collectives of its own, a rank that skips a parameter launches a
// bucket early, and its all-reduce meets another collective on the other ranks. PyTorch >= 1.12 (pytorch#73732) stopped guessing: iteration 0 gets one bucket
// (per dtype and device, sparse parameters alone), a single all-reduce after the whole backward,
// and the rebuild before iteration 1 buckets by the order gradients arrived on rank 0 (the
// Reducer's rebuild_buckets). With find_unused_parameters and no static graph there is no
// rebuild, so PyTorch keeps bucketing by size from the start. dpscope does PyTorch's by default
// and the old guess on request; the trace's meta `ddp_initial_buckets` says which.

// The size limits of the constructor's plan under `policy`, as PyTorch's _ddp_init_helper
// chooses them: {INT64_MAX} (one bucket) or {first_bucket_bytes, cap_bytes}.
inline std::vector<int64_t> initial_size_limits(trace::InitialBuckets policy, bool find_unused_parameters,
                                                bool static_graph, int64_t first_bucket_bytes,
                                                int64_t cap_bytes) {
  if (policy == trace::InitialBuckets::PyTorch && (static_graph || !find_unused_parameters)) {
    return {std::numeric_limits<int64_t>::max()};
  }
  return {first_bucket_bytes, cap_bytes};
}

}  // namespace dpscope::ddp
