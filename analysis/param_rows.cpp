// FSDP2's per-rank dim-0 row ranges of each parameter (param_rows.h), from the params table's
// shapes and the unit_shards table's ranks (Note [Rows from the trace]).
#include "analysis/param_rows.h"

#include <algorithm>
#include <map>

namespace dpscope::analysis {

std::vector<RowRange> dim0_row_ranges(int64_t rows, int32_t ranks) {
  std::vector<RowRange> out;
  if (ranks < 1) return out;
  const int64_t chunk = (rows + ranks - 1) / ranks;
  for (int32_t r = 0; r < ranks; ++r) {
    out.push_back({std::min(rows, chunk * r), std::min(rows, chunk * (r + 1))});
  }
  return out;
}

std::vector<std::vector<RowRange>> param_row_ranges(const std::vector<trace::ParamInfo>& params,
                                                    const std::vector<trace::UnitShard>& shards) {
  std::map<int32_t, int32_t> ranks_of_unit;
  for (const trace::UnitShard& s : shards) ++ranks_of_unit[s.unit];
  std::vector<std::vector<RowRange>> out(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const trace::ParamInfo& p = params[i];
    const auto found = ranks_of_unit.find(p.unit);
    if (p.shape.empty() || found == ranks_of_unit.end()) continue;
    out[i] = dim0_row_ranges(p.shape.front(), found->second);
  }
  return out;
}

}  // namespace dpscope::analysis
