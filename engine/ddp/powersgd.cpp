// PowerSGD as PyTorch 1.13's powerSGD_hook (powersgd.h): the hook's state, its launch() (error
// feedback, the split into compressed and uncompressed tensors, Q's initialisation, P = M Q and
// the first collectives) and the PendingReduction whose wait() finishes P, Q and the error.
#include "engine/ddp/powersgd.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/frobenius_norm.h>
#include <ATen/ops/linalg_qr.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dpscope::ddp {

namespace powersgd {

LegacyRandomState::LegacyRandomState(uint64_t seed) {
  if (seed > 0xFFFFFFFFull) {
    throw std::invalid_argument("PowerSGD random_seed " + std::to_string(seed) +
                                " does not fit NumPy's RandomState; use a seed below 2^32");
  }
  engine_.seed(static_cast<std::mt19937::result_type>(seed));
}

int64_t LegacyRandomState::randint(int64_t high) {
  if (high <= 0 || high > (int64_t{1} << 32)) {
    throw std::invalid_argument("LegacyRandomState::randint: high must be in [1, 2^32], got " +
                                std::to_string(high));
  }
  const uint64_t max = static_cast<uint64_t>(high - 1);
  if (max == 0) return 0;
  // NumPy's gen_mask: the smallest all-ones mask covering `max`.
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  if (max == 0xFFFFFFFFull) return static_cast<int64_t>(engine_());
  uint64_t value;
  do {
    value = static_cast<uint64_t>(engine_()) & mask;
  } while (value > max);
  return static_cast<int64_t>(value);
}

CompressionDecision should_compress(int64_t rows, int64_t cols, int64_t rank,
                                    double min_compression_rate) {
  CompressionDecision decision;
  decision.uncompressed_numel = rows * cols;
  decision.compressed_numel = (rows + cols) * rank;
  decision.compress = static_cast<double>(decision.compressed_numel) * min_compression_rate <
                      static_cast<double>(decision.uncompressed_numel);
  return decision;
}

void orthogonalize_gram_schmidt(at::Tensor& matrices, double epsilon) {
  const int64_t num_cols = matrices.size(2);
  for (int64_t i = 0; i < num_cols; ++i) {
    at::Tensor col = matrices.narrow(2, i, 1);
    // torch.norm(col, dim=1, keepdim=True) is frobenius_norm over dim 1.
    if (epsilon == 0) {
      col.div_(at::frobenius_norm(col, {1}, /*keepdim=*/true));
    } else {
      col.div_(at::frobenius_norm(col, {1}, /*keepdim=*/true).add_(epsilon));
    }
    if (i + 1 < num_cols) {
      at::Tensor rest = matrices.narrow(2, i + 1, num_cols - i - 1);
      rest.sub_(at::sum(col.mul(rest), {1}, /*keepdim=*/true).mul(col));
    }
  }
}

void orthogonalize(at::Tensor& matrices, double epsilon) {
  TORCH_CHECK(matrices.dim() == 3 && matrices.size(2) <= matrices.size(1),
              "PowerSGD orthogonalize: expected a batch of tall matrices, got ", matrices.sizes());
  const int64_t rank = matrices.size(2);
  const c10::ScalarType type = matrices.scalar_type();
  if (rank <= 2 || type == c10::ScalarType::Half || type == c10::ScalarType::BFloat16) {
    orthogonalize_gram_schmidt(matrices, epsilon);
  } else {
    at::Tensor r = at::empty({matrices.size(0), rank, rank}, matrices.options());
    at::linalg_qr_out(matrices, r, matrices);
  }
}

}  // namespace powersgd

namespace {

std::string where(const comm::ProcessGroup& group, const GradBucket& bucket) {
  return "rank " + std::to_string(group.rank()) + ", bucket " + std::to_string(bucket.index);
}

}  // namespace

