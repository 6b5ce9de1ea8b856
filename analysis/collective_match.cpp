// Cross-rank collective matching (see collective_match.h): groups every rank's collectives by
// (group, sequence number) and compares what each rank moved.
#include "analysis/collective_match.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "trace/saturate.h"

namespace dpscope::analysis {

std::string bytes_text(int64_t bytes) {
  char text[32];
  if (bytes < 0) return "? B";
  if (bytes < 1024) std::snprintf(text, sizeof(text), "%lld B", static_cast<long long>(bytes));
  else if (bytes < (int64_t{1} << 20)) std::snprintf(text, sizeof(text), "%.1f KiB", double(bytes) / 1024);
  else if (bytes < (int64_t{1} << 30)) std::snprintf(text, sizeof(text), "%.1f MiB", double(bytes) / double(1 << 20));
  else std::snprintf(text, sizeof(text), "%.2f GiB", double(bytes) / double(1 << 30));
  return text;
}

namespace {

std::string payload_text(const CollectiveStats& c) {
  const std::string dtype = c.dtype < trace::kDTypeCount ? std::string(to_string(trace::DType(c.dtype)))
                                                  : std::string("no dtype");
  return std::string(to_string(c.op)) + " of " + (c.bytes == trace::kNone64 ? "? B" : bytes_text(c.bytes)) +
         " " + dtype;
}

}  // namespace

ArrivalSplit split_at_arrival(const CollectiveStats& c, int64_t last_begin_ns) {
  ArrivalSplit split;
  const int64_t length = std::max<int64_t>(0, trace::detail::saturating_sub(c.end_ns, c.begin_ns));
  split.wait_ns = std::clamp<int64_t>(trace::detail::saturating_sub(last_begin_ns, c.begin_ns), 0, length);
  split.transfer_ns = length - split.wait_ns;
  return split;
}

std::vector<CollectiveMatch> match_collectives(
    const std::vector<int32_t>& ranks, const std::vector<std::vector<CollectiveStats>>& by_rank,
    int32_t world) {
  // (grp, seq) -> (rank, its collective); a rank's first collective of a key counts.
  std::map<std::pair<int32_t, int64_t>, std::vector<std::pair<int32_t, const CollectiveStats*>>> keys;
  for (size_t i = 0; i < by_rank.size() && i < ranks.size(); ++i) {
    for (const CollectiveStats& c : by_rank[i]) {
      if (c.seq == trace::kNone64) continue;
      auto& list = keys[{c.grp, c.seq}];
      if (list.empty() || list.back().first != ranks[i]) list.emplace_back(ranks[i], &c);
    }
  }
  // Each group's ranks: those that ran any collective of it (See Note [Subgroup collectives]).
  std::map<int32_t, std::set<int32_t>> members;
  for (const auto& [key, list] : keys) {
    for (const auto& entry : list) members[key.first].insert(entry.first);
  }
  std::vector<CollectiveMatch> matches;
  matches.reserve(keys.size());
  for (auto& [key, list] : keys) {
    std::sort(list.begin(), list.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    CollectiveMatch m;
    m.grp = key.first;
    m.seq = key.second;
    const auto& [first_rank, first] = list.front();
    m.op = first->op;
    m.iteration = first->iteration;
    int64_t lo = first->begin_ns, hi = first->begin_ns;
    for (const auto& [rank, c] : list) {
      m.ranks.push_back(rank);
      lo = std::min(lo, c->begin_ns);
      hi = std::max(hi, c->begin_ns);
      if (!m.mismatch && (c->op != first->op || c->bytes != first->bytes || c->dtype != first->dtype)) {
        m.mismatch = true;
        m.why = "rank " + std::to_string(rank) + " ran " + payload_text(*c) + ", rank " +
                std::to_string(first_rank) + " " + payload_text(*first);
      }
    }
    m.skew_ns = trace::detail::saturating_sub(hi, lo);
    int64_t second_latest = INT64_MIN;
    for (const auto& [rank, c] : list) {
      if (m.last_rank == trace::kNone || c->begin_ns > m.last_begin_ns) {
        if (m.last_rank != trace::kNone) second_latest = std::max(second_latest, m.last_begin_ns);
        m.last_rank = rank;
        m.last_begin_ns = c->begin_ns;
      } else {
        second_latest = std::max(second_latest, c->begin_ns);
      }
    }
    m.late_ns = second_latest == INT64_MIN ? 0 : trace::detail::saturating_sub(m.last_begin_ns, second_latest);
    const auto seen_in_group = static_cast<int32_t>(members[key.first].size());
    const int32_t expected = key.first == kWorldGroup || seen_in_group < 2 ? world : seen_in_group;
    if (!m.mismatch && static_cast<int32_t>(list.size()) < expected) {
      m.mismatch = true;
      m.why = "ran on " + std::to_string(list.size()) + " of " + std::to_string(expected) + " ranks" +
              (expected == world ? "" : " of its group");
    }
    matches.push_back(std::move(m));
  }
  return matches;
}

}  // namespace dpscope::analysis
