// DDP communication hooks: how the Reducer turns one bucket of local gradients into the average
// across ranks. The default all-reduce, fp16 and bf16 compression and PowerSGD, as PyTorch's
// torch.distributed.algorithms.ddp_comm_hooks define them. Hooks issue collectives only through
// comm::ProcessGroup, so every byte they send is traced there.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/comm/process_group.h"
#include "trace/vocabulary.h"

namespace dpscope::ddp {

// One bucket handed to a hook (PyTorch's GradBucket).
struct GradBucket {
  int32_t index = 0;          // bucket index in the current plan
  at::Tensor buffer;          // flat, contiguous, 1-D: the bucket's gradients in slot order
  std::vector<at::Tensor> gradients;  // views of `buffer`, one per parameter, shaped like it
  std::vector<int32_t> params;        // the parameters' indices, in slot order
  bool is_last = false;       // the last bucket reduced in this iteration
  int32_t iteration = 0;      // the DDP iteration (counts synced backward passes from 0)
  comm::CollectiveTag tag;    // pass to every collective the hook issues
};

// A reduction in flight. wait() blocks until the average across ranks of the bucket's gradients
// is in bucket.buffer (the GradBucket given to launch(), which the Reducer keeps alive until
// then), and rethrows a collective's error. Called once, on the thread that finalizes backward.
class PendingReduction {
 public:
  virtual ~PendingReduction() = default;
  virtual void wait() = 0;
};

// Note [Hook collective order]
// A hook may issue several collectives for one bucket (PowerSGD: P, then Q). launch() runs on
// the autograd thread in bucket order and wait() on the finalizing thread in bucket order, both
// the same on every rank; a hook issues collectives only from these two calls, never from a
// thread of its own, so every rank issues the same collectives in the same order
// (See Note [Collective order]).
class CommHook {
 public:
  virtual ~CommHook() = default;
  // "allreduce", "fp16", "bf16", "powersgd".
  virtual std::string_view name() const = 0;
  // Starts reducing `bucket` on `group`. The result must be the average over group.size() ranks
  // (the hook divides; the Reducer does not when a hook is set). May return before any byte is
  // sent. Thread-safety: called on one thread at a time.
  virtual std::unique_ptr<PendingReduction> launch(comm::ProcessGroup& group,
                                                   GradBucket& bucket) = 0;
};

// PyTorch's allreduce_hook: divide by the world size, all-reduce (sum) in place.
std::unique_ptr<CommHook> make_allreduce_hook();
// PyTorch's fp16_compress_hook / bf16_compress_hook: cast the bucket to float16 (bfloat16),
// divide by the world size, all-reduce the compressed copy, copy the result back (decompress).
std::unique_ptr<CommHook> make_fp16_compress_hook();
std::unique_ptr<CommHook> make_bf16_compress_hook();

// PyTorch's PowerSGDState options (torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook).
struct PowerSGDOptions {
  int matrix_approximation_rank = 1;
  // Iterations before this run plain all-reduce (vanilla), so the compression starts after the
  // model has warmed up; PowerSGD's error feedback starts with it.
  int32_t start_powersgd_iter = 1000;
  // Tensors whose compression would not save at least this ratio are all-reduced uncompressed.
  double min_compression_rate = 2;
  bool use_error_feedback = true;
  bool warm_start = true;
  // Added to each column's norm in orthogonalization (PyTorch's orthogonalization_epsilon);
  // 0 divides by the bare norm, as PyTorch does by default.
  double orthogonalization_epsilon = 0;
  uint64_t random_seed = 0;
};
std::unique_ptr<CommHook> make_powersgd_hook(const PowerSGDOptions& options);

// The hook for `dpscope train --comm-hook`: null for None (the Reducer's own all-reduce);
// PowerSGD with default options except start iteration 2 and rank 1.
std::unique_ptr<CommHook> make_comm_hook(trace::CommHookKind kind);

}  // namespace dpscope::ddp
