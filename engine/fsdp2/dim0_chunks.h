// Dim-0 chunking, the arithmetic of FSDP2's Shard(0): which rows of a parameter each rank keeps,
// with torch.chunk(dim=0)'s semantics (every chunk ceil(rows / world) rows, the last ones shorter
// or empty), and the padded chunk the collectives move. Pure integers, no LibTorch; thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>

namespace dpscope::fsdp2 {

// Note [Dim-0 chunks]
// FSDP2 shards each parameter on its first dimension as torch.chunk(param, world, dim=0) would,
// with the chunks it does not return counted as empty (PyTorch's _chunk_with_empty): every rank's
// chunk is `padded_rows` = ceil(rows / world) rows long except that the chunks run out at `rows`,
// so the last ranks' chunks are shorter or empty. A 10-row weight on 4 ranks: 3, 3, 3 and 1 rows;
// a 3-row weight on 4 ranks: 1, 1, 1 and 0. What a rank keeps (the sharded parameter the
// optimizer steps on) has exactly its rows; what it hands the all-gather, and what the
// reduce-scatter hands it, is its chunk padded with zeros to `padded_rows` rows, so every rank
// moves the same number of elements and rank r's chunk lands at rows [r * padded_rows, ...) of
// the padded parameter — whose first `rows` rows are the parameter. Padding exists only in the
// collectives' buffers and in each rank's padded shard storage, never in the parameter or its
// gradient (contrast FSDP1's flat parameter, padded once at its end: docs/fsdp2.md).
struct Dim0Chunks {
  int64_t rows = 0;        // the parameter's size on dim 0
  int world_size = 1;
  int64_t padded_rows = 0;  // ceil(rows / world_size): every rank's chunk in the collectives

  Dim0Chunks() = default;
  Dim0Chunks(int64_t rows_, int world_size_)
      : rows(rows_), world_size(world_size_),
        padded_rows(world_size_ > 0 ? (rows_ + world_size_ - 1) / world_size_ : 0) {}

  // The first row of `rank`'s chunk (rows when the chunk is empty).
  int64_t first_row(int rank) const { return std::min(rows, padded_rows * rank); }
  // How many real rows `rank` keeps: padded_rows, fewer for the last chunk, 0 past the end.
  int64_t rows_of(int rank) const {
    return std::clamp<int64_t>(rows - padded_rows * rank, 0, padded_rows);
  }
  // Padding rows in `rank`'s chunk (what the collectives carry beyond its real rows).
  int64_t padding_rows_of(int rank) const { return padded_rows - rows_of(rank); }
};

}  // namespace dpscope::fsdp2
