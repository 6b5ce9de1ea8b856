// The hang section (hang.h): every rank's collectives per group, their end states, the first
// sequence number where the ranks disagree, the culprit, and the flight-recorder analyzer's
// verdict (Note [Flight-recorder verdicts]).
#include "analysis/hang.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "trace/reader.h"
#include "trace/saturate.h"

namespace dpscope::analysis {
namespace {

using trace::CollectiveEndState;

int64_t element_bytes(uint8_t dtype) {
  switch (static_cast<trace::DType>(dtype)) {
    case trace::DType::Float16:
    case trace::DType::BFloat16: return 2;
    case trace::DType::Float64:
    case trace::DType::Int64: return 8;
    case trace::DType::Int8:
    case trace::DType::UInt8:
    case trace::DType::Bool: return 1;
    default: return 4;
  }
}

int64_t elements(const HangCollective& c) {
  return c.bytes > 0 ? c.bytes / element_bytes(c.dtype) : 0;
}

std::string ranks_text(const std::vector<int32_t>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return out;
}

std::string size_text(int64_t bytes) {
  char text[48];
  if (bytes >= (int64_t{1} << 20)) {
    std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(text, sizeof(text), "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(text, sizeof(text), "%lld bytes", static_cast<long long>(bytes));
  }
  return text;
}

std::string seconds_text(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(ns) / 1e9);
  return text;
}

// What a collective is, apart from its sequence number: two ranks issued "the same" collective
// when these agree.
using Signature = std::tuple<uint8_t, int64_t, uint8_t, int32_t, int32_t, int32_t, uint8_t>;
Signature signature(const HangCollective& c) {
  return {static_cast<uint8_t>(c.op), c.bytes, c.dtype, c.iteration, c.bucket, c.unit, c.pass_flags};
}
// The same without the iteration: what repeats from step to step.
using Shape = std::tuple<uint8_t, int64_t, uint8_t, int32_t, int32_t, uint8_t>;
Shape shape(const HangCollective& c) {
  return {static_cast<uint8_t>(c.op), c.bytes, c.dtype, c.bucket, c.unit, c.pass_flags};
}

// The first field in which `b` differs from `a`, in the order the report names them.
std::string first_difference(const HangCollective& a, const HangCollective& b) {
  if (a.op != b.op) return "kind";
  if (a.bytes != b.bytes) return "size";
  if (a.dtype != b.dtype) return "dtype";
  if (a.iteration != b.iteration) return "iteration";
  if (a.bucket != b.bucket) return "bucket";
  if (a.unit != b.unit) return "unit";
  if (a.pass_flags != b.pass_flags) return "pass";
  return "";
}

// One group's collectives, rank by rank, by sequence number.
struct GroupCollectives {
  int32_t grp = 0;
  std::vector<int32_t> ranks;
  std::map<int32_t, std::map<int64_t, HangCollective>> by_rank;
};

// Note [Flight-recorder verdicts]: the analyzer's first problem in one group.
struct FrProblem {
  int64_t seq = trace::kNone64;
  std::string verdict;
  int64_t issued_ns = 0;
};
std::optional<FrProblem> flight_recorder_problem(const GroupCollectives& g) {
  std::set<int64_t> seqs;
  for (const auto& [rank, collectives] : g.by_rank) {
    for (const auto& [seq, c] : collectives) seqs.insert(seq);
  }
  const auto group_size = static_cast<int32_t>(g.ranks.size());
  for (const int64_t seq : seqs) {
    const HangCollective* first = nullptr;
    std::string verdict;
    for (const int32_t rank : g.ranks) {
      const auto& collectives = g.by_rank.at(rank);
      const auto found = collectives.find(seq);
      if (found == collectives.end()) {
        // A rank with no entry of the group at all left no dump: the analyzer "cannot decide
        // what's wrong with this collective entry because we missed FR dumps from ranks".
        verdict = collectives.empty() ? "UNDECIDED" : "NOT_ALL_RANKS_JOINING";
        break;
      }
      if (!first) {
        first = &found->second;
      } else if (verdict.empty()) {
        const std::string match = flight_recorder_match(*first, found->second, group_size);
        if (match != "FULLY_MATCHED") verdict = match;
      }
    }
    if (!verdict.empty()) {
      int64_t issued = INT64_MAX;
      for (const auto& [rank, collectives] : g.by_rank) {
        if (const auto found = collectives.find(seq); found != collectives.end()) {
          issued = std::min(issued, found->second.issued_ns);
        }
      }
      return FrProblem{seq, verdict, issued};
    }
  }
  return std::nullopt;
}

// The first sequence number of `g` where its ranks disagree, with the FR verdict there.
std::optional<HangDisagreement> first_disagreement(const GroupCollectives& g) {
  std::set<int64_t> seqs;
  for (const auto& [rank, collectives] : g.by_rank) {
    for (const auto& [seq, c] : collectives) seqs.insert(seq);
  }
  const auto group_size = static_cast<int32_t>(g.ranks.size());
  for (const int64_t seq : seqs) {
    HangDisagreement d;
    d.grp = g.grp;
    d.seq = seq;
    for (const int32_t rank : g.ranks) {
      const auto& collectives = g.by_rank.at(rank);
      const auto found = collectives.find(seq);
      if (found == collectives.end()) {
        d.missing_ranks.push_back(rank);
      } else {
        d.by_rank.push_back(found->second);
      }
    }
    if (!d.missing_ranks.empty()) {
      d.field = "missing";
      d.verdict = "NOT_ALL_RANKS_JOINING";
      return d;
    }
    const HangCollective& first = d.by_rank.front();
    for (const HangCollective& other : d.by_rank) {
      const std::string field = first_difference(first, other);
      if (field.empty()) continue;
      d.field = field;
      d.verdict = "FULLY_MATCHED";
      for (const HangCollective& o : d.by_rank) {
        const std::string match = flight_recorder_match(first, o, group_size);
        if (match != "FULLY_MATCHED") {
          d.verdict = match;
          break;
        }
      }
      return d;
    }
  }
  return std::nullopt;
}

// Whether `rank` issued a collective of signature `s` anywhere in the group.
bool issued_anywhere(const GroupCollectives& g, int32_t rank, const Signature& s) {
  for (const auto& [seq, c] : g.by_rank.at(rank)) {
    if (signature(c) == s) return true;
  }
  return false;
}

// The run's own history before a disagreement: each bucket's or unit's (size, dtype) in other
// iterations, the shapes seen, and which shape followed which (See Note [Culprit]).
struct History {
  std::set<Shape> shapes;
  std::set<Shape> followed;  // shapes some collective followed before
  std::set<std::pair<Shape, Shape>> successions;
  std::map<std::pair<uint8_t, std::pair<int32_t, int32_t>>, std::set<std::pair<int64_t, uint8_t>>> sizes_of;
};
History history_before(const GroupCollectives& g, int64_t seq_limit) {
  History h;
  for (const auto& [rank, collectives] : g.by_rank) {
    const HangCollective* previous = nullptr;
    for (const auto& [seq, c] : collectives) {
      if (seq >= seq_limit) break;
      h.sizes_of[{static_cast<uint8_t>(c.op), {c.bucket, c.unit}}].insert({c.bytes, c.dtype});
      if (previous) {
        h.successions.insert({shape(*previous), shape(c)});
        h.followed.insert(shape(*previous));
      }
      h.shapes.insert(shape(c));
      previous = &c;
    }
  }
  return h;
}

// One side of an even split: its lowest rank, how often its collective breaks with the
// history, and the most telling way it does.
struct CulpritSide {
  int32_t rank = 0;
  int breaks = 0;
  std::string reason;
};
std::vector<CulpritSide> score_sides(const GroupCollectives& g, const HangDisagreement& d,
                                     const std::map<Signature, std::vector<int32_t>>& sides) {
  const History history = history_before(g, d.seq);
  std::vector<CulpritSide> scored;
  for (const auto& [s, ranks] : sides) {
    const int32_t rank = ranks.front();
    const HangCollective& mine = g.by_rank.at(rank).at(d.seq);
    CulpritSide side{rank, 0, {}};
    // Reasons, the most telling kept: a resize, then a skip, then a collective never issued.
    std::string resized, skipped, never;
    const auto known = history.sizes_of.find({static_cast<uint8_t>(mine.op), {mine.bucket, mine.unit}});
    if (known != history.sizes_of.end() && !known->second.count({mine.bytes, mine.dtype})) {
      ++side.breaks;
      resized = "it issued " + std::string(trace::to_string(mine.op)) +
                " with another size or dtype than in every other iteration";
    }
    const auto& mine_all = g.by_rank.at(rank);
    const auto before = mine_all.find(d.seq - 1);
    if (before != mine_all.end() && history.followed.count(shape(before->second)) &&
        !history.successions.count({shape(before->second), shape(mine)})) {
      ++side.breaks;
      skipped = "its collective follows the one before where no earlier iteration's did "
                "(it skipped one: its later collectives paired with the others' earlier ones)";
    }
    for (const auto& [other, other_ranks] : sides) {
      if (other != s && !issued_anywhere(g, rank, other)) {
        ++side.breaks;
        never = "it never issued the collective the others issued there";
      }
    }
    side.reason = !resized.empty() ? resized : !skipped.empty() ? skipped : never;
    scored.push_back(side);
  }
  return scored;
}

// Two sides at different iterations (See Note [Culprit]): the one still in the earlier iteration
// issued there either one of the engine's own collectives (a bucket's, a unit's), which the
// other, already in the next iteration, skipped; or a collective of no bucket or unit, one of
// its own that the other never issues (a metric). Returns whether that told the culprit.
bool culprit_by_iteration(const HangDisagreement& d, HangReport& report) {
  const HangCollective* earlier = nullptr;
  const HangCollective* later = nullptr;
  for (const HangCollective& c : d.by_rank) {
    if (c.iteration == trace::kNone) return false;
    if (!earlier || c.iteration < earlier->iteration) earlier = &c;
    if (!later || c.iteration > later->iteration) later = &c;
  }
  if (!earlier || earlier->iteration == later->iteration) return false;
  const bool engines = earlier->bucket != trace::kNone || earlier->unit != trace::kNone;
  report.culprit = engines ? later->rank : earlier->rank;
  report.culprit_reason =
      engines ? "it had moved on to iteration " + std::to_string(later->iteration) +
                    " while the others still issued iteration " + std::to_string(earlier->iteration) +
                    "'s " + std::string(trace::to_string(earlier->op)) + ": it skipped it"
              : "it issued a collective of its own (no bucket or unit) in iteration " +
                    std::to_string(earlier->iteration) + ", which the others, already in the next, never issue";
  return true;
}

// Note [Culprit]
// The rank that diverged at a disagreement: a rank that never issued the sequence number; else
// the ranks outside a strict majority of one signature; else (two ranks, or an even split) the
// side whose collective breaks with the run's own history: a bucket or unit issued with another
// size or dtype than in every other iteration (a resized one), or a collective that follows its
// predecessor where no iteration ever did (a skipped one: its later collectives moved up), or
// the side that never issued the other side's collective at all. Still even, sides at different
// iterations: the later one skipped the earlier one's engine collective (a bucket's, a unit's),
// or the earlier one issued a collective of its own (no bucket or unit: a metric). Where nothing
// tells them apart, the side without the lowest rank, as the flight-recorder analyzer assumes its
// first rank is right.
void find_culprit(const GroupCollectives& g, const HangDisagreement& d, HangReport& report) {
  if (!d.missing_ranks.empty()) {
    report.culprit = d.missing_ranks.front();
    report.culprit_reason = "it never issued the collective the others issued";
    return;
  }
  std::map<Signature, std::vector<int32_t>> sides;
  for (const HangCollective& c : d.by_rank) sides[signature(c)].push_back(c.rank);
  for (const auto& [s, ranks] : sides) {
    if (ranks.size() * 2 > d.by_rank.size()) {
      for (const HangCollective& c : d.by_rank) {
        if (signature(c) != s) {
          report.culprit = c.rank;
          report.culprit_reason = "its collective differs from the majority's";
          return;
        }
      }
    }
  }
  std::vector<CulpritSide> scored = score_sides(g, d, sides);
  std::sort(scored.begin(), scored.end(),
            [](const CulpritSide& a, const CulpritSide& b) { return a.breaks != b.breaks ? a.breaks > b.breaks : a.rank < b.rank; });
  if (scored.size() >= 2 && scored[0].breaks > scored[1].breaks) {
    report.culprit = scored[0].rank;
    report.culprit_reason = scored[0].reason;
    return;
  }
  if (culprit_by_iteration(d, report)) return;
  for (const HangCollective& c : d.by_rank) {
    if (signature(c) != signature(d.by_rank.front())) {
      report.culprit = c.rank;
      report.culprit_reason = "nothing in the trace tells the sides apart; taken as the flight "
                              "recorder does, the lowest rank being right";
      return;
    }
  }
}

std::string waited_clause(const HangReport& report) {
  std::vector<int32_t> waiters;
  int64_t longest = 0;
  const HangCollective* stuck = nullptr;
  for (const HangGroup& g : report.groups) {
    for (const HangRank& r : g.ranks) {
      if (r.rank == report.culprit || r.pending.empty()) continue;
      if (std::find(waiters.begin(), waiters.end(), r.rank) == waiters.end()) waiters.push_back(r.rank);
      const HangCollective& first = r.pending.front();
      if (!stuck || first.end_ns - first.issued_ns > longest) {
        longest = first.end_ns - first.issued_ns;
        stuck = &first;
      }
    }
  }
  if (!stuck) return "";
  std::sort(waiters.begin(), waiters.end());
  const std::string where = std::string(trace::to_string(stuck->op)) + " #" + std::to_string(stuck->seq);
  // Under a tenth of a second the run did not wait: a rank failed at once (Gloo refuses a
  // message of another size), and the others were stopped.
  if (longest < 100'000'000) {
    return "; " + ranks_text(waiters) + (waiters.size() == 1 ? " was" : " were") + " in " + where +
           " when the run stopped";
  }
  return "; " + ranks_text(waiters) + " waited up to " + seconds_text(longest) + " in " + where;
}

std::string make_sentence(const HangReport& report) {
  if (!report.first_disagreement) {
    // Every rank issued the same collectives: someone is stuck inside one.
    for (const HangGroup& g : report.groups) {
      for (const HangRank& r : g.ranks) {
        if (r.pending.empty()) continue;
        const HangCollective& c = r.pending.front();
        return "every rank issued the same collectives; rank " + std::to_string(r.rank) + " never completed " +
               describe_collective(c) + " after " + seconds_text(c.end_ns - c.issued_ns) +
               " (a rank stuck inside it, or the timeout too short)";
      }
    }
    return "every rank issued the same collectives";
  }
  const HangDisagreement& d = *report.first_disagreement;
  const std::string culprit = "rank " + std::to_string(report.culprit);
  const HangCollective* mine = nullptr;
  for (const HangCollective& c : d.by_rank) {
    if (c.rank == report.culprit) mine = &c;
  }
  const HangCollective* theirs = nullptr;
  for (const HangCollective& c : d.by_rank) {
    if (c.rank != report.culprit && (!mine || signature(c) != signature(*mine))) {
      theirs = &c;
      break;
    }
  }
  bool culprit_recorded_nothing = false;
  for (const HangGroup& g : report.groups) {
    for (const HangRank& r : g.ranks) {
      if (g.grp == d.grp && r.rank == report.culprit) culprit_recorded_nothing = r.last_issued_seq == trace::kNone64;
    }
  }
  std::string sentence;
  if (!mine && theirs && culprit_recorded_nothing) {
    sentence = culprit + " left no record of any collective of its group (no trace or dump of it), so nothing says "
               "whether it issued " + describe_collective(*theirs);
  } else if (!mine && theirs) {
    sentence = culprit + " never issued " + describe_collective(*theirs);
  } else if (mine && theirs && (report.culprit_reason.find("never issued") != std::string::npos ||
                                report.culprit_reason.find("skipped") != std::string::npos)) {
    sentence = culprit + " never issued " + describe_collective(*theirs) + ": at #" + std::to_string(d.seq) +
               " it issued " + describe_collective(*mine) +
               " instead, so its later collectives paired with the others' earlier ones";
  } else if (mine && theirs) {
    sentence = culprit + " issued " + describe_collective(*mine) + " where the others issued " +
               describe_collective(*theirs);
  } else {
    sentence = culprit + " diverged at #" + std::to_string(d.seq);
  }
  return sentence + waited_clause(report);
}

}  // namespace

std::string describe_collective(const HangCollective& c) {
  std::string text = std::string(trace::to_string(c.op)) + " #" + std::to_string(c.seq) + " (";
  if (c.iteration != trace::kNone) text += "iteration " + std::to_string(c.iteration) + ", ";
  if (c.bucket != trace::kNone) text += "bucket " + std::to_string(c.bucket) + ", ";
  if (c.unit != trace::kNone) {
    text += "unit " + std::to_string(c.unit) + ((c.pass_flags & trace::kFlagBackward) ? ", backward, " : ", forward, ");
  }
  if (c.pass_flags & trace::kFlagPrefetch) text += "prefetch, ";
  text += size_text(c.bytes);
  if (c.dtype != 0xff) text += " " + std::string(trace::to_string(static_cast<trace::DType>(c.dtype)));
  return text + ")";
}

std::string flight_recorder_match(const HangCollective& first, const HangCollective& other,
                                  int32_t group_size) {
  if (first.op != other.op) return "COLLECTIVE_TYPE_MISMATCH";
  // Input and output sizes: a dpscope collective's tensors are flat, so its element count
  // decides both (an all-gather's output and a reduce-scatter's input are group_size times it).
  (void)group_size;
  if (elements(first) != elements(other)) return "SIZE_OR_SYNTAX_MISMATCH";
  if (first.dtype != other.dtype) return "COLLECTIVE_DTYPE_MISMATCH";
  if (first.state != other.state) return "COLLECTIVE_STATE_MISMATCH";
  return "FULLY_MATCHED";
}

std::optional<HangReport> analyze_hang(std::vector<HangCollective> collectives,
                                       const std::vector<int32_t>& run_ranks,
                                       const std::vector<std::pair<int32_t, std::string>>& group_names) {
  const bool hung = std::any_of(collectives.begin(), collectives.end(), [](const HangCollective& c) {
    return c.state != CollectiveEndState::Completed;
  });
  if (!hung) return std::nullopt;
  std::map<int32_t, GroupCollectives> groups;
  for (const HangCollective& c : collectives) {
    GroupCollectives& g = groups[c.grp];
    g.grp = c.grp;
    g.by_rank[c.rank].emplace(c.seq, c);  // the first of a duplicate is kept
  }
  HangReport report;
  std::optional<FrProblem> fr_first;
  for (auto& [grp, g] : groups) {
    // See Note [Subgroup collectives]: the world group is every rank of the run.
    std::set<int32_t> ranks;
    for (const auto& [rank, unused] : g.by_rank) ranks.insert(rank);
    if (grp == 0 || ranks.size() == 1) ranks.insert(run_ranks.begin(), run_ranks.end());
    g.ranks.assign(ranks.begin(), ranks.end());
    for (const int32_t rank : g.ranks) g.by_rank[rank];
    HangGroup out;
    out.grp = grp;
    out.name = grp == 0 ? "world" : "group " + std::to_string(grp);
    for (const auto& [id, name] : group_names) {
      if (id == grp && !name.empty()) out.name = name;
    }
    for (const int32_t rank : g.ranks) {
      HangRank r;
      r.rank = rank;
      for (const auto& [seq, c] : g.by_rank.at(rank)) {
        r.last_issued_seq = seq;
        if (c.state == CollectiveEndState::Completed) {
          r.last_completed_seq = std::max(r.last_completed_seq, seq);
        } else {
          r.pending.push_back(c);
        }
      }
      out.ranks.push_back(std::move(r));
    }
    report.groups.push_back(std::move(out));
    if (std::optional<FrProblem> fr = flight_recorder_problem(g); fr && (!fr_first || fr->issued_ns < fr_first->issued_ns)) {
      fr_first = fr;
      report.verdict_grp = grp;
    }
    std::optional<HangDisagreement> d = first_disagreement(g);
    if (d) {
      int64_t issued = INT64_MAX;
      for (const HangCollective& c : d->by_rank) issued = std::min(issued, c.issued_ns);
      int64_t current = INT64_MAX;
      if (report.first_disagreement) {
        for (const HangCollective& c : report.first_disagreement->by_rank) current = std::min(current, c.issued_ns);
      }
      if (!report.first_disagreement || issued < current) report.first_disagreement = std::move(d);
    }
  }
  if (fr_first) {
    report.verdict = fr_first->verdict;
    report.verdict_seq = fr_first->seq;
  }
  if (report.first_disagreement) {
    const HangDisagreement& d = *report.first_disagreement;
    report.missing_ranks = d.missing_ranks;
    find_culprit(groups.at(d.grp), d, report);
  } else {
    // Every rank issued the same: the rank that completed least is the one the others wait for.
    for (const HangGroup& g : report.groups) {
      for (const HangRank& r : g.ranks) {
        if (!r.pending.empty() && (report.culprit == trace::kNone)) {
          report.culprit = r.rank;
          report.culprit_reason = "it never completed a collective every rank issued";
        }
      }
    }
  }
  report.sentence = make_sentence(report);
  return report;
}

std::optional<HangReport> analyze_hang(trace::Reader& reader) {
  // A run whose collectives all completed has no hang section: found without reading them all
  // (a million on a 10 M-event trace, some 200 MB).
  if (!reader.any_collective_not_completed()) return std::nullopt;
  const int64_t start_ns = reader.time_range().first;
  std::vector<HangCollective> collectives;
  std::vector<std::pair<int32_t, std::string>> group_names;
  const std::vector<trace::LaneInfo> lanes = reader.lanes();
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Collective)) {
    if (e.seq == trace::kNone64 || e.grp == trace::kNone) continue;
    HangCollective c;
    c.rank = e.rank;
    c.lane = e.lane;
    c.grp = e.grp;
    c.seq = e.seq;
    c.op = static_cast<trace::CollectiveOp>(e.op);
    c.bytes = e.bytes == trace::kNone64 ? 0 : e.bytes;
    c.dtype = e.dtype;
    c.iteration = e.iteration;
    c.bucket = e.bucket;
    c.unit = e.unit;
    c.pass_flags = e.flags & (trace::kFlagPrefetch | trace::kFlagBackward | trace::kFlagBucketed);
    c.state = trace::collective_end_state(e.flags);
    const int64_t issued = e.enqueue_ns != trace::kNone64 ? e.enqueue_ns : e.begin_ns;
    c.issued_ns = trace::detail::saturating_sub(issued, start_ns);
    c.end_ns = trace::detail::saturating_sub(e.end_ns, start_ns);
    collectives.push_back(c);
    // A group's name is in its communication lane's name: "gloo comm (world)".
    const bool named = std::any_of(group_names.begin(), group_names.end(),
                                   [&](const auto& n) { return n.first == e.grp; });
    if (!named) {
      for (const trace::LaneInfo& lane : lanes) {
        if (lane.rank != e.rank || lane.lane != e.lane) continue;
        const size_t open = lane.name.rfind('(');
        const size_t close = lane.name.rfind(')');
        if (open != std::string::npos && close != std::string::npos && close > open + 1) {
          group_names.emplace_back(e.grp, lane.name.substr(open + 1, close - open - 1));
        }
      }
    }
  }
  std::vector<int32_t> run_ranks;
  for (const trace::RankInfo& r : reader.ranks()) run_ranks.push_back(r.rank);
  return analyze_hang(std::move(collectives), run_ranks, group_names);
}

}  // namespace dpscope::analysis
