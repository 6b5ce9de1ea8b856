// Tutorial 20's pictures of what each rank holds (layout.h): FSDP1's flat ranges in the
// coordinates of the parameters they cut, FSDP2's rows, one row per character side by side, and
// the padding of each.
#include "tutorials/20_fsdp1_vs_fsdp2/layout.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "analysis/param_rows.h"
#include "engine/fsdp2/dim0_chunks.h"

namespace dpscope::tutorials {

namespace {

int64_t rows_of(const trace::ParamInfo& param) { return param.shape.empty() ? 1 : param.shape[0]; }
int64_t row_numel_of(const trace::ParamInfo& param) {
  const int64_t rows = rows_of(param);
  return rows > 0 ? param.numel / rows : 0;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? " x " : "") + std::to_string(shape[i]);
  return "[" + text + "]";
}

// Elements [begin, end) of `param` in its own coordinates, as rows: a part-row at the start, whole
// rows, a part-row at the end ("rows 0-1, row 2 cols 0-34").
std::string describe_elements(const trace::ParamInfo& param, int64_t begin, int64_t end) {
  const int64_t width = row_numel_of(param);
  if (param.shape.size() < 2) {
    return param.name + " [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
  }
  std::vector<std::string> pieces;
  int64_t at = begin;
  if (at % width != 0) {
    const int64_t row = at / width;
    const int64_t stop = std::min(end, (row + 1) * width);
    pieces.push_back("row " + std::to_string(row) + " cols " + std::to_string(at % width) + "-" +
                     std::to_string((stop - 1) % width));
    at = stop;
  }
  const int64_t whole_end = end / width * width;
  if (at < whole_end) {
    const int64_t first = at / width, last = whole_end / width - 1;
    pieces.push_back(first == last ? "row " + std::to_string(first)
                                   : "rows " + std::to_string(first) + "-" + std::to_string(last));
    at = whole_end;
  }
  if (at < end) {
    pieces.push_back("row " + std::to_string(at / width) + " cols 0-" + std::to_string(end - at - 1));
  }
  std::string text = param.name + " ";
  for (size_t i = 0; i < pieces.size(); ++i) text += (i ? ", " : "") + pieces[i];
  return text;
}

std::vector<trace::ParamInfo> params_of_unit(const std::vector<trace::ParamInfo>& params, int32_t unit) {
  std::vector<trace::ParamInfo> mine;
  for (const trace::ParamInfo& p : params) {
    if (p.unit == unit) mine.push_back(p);
  }
  std::sort(mine.begin(), mine.end(),
            [](const trace::ParamInfo& a, const trace::ParamInfo& b) { return a.unit_offset < b.unit_offset; });
  return mine;
}

// The ranks holding any element of rows [first, last] of `param` under FSDP1.
std::set<int> fsdp1_owners(const trace::ParamInfo& param, int64_t first, int64_t last,
                           const std::vector<trace::UnitShard>& shards) {
  const int64_t width = row_numel_of(param);
  const int64_t begin = param.unit_offset + first * width, end = param.unit_offset + (last + 1) * width;
  std::set<int> owners;
  for (const trace::UnitShard& s : shards) {
    if (s.unit == param.unit && s.shard_begin < end && begin < s.shard_end) owners.insert(s.rank);
  }
  return owners;
}

}  // namespace

void print_fsdp1_holdings(trace::Reader& fsdp1, int world_size) {
  const std::vector<trace::ParamInfo> params = fsdp1.params();
  const std::vector<trace::UnitShard> shards = fsdp1.unit_shards();
  std::printf("\nFSDP1 — each unit's parameters are flattened into one flat parameter, padded to a multiple "
              "of %d,\nand rank r keeps the elements [r * shard, (r + 1) * shard): a range that cuts "
              "through rows.\n", world_size);
  for (const trace::UnitInfo& unit : fsdp1.units()) {
    if (unit.numel == 0) continue;
    std::printf("  unit %s: %lld elements, padded %lld, shards of %lld\n", unit.name.c_str(),
                static_cast<long long>(unit.numel), static_cast<long long>(unit.padded_numel),
                static_cast<long long>(unit.shard_numel));
    for (const trace::UnitShard& s : shards) {
      if (s.unit != unit.index) continue;
      std::string held;
      for (const trace::ParamInfo& p : params_of_unit(params, unit.index)) {
        const int64_t begin = std::max(s.shard_begin, p.unit_offset) - p.unit_offset;
        const int64_t end = std::min(s.shard_end, p.unit_offset + p.numel) - p.unit_offset;
        if (begin < end) held += (held.empty() ? "" : "; ") + describe_elements(p, begin, end);
      }
      const int64_t padding = (s.shard_end - s.shard_begin) - s.real_numel;
      if (padding > 0) held += "; " + std::to_string(padding) + " padding";
      std::printf("    rank %d [%6lld, %6lld): %s\n", s.rank, static_cast<long long>(s.shard_begin),
                  static_cast<long long>(s.shard_end), held.c_str());
    }
  }
}

