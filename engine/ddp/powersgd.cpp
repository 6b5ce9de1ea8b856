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

// The gradients worth compressing, as n x m matrices grouped by shape in order of first
// appearance (PyTorch's shape_to_tensors), and the sizes of the P and Q memory they need.
struct CompressedMatrices {
  struct ShapeGroup {
    int64_t n = 0, m = 0, rank = 0;
    std::vector<at::Tensor> matrices;
  };
  std::vector<ShapeGroup> by_shape;
  int64_t total_ps = 0;  // sum of n * rank
  int64_t total_qs = 0;  // sum of m * rank

  void add(const at::Tensor& matrix, int64_t n, int64_t m, int64_t rank) {
    auto group = std::find_if(by_shape.begin(), by_shape.end(),
                              [&](const ShapeGroup& entry) { return entry.n == n && entry.m == m; });
    if (group == by_shape.end()) group = by_shape.insert(by_shape.end(), ShapeGroup{n, m, rank, {}});
    group->matrices.push_back(matrix);
    total_ps += n * rank;
    total_qs += m * rank;
  }
};

// Where Q starts this iteration: drawn afresh, or last iteration's (warm start).
enum class QStart { Random, Reused };

void check_flat_buffer(const comm::ProcessGroup& group, const GradBucket& bucket) {
  const at::Tensor& input = bucket.buffer;
  if (!input.defined() || input.dim() != 1 || !input.is_contiguous()) {
    throw std::invalid_argument("PowerSGD on " + where(group, bucket) +
                                ": the bucket's buffer must be a defined, contiguous 1-D tensor "
                                "(the Reducer's flat bucket)");
  }
}

// A vanilla all-reduce before start_powersgd_iter (default._allreduce_fut).
class VanillaReduction final : public PendingReduction {
 public:
  explicit VanillaReduction(comm::WorkHandle work) : work_(std::move(work)) {}
  void wait() override { work_->wait(); }

 private:
  comm::WorkHandle work_;
};

std::unique_ptr<PendingReduction> launch_vanilla_allreduce(comm::ProcessGroup& group,
                                                           GradBucket& bucket) {
  bucket.buffer.div_(group.size());
  return std::make_unique<VanillaReduction>(
      group.all_reduce(bucket.buffer, comm::ReduceOp::Sum, bucket.tag));
}

}  // namespace

// One bucket's pass through powerSGD_hook once compression has started. PowerSGDHook::launch()
// runs the steps up to P = M Q (under the hook's mutex) and issues the first collectives; wait()
// runs what PyTorch chains on their future (unpack_uncompressed_tensors_and_allreduce_ps,
// compute_qs, decompress).
class PowerSGDReduction final : public PendingReduction {
 public:
  PowerSGDReduction(PowerSGDHook& hook, comm::ProcessGroup& group, GradBucket& bucket)
      : hook_(hook), group_(group), bucket_(bucket) {}

  // launch()'s steps, in this order, under hook_.mutex_.
  void add_error_feedback();
  CompressedMatrices split_gradients();
  void concatenate_uncompressed();
  QStart claim_p_and_q_memory(const CompressedMatrices& compressed);
  void view_ps_and_qs(const CompressedMatrices& compressed);
  void initialize_qs(QStart start);
  void compute_ps();
  // launch()'s last step, after the mutex is released.
  void allreduce_uncompressed_and_ps();

  void wait() override {
    unpack_uncompressed();
    compute_qs();
    decompress();
    update_hook_state();
  }

