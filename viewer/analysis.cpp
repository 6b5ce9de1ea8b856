// The viewer's analyses over a loaded Model (see analysis.h): the trace's analysis tied to the
// collective spans, flows, range statistics, find.
#include "viewer/analysis.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <queue>
#include <tuple>

#include "trace/reader.h"
#include "viewer/lod.h"

namespace dpscope::view {

using trace::EventKind;
using trace::kNone;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The first span of `kind` on lane `li` of rank `ri` with this bucket (and seq, unless kNone)
// beginning in [from, to].
SpanRef find_on_lane(const Model& model, int32_t ri, int32_t li, EventKind kind, int32_t bucket,
                     int32_t seq, int64_t from, int64_t to) {
  const Lane& lane = model.ranks[size_t(ri)].lanes[size_t(li)];
  for (int row = 0; row < lane.rows(); ++row) {
    auto first = std::lower_bound(
        lane.spans.begin() + std::ptrdiff_t(lane.row_begin(row)),
        lane.spans.begin() + std::ptrdiff_t(lane.row_end(row)), from,
        [](const Span& s, int64_t t) { return s.begin_ns < t; });
    for (auto it = first; it != lane.spans.begin() + std::ptrdiff_t(lane.row_end(row)); ++it) {
      if (it->begin_ns > to) break;
      if (it->kind() == kind && it->bucket() == bucket && (seq == kNone || it->seq() == seq)) {
        return {ri, li, it - lane.spans.begin()};
      }
    }
  }
  return {};
}

// Every collective span by its seq (Span::seq), each list by rank: ranks are visited in order.
std::map<int32_t, std::vector<SpanRef>> collective_spans_by_seq(const Model& model) {
  std::map<int32_t, std::vector<SpanRef>> by_seq;
  for (size_t ri = 0; ri < model.ranks.size(); ++ri) {
    const RankData& rank = model.ranks[ri];
    for (size_t li = 0; li < rank.lanes.size(); ++li) {
      const Lane& lane = rank.lanes[li];
      for (size_t i = 0; i < lane.spans.size(); ++i) {
        const Span& s = lane.spans[i];
        if (s.kind() != EventKind::Collective || s.seq() == kNone) continue;
        by_seq[s.seq()].push_back({static_cast<int32_t>(ri), static_cast<int32_t>(li), static_cast<int64_t>(i)});
      }
    }
  }
  return by_seq;
}

// The trace's matches (indices into stats.matches) by the low 32 bits of their sequence number,
// which is what a span keeps; with several groups in one file, the first group's.
std::unordered_map<int32_t, int64_t> matches_by_seq(const analysis::RunStats& stats) {
  std::unordered_map<int32_t, int64_t> by_seq;
  for (size_t m = 0; m < stats.matches.size(); ++m) {
    by_seq.emplace(static_cast<int32_t>(stats.matches[m].seq), static_cast<int64_t>(m));
  }
  return by_seq;
}

// A span's op or unit state as a number; -1 for a kind without one, or an unknown one.
int op_or_state(const Span& s) {
  if (const auto op = s.op()) return int(*op);
  if (const auto state = s.state()) return int(*state);
  return -1;
}

}  // namespace

const Span& span_of(const Model& model, const SpanRef& ref) {
  return model.ranks[static_cast<size_t>(ref.rank)]
      .lanes[static_cast<size_t>(ref.lane)]
      .spans[static_cast<size_t>(ref.index)];
}

const CollectiveSpans* Analysis::match(int32_t seq) const {
  auto it = by_seq.find(seq);
  return it == by_seq.end() ? nullptr : &collectives[it->second];
}

const analysis::CollectiveMatch* Analysis::trace_match(const CollectiveSpans& c) const {
  return c.match >= 0 && size_t(c.match) < stats.matches.size() ? &stats.matches[size_t(c.match)]
                                                                 : nullptr;
}

bool Analysis::mismatch(const CollectiveSpans& c) const {
  const analysis::CollectiveMatch* m = trace_match(c);
  return m && m->mismatch;
}

const analysis::RankStats* Analysis::rank(const Model& model, size_t rank_index) const {
  if (rank_index >= model.ranks.size()) return nullptr;
  const int32_t number = model.ranks[rank_index].info.rank;
  for (const analysis::RankStats& r : stats.ranks) {
    if (r.rank == number) return &r;
  }
  return nullptr;
}

