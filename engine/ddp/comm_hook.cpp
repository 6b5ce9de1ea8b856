// The simple DDP communication hooks — all-reduce, fp16 and bf16 compression — as PyTorch 1.13's
// torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py defines them, and
// make_comm_hook(), which builds the hook a CommHookKind names (`dpscope train --comm-hook`).
#include "engine/ddp/comm_hook.h"

#include <ATen/core/Tensor.h>

#include <stdexcept>
#include <string>
#include <utility>


namespace dpscope::ddp {

using trace::CommHookKind;
namespace {

// One collective in flight; wait() waits for it, then runs `finish` (the "decompress" callback
// of PyTorch's future chain), on the finalizing thread.
class SingleReduction final : public PendingReduction {
 public:
  SingleReduction(comm::WorkHandle work, at::Tensor result, at::Tensor destination)
      : work_(std::move(work)), result_(std::move(result)), destination_(std::move(destination)) {}

  void wait() override {
    work_->wait();
    // fp16/bf16: copy the reduced, compressed copy back into the bucket (decompress in place).
    if (destination_.defined() && !destination_.is_same(result_)) destination_.copy_(result_);
  }

 private:
  comm::WorkHandle work_;
  at::Tensor result_;
  at::Tensor destination_;
};

void check_bucket(const comm::ProcessGroup& group, const GradBucket& bucket,
                  std::string_view hook) {
  if (!bucket.buffer.defined() || bucket.buffer.dim() != 1 || !bucket.buffer.is_contiguous()) {
    throw std::invalid_argument(
        "comm hook '" + std::string(hook) + "' on rank " + std::to_string(group.rank()) +
        ", bucket " + std::to_string(bucket.index) +
        ": the bucket's buffer must be a defined, contiguous 1-D tensor (the Reducer's flat "
        "bucket); pass the flat buffer, not a gradient view");
  }
}

// PyTorch's _allreduce_fut: divide first (to avoid overflow, especially in fp16), then sum.
class AllReduceHook final : public CommHook {
 public:
  std::string_view name() const override { return to_string(CommHookKind::AllReduce); }
  std::unique_ptr<PendingReduction> launch(comm::ProcessGroup& group,
                                           GradBucket& bucket) override {
    check_bucket(group, bucket, name());
    bucket.buffer.div_(group.size());
    comm::WorkHandle work = group.all_reduce(bucket.buffer, comm::ReduceOp::Sum, bucket.tag);
    return std::make_unique<SingleReduction>(std::move(work), bucket.buffer, at::Tensor());
  }
};

// fp16_compress_hook / bf16_compress_hook: buffer.to(low).div_(world_size), all-reduce the
// compressed copy, then buffer.copy_(result).
class CompressHook final : public CommHook {
 public:
  CompressHook(c10::ScalarType type, std::string_view name) : type_(type), name_(name) {}
  std::string_view name() const override { return name_; }
  std::unique_ptr<PendingReduction> launch(comm::ProcessGroup& group,
                                           GradBucket& bucket) override {
    check_bucket(group, bucket, name());
    // Like PyTorch, .to() returns the buffer itself when it already has the low dtype.
    at::Tensor compressed = bucket.buffer.to(type_).div_(group.size());
    comm::WorkHandle work = group.all_reduce(compressed, comm::ReduceOp::Sum, bucket.tag);
    return std::make_unique<SingleReduction>(std::move(work), compressed, bucket.buffer);
  }

 private:
  c10::ScalarType type_;
  std::string_view name_;
};

}  // namespace

std::unique_ptr<CommHook> make_allreduce_hook() { return std::make_unique<AllReduceHook>(); }

std::unique_ptr<CommHook> make_fp16_compress_hook() {
  return std::make_unique<CompressHook>(c10::ScalarType::Half, to_string(CommHookKind::Fp16));
}

std::unique_ptr<CommHook> make_bf16_compress_hook() {
  return std::make_unique<CompressHook>(c10::ScalarType::BFloat16, to_string(CommHookKind::Bf16));
}

std::unique_ptr<CommHook> make_comm_hook(CommHookKind kind) {
  switch (kind) {
    case CommHookKind::None: return nullptr;
    case CommHookKind::AllReduce: return make_allreduce_hook();
    case CommHookKind::Fp16: return make_fp16_compress_hook();
    case CommHookKind::Bf16: return make_bf16_compress_hook();
    case CommHookKind::PowerSgd: {
      PowerSGDOptions options;
      options.matrix_approximation_rank = 1;
      options.start_powersgd_iter = 2;
      return make_powersgd_hook(options);
    }
  }
  return nullptr;
}

}  // namespace dpscope::ddp
