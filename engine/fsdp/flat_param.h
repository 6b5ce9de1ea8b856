// FlatParameter: one FSDP unit's parameters flattened into one padded vector, this rank's shard of
// it (what the optimizer steps on), and the full parameter that is gathered on demand, whose
// storage the module's parameters view. Owns the memory of both; FullyShardedDataParallel drives
// the collectives.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/csrc/autograd/function.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/fsdp/wrap_policy.h"

namespace dpscope::fsdp {

// Note [Full parameter storage]
// A unit's module parameters are views of one full flat tensor, `full()`, fixed at construction:
// parameter i is full()[offset_i : offset_i + numel_i] in its own shape. Freeing the full
// parameter empties that tensor's storage (zero bytes), and gathering allocates the same storage
// again and all-gathers into it — the storage object never changes, only the memory behind it
// (fairscale's `full_param_padded.storage().resize_()`). So every tensor that views it, including
// those autograd saved for backward in forward, sees the gathered values again once the unit is
// gathered for backward, and nothing keeps freed memory alive. A parameter may be read only while
// its unit is full: between forward and backward under FULL_SHARD it is gathered again by the
// pre-backward hook (See Note [FSDP hooks]).
//
// With NO_SHARD and full precision there is nothing to gather: full() shares the shard's storage
// and is never freed.

// How a unit lays out and places its flat parameter.
struct FlatParamConfig {
  int rank = 0;
  int world_size = 1;
  bool sharded = true;  // false: NO_SHARD (every rank holds everything; no padding)
  c10::ScalarType compute_dtype = c10::ScalarType::Float;  // the full parameter's dtype
  c10::Device compute_device = c10::kCPU;
  c10::Device shard_device = c10::kCPU;  // kCPU with cpu_offload
};

// Thread-safety: used from the training thread and autograd's (one at a time: CPU backward runs on
// the thread that calls backward()).
class FlatParameter {
 public:
  // Flattens `plan`'s parameters (which must hold rank 0's values on every rank already), keeps
  // this rank's shard, points the parameters at views of the full parameter and frees it (unless
  // it aliases the shard). Throws FsdpError for parameters of mixed dtypes or devices.
  FlatParameter(const UnitPlan& plan, const FlatParamConfig& config);
  ~FlatParameter();
  FlatParameter(const FlatParameter&) = delete;
  FlatParameter& operator=(const FlatParameter&) = delete;

  // ---- Layout.
  int64_t numel() const { return numel_; }
  int64_t padded_numel() const { return padded_numel_; }
  int64_t shard_numel() const { return shard_numel_; }
  // This rank's shard is elements [shard_begin, shard_begin + shard_numel) of the padded vector.
  int64_t shard_begin() const { return shard_begin_; }
  // Real (not padding) elements in `rank`'s shard.
  int64_t real_numel_of(int rank) const;
  const std::vector<at::Tensor>& params() const { return params_; }
  const std::vector<std::string>& param_names() const { return param_names_; }
  const std::vector<int64_t>& offsets() const { return offsets_; }
  const FlatParamConfig& config() const { return config_; }
  bool empty() const { return numel_ == 0; }

  // ---- Shard (the optimizer's parameter): float32, [shard_numel], on the shard device, a leaf
  // that requires grad. Its .grad is the reduced gradient of this rank's elements.
  const at::Tensor& shard() const { return shard_; }

  // ---- Full parameter: [padded_numel], compute dtype, on the compute device. A leaf requiring
  // grad whose AccumulateGrad receives the unit's whole gradient once per backward (the
  // post-backward hook is registered there). See Note [Full parameter storage].
  const at::Tensor& full() const { return full_; }
  bool full_aliases_shard() const { return full_aliases_shard_; }
  bool is_materialized() const;
  // Allocates the full parameter's storage (contents undefined) if it is empty; counted as
  // FullParameters.
  void materialize();
  // Frees the full parameter's storage (a no-op when it aliases the shard).
  void free_full();
  // The shard in the compute dtype on the compute device, the all-gather's input: the shard
  // itself without mixed precision or offload, else a copy (FullParameters).
  at::Tensor shard_for_gather() const;
  // Copies the shard into the full parameter without communication (world size 1 with mixed
  // precision: the full parameter is just a low-precision copy).
  void fill_full_from_shard();

  // ---- Autograd. Makes the module's parameters interior variables whose gradients meet in one
  // node that writes the unit's full flat gradient into full()'s AccumulateGrad; call before the
  // unit's forward when grad is enabled. See Note [FSDP hooks].
  void attach_gradient_node();
  // full()'s gradient accumulator (kept alive here; the post-backward hook sits on it).
  const std::shared_ptr<torch::autograd::Node>& grad_accumulator() const { return accumulator_; }

 private:
  FlatParamConfig config_;
  std::vector<at::Tensor> params_;
  std::vector<std::string> param_names_;
  std::vector<int64_t> offsets_;
  int64_t numel_ = 0;
  int64_t padded_numel_ = 0;
  int64_t shard_numel_ = 0;
  int64_t shard_begin_ = 0;
  at::Tensor shard_;
  at::Tensor full_;
  bool full_aliases_shard_ = false;
  std::shared_ptr<torch::autograd::Node> accumulator_;
};

}  // namespace dpscope::fsdp