bool Analysis::steps_peak_elsewhere() const {
  return std::any_of(stats.ranks.begin(), stats.ranks.end(), [](const analysis::RankStats& r) {
    return r.step_memory_peak.found() && r.step_memory_peak.ts_ns != r.memory_peak.ts_ns;
  });
}

Analysis analyze(const Model& model, analysis::RunStats stats) {
  Analysis a;
  a.stats = std::move(stats);
  const std::unordered_map<int32_t, int64_t> match_of_seq = matches_by_seq(a.stats);
  for (auto& [seq, refs] : collective_spans_by_seq(model)) {
    CollectiveSpans c;
    c.seq = seq;
    c.spans = std::move(refs);
    const auto it = match_of_seq.find(seq);
    if (it != match_of_seq.end()) c.match = it->second;
    a.by_seq[seq] = a.collectives.size();
    a.collectives.push_back(std::move(c));
  }
  return a;
}

Analysis analyze_file(const Model& model) {
  trace::Reader reader(model.path);
  Analysis result = analyze(model, analysis::compute_stats(reader));
  result.hang = analysis::analyze_hang(reader);
  return result;
}

std::vector<Flow> flows_of(const Model& model, const Analysis& analysis, const SpanRef& selected) {
  std::vector<Flow> flows;
  if (!selected.valid()) return flows;
  const Span& s = span_of(model, selected);
  const RankData& rank = model.ranks[size_t(selected.rank)];
  int32_t seq = s.seq();
  SpanRef collective;
  if (s.kind() == EventKind::Hook && s.bucket() != kNone) {
    const int32_t it = rank.iteration_at(s.begin_ns);
    const IterationSpan* span = rank.find_iteration(it);
    const int64_t until = span ? span->end_ns : s.end_ns + int64_t{10'000'000'000};
    const SpanRef ready = find_on_lane(model, selected.rank, selected.lane, EventKind::BucketReady,
                                       s.bucket(), kNone, s.begin_ns, until);
    if (!ready.valid()) return flows;
    flows.push_back({selected, ready, Flow::HookToBucket});
    const SpanRef launch =
        find_on_lane(model, selected.rank, selected.lane, EventKind::BucketLaunch,
                     s.bucket(), kNone, span_of(model, ready).begin_ns, until);
    if (!launch.valid()) return flows;
    flows.push_back({ready, launch, Flow::BucketToLaunch});
    seq = span_of(model, launch).seq();
    if (const CollectiveSpans* m = analysis.match(seq)) {
      for (const SpanRef& r : m->spans) {
        if (r.rank == selected.rank) collective = r;
      }
    }
    if (collective.valid()) flows.push_back({launch, collective, Flow::LaunchToCollective});
  } else if (s.kind() == EventKind::Collective) {
    collective = selected;
  } else if (s.kind() != EventKind::CollectiveWait && s.kind() != EventKind::BucketLaunch) {
    return flows;
  }
  const CollectiveSpans* m = seq == kNone ? nullptr : analysis.match(seq);
  if (!m) return flows;
  if (!collective.valid()) {
    for (const SpanRef& r : m->spans) {
      if (r.rank == selected.rank) collective = r;
    }
    if (!collective.valid()) return flows;
    flows.push_back({selected, collective, Flow::LaunchToCollective});
  }
  for (const SpanRef& r : m->spans) {
    if (!(r == collective)) flows.push_back({collective, r, Flow::SameCollective});
  }
  return flows;
}

std::vector<RangeRow> summarize_range(const Model& model, int64_t t0, int64_t t1) {
  // Key by (kind, name, op or state) first; labels are made once per key at the end.
  std::map<std::tuple<int, int32_t, int>, std::pair<int64_t, double>> by_key;
  std::map<std::tuple<int, int32_t, int>, Span> sample;
  for (const RankData& rank : model.ranks) {
    for (const Lane& lane : rank.lanes) {
      for (int row = 0; row < lane.rows(); ++row) {
        auto it = std::lower_bound(lane.spans.begin() + std::ptrdiff_t(lane.row_begin(row)),
                                   lane.spans.begin() + std::ptrdiff_t(lane.row_end(row)), t0,
                                   [](const Span& s, int64_t t) { return s.begin_ns < t; });
        const auto end = lane.spans.begin() + std::ptrdiff_t(lane.row_end(row));
        for (; it != end && it->begin_ns <= t1; ++it) {
          if (it->end_ns > t1) continue;
          auto key = std::make_tuple(int(it->kind()), it->name(), op_or_state(*it));
          auto& entry = by_key[key];
          ++entry.first;
          entry.second += double(it->end_ns - it->begin_ns);
          sample.emplace(key, *it);
        }
      }
    }
  }
  std::map<std::string, RangeRow> by_label;
  for (const auto& [key, entry] : by_key) {
    const std::string label = span_label(model, sample[key]);
    RangeRow& row = by_label[label];
    row.label = label;
    row.count += entry.first;
    row.sum_ns += entry.second;
  }
  std::vector<RangeRow> rows;
  for (auto& [label, row] : by_label) rows.push_back(row);
  std::sort(rows.begin(), rows.end(),
            [](const RangeRow& a, const RangeRow& b) { return a.sum_ns > b.sum_ns; });
  return rows;
}

FindQuery::FindQuery(const Model& model, const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return;
  text_ = text.substr(first, text.find_last_not_of(" \t") - first + 1);
  std::string needle = lower(text_);
  bool kind_only = false;
  if (needle.rfind("kind:", 0) == 0) {
    needle = needle.substr(5);
    kind_only = true;
  }
  for (int k = 0; k < trace::kEventKindCount; ++k) {
    const std::string kind = std::string(trace::to_string(static_cast<EventKind>(k)));
    kind_match_[k] = kind_only ? kind == needle : kind.find(needle) != std::string::npos;
  }
  if (kind_only) return;
  name_match_.resize(model.names.size());
  for (size_t id = 0; id < model.names.size(); ++id) {
    name_match_[id] = lower(model.names[id]).find(needle) != std::string::npos;
  }
  for (int op = 0; op < trace::kCollectiveOpCount; ++op) {
    const std::string name(trace::to_string(static_cast<trace::CollectiveOp>(op)));
    collective_match_[op] = name.find(needle) != std::string::npos;
    wait_match_[op] = ("wait " + name).find(needle) != std::string::npos;
  }
  for (int st = 0; st < trace::kUnitStateCount; ++st) {
    const std::string name(trace::to_string(static_cast<trace::UnitState>(st)));
    state_match_[st] = name.find(needle) != std::string::npos;
  }
}

bool FindQuery::matches(const Span& s) const {
  if (text_.empty()) return false;
  const int k = static_cast<int>(s.kind());
  if (k < 0 || k >= trace::kEventKindCount) return false;
  if (kind_match_[k]) return true;
  switch (s.kind()) {
    case EventKind::Phase:
    case EventKind::Mark: {
      const trace::NameId name = s.name();
      return name >= 0 && static_cast<size_t>(name) < name_match_.size() && name_match_[static_cast<size_t>(name)];
    }
    case EventKind::Collective: return s.op() && collective_match_[int(*s.op())];
    case EventKind::CollectiveWait: return s.op() && wait_match_[int(*s.op())];
    case EventKind::UnitState: return s.state() && state_match_[int(*s.state())];
    default: return false;
  }
}

FindResult find_spans(const Model& model, const FindQuery& query, size_t limit) {
  FindResult result;
  if (query.empty()) return result;
  // The `limit` earliest matches: a max-heap on (begin, rank, lane, index) holding them.
  using Entry = std::tuple<int64_t, int32_t, int32_t, int64_t>;
  std::priority_queue<Entry> earliest;
  for (size_t ri = 0; ri < model.ranks.size(); ++ri) {
    const RankData& rank = model.ranks[ri];
    for (size_t li = 0; li < rank.lanes.size(); ++li) {
      const Lane& lane = rank.lanes[li];
      for (size_t i = 0; i < lane.spans.size(); ++i) {
        if (!query.matches(lane.spans[i])) continue;
        ++result.total;
        const Entry entry{lane.spans[i].begin_ns, int32_t(ri), int32_t(li), int64_t(i)};
        if (earliest.size() < limit) {
          earliest.push(entry);
        } else if (limit > 0 && entry < earliest.top()) {
          earliest.pop();
          earliest.push(entry);
        }
      }
    }
  }
  result.first.resize(earliest.size());
  for (size_t k = earliest.size(); k-- > 0; earliest.pop()) {
    const auto& [begin, rank, lane, index] = earliest.top();
    result.first[k] = {rank, lane, index};
  }
  return result;
}

}  // namespace dpscope::view
