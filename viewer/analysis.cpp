// The viewer's analyses over a loaded Model (see analysis.h): overlap and exposed time per rank,
// iteration and bucket; collectives matched across ranks; flows; range statistics; find.
#include "viewer/analysis.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "viewer/lod.h"

namespace dpscope::view {

using trace::EventKind;
using trace::kNone;

const EventSpan& span_of(const Model& model, const SpanRef& ref) {
  return model.ranks[static_cast<size_t>(ref.rank)]
      .lanes[static_cast<size_t>(ref.lane)]
      .spans[static_cast<size_t>(ref.index)];
}

const CollectiveMatch* Analysis::match(int32_t seq) const {
  auto it = by_seq.find(seq);
  return it == by_seq.end() ? nullptr : &collectives[it->second];
}

namespace {

struct Interval {
  int64_t begin, end;
};

// Sorts and merges overlapping intervals in place; returns the total length.
int64_t merge(std::vector<Interval>& v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  size_t out = 0;
  int64_t total = 0;
  for (const Interval& i : v) {
    if (out > 0 && i.begin <= v[out - 1].end) {
      v[out - 1].end = std::max(v[out - 1].end, i.end);
    } else {
      v[out++] = i;
    }
  }
  v.resize(out);
  for (const Interval& i : v) total += i.end - i.begin;
  return total;
}

// Length of [begin, end) covered by the merged, sorted `cover`.
int64_t covered(const std::vector<Interval>& cover, int64_t begin, int64_t end) {
  auto it = std::upper_bound(cover.begin(), cover.end(), begin,
                             [](int64_t t, const Interval& i) { return t < i.end; });
  int64_t sum = 0;
  for (; it != cover.end() && it->begin < end; ++it) {
    sum += std::max<int64_t>(0, std::min(end, it->end) - std::max(begin, it->begin));
  }
  return sum;
}

Overlap overlap_of(std::vector<Interval>& compute, std::vector<Interval> comm) {
  Overlap o;
  o.compute_ms = double(merge(compute)) / 1e6;
  o.comm_ms = double(merge(comm)) / 1e6;
  int64_t both = 0;
  for (const Interval& c : comm) both += covered(compute, c.begin, c.end);
  o.overlap_ms = double(both) / 1e6;
  o.exposed_ms = o.comm_ms - o.overlap_ms;
  return o;
}

// "4.0 MiB of float32": what a collective moved, for the mismatch reason.
std::string payload_text(const trace::CollectivePayload& p) {
  const std::string dtype = p.dtype == 0xff ? std::string("no dtype")
                                            : std::string(trace::to_string(trace::DType(p.dtype)));
  return (p.bytes == trace::kNone64 ? std::string("? bytes") : format_bytes(p.bytes)) + " of " + dtype;
}

// Marks the matches whose ranks disagree on bytes or dtype. Both lists go by seq: `payloads` is
// sorted here by (seq, rank), so one walk pairs them up.
void check_payloads(const Model& model, std::vector<trace::CollectivePayload> payloads,
                    std::vector<CollectiveMatch>& matches) {
  std::stable_sort(payloads.begin(), payloads.end(),
                   [](const trace::CollectivePayload& a, const trace::CollectivePayload& b) {
                     return a.seq != b.seq ? a.seq < b.seq : a.rank < b.rank;
                   });
  size_t at = 0;
  for (CollectiveMatch& m : matches) {
    while (at < payloads.size() && payloads[at].seq < m.seq) ++at;
    size_t end = at;
    while (end < payloads.size() && payloads[end].seq == m.seq) ++end;
    if (m.mismatch || end == at) continue;
    // The first payload of each rank with this seq (a rank's later ones belong to other groups).
    auto payload_of = [&](int32_t rank) -> const trace::CollectivePayload* {
      for (size_t i = at; i < end; ++i) {
        if (payloads[i].rank == rank) return &payloads[i];
      }
      return nullptr;
    };
    const int32_t first_rank = model.ranks[size_t(m.spans.front().rank)].info.rank;
    const trace::CollectivePayload* first = payload_of(first_rank);
    for (const SpanRef& ref : m.spans) {
      const int32_t rank = model.ranks[size_t(ref.rank)].info.rank;
      const trace::CollectivePayload* p = payload_of(rank);
      if (!first || !p || (p->bytes == first->bytes && p->dtype == first->dtype)) continue;
      m.mismatch = true;
      m.why = "rank " + std::to_string(rank) + " moved " + payload_text(*p) + ", rank " +
              std::to_string(first_rank) + " " + payload_text(*first);
      break;
    }
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Analysis analyze(const Model& model, const std::vector<trace::CollectivePayload>& payloads) {
  Analysis a;
  std::vector<bool> compute_name(model.names.size(), false);
  for (size_t id = 0; id < model.names.size(); ++id) {
    const std::string& n = model.names[id];
    compute_name[id] = n == "forward" || n == "backward" || n == "optimizer_step";
  }
  std::map<int32_t, std::vector<SpanRef>> seqs;
  for (size_t ri = 0; ri < model.ranks.size(); ++ri) {
    const RankData& rank = model.ranks[ri];
    RankAnalysis ra;
    ra.iterations.resize(static_cast<size_t>(model.iterations));
    // Per iteration (index iterations + 1 holds construction): compute and comm intervals.
    const size_t slots = static_cast<size_t>(model.iterations) + 1;
    std::vector<std::vector<Interval>> compute(slots), comm(slots);
    struct BucketComm {
      size_t slot;
      int16_t bucket;
      Interval span;
    };
    std::vector<BucketComm> bucket_comm;
    std::vector<Interval> all_compute, all_comm;
    for (size_t li = 0; li < rank.lanes.size(); ++li) {
      const Lane& lane = rank.lanes[li];
      for (size_t i = 0; i < lane.spans.size(); ++i) {
        const EventSpan& s = lane.spans[i];
        const bool is_compute = s.kind == EventKind::Phase && s.name >= 0 &&
                                static_cast<size_t>(s.name) < compute_name.size() &&
                                compute_name[static_cast<size_t>(s.name)];
        const bool is_comm = s.kind == EventKind::Collective;
        if (!is_compute && !is_comm) continue;
        const int32_t it = rank.iteration_at(s.begin_ns);
        const size_t slot = it == kNone || it >= model.iterations ? slots - 1 : size_t(it);
        (is_compute ? compute : comm)[slot].push_back({s.begin_ns, s.end_ns});
        (is_compute ? all_compute : all_comm).push_back({s.begin_ns, s.end_ns});
        if (is_comm) {
          if (s.seq_or_iteration != kNone) {
            seqs[s.seq_or_iteration].push_back({static_cast<int32_t>(ri), static_cast<int32_t>(li),
                                   static_cast<int64_t>(i)});
          }
          if (s.bucket_or_unit != kNone && s.op == uint8_t(trace::CollectiveOp::AllReduce)) {
            bucket_comm.push_back({slot, s.bucket_or_unit, {s.begin_ns, s.end_ns}});
          }
        }
      }
    }
    for (size_t slot = 0; slot + 1 < slots; ++slot) {
      ra.iterations[slot] = overlap_of(compute[slot], comm[slot]);
    }
    merge(compute[slots - 1]);
    for (const BucketComm& b : bucket_comm) {
      if (ra.buckets.size() <= static_cast<size_t>(b.bucket)) ra.buckets.resize(size_t(b.bucket) + 1);
      BucketExposure& e = ra.buckets[static_cast<size_t>(b.bucket)];
      e.bucket = b.bucket;
      ++e.collectives;
      const int64_t length = b.span.end - b.span.begin;
      e.comm_ms += double(length) / 1e6;
      e.exposed_ms += double(length - covered(compute[b.slot], b.span.begin, b.span.end)) / 1e6;
    }
    ra.total = overlap_of(all_compute, all_comm);
    a.ranks.push_back(std::move(ra));
  }
  for (auto& [seq, refs] : seqs) {
    CollectiveMatch m;
    m.seq = seq;
    std::sort(refs.begin(), refs.end(),
              [](const SpanRef& x, const SpanRef& y) { return x.rank < y.rank; });
    m.spans = refs;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const SpanRef& r : refs) {
      const EventSpan& s = span_of(model, r);
      if (m.op == 0xff) m.op = s.op;
      if (s.op != m.op && !m.mismatch) {
        m.mismatch = true;
        m.why = "rank " + std::to_string(model.ranks[size_t(r.rank)].info.rank) + " ran " +
                span_label(model, s) + ", rank " +
                std::to_string(model.ranks[size_t(refs[0].rank)].info.rank) + " " +
                span_label(model, span_of(model, refs[0]));
      }
      lo = std::min(lo, s.begin_ns);
      hi = std::max(hi, s.begin_ns);
    }
    m.skew_ns = hi - lo;
    if (!m.mismatch && refs.size() != model.ranks.size()) {
      m.mismatch = true;
      m.why = "ran on " + std::to_string(refs.size()) + " of " +
              std::to_string(model.ranks.size()) + " ranks";
    }
    a.by_seq[seq] = a.collectives.size();
    a.collectives.push_back(std::move(m));
  }
  if (!payloads.empty()) check_payloads(model, payloads, a.collectives);
  for (const CollectiveMatch& m : a.collectives) a.mismatches += m.mismatch ? 1 : 0;
  return a;
}

namespace {

// The first span of `kind` on lane `lane_index` of rank `ri` with this bucket (and seq, unless
// kNone) beginning in [from, to].
SpanRef find_on_lane(const Model& model, int32_t ri, int32_t li, EventKind kind, int16_t bucket,
                     int32_t seq, int64_t from, int64_t to) {
  const Lane& lane = model.ranks[size_t(ri)].lanes[size_t(li)];
  for (int row = 0; row < lane.rows(); ++row) {
    auto first = std::lower_bound(
        lane.spans.begin() + std::ptrdiff_t(lane.row_begin(row)),
        lane.spans.begin() + std::ptrdiff_t(lane.row_end(row)), from,
        [](const EventSpan& s, int64_t t) { return s.begin_ns < t; });
    for (auto it = first; it != lane.spans.begin() + std::ptrdiff_t(lane.row_end(row)); ++it) {
      if (it->begin_ns > to) break;
      if (it->kind == kind && it->bucket_or_unit == bucket && (seq == kNone || it->seq_or_iteration == seq)) {
        return {ri, li, it - lane.spans.begin()};
      }
    }
  }
  return {};
}

}  // namespace

std::vector<Flow> flows_of(const Model& model, const Analysis& analysis, const SpanRef& selected) {
  std::vector<Flow> flows;
  if (!selected.valid()) return flows;
  const EventSpan& s = span_of(model, selected);
  const RankData& rank = model.ranks[size_t(selected.rank)];
  int32_t seq = s.seq_or_iteration;
  SpanRef collective;
  if (s.kind == EventKind::Hook && s.bucket_or_unit != kNone) {
    const int32_t it = rank.iteration_at(s.begin_ns);
    const IterationSpan* span = rank.find_iteration(it);
    const int64_t until = span ? span->end_ns : s.end_ns + int64_t{10'000'000'000};
    const SpanRef ready = find_on_lane(model, selected.rank, selected.lane, EventKind::BucketReady,
                                       s.bucket_or_unit, kNone, s.end_ns, until);
    if (!ready.valid()) return flows;
    flows.push_back({selected, ready, Flow::HookToBucket});
    const SpanRef launch =
        find_on_lane(model, selected.rank, selected.lane, EventKind::BucketLaunch,
                     s.bucket_or_unit, kNone, span_of(model, ready).begin_ns, until);
    if (!launch.valid()) return flows;
    flows.push_back({ready, launch, Flow::BucketToLaunch});
    seq = span_of(model, launch).seq_or_iteration;
    if (const CollectiveMatch* m = analysis.match(seq)) {
      for (const SpanRef& r : m->spans) {
        if (r.rank == selected.rank) collective = r;
      }
    }
    if (collective.valid()) flows.push_back({launch, collective, Flow::LaunchToCollective});
  } else if (s.kind == EventKind::Collective) {
    collective = selected;
  } else if (s.kind != EventKind::CollectiveWait && s.kind != EventKind::BucketLaunch) {
    return flows;
  }
  const CollectiveMatch* m = seq == kNone ? nullptr : analysis.match(seq);
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
  // Key by (kind, name, op) first; labels are made once per key at the end.
  std::map<std::tuple<int, int32_t, int>, std::pair<int64_t, double>> by_key;
  std::map<std::tuple<int, int32_t, int>, EventSpan> sample;
  for (const RankData& rank : model.ranks) {
    for (const Lane& lane : rank.lanes) {
      for (int row = 0; row < lane.rows(); ++row) {
        auto it = std::lower_bound(lane.spans.begin() + std::ptrdiff_t(lane.row_begin(row)),
                                   lane.spans.begin() + std::ptrdiff_t(lane.row_end(row)), t0,
                                   [](const EventSpan& s, int64_t t) { return s.begin_ns < t; });
        const auto end = lane.spans.begin() + std::ptrdiff_t(lane.row_end(row));
        for (; it != end && it->begin_ns <= t1; ++it) {
          if (it->end_ns > t1) continue;
          const bool named = it->kind == EventKind::Phase || it->kind == EventKind::Mark;
          const bool with_op = it->kind == EventKind::Collective ||
                               it->kind == EventKind::CollectiveWait ||
                               it->kind == EventKind::UnitState;
          auto key = std::make_tuple(int(it->kind), named ? it->name : kNone,
                                     with_op ? int(it->op) : -1);
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

FindQuery::FindQuery(const Model& model, const std::string& text) : text_(text) {
  if (text.empty()) return;
  std::string needle = lower(text);
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
    op_match_[int(EventKind::Collective)][op] = name.find(needle) != std::string::npos;
    op_match_[int(EventKind::CollectiveWait)][op] =
        ("wait " + name).find(needle) != std::string::npos;
  }
  for (int st = 0; st < trace::kUnitStateCount; ++st) {
    const std::string name(trace::to_string(static_cast<trace::UnitState>(st)));
    op_match_[int(EventKind::UnitState)][st] = name.find(needle) != std::string::npos;
  }
}

bool FindQuery::matches(const EventSpan& s) const {
  if (text_.empty()) return false;
  const int k = static_cast<int>(s.kind);
  if (k < 0 || k >= trace::kEventKindCount) return false;
  if (kind_match_[k]) return true;
  if (s.kind == EventKind::Phase || s.kind == EventKind::Mark) {
    return s.name >= 0 && static_cast<size_t>(s.name) < name_match_.size() &&
           name_match_[static_cast<size_t>(s.name)];
  }
  return op_match_[k][s.op] != 0;
}

FindResult find_spans(const Model& model, const FindQuery& query, size_t limit) {
  FindResult result;
  if (query.empty()) return result;
  for (size_t ri = 0; ri < model.ranks.size(); ++ri) {
    const RankData& rank = model.ranks[ri];
    for (size_t li = 0; li < rank.lanes.size(); ++li) {
      const Lane& lane = rank.lanes[li];
      for (size_t i = 0; i < lane.spans.size(); ++i) {
        if (!query.matches(lane.spans[i])) continue;
        ++result.total;
        if (result.first.size() < limit) {
          result.first.push_back({int32_t(ri), int32_t(li), int64_t(i)});
        }
      }
    }
  }
  return result;
}

}  // namespace dpscope::view