void print_fsdp2_holdings(trace::Reader& fsdp2, int world_size) {
  const std::vector<trace::ParamInfo> params = fsdp2.params();
  // What `dpscope stats` prints as each parameter's rows (Note [Rows from the trace]).
  const std::vector<std::vector<analysis::RowRange>> rows = analysis::param_row_ranges(params, fsdp2.unit_shards());
  std::printf("\nFSDP2 — every parameter is chunked on dim 0 (torch.chunk): rank r keeps whole rows,\n"
              "ceil(rows / %d) of them, the last ranks fewer or none.\n", world_size);
  for (const trace::UnitInfo& unit : fsdp2.units()) {
    if (unit.numel == 0) continue;
    std::printf("  group %s:\n", unit.name.c_str());
    for (int rank = 0; rank < world_size; ++rank) {
      std::string held;
      for (size_t i = 0; i < params.size(); ++i) {
        if (params[i].unit != unit.index || static_cast<size_t>(rank) >= rows[i].size()) continue;
        const analysis::RowRange& range = rows[i][static_cast<size_t>(rank)];
        held += (held.empty() ? "" : "; ") + params[i].name + " rows [" + std::to_string(range.begin) +
                ", " + std::to_string(range.end) + ")";
      }
      std::printf("    rank %d: %s\n", rank, held.c_str());
    }
  }
}

void draw_rows_side_by_side(trace::Reader& fsdp1, int world_size) {
  constexpr int64_t kMaxChars = 40;
  const std::vector<trace::ParamInfo> params = fsdp1.params();
  const std::vector<trace::UnitShard> shards = fsdp1.unit_shards();
  std::printf("\nOne character per row: the rank that holds it ('+': the row is cut between two ranks).\n");
  std::printf("  %-22s %-*s  %s\n", "parameter", static_cast<int>(kMaxChars), "FSDP1 (flat ranges)",
              "FSDP2 (dim-0 rows)");
  for (const trace::ParamInfo& p : params) {
    if (p.unit == trace::kNone) continue;
    const int64_t rows = rows_of(p);
    const int64_t per_char = (rows + kMaxChars - 1) / kMaxChars;
    const fsdp2::Dim0Chunks chunks(rows, world_size);
    std::string flat, dim0;
    for (int64_t first = 0; first < rows; first += per_char) {
      const int64_t last = std::min(rows, first + per_char) - 1;
      const std::set<int> owners = fsdp1_owners(p, first, last, shards);
      flat += owners.size() == 1 ? static_cast<char>('0' + *owners.begin()) : '+';
      const int64_t first_owner = chunks.padded_rows > 0 ? first / chunks.padded_rows : 0;
      const int64_t last_owner = chunks.padded_rows > 0 ? last / chunks.padded_rows : 0;
      dim0 += first_owner == last_owner ? static_cast<char>('0' + first_owner) : '+';
    }
    const std::string label = p.name + " " + shape_text(p.shape);
    std::printf("  %-22s %-*s  %s%s\n", label.c_str(), static_cast<int>(kMaxChars), flat.c_str(),
                dim0.c_str(), per_char > 1 ? ("  (" + std::to_string(per_char) + " rows a character)").c_str() : "");
  }
}

void print_padding(trace::Reader& fsdp1, int world_size) {
  int64_t flat_padding = 0, dim0_padding = 0;
  for (const trace::UnitInfo& unit : fsdp1.units()) flat_padding += unit.padded_numel - unit.numel;
  for (const trace::ParamInfo& p : fsdp1.params()) {
    const fsdp2::Dim0Chunks chunks(rows_of(p), world_size);
    dim0_padding += (chunks.padded_rows * world_size - chunks.rows) * row_numel_of(p);
  }
  std::printf("\nPadding, so that every rank moves as many elements:\n"
              "  FSDP1: %lld elements, at the end of each flat parameter — kept in the last rank's shard\n"
              "         and carried by every all-gather and reduce-scatter of the unit.\n"
              "  FSDP2: %lld elements, whole rows added to each parameter's short chunks — only in the\n"
              "         collectives' buffers and each rank's padded shard; the parameters never see them.\n",
              static_cast<long long>(flat_padding), static_cast<long long>(dim0_padding));
}

}  // namespace dpscope::tutorials
