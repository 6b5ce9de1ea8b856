// The run-wide half of compute_stats (analysis/stats_run.h): the run's meta and layout, the
// collectives matched across ranks and split at the last arrival, bus bandwidth; and the
// per-step summaries stats.h offers of a settled rank.
#include "analysis/stats_run.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "analysis/bandwidth.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {
namespace {

// A meta number such as link_gbps; 0 when absent, not a number, or not positive.
double parse_positive(const std::string& text) {
  if (text.empty()) return 0;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0' || !(value > 0) || value > 1e12) return 0;
  return value;
}

}  // namespace

namespace detail {

std::optional<int32_t> parse_count(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || value < 0 || value > INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(value);
}

std::string meta_or_empty(const std::map<std::string, std::string>& meta, std::string_view key) {
  const auto it = meta.find(std::string(key));
  return it == meta.end() ? std::string() : it->second;
}

void read_run_meta(const std::map<std::string, std::string>& meta, RunStats& stats) {
  stats.strategy_recorded = meta_or_empty(meta, trace::meta_key::kStrategy);
  stats.strategy = trace::parse_strategy(stats.strategy_recorded);
  stats.backend = meta_or_empty(meta, trace::meta_key::kBackend);
  stats.model = meta_or_empty(meta, trace::meta_key::kModel);
  stats.link_gbps = parse_positive(meta_or_empty(meta, trace::meta_key::kLinkGbps));
  stats.link_latency_us = parse_positive(meta_or_empty(meta, trace::meta_key::kLinkLatencyUs));
  // Absent: a run of dpscope's own (rendezvous), or one imported before the import aligned ranks.
  stats.alignment = recorded_alignment(meta_or_empty(meta, trace::meta_key::kClockAlignment),
                                       !meta_or_empty(meta, trace::meta_key::kImportedFrom).empty());
  stats.alignment_note = meta_or_empty(meta, trace::meta_key::kClockAlignmentNote);
  stats.memory_accounting =
      trace::parse_mode(trace::kMemoryAccountings, meta_or_empty(meta, trace::meta_key::kMemoryAccounting))
          .value_or(trace::MemoryAccounting::Tracking);
  stats.imported_from = meta_or_empty(meta, trace::meta_key::kImportedFrom);
}

void read_layout(trace::Reader& reader, RunStats& stats) {
  stats.params = reader.params();
  stats.buckets = reader.buckets();
  for (trace::UnitInfo& unit : reader.units()) {
    UnitStats u{std::move(unit), {}};
    for (const trace::ParamInfo& p : stats.params) {
      if (p.unit == u.unit.index) u.params.push_back(p.index);
    }
    stats.units.push_back(std::move(u));
  }
  if (stats.strategy == trace::Strategy::Fsdp2) stats.param_rows = param_row_ranges(stats.params, reader.unit_shards());
}

LastArrivals match_across_ranks(RunStats& stats,
                                const std::map<std::pair<int32_t, int32_t>, std::string>& lane_names) {
  std::vector<int32_t> rank_numbers;
  std::vector<std::vector<CollectiveStats>> by_rank;
  // Lent to the matching and given back, not copied: a 10 M-event trace has a million of them.
  for (RankStats& r : stats.ranks) {
    rank_numbers.push_back(r.rank);
    by_rank.push_back(std::move(r.collectives));
  }
  stats.matches = match_collectives(rank_numbers, by_rank, static_cast<int32_t>(stats.ranks.size()));
  stats.groups = group_traffic(rank_numbers, by_rank, lane_names, std::max(stats.iterations, 0));
  for (size_t r = 0; r < stats.ranks.size(); ++r) stats.ranks[r].collectives = std::move(by_rank[r]);
  LastArrivals last_begin;
  for (const CollectiveMatch& m : stats.matches) {
    stats.mismatches += m.mismatch ? 1 : 0;
    stats.max_skew_ns = std::max(stats.max_skew_ns, m.skew_ns);
    if (!m.mismatch) last_begin.push_back({{m.grp, m.seq}, m.last_begin_ns, static_cast<int32_t>(m.ranks.size())});
  }
  return last_begin;
}

void split_at_arrivals(const LastArrivals& last_begin, RankStats& out) {
  for (CollectiveStats& c : out.collectives) {
    if (c.seq == trace::kNone64) continue;
    const std::pair<int32_t, int64_t> key{c.grp, c.seq};
    const auto last = std::lower_bound(last_begin.begin(), last_begin.end(), key,
                                       [](const MatchedArrival& a, const auto& k) { return a.key < k; });
    if (last == last_begin.end() || last->key != key) continue;
    const ArrivalSplit split = split_at_arrival(c, last->last_begin_ns);
    c.transfer_ns = split.transfer_ns;
    c.group_ranks = last->ranks;
    out.wait_ms += double(split.wait_ns) / 1e6;
    out.transfer_ms += double(split.transfer_ns) / 1e6;
    if (c.iteration >= 0 && size_t(c.iteration) < out.iterations.size()) {
      out.iterations[size_t(c.iteration)].wait_ms += double(split.wait_ns) / 1e6;
      out.iterations[size_t(c.iteration)].transfer_ms += double(split.transfer_ns) / 1e6;
    }
  }
}

void add_bus_bandwidth(RunStats& stats) {
  std::map<int32_t, std::vector<double>> by_group;
  for (const RankStats& r : stats.ranks) {
    for (const CollectiveStats& c : r.collectives) {
      if (c.bytes < kBusbwLeastBytes) continue;
      if (const std::optional<Bandwidth> bw = bandwidth_of(c.op, c.bytes, c.group_ranks, c.transfer_ns)) {
        by_group[c.grp].push_back(bw->busbw_gbps);
      }
    }
  }
  for (GroupTraffic& g : stats.groups) {
    std::vector<double>& values = by_group[g.grp];
    if (values.empty()) continue;
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    g.median_busbw_gbps = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
    g.busbw_collectives = static_cast<int64_t>(n);
  }
}

}  // namespace detail

