// ReduceScatterBucketer: fairscale's batching of small reduce-scatters. Gradients whose per-rank
// chunk is small are copied into a bucket (one per dtype and device) that is reduce-scattered
// when full and at the end of backward; large ones go straight to the process group.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "engine/comm/process_group.h"

namespace dpscope::fsdp {

// Thread-safety: one thread at a time (FSDP calls it from its hooks and the final callback).
class ReduceScatterBucketer {
 public:
  // Called with this rank's reduced chunk (a tensor of the input's chunk size and dtype) once
  // its reduce-scatter is done, from wait_all().
  using Callback = std::function<void(const at::Tensor& reduced)>;

  // `cap_bytes`: the bucket's size over all ranks (0: every reduce-scatter goes straight
  // through). `max_in_flight`: issuing one more reduce-scatter first waits for the oldest while
  // this many are running (0: no limit) — each holds a full gradient until it is done, so this
  // bounds memory when communication is slower than backward. Collectives go to `group`.
  ReduceScatterBucketer(comm::ProcessGroup& group, int64_t cap_bytes, int max_in_flight);
  ~ReduceScatterBucketer();

  // Reduce-scatters (sum) the flat `input` of size() * n elements: rank r gets the sum of every
  // rank's chunk r. Bucketed when n is at most the bucket's per-rank capacity (the input is held
  // until the bucket is flushed); otherwise issued directly (the input is kept alive until the
  // collective is done, which may reduce in it). Either way the caller gives the input up: its
  // contents are undefined afterwards. `tag` is recorded with the collective (a bucketed one records
  // the tag of the gradient that flushed it, with trace::kFlagBucketed).
  void reduce_scatter(const at::Tensor& input, comm::CollectiveTag tag, Callback callback);
  // Issues the reduce-scatter of every non-empty bucket.
  void flush(comm::CollectiveTag tag);
  // Runs the callbacks of the reduce-scatters that are already done (the oldest first, stopping at
  // the first still running) and lets their tensors go, without waiting. Called as backward goes
  // on, so that a unit's full gradient is freed as soon as its reduction is over, not at the end.
  void poll();
  // Waits for every issued reduce-scatter, in issue order, running each one's callbacks once it
  // is done. Rethrows the first collective error.
  void wait_all();

  // Per-rank capacity in elements for a dtype (0 when bucketing is off).
  int64_t shard_capacity(c10::ScalarType dtype) const;

 private:
  // The gradients waiting for a flush, held as they are ([world * n] each); the flush packs them
  // into one [world, filled] input. fairscale copies each into a preallocated [world, capacity]
  // buffer instead, which costs the whole capacity even when little of it is used.
  struct Bucket {
    std::vector<at::Tensor> inputs;
    int64_t offset = 0;  // elements per rank held so far
    std::vector<std::pair<int64_t, Callback>> callbacks;  // (offset, callback)
  };
  struct Issued {
    comm::WorkHandle work;
    at::Tensor input;   // kept alive until done
    at::Tensor output;  // [n] for a direct one; [filled] for a bucket
    std::vector<std::tuple<int64_t, int64_t, Callback>> callbacks;  // (offset, numel, callback)
  };
  void flush_bucket(Bucket& bucket, comm::CollectiveTag tag);
  // Makes room for one more issued reduce-scatter (max_in_flight).
  void wait_for_room();
  // Waits for `issued` (rethrowing its error) and runs its callbacks.
  static void complete(Issued& issued);

  comm::ProcessGroup& group_;
  const int64_t cap_bytes_;
  const int max_in_flight_;
  std::map<std::pair<int, int>, Bucket> buckets_;  // by (dtype, device index)
  std::deque<Issued> issued_;  // oldest first
};

}  // namespace dpscope::fsdp
