// FsdpParam: one parameter under FSDP2 (PyTorch's FSDPParam) — its dim-0 chunk on this rank (the
// sharded parameter the optimizer steps on, inside a zero-padded shard), and the unsharded
// parameter, the module's own tensor, whose memory exists only while its group is unsharded.
// Owns the memory of both; FsdpParamGroup drives the collectives.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/function.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/fsdp2/dim0_chunks.h"
#include "engine/fsdp2/fsdp2_options.h"
#include "engine/fsdp2/offload_policy.h"

namespace dpscope::fsdp2 {

// Note [Unsharded parameter storage]
// The module keeps its own parameter tensors: each is made, once, a view of the first numel
// elements of its FsdpParam's all-gather output, a flat tensor of world x padded-chunk elements
// (rank r's padded chunk at r x padded-chunk), in the parameter's shape. Resharding frees that
// output's storage (zero bytes) and unsharding allocates it again and copies the gathered rows in
// (PyTorch's alloc_storage / free_storage on all_gather_outputs) — the storage object never
// changes, only the memory behind it, so what autograd saved in forward sees the values again in
// backward, and the copies go through the output tensor, whose version counter is not the
// parameter's (PyTorch's _unsafe_preserve_version_counter). A parameter may be read only while
// its group is unsharded; the module's parameters stay autograd leaves, so autograd accumulates
// each one's whole gradient in its .grad (one AccumulateGrad a parameter, however often it is
// used) and FSDP2 takes it from there (See Note [FSDP2 hooks] in fully_shard.h).

// The dtype a precision computes in: Float, Half or BFloat16.
c10::ScalarType scalar_type_of(ComputePrecision precision);

// Thread-safety: used from the training thread and autograd's (one at a time: CPU backward runs
// on the thread that calls backward()).
class FsdpParam {
 public:
  // Keeps this rank's rows of `param` (its current values) in a zero-padded float32 shard (on the
  // host with `offload`'s Cpu: Note [FSDP2 CPU offload]), points the parameter at its all-gather
  // output, on the parameter's device in `compute_dtype` (mixed precision: the parameter's dtype
  // changes), and frees that. Throws Fsdp2Error for a parameter FSDP2 cannot shard (0
  // dimensions, not contiguous, not float32, a view), naming it.
  FsdpParam(at::Tensor param, std::string name, int rank, int world_size,
            c10::ScalarType compute_dtype = c10::ScalarType::Float,
            OffloadPolicy offload = OffloadPolicy::none());
  FsdpParam(const FsdpParam&) = delete;
  FsdpParam& operator=(const FsdpParam&) = delete;

  // ---- Layout (See Note [Dim-0 chunks]).
  const std::string& name() const { return name_; }
  const Dim0Chunks& chunks() const { return chunks_; }
  int rank() const { return rank_; }
  int64_t numel() const { return param_.numel(); }
  // Elements of one row: the product of the sizes after dim 0.
  int64_t row_numel() const { return row_numel_; }
  // A rank's padded chunk, in elements: what it gives the all-gather and gets from the
  // reduce-scatter.
  int64_t padded_chunk_numel() const { return chunks_.padded_rows * row_numel_; }

  // ---- Sharded: this rank's rows, [rows_of(rank), ...], float32, a leaf requiring grad (the
  // optimizer's parameter); a view of the first rows of padded_shard(). Its .grad is the averaged
  // gradient of those rows once backward has reduced it.
  const at::Tensor& sharded_param() const { return sharded_; }
  // [padded_chunk_numel()]: the sharded parameter's rows, then zeros. The all-gather's input
  // (copied to the compute device first when offloaded).
  const at::Tensor& padded_shard() const { return padded_shard_; }
  // Adds `grad` (this rank's reduced rows, flat: rows_of(rank) x row_numel elements, e.g. a view
  // into a reduce-scatter's output) to the sharded parameter's .grad, as its own tensor on the
  // sharded parameter's device (GradientShards; the host when offloaded).
  void accumulate_sharded_grad(const at::Tensor& grad);

  // ---- Unsharded: the module's parameter (See Note [Unsharded parameter storage]).
  const at::Tensor& unsharded_param() const { return param_; }
  // [world x padded_chunk_numel()] in the compute dtype: the gathered padded chunks, rank after
  // rank.
  const at::Tensor& all_gather_output() const { return all_gather_output_; }
  bool is_allocated() const;
  // Allocates the all-gather output's storage (contents undefined), counted as FullParameters.
  void alloc_unsharded();
  // Frees it; the parameter must not be read until alloc_unsharded and a copy-out.
  void free_unsharded();

  // ---- Post-forward shard (reshard_after_forward N; See Note [Resharding to a smaller group]
  // in fsdp_param_group.h): slice `group_rank` of N equal slices of the all-gather output, copied
  // out while unsharded (FullParameters), then the all-gather's input within the N ranks.
  const at::Tensor& post_forward_shard() const { return post_forward_shard_; }
  void keep_post_forward_shard(int group_size, int group_rank);
  void free_post_forward_shard() { post_forward_shard_ = at::Tensor(); }

  // ---- Autograd. The parameter's gradient accumulator, kept alive here; FsdpParamGroup hangs
  // its post-backward count on it.
  const std::shared_ptr<torch::autograd::Node>& grad_accumulator() const { return accumulator_; }
  uintptr_t post_hook_key = 0;

 private:
  std::string name_;
  int rank_ = 0;
  Dim0Chunks chunks_;
  int64_t row_numel_ = 1;
  at::Tensor param_;
  at::Tensor padded_shard_;
  at::Tensor sharded_;
  at::Tensor all_gather_output_;
  at::Tensor post_forward_shard_;
  std::shared_ptr<torch::autograd::Node> accumulator_;
};

}  // namespace dpscope::fsdp2
