// The ranks' offsets from their collectives' ends (kineto_align.h, Note [Aligning on collective
// ends]): matching, the median shift and its spread, and the causality check.
#include "formats/kineto_align.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>
#include <utility>

namespace dpscope::formats {
namespace {

constexpr int64_t kLeastUncertaintyNs = 1000;

bool blocking(uint8_t op) {
  return op != 0xff && op != static_cast<uint8_t>(trace::CollectiveOp::SendRecv);
}

// The matched collectives of `rank` and `reference`: the same group and seq (Note [Collective
// sequence numbers]), ops agreeing.
template <typename Visit>
void for_each_match(const RankCollectives& reference, const RankCollectives& rank, Visit visit) {
  for (const auto& [grp, ours] : *reference.collectives) {
    const auto theirs = rank.collectives->find(grp);
    if (theirs == rank.collectives->end()) continue;
    std::unordered_map<int64_t, const SurveyedCollective*> by_seq;
    for (const SurveyedCollective& b : theirs->second) by_seq.emplace(b.seq, &b);
    for (const SurveyedCollective& a : ours) {
      const auto b = by_seq.find(a.seq);
      if (b != by_seq.end() && a.op == b->second->op && blocking(a.op)) visit(grp, a.seq, a, *b->second);
    }
  }
}

// The value at fraction q of sorted `v` (linear between neighbours).
double quantile(const std::vector<int64_t>& v, double q) {
  const double at = q * static_cast<double>(v.size() - 1);
  const auto below = static_cast<size_t>(at);
  const size_t above = std::min(below + 1, v.size() - 1);
  return static_cast<double>(v[below]) + (at - static_cast<double>(below)) *
                                             static_cast<double>(v[above] - v[below]);
}

RankOffset offset_of(const RankCollectives& reference, const RankCollectives& rank) {
  std::vector<int64_t> shifts;
  for_each_match(reference, rank, [&](int16_t, int64_t, const SurveyedCollective& a, const SurveyedCollective& b) {
    shifts.push_back((reference.base_ns + a.end_ns) - (rank.base_ns + b.end_ns));
  });
  RankOffset offset{rank.rank, 0, 0, static_cast<int64_t>(shifts.size())};
  if (shifts.empty()) return offset;
  std::sort(shifts.begin(), shifts.end());
  offset.offset_ns = static_cast<int64_t>(std::llround(quantile(shifts, 0.5)));
  const double iqr = quantile(shifts, 0.75) - quantile(shifts, 0.25);
  offset.uncertainty_ns = std::max(kLeastUncertaintyNs, static_cast<int64_t>(std::llround(iqr / 2)));
  return offset;
}

std::string ms_text(int64_t ns) {
  char text[48];
  std::snprintf(text, sizeof(text), "%.3f ms", static_cast<double>(ns) / 1e6);
  return text;
}

// The first matched collective that would end on a rank before the last rank began it, once
// shifted; "" when none does. Every rank is checked against the reference's collectives.
std::string causality_problem(const std::vector<RankCollectives>& ranks, const std::vector<RankOffset>& offsets) {
  const RankCollectives& reference = ranks.front();
  struct Moment {
    int64_t last_begin = std::numeric_limits<int64_t>::min();
    int32_t last_rank = 0;
    int64_t first_end = std::numeric_limits<int64_t>::max();
    int32_t first_rank = 0;
    int64_t slack = 0;
  };
  std::map<std::pair<int16_t, int64_t>, Moment> moments;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const int64_t shift = ranks[r].base_ns + offsets[r].offset_ns;
    for_each_match(reference, ranks[r], [&](int16_t grp, int64_t seq, const SurveyedCollective& a,
                                            const SurveyedCollective& b) {
      Moment& m = moments[{grp, seq}];
      const SurveyedCollective& mine = r == 0 ? a : b;
      if (mine.begin_ns + shift > m.last_begin) {
        m.last_begin = mine.begin_ns + shift;
        m.last_rank = ranks[r].rank;
      }
      if (mine.end_ns + shift < m.first_end) {
        m.first_end = mine.end_ns + shift;
        m.first_rank = ranks[r].rank;
      }
      m.slack = std::max(m.slack, offsets[r].uncertainty_ns);
    });
  }
  for (const auto& [where, m] : moments) {
    if (m.first_end + 2 * m.slack >= m.last_begin) continue;
    return "group " + std::to_string(where.first) + "'s collective seq " + std::to_string(where.second) +
           " would end on rank " + std::to_string(m.first_rank) + " " + ms_text(m.last_begin - m.first_end) +
           " before rank " + std::to_string(m.last_rank) + " began it";
  }
  return "";
}

// `given` with the reference (the lowest rank) first, the others in their order.
std::vector<RankCollectives> reference_first(const std::vector<RankCollectives>& given) {
  std::vector<RankCollectives> ranks = given;
  std::stable_sort(ranks.begin(), ranks.end(),
                   [](const RankCollectives& a, const RankCollectives& b) { return a.rank < b.rank; });
  return ranks;
}

bool shares_a_collective(const RankCollectives& reference, const RankCollectives& rank) {
  bool shared = false;
  for_each_match(reference, rank, [&](int16_t, int64_t, const SurveyedCollective&, const SurveyedCollective&) {
    shared = true;
  });
  return shared;
}

}  // namespace

bool can_align_collective_ends(const std::vector<RankCollectives>& given) {
  const std::vector<RankCollectives> ranks = reference_first(given);
  for (size_t r = 1; r < ranks.size(); ++r) {
    if (shares_a_collective(ranks.front(), ranks[r])) return true;
  }
  return false;
}

Alignment align_ranks(const std::vector<RankCollectives>& given, trace::ClockAlignment method) {
  Alignment alignment;
  for (const RankCollectives& r : given) alignment.ranks.push_back({r.rank, 0, 0, 0});
  if (method != trace::ClockAlignment::CollectiveEnds) return alignment;
  const std::vector<RankCollectives> ranks = reference_first(given);
  std::vector<RankOffset> offsets{{ranks.front().rank, 0, 0, 0}};
  for (size_t r = 1; r < ranks.size(); ++r) offsets.push_back(offset_of(ranks.front(), ranks[r]));
  if (std::none_of(offsets.begin(), offsets.end(), [](const RankOffset& o) { return o.matched > 0; })) {
    alignment.note = "collective-ends alignment needs two ranks that share a blocking collective; "
                     "every rank keeps its profiler's own clock";
    return alignment;
  }
  const std::string problem = causality_problem(ranks, offsets);
  if (!problem.empty()) {
    alignment.note = "collective-ends alignment refused: " + problem +
                     "; every rank keeps its profiler's own clock (--align none says so quietly)";
    return alignment;
  }
  alignment.method = trace::ClockAlignment::CollectiveEnds;
  for (RankOffset& out : alignment.ranks) {
    out = *std::find_if(offsets.begin(), offsets.end(), [&](const RankOffset& o) { return o.rank == out.rank; });
  }
  return alignment;
}

}  // namespace dpscope::formats
