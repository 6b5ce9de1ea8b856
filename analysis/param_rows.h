// FSDP2's dim-0 row ranges: which rows of each parameter every rank keeps, worked out from the
// parameter's shape and its group's shard ranks in the trace. Behind `params[].rows` of
// `dpscope stats --json` and the text report's rows table (docs/trace-format.md, "FSDP2 rows").
#pragma once

#include <cstdint>
#include <vector>

#include "trace/records.h"

namespace dpscope::analysis {

// Note [Rows from the trace]
// An FSDP2 trace does not store each parameter's rows per rank: they follow from what it does
// store, as the engine computes them (Note [Dim-0 chunks] in engine/fsdp2/dim0_chunks.h, whose
// arithmetic dim0_row_ranges repeats: analysis links no engine code). A parameter's dim-0 size is
// the first entry of params.shape; the ranks it is sharded over are the rows of unit_shards of
// its unit (one per rank of its shard group). With c = ceil(rows / n) over n ranks, rank r keeps
// rows [min(r c, rows), min((r + 1) c, rows)): torch.chunk's chunks, the last ones shorter or
// empty. tests/fsdp2 hold the two to the same ranges on an uneven run.

// One rank's rows of a parameter: [begin, end), empty when begin == end.
struct RowRange {
  int64_t begin = 0, end = 0;
  bool operator==(const RowRange& o) const { return begin == o.begin && end == o.end; }
};

// `rows` split over `ranks` ranks with torch.chunk's semantics (Note [Rows from the trace]):
// one range per rank. Empty when ranks < 1. Pure.
std::vector<RowRange> dim0_row_ranges(int64_t rows, int32_t ranks);

// Each parameter's rows per rank, by position in `params` (Note [Rows from the trace]): the ranks
// of its unit in `shards`; empty for a parameter without a unit, with a 0-dim shape, or whose
// unit has no shards recorded. Pure.
std::vector<std::vector<RowRange>> param_row_ranges(const std::vector<trace::ParamInfo>& params,
                                                    const std::vector<trace::UnitShard>& shards);

}  // namespace dpscope::analysis