// The part of powerSGD_hook that PyTorch chains on the first collective's future
// (unpack_uncompressed_tensors_and_allreduce_ps, compute_qs, decompress), run by wait().
class PowerSGDReduction final : public PendingReduction {
 public:
  PowerSGDReduction(PowerSGDHook& hook, comm::ProcessGroup& group, GradBucket& bucket)
      : hook_(hook), group_(group), bucket_(bucket) {}

  void wait() override {
    const int world = group_.size();
    // unpack_uncompressed_tensors_and_allreduce_ps: sum, then divide.
    if (uncompressed_work_) {
      uncompressed_work_->wait();
      uncompressed_memory_.div_(world);
      int64_t offset = 0;
      for (at::Tensor& tensor : uncompressed_tensors_) {
        tensor.copy_(uncompressed_memory_.narrow(0, offset, tensor.numel()).view_as(tensor));
        offset += tensor.numel();
      }
    }
    if (p_work_) p_work_->wait();
    // compute_qs: orthogonalize the summed Ps, Q = M^T P, all-reduce Q.
    for (at::Tensor& p : ps_) powersgd::orthogonalize(p, hook_.options_.orthogonalization_epsilon);
    for (size_t i = 0; i < matrices_.size(); ++i) {
      at::bmm_out(qs_[i], matrices_[i].transpose(1, 2), ps_[i]);
    }
    // The second collective of this bucket, from wait() (Note [Hook collective order]).
    if (q_memory_.numel() > 0) {
      group_.all_reduce(q_memory_, comm::ReduceOp::Sum, bucket_.tag)->wait();
    }
    // decompress: average Q, M = P Q^T written through the gradient views into the buffer.
    q_memory_.div_(world);
    for (size_t i = 0; i < matrices_.size(); ++i) {
      at::bmm_out(matrices_[i], ps_[i], qs_[i].transpose(1, 2));
    }
    std::lock_guard<std::mutex> lock(hook_.mutex_);
    if (hook_.options_.use_error_feedback) {
      hook_.error_[bucket_.index] = input_copy_.sub(bucket_.buffer);
    }
    if (!hook_.options_.warm_start) {
      hook_.p_memory_.clear();
      hook_.q_memory_.clear();
    }
    hook_.maybe_increase_iter(bucket_);
  }

 private:
  friend class PowerSGDHook;
  PowerSGDHook& hook_;
  comm::ProcessGroup& group_;
  GradBucket& bucket_;
  at::Tensor input_copy_;                    // the buffer after error feedback (input_tensor_cp)
  std::vector<at::Tensor> uncompressed_tensors_;
  at::Tensor uncompressed_memory_;
  std::vector<at::Tensor> matrices_;         // 1 x n x m views of the compressed gradients
  std::vector<at::Tensor> ps_, qs_;          // 1 x n x r and 1 x m x r views of P and Q memory
  at::Tensor p_memory_, q_memory_;
  comm::WorkHandle uncompressed_work_, p_work_;
};

// A vanilla all-reduce before start_powersgd_iter (default._allreduce_fut).
class VanillaReduction final : public PendingReduction {
 public:
  explicit VanillaReduction(comm::WorkHandle work) : work_(std::move(work)) {}
  void wait() override { work_->wait(); }

 private:
  comm::WorkHandle work_;
};

PowerSGDHook::PowerSGDHook(const PowerSGDOptions& options)
    : options_(options), rng_(options.random_seed) {
  if ((options.use_error_feedback || options.warm_start) && options.start_powersgd_iter <= 1) {
    throw std::invalid_argument(
        "PowerSGD: start_powersgd_iter is " + std::to_string(options.start_powersgd_iter) +
        " but must be > 1 when error feedback or warm start is on, because DDP rebuilds its "
        "buckets after iteration 0 (as PyTorch requires); use 2 or more");
  }
  if (options.matrix_approximation_rank < 1) {
    throw std::invalid_argument("PowerSGD: matrix_approximation_rank is " +
                                std::to_string(options.matrix_approximation_rank) +
                                "; use 1 or more (1 to 4 is typical)");
  }
}

