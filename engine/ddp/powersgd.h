// PowerSGD gradient compression (Vogels et al., 2019) as PyTorch 1.13's powerSGD_hook does it
// (torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py): the same state, random
// numbers, orthogonalization, collectives and error feedback, so results match PyTorch's.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string_view>

#include "engine/ddp/comm_hook.h"

namespace dpscope::ddp {

namespace powersgd {

// NumPy's legacy np.random.RandomState(seed), as far as PowerSGD uses it: MT19937 seeded by
// init_genrand(seed) (the same initialisation as std::mt19937), and randint(high) drawing masked
// 32-bit words until one is below `high` (NumPy's legacy bounded-integer algorithm).
class LegacyRandomState {
 public:
  // Throws std::invalid_argument for a seed above 2^32 - 1, as NumPy does.
  explicit LegacyRandomState(uint64_t seed);
  // RandomState.randint(high) for 0 < high <= 2^32: uniform in [0, high).
  int64_t randint(int64_t high);

 private:
  std::mt19937 engine_;
};

// PyTorch's _should_compress: whether a rows x cols matrix is worth compressing at `rank`,
// i.e. (rows + cols) * rank * min_compression_rate < rows * cols.
struct CompressionDecision {
  bool compress = false;
  int64_t uncompressed_numel = 0;  // rows * cols
  int64_t compressed_numel = 0;    // (rows + cols) * rank
};
CompressionDecision should_compress(int64_t rows, int64_t cols, int64_t rank,
                                    double min_compression_rate);

// PyTorch's _orthogonalize_gram_schmidt: orthonormalizes the columns of each matrix of the
// batch `matrices` (batch x rows x cols, cols <= rows) in place. With epsilon 0 a column of
// zeros becomes NaN, as in PyTorch; set a small epsilon (1e-8) to avoid it.
void orthogonalize_gram_schmidt(at::Tensor& matrices, double epsilon);
// PyTorch's _orthogonalize: Gram-Schmidt for at most 2 columns or a 16-bit dtype, otherwise
// the Q of torch.linalg.qr written into `matrices`.
void orthogonalize(at::Tensor& matrices, double epsilon);

}  // namespace powersgd

// PyTorch's powerSGD_hook with its PowerSGDState (not batched_powerSGD_hook, and without
// batch_tensors_with_same_shape). Per bucket, once compression has started:
//   1. error feedback: add the bucket's last local error to the buffer and keep a copy;
//   2. view each gradient as a matrix (dim 0 x the rest); those that would not save
//      min_compression_rate (vectors, tiny tensors) are concatenated and all-reduced as they are;
//   3. for the others, Q (warm-started from the last iteration, or drawn from a normal
//      distribution seeded like PyTorch) is orthogonalized and P = M Q is all-reduced;
//   4. on wait(): P is orthogonalized, Q = M^T P is all-reduced and averaged, M = P Q^T;
//      the new local error is the copy minus the result.
// Collectives: launch() issues the uncompressed all-reduce and P's; wait() issues Q's (see
// Note [Hook collective order]). Unlike PyTorch, a collective of 0 elements is not issued.
// Before start_powersgd_iter it is PyTorch's allreduce_hook. The iteration counter is the
// hook's own, as in PyTorch (state.iter): it advances after the bucket marked is_last.
//
// Thread-safety: launch() and wait() may run on different threads; the hook must outlive every
// PendingReduction it returned.
class PowerSGDHook final : public CommHook {
 public:
  // Throws std::invalid_argument when the options are invalid (PyTorch's checks: a start
  // iteration below 2 with error feedback or warm start; also a rank below 1, a seed over 32 bits).
  explicit PowerSGDHook(const PowerSGDOptions& options);

  std::string_view name() const override { return to_string(trace::CommHookKind::PowerSgd); }
  std::unique_ptr<PendingReduction> launch(comm::ProcessGroup& group,
                                           GradBucket& bucket) override;

  const PowerSGDOptions& options() const { return options_; }
  // state.iter: iterations finished so far (counted on the last bucket).
  int32_t iteration() const;
  // state.compression_stats(): elements before and after compression over all compressed
  // iterations so far, and their ratio (0 before any compression).
  int64_t numel_before_compression() const;
  int64_t numel_after_compression() const;
  double compression_rate() const;

 private:
  friend class PowerSGDReduction;
  void maybe_increase_iter(const GradBucket& bucket);  // under mutex_

  const PowerSGDOptions options_;
  mutable std::mutex mutex_;  // guards everything below
  powersgd::LegacyRandomState rng_;
  std::map<int32_t, at::Tensor> error_;     // state.error_dict, by bucket index
  std::map<int32_t, at::Tensor> p_memory_;  // state.p_memory_dict
  std::map<int32_t, at::Tensor> q_memory_;  // state.q_memory_dict
  int32_t iter_ = 0;
  int64_t numel_before_ = 0;
  int64_t numel_after_ = 0;
};

}  // namespace dpscope::ddp
