// FSDP2's copies around its two collectives, as PyTorch's _fsdp_collectives.py writes them: the
// all-gather's copy-in of every parameter's padded chunk into one buffer and its copy-out into the
// parameters' own all-gather outputs, and the reduce-scatter's copy-in of the gradients in
// per-rank chunk order. Functions of tensors only (no group, no trace); thread-safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "engine/fsdp2/dim0_chunks.h"

namespace dpscope::fsdp2 {

// Note [Copy-in and copy-out]
// A group (one fully_shard call) moves all its parameters in one collective each way, through a
// flat buffer of world x I elements, I the sum of its parameters' padded chunks:
//
//   buffer = [ rank 0: p0 chunk | p1 chunk | ... ][ rank 1: p0 chunk | p1 chunk | ... ] ...
//
// parameter i's padded chunk at offset o_i = sum of the chunks before it, in every rank's part.
//  - all-gather: the copy-in writes this rank's padded chunks into its own part (the all-gather's
//    input is that part of its output, in place), the all-gather fills the other parts, and the
//    copy-out copies column block [o_i, o_i + chunk_i) of every rank's part, rank after rank,
//    into parameter i's all-gather output — whose first numel elements are the parameter
//    (PyTorch's foreach_all_gather, foreach_all_gather_copy_out: split_with_sizes_copy on dim 1).
//  - reduce-scatter: the copy-in writes, for rank r and parameter i, the rows of i's gradient
//    that are rank r's chunk (See Note [Dim-0 chunks]), zero-padded to chunk_i, at r's part and
//    o_i (PyTorch's foreach_reduce_scatter_copy_in: torch._chunk_cat). After the reduce-scatter
//    this rank's output is its part, [I], and its rows of parameter i's gradient are
//    output[o_i, o_i + rows x row_numel) (foreach_reduce's view-out).
// Both collectives therefore move the same I elements a rank; the padding is zeros, and only the
// buffers hold it.

// Where each parameter's padded chunk sits in a rank's part of the buffer.
struct ChunkLayout {
  std::vector<int64_t> chunk_numels;  // per parameter: its padded chunk, in elements
  std::vector<int64_t> offsets;       // per parameter: o_i
  int64_t rank_numel = 0;             // I: a rank's part
  int world_size = 1;
};
// `chunk_numels` in the group's order; `world_size` ranks.
ChunkLayout chunk_layout(const std::vector<int64_t>& chunk_numels, int world_size);

// The all-gather's buffers: `output` [world x I] and `input`, this rank's part of it.
struct AllGatherBuffers {
  at::Tensor output;
  at::Tensor input;
};
// Allocates the buffer (in `dtype`, on `device`, the compute device, counted as FullParameters)
// and copies `padded_shards` (each [chunk_numels[i]], in order; cast to `dtype` under mixed
// precision, copied from the host when offloaded: Note [FSDP2 CPU offload]) into `rank`'s part.
AllGatherBuffers foreach_all_gather_copy_in(const std::vector<at::Tensor>& padded_shards,
                                            const ChunkLayout& layout, int rank,
                                            c10::ScalarType dtype, c10::Device device);
// Copies every rank's chunk of parameter i out of the gathered `output` into `param_outputs[i]`
// (each [world x chunk_numels[i]], allocated).
void foreach_all_gather_copy_out(const at::Tensor& output, const ChunkLayout& layout,
                                 const std::vector<at::Tensor>& param_outputs);

// A new [world x I] buffer (FullGradients, in `dtype`: the reduce dtype) holding the gradients
// `grads` (each in its parameter's shape, dim 0 chunked by `chunks[i]`) in per-rank chunk order,
// the padding zeroed.
at::Tensor foreach_reduce_scatter_copy_in(const std::vector<at::Tensor>& grads,
                                          const std::vector<Dim0Chunks>& chunks,
                                          const ChunkLayout& layout, c10::ScalarType dtype);
// This rank's rows of parameter i's gradient in a reduce-scatter's `output` ([I]): a view,
// rows_of(rank) x row_numel elements long.
at::Tensor view_out_sharded_grad(const at::Tensor& output, const ChunkLayout& layout, size_t i,
                                 int64_t rows, int64_t row_numel);

}  // namespace dpscope::fsdp2