int32_t PowerSGDHook::iteration() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return iter_;
}

int64_t PowerSGDHook::numel_before_compression() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return numel_before_;
}

int64_t PowerSGDHook::numel_after_compression() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return numel_after_;
}

double PowerSGDHook::compression_rate() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return numel_after_ > 0 ? static_cast<double>(numel_before_) / numel_after_ : 0.0;
}

void PowerSGDHook::maybe_increase_iter(const GradBucket& bucket) {
  if (bucket.is_last) ++iter_;
}

std::unique_ptr<PendingReduction> PowerSGDHook::launch(comm::ProcessGroup& group,
                                                       GradBucket& bucket) {
  at::Tensor input = bucket.buffer;
  if (!input.defined() || input.dim() != 1 || !input.is_contiguous()) {
    throw std::invalid_argument("PowerSGD on " + where(group, bucket) +
                                ": the bucket's buffer must be a defined, contiguous 1-D tensor "
                                "(the Reducer's flat bucket)");
  }
  const int world = group.size();
  std::unique_lock<std::mutex> lock(mutex_);

  if (iter_ < options_.start_powersgd_iter) {
    maybe_increase_iter(bucket);
    lock.unlock();
    input.div_(world);
    return std::make_unique<VanillaReduction>(
        group.all_reduce(input, comm::ReduceOp::Sum, bucket.tag));
  }

  auto reduction = std::make_unique<PowerSGDReduction>(*this, group, bucket);
  const int32_t index = bucket.index;
  const int64_t total_length = input.size(0);
  const at::TensorOptions options = input.options();

  // Error feedback: the local error of the last compressed iteration is added back.
  if (options_.use_error_feedback) {
    auto error = error_.find(index);
    if (error != error_.end()) {
      if (error->second.numel() != total_length) {
        throw std::runtime_error(
            "PowerSGD on " + where(group, bucket) + ": the bucket has " +
            std::to_string(total_length) + " elements but its error feedback was kept for " +
            std::to_string(error->second.numel()) +
            "; buckets changed after compression started. Start PowerSGD after DDP rebuilds "
            "its buckets (start_powersgd_iter >= 2)");
      }
      input.add_(error->second);
    } else {
      error_[index] = at::zeros({total_length}, options);
    }
    reduction->input_copy_ = input.clone();
  }

  // Split the gradients: matrices worth compressing, grouped by shape in order of first
  // appearance (PyTorch's shape_to_tensors), and the rest.
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::vector<at::Tensor>>> by_shape;
  int64_t total_ps = 0;
  int64_t total_qs = 0;
  for (size_t i = 0; i < bucket.gradients.size(); ++i) {
    const at::Tensor& tensor = bucket.gradients[i];
    if (!tensor.defined() || !tensor.is_alias_of(input)) {
      throw std::invalid_argument(
          "PowerSGD on " + where(group, bucket) + ": gradient " + std::to_string(i) +
          " is not a view of the bucket's buffer; PowerSGD writes the averaged gradients "
          "through these views, so pass views of GradBucket::buffer");
    }
    // tensor.view(tensor.shape[0], -1); a 0-d or empty tensor is never compressed.
    const int64_t n = tensor.dim() > 0 ? tensor.size(0) : 1;
    const int64_t m = n > 0 ? tensor.numel() / n : 0;
    const int64_t rank = std::min<int64_t>({n, m, options_.matrix_approximation_rank});
    const powersgd::CompressionDecision decision =
        powersgd::should_compress(n, m, rank, options_.min_compression_rate);
    numel_before_ += decision.uncompressed_numel;
    if (decision.compress) {
      at::Tensor matrix = tensor.view({n, m});
      auto group_of = std::find_if(by_shape.begin(), by_shape.end(),
                                   [&](const auto& entry) { return entry.first == std::make_pair(n, m); });
      if (group_of == by_shape.end()) {
        by_shape.push_back({{n, m}, {}});
        group_of = by_shape.end() - 1;
      }
      group_of->second.push_back(matrix);
      total_ps += n * rank;
      total_qs += m * rank;
      numel_after_ += decision.compressed_numel;
    } else {
      reduction->uncompressed_tensors_.push_back(tensor);
      numel_after_ += decision.uncompressed_numel;
    }
  }
  {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& tensor : reduction->uncompressed_tensors_) {
      flat.push_back(tensor.reshape({-1}));
    }
    reduction->uncompressed_memory_ =
        flat.empty() ? at::empty({0}, options) : at::cat(flat);
  }

  // P and Q memory: kept across iterations with warm start (Q is reused), else drawn afresh.
  bool need_randomize_qs = false;
  if (!options_.warm_start || p_memory_.find(index) == p_memory_.end()) {
    need_randomize_qs = true;
    p_memory_[index] = at::empty({total_ps}, options);
    q_memory_[index] = at::empty({total_qs}, options);
  }
  at::Tensor p_memory = p_memory_[index];
  at::Tensor q_memory = q_memory_[index];
  if (p_memory.numel() != total_ps || q_memory.numel() != total_qs) {
    throw std::runtime_error("PowerSGD on " + where(group, bucket) + ": the bucket's P/Q memory (" +
                             std::to_string(p_memory.numel()) + "/" +
                             std::to_string(q_memory.numel()) + " elements) does not fit its " +
                             "gradients (" + std::to_string(total_ps) + "/" +
                             std::to_string(total_qs) +
                             "); buckets changed after compression started. Start PowerSGD after "
                             "DDP rebuilds its buckets (start_powersgd_iter >= 2)");
  }
  int64_t p_offset = 0;
  int64_t q_offset = 0;
  for (const auto& [shape, matrices] : by_shape) {
    const auto [n, m] = shape;
    const int64_t rank = std::min<int64_t>({n, m, options_.matrix_approximation_rank});
    for (const at::Tensor& matrix : matrices) {
      reduction->matrices_.push_back(matrix.unsqueeze(0));
      reduction->ps_.push_back(p_memory.narrow(0, p_offset, n * rank).view({1, n, rank}));
      reduction->qs_.push_back(q_memory.narrow(0, q_offset, m * rank).view({1, m, rank}));
      p_offset += n * rank;
      q_offset += m * rank;
    }
  }

  const double epsilon = options_.orthogonalization_epsilon;
  if (!need_randomize_qs) {
    for (at::Tensor& q : reduction->qs_) powersgd::orthogonalize(q, epsilon);
  } else {
    // torch.manual_seed(state.rng.randint(1_000_000_000)) inside fork_rng: a fresh CPU
    // generator, drawn once per bucket even when nothing is compressed.
    const int64_t seed = rng_.randint(1'000'000'000);
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
    for (at::Tensor& q : reduction->qs_) {
      q.copy_(at::randn(q.sizes(), generator, options.device(at::kCPU)));
      powersgd::orthogonalize(q, epsilon);
    }
  }
  for (size_t i = 0; i < reduction->matrices_.size(); ++i) {
    at::bmm_out(reduction->ps_[i], reduction->matrices_[i], reduction->qs_[i]);
  }
  reduction->p_memory_ = p_memory;
  reduction->q_memory_ = q_memory;
  lock.unlock();

  // The uncompressed tensors, then P (PyTorch issues P once the first is done; the order on the
  // wire is the same). Collectives of 0 elements are skipped.
  if (reduction->uncompressed_memory_.numel() > 0) {
    reduction->uncompressed_work_ =
        group.all_reduce(reduction->uncompressed_memory_, comm::ReduceOp::Sum, bucket.tag);
  }
  if (p_memory.numel() > 0) {
    reduction->p_work_ = group.all_reduce(p_memory, comm::ReduceOp::Sum, bucket.tag);
  }
  return reduction;
}

std::unique_ptr<CommHook> make_powersgd_hook(const PowerSGDOptions& options) {
  return std::make_unique<PowerSGDHook>(options);
}

}  // namespace dpscope::ddp