 private:
  void unpack_uncompressed();
  void compute_qs();
  void decompress();
  void update_hook_state();

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

// The local error of the last compressed iteration is added back, and the result kept to
// compute this iteration's error in update_hook_state().
void PowerSGDReduction::add_error_feedback() {
  if (!hook_.options_.use_error_feedback) return;
  at::Tensor input = bucket_.buffer;
  const int64_t total_length = input.size(0);
  auto error = hook_.error_.find(bucket_.index);
  if (error != hook_.error_.end()) {
    if (error->second.numel() != total_length) {
      throw std::runtime_error(
          "PowerSGD on " + where(group_, bucket_) + ": the bucket has " +
          std::to_string(total_length) + " elements but its error feedback was kept for " +
          std::to_string(error->second.numel()) +
          "; buckets changed after compression started. Start PowerSGD after DDP rebuilds "
          "its buckets (start_powersgd_iter >= 2)");
    }
    input.add_(error->second);
  } else {
    hook_.error_[bucket_.index] = at::zeros({total_length}, input.options());
  }
  input_copy_ = input.clone();
}

// Step I: each gradient viewed as a matrix (dim 0 x the rest) is compressed when
// should_compress says it saves enough, else all-reduced as it is; counts compression_stats.
CompressedMatrices PowerSGDReduction::split_gradients() {
  CompressedMatrices compressed;
  for (size_t i = 0; i < bucket_.gradients.size(); ++i) {
    const at::Tensor& tensor = bucket_.gradients[i];
    if (!tensor.defined() || !tensor.is_alias_of(bucket_.buffer)) {
      throw std::invalid_argument(
          "PowerSGD on " + where(group_, bucket_) + ": gradient " + std::to_string(i) +
          " is not a view of the bucket's buffer; PowerSGD writes the averaged gradients "
          "through these views, so pass views of GradBucket::buffer");
    }
    // tensor.view(tensor.shape[0], -1); a 0-d or empty tensor is never compressed.
    const int64_t n = tensor.dim() > 0 ? tensor.size(0) : 1;
    const int64_t m = n > 0 ? tensor.numel() / n : 0;
    const int64_t rank = std::min<int64_t>({n, m, hook_.options_.matrix_approximation_rank});
    const powersgd::CompressionDecision decision =
        powersgd::should_compress(n, m, rank, hook_.options_.min_compression_rate);
    hook_.numel_before_ += decision.uncompressed_numel;
    if (decision.compress) {
      compressed.add(tensor.view({n, m}), n, m, rank);
      hook_.numel_after_ += decision.compressed_numel;
    } else {
      uncompressed_tensors_.push_back(tensor);
      hook_.numel_after_ += decision.uncompressed_numel;
    }
  }
  return compressed;
}

// Step II: the uncompressed tensors in one contiguous tensor, to all-reduce them at once.
void PowerSGDReduction::concatenate_uncompressed() {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& tensor : uncompressed_tensors_) flat.push_back(tensor.reshape({-1}));
  uncompressed_memory_ = flat.empty() ? at::empty({0}, bucket_.buffer.options()) : at::cat(flat);
}

// Step III: the bucket's P and Q memory, kept across iterations with warm start (Q is reused),
// else allocated afresh.
QStart PowerSGDReduction::claim_p_and_q_memory(const CompressedMatrices& compressed) {
  const int32_t index = bucket_.index;
  QStart start = QStart::Reused;
  if (!hook_.options_.warm_start || hook_.p_memory_.find(index) == hook_.p_memory_.end()) {
    start = QStart::Random;
    hook_.p_memory_[index] = at::empty({compressed.total_ps}, bucket_.buffer.options());
    hook_.q_memory_[index] = at::empty({compressed.total_qs}, bucket_.buffer.options());
  }
  p_memory_ = hook_.p_memory_[index];
  q_memory_ = hook_.q_memory_[index];
  if (p_memory_.numel() != compressed.total_ps || q_memory_.numel() != compressed.total_qs) {
    throw std::runtime_error("PowerSGD on " + where(group_, bucket_) +
                             ": the bucket's P/Q memory (" + std::to_string(p_memory_.numel()) +
                             "/" + std::to_string(q_memory_.numel()) +
                             " elements) does not fit its gradients (" +
                             std::to_string(compressed.total_ps) + "/" +
                             std::to_string(compressed.total_qs) +
                             "); buckets changed after compression started. Start PowerSGD after "
                             "DDP rebuilds its buckets (start_powersgd_iter >= 2)");
  }
  return start;
}

// Each compressed matrix as a batch of one, with its P and Q as views of the memory, laid out
// shape group by shape group.
void PowerSGDReduction::view_ps_and_qs(const CompressedMatrices& compressed) {
  int64_t p_offset = 0;
  int64_t q_offset = 0;
  for (const CompressedMatrices::ShapeGroup& group : compressed.by_shape) {
    const int64_t n = group.n, m = group.m, rank = group.rank;
    for (const at::Tensor& matrix : group.matrices) {
      matrices_.push_back(matrix.unsqueeze(0));
      ps_.push_back(p_memory_.narrow(0, p_offset, n * rank).view({1, n, rank}));
      qs_.push_back(q_memory_.narrow(0, q_offset, m * rank).view({1, m, rank}));
      p_offset += n * rank;
      q_offset += m * rank;
    }
  }
}

