// Cross-rank collective matching (see collective_match.h): groups every rank's collectives by
// (group, sequence number) and compares what each rank moved.
#include "analysis/collective_match.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <queue>
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

namespace {

// One rank's collectives with a sequence number in (grp, seq) order, ties in the list's order:
// the list itself when it is already so (compute_stats sorts each rank's by (grp, seq, begin)),
// else an ordered index into it.
class KeyOrder {
 public:
  explicit KeyOrder(const std::vector<CollectiveStats>& list) : list_(list) {
    for (size_t i = 0; i < list_.size() && identity_; ++i) {
      identity_ = list_[i].seq != trace::kNone64 && (i == 0 || !(key(list_[i]) < key(list_[i - 1])));
    }
    if (identity_) return;
    for (size_t i = 0; i < list_.size(); ++i) {
      if (list_[i].seq != trace::kNone64) order_.push_back(i);
    }
    std::stable_sort(order_.begin(), order_.end(),
                     [&](size_t a, size_t b) { return key(list_[a]) < key(list_[b]); });
  }
  static std::pair<int32_t, int64_t> key(const CollectiveStats& c) { return {c.grp, c.seq}; }
  size_t size() const { return identity_ ? list_.size() : order_.size(); }
  const CollectiveStats& operator[](size_t i) const { return identity_ ? list_[i] : list_[order_[i]]; }

 private:
  const std::vector<CollectiveStats>& list_;
  bool identity_ = true;      // the list is in key order, every entry with a sequence number
  std::vector<size_t> order_;  // else: the entries with one, in key order
};

// Calls visit(key, entries) for each (grp, seq) in ascending order, with the collective of each
// rank that ran it (a rank's first of the key), in the order of `ranks`: a merge of the ranks'
// ordered lists, so that a million collectives need no map of a million keys.
template <typename Visit>
void for_each_key(const std::vector<int32_t>& ranks, const std::vector<KeyOrder>& lists, Visit&& visit) {
  using Key = std::pair<int32_t, int64_t>;
  std::vector<size_t> next(lists.size(), 0);
  // The ranks' next keys, smallest first.
  using Head = std::pair<Key, size_t>;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  for (size_t i = 0; i < lists.size(); ++i) {
    if (lists[i].size() > 0) heads.push({KeyOrder::key(lists[i][0]), i});
  }
  std::vector<std::pair<int32_t, const CollectiveStats*>> entries;
  while (!heads.empty()) {
    const Key key = heads.top().first;
    entries.clear();
    while (!heads.empty() && heads.top().first == key) {
      const size_t i = heads.top().second;
      heads.pop();
      const KeyOrder& list = lists[i];
      if (entries.empty() || entries.back().first != ranks[i]) entries.emplace_back(ranks[i], &list[next[i]]);
      while (next[i] < list.size() && KeyOrder::key(list[next[i]]) == key) ++next[i];
      if (next[i] < list.size()) heads.push({KeyOrder::key(list[next[i]]), i});
    }
    visit(key, entries);
  }
}

}  // namespace

std::vector<CollectiveMatch> match_collectives(
    const std::vector<int32_t>& ranks, const std::vector<std::vector<CollectiveStats>>& by_rank,
    int32_t world) {
  std::vector<KeyOrder> lists;
  for (size_t i = 0; i < by_rank.size() && i < ranks.size(); ++i) lists.emplace_back(by_rank[i]);
  // Each group's ranks: those that ran any collective of it (See Note [Subgroup collectives]).
  std::map<int32_t, std::set<int32_t>> members;
  size_t keys = 0;
  for_each_key(ranks, lists, [&](const std::pair<int32_t, int64_t>& key, const auto& entries) {
    ++keys;
    for (const auto& entry : entries) members[key.first].insert(entry.first);
  });
  std::vector<CollectiveMatch> matches;
  matches.reserve(keys);
  for_each_key(ranks, lists, [&](const std::pair<int32_t, int64_t>& key, auto& list) {
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
  });
  return matches;
}

}  // namespace dpscope::analysis