core::StepSummary step_summary(const RankStats& rank) {
  std::vector<double> step_ms;
  step_ms.reserve(rank.iterations.size());
  for (const IterationStats& it : rank.iterations) step_ms.push_back(it.step_ms);
  return core::summarize_steps(step_ms);
}

OverlapStats overlap_per_step(const RankStats& rank) {
  const auto from = static_cast<size_t>(core::steady_from(rank.iterations.size()));
  OverlapStats mean;
  if (rank.iterations.size() <= from) return mean;
  for (size_t i = from; i < rank.iterations.size(); ++i) {
    const OverlapStats& o = rank.iterations[i].overlap;
    mean.compute_ms += o.compute_ms;
    mean.comm_ms += o.comm_ms;
    mean.overlap_ms += o.overlap_ms;
    mean.exposed_comm_ms += o.exposed_comm_ms;
  }
  const double n = static_cast<double>(rank.iterations.size() - from);
  mean.compute_ms /= n;
  mean.comm_ms /= n;
  mean.overlap_ms /= n;
  mean.exposed_comm_ms /= n;
  return mean;
}

std::pair<double, double> wait_per_step(const RankStats& rank) {
  const auto from = static_cast<size_t>(core::steady_from(rank.iterations.size()));
  if (rank.iterations.size() <= from) return {0, 0};
  double wait = 0, transfer = 0;
  for (size_t i = from; i < rank.iterations.size(); ++i) {
    wait += rank.iterations[i].wait_ms;
    transfer += rank.iterations[i].transfer_ms;
  }
  const double n = static_cast<double>(rank.iterations.size() - from);
  return {wait / n, transfer / n};
}

std::string link_text(const RunStats& stats) {
  return link_text(stats.link_gbps, stats.link_latency_us);
}

std::string link_text(double link_gbps, double link_latency_us) {
  if (!(link_gbps > 0)) return "";
  char text[96];
  std::snprintf(text, sizeof(text), "emulated link %g Gb/s, %g \u00b5s", link_gbps,
                link_latency_us);
  return text;
}

}  // namespace dpscope::analysis