// Q orthogonalized: last iteration's, or drawn from a normal distribution seeded like PyTorch.
void PowerSGDReduction::initialize_qs(QStart start) {
  const double epsilon = hook_.options_.orthogonalization_epsilon;
  if (start == QStart::Reused) {
    for (at::Tensor& q : qs_) powersgd::orthogonalize(q, epsilon);
    return;
  }
  // torch.manual_seed(state.rng.randint(1_000_000_000)) inside fork_rng: a fresh CPU
  // generator, drawn once per bucket even when nothing is compressed.
  const int64_t seed = hook_.rng_.randint(1'000'000'000);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  for (at::Tensor& q : qs_) {
    q.copy_(at::randn(q.sizes(), generator, bucket_.buffer.options().device(at::kCPU)));
    powersgd::orthogonalize(q, epsilon);
  }
}

void PowerSGDReduction::compute_ps() {
  for (size_t i = 0; i < matrices_.size(); ++i) at::bmm_out(ps_[i], matrices_[i], qs_[i]);
}

// The uncompressed tensors, then P (PyTorch issues P once the first is done; the order on the
// wire is the same). Collectives of 0 elements are skipped.
void PowerSGDReduction::allreduce_uncompressed_and_ps() {
  if (uncompressed_memory_.numel() > 0) {
    uncompressed_work_ = group_.all_reduce(uncompressed_memory_, comm::ReduceOp::Sum, bucket_.tag);
  }
  if (p_memory_.numel() > 0) {
    p_work_ = group_.all_reduce(p_memory_, comm::ReduceOp::Sum, bucket_.tag);
  }
}

// unpack_uncompressed_tensors_and_allreduce_ps: sum, then divide, written back through the views.
void PowerSGDReduction::unpack_uncompressed() {
  if (!uncompressed_work_) return;
  uncompressed_work_->wait();
  uncompressed_memory_.div_(group_.size());
  int64_t offset = 0;
  for (at::Tensor& tensor : uncompressed_tensors_) {
    tensor.copy_(uncompressed_memory_.narrow(0, offset, tensor.numel()).view_as(tensor));
    offset += tensor.numel();
  }
}

// compute_qs: orthogonalize the summed Ps, Q = M^T P, all-reduce Q.
void PowerSGDReduction::compute_qs() {
  if (p_work_) p_work_->wait();
  for (at::Tensor& p : ps_) powersgd::orthogonalize(p, hook_.options_.orthogonalization_epsilon);
  for (size_t i = 0; i < matrices_.size(); ++i) {
    at::bmm_out(qs_[i], matrices_[i].transpose(1, 2), ps_[i]);
  }
  // The second collective of this bucket, from wait() (Note [Hook collective order]).
  if (q_memory_.numel() > 0) {
    group_.all_reduce(q_memory_, comm::ReduceOp::Sum, bucket_.tag)->wait();
  }
}

// decompress: average Q, M = P Q^T written through the gradient views into the buffer.
void PowerSGDReduction::decompress() {
  q_memory_.div_(group_.size());
  for (size_t i = 0; i < matrices_.size(); ++i) {
    at::bmm_out(matrices_[i], ps_[i], qs_[i].transpose(1, 2));
  }
}

// The new local error (the input after error feedback minus the result), P and Q memory dropped
// without warm start, and the iteration counted.
void PowerSGDReduction::update_hook_state() {
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

// powerSGD_hook step by step; each step is a PowerSGDReduction method above.
std::unique_ptr<PendingReduction> PowerSGDHook::launch(comm::ProcessGroup& group,
                                                       GradBucket& bucket) {
  check_flat_buffer(group, bucket);
  std::unique_lock<std::mutex> lock(mutex_);
  if (iter_ < options_.start_powersgd_iter) {
    maybe_increase_iter(bucket);
    lock.unlock();
    return launch_vanilla_allreduce(group, bucket);
  }
  auto reduction = std::make_unique<PowerSGDReduction>(*this, group, bucket);
  reduction->add_error_feedback();
  const CompressedMatrices compressed = reduction->split_gradients();
  reduction->concatenate_uncompressed();
  const QStart q_start = reduction->claim_p_and_q_memory(compressed);
  reduction->view_ps_and_qs(compressed);
  reduction->initialize_qs(q_start);
  reduction->compute_ps();
  lock.unlock();
  reduction->allreduce_uncompressed_and_ps();
  return reduction;
}

std::unique_ptr<CommHook> make_powersgd_hook(const PowerSGDOptions& options) {
  return std::make_unique<PowerSGDHook>(options);
}

}  // namespace dpscope::ddp
