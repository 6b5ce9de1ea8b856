// The run-wide half of compute_stats (stats.cpp holds the per-rank pass): the run's meta values
// and layout, the collectives matched across the settled ranks, each rank's collectives split at
// the last arrival, and the process groups' bus bandwidth. Internal to analysis/.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/stats.h"
#include "trace/reader.h"

namespace dpscope::analysis::detail {

// ---- The run's meta and layout, read before the pass ----------------------------------------

// A meta value, "" when absent.
std::string meta_or_empty(const std::map<std::string, std::string>& meta, std::string_view key);
// A meta count such as world_size; nullopt when absent or not a non-negative 32-bit number.
std::optional<int32_t> parse_count(const std::string& text);
// The run's strategy, backend, model, emulated link, clock alignment and memory accounting
// from its meta values, into `stats`.
void read_run_meta(const std::map<std::string, std::string>& meta, RunStats& stats);
// The model's parameters, DDP's buckets and FSDP's units, each unit with its parameters; FSDP2's
// rows per rank (read_run_meta has set the strategy).
void read_layout(trace::Reader& reader, RunStats& stats);

// ---- Across the ranks, once every rank is settled ----------------------------------------------

// A matched collective's last rank's begin and how many ranks ran it.
struct MatchedArrival {
  std::pair<int32_t, int64_t> key;  // (grp, seq)
  int64_t last_begin_ns = 0;
  int32_t ranks = 0;
};
// When the last rank arrived at each collective matched on every rank, by key (a sorted
// vector: the matches come in key order, and a map of a million nodes would triple its size).
using LastArrivals = std::vector<MatchedArrival>;

// Matches every collective across the ranks (stats.matches, mismatches, largest skew) and sums
// each process group's traffic (stats.groups). The ranks' collectives are lent to the matching
// and given back, not copied.
LastArrivals match_across_ranks(RunStats& stats,
                                const std::map<std::pair<int32_t, int32_t>, std::string>& lane_names);
// Splits the rank's matched collectives into waiting and transfer (Note [Waiting and transfer]),
// over the run and per iteration.
void split_at_arrivals(const LastArrivals& last_begin, RankStats& out);
// Each group's median busbw over every rank's matched collectives of kBusbwLeastBytes and more
// (Note [Bus bandwidth]).
void add_bus_bandwidth(RunStats& stats);

}  // namespace dpscope::analysis::detail
