// The copies around FSDP2's collectives (fsdp_collectives.h; Note [Copy-in and copy-out]): the
// all-gather's copy-in and copy-out and the reduce-scatter's copy-in, each a loop of narrow copies
// where PyTorch calls a fused kernel (_foreach_copy_, split_with_sizes_copy, _chunk_cat).
#include "engine/fsdp2/fsdp_collectives.h"

#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>

#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"

namespace dpscope::fsdp2 {

ChunkLayout chunk_layout(const std::vector<int64_t>& chunk_numels, int world_size) {
  ChunkLayout layout;
  layout.chunk_numels = chunk_numels;
  layout.world_size = world_size;
  for (const int64_t numel : chunk_numels) {
    layout.offsets.push_back(layout.rank_numel);
    layout.rank_numel += numel;
  }
  return layout;
}

AllGatherBuffers foreach_all_gather_copy_in(const std::vector<at::Tensor>& padded_shards,
                                            const ChunkLayout& layout, int rank,
                                            c10::ScalarType dtype, c10::Device device) {
  c10::NoGradGuard no_grad;
  AllGatherBuffers buffers;
  {
    memory::CategoryScope full(memory::MemoryCategory::FullParameters);
    buffers.output = at::empty({layout.rank_numel * layout.world_size},
                               padded_shards.at(0).options().dtype(dtype).device(device).requires_grad(false));
    memory::own(buffers.output, memory::MemoryCategory::FullParameters);
  }
  buffers.input = buffers.output.narrow(0, layout.rank_numel * rank, layout.rank_numel);
  for (size_t i = 0; i < padded_shards.size(); ++i) {
    buffers.input.narrow(0, layout.offsets[i], layout.chunk_numels[i]).copy_(padded_shards[i]);
  }
  return buffers;
}

void foreach_all_gather_copy_out(const at::Tensor& output, const ChunkLayout& layout,
                                 const std::vector<at::Tensor>& param_outputs) {
  c10::NoGradGuard no_grad;
  const at::Tensor by_rank = output.view({layout.world_size, layout.rank_numel});
  for (size_t i = 0; i < param_outputs.size(); ++i) {
    param_outputs[i]
        .view({layout.world_size, layout.chunk_numels[i]})
        .copy_(by_rank.narrow(1, layout.offsets[i], layout.chunk_numels[i]));
  }
}

at::Tensor foreach_reduce_scatter_copy_in(const std::vector<at::Tensor>& grads,
                                          const std::vector<Dim0Chunks>& chunks,
                                          const ChunkLayout& layout, c10::ScalarType dtype) {
  c10::NoGradGuard no_grad;
  at::Tensor input;
  {
    memory::CategoryScope full_gradients(memory::MemoryCategory::FullGradients);
    input = at::empty({layout.rank_numel * layout.world_size},
                      grads.at(0).options().dtype(dtype).requires_grad(false));
    memory::own(input, memory::MemoryCategory::FullGradients);
  }
  const at::Tensor by_rank = input.view({layout.world_size, layout.rank_numel});
  for (size_t i = 0; i < grads.size(); ++i) {
    const at::Tensor flat = grads[i].reshape({-1});
    const int64_t row_numel = chunks[i].rows > 0 ? flat.numel() / chunks[i].rows : 0;
    for (int r = 0; r < layout.world_size; ++r) {
      at::Tensor slot = by_rank.select(0, r).narrow(0, layout.offsets[i], layout.chunk_numels[i]);
      const int64_t real = chunks[i].rows_of(r) * row_numel;
      if (real > 0) {
        slot.narrow(0, 0, real).copy_(flat.narrow(0, chunks[i].first_row(r) * row_numel, real));
      }
      if (real < layout.chunk_numels[i]) slot.narrow(0, real, layout.chunk_numels[i] - real).zero_();
    }
  }
  return input;
}

at::Tensor view_out_sharded_grad(const at::Tensor& output, const ChunkLayout& layout, size_t i,
                                 int64_t rows, int64_t row_numel) {
  return output.narrow(0, layout.offsets[i], rows * row_numel);
}

}  // namespace dpscope::fsdp2
