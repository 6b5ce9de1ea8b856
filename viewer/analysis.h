// What the viewer knows of a loaded Model beyond drawing: the trace's one analysis (analysis/stats.h:
// overlap, exposure per bucket, memory at the peak, collectives matched across ranks) tied to the
// spans that draw it, flows from a hook to its bucket and all-reduce, range statistics by name,
// and find. The viewer computes no figure of its own: every number in its panels is a RunStats
// field, so it always equals `dpscope stats`. Pure functions of the Model; no ImGui.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/hang.h"
#include "analysis/stats.h"
#include "viewer/model.h"

namespace dpscope::view {

// One span of a Model: model.ranks[rank].lanes[lane].spans[index]. rank is an index into
// Model::ranks (equal to the rank number in every file dpscope writes).
struct SpanRef {
  int32_t rank = -1;
  int32_t lane = -1;
  int64_t index = -1;
  bool valid() const { return index >= 0; }
  bool operator==(const SpanRef& o) const {
    return rank == o.rank && lane == o.lane && index == o.index;
  }
};
const Span& span_of(const Model& model, const SpanRef& ref);

// One collective of the trace's matching (analysis/collective_match.h) with the spans that draw it.
struct CollectiveSpans {
  int32_t seq = 0;             // the low 32 bits of the sequence number, as Span::seq holds it
  std::vector<SpanRef> spans;  // one per rank that ran it, by rank
  // The trace's match of this collective: an index into Analysis::stats.matches; -1 when the
  // analysis read none for it (a live file that grew since).
  int64_t match = -1;
};

struct Analysis {
  // The one analysis of the model's file (analysis::compute_stats): every figure the Stats,
  // Compare and Buckets panels and the headless JSON line show.
  analysis::RunStats stats;
  // The hang section of the file (analysis/hang.h): none for a run whose collectives all
  // completed; drawn over the lanes and said in the header and the narration (hang_overlay.h).
  std::optional<analysis::HangReport> hang;
  std::vector<CollectiveSpans> collectives;    // by seq
  std::unordered_map<int32_t, size_t> by_seq;  // seq -> index in `collectives`
  const CollectiveSpans* match(int32_t seq) const;
  // The trace's match behind `c`, or null.
  const analysis::CollectiveMatch* trace_match(const CollectiveSpans& c) const;
  bool mismatch(const CollectiveSpans& c) const;
  // The statistics of Model::ranks[rank_index], or null when the analysis has no such rank.
  const analysis::RankStats* rank(const Model& model, size_t rank_index) const;
  // Whether some rank's peak in the steps is another moment than its run's peak (construction or
  // an evaluation after the steps peaked higher: Note [Work outside iterations]); the Stats panel
  // then shows both.
  bool steps_peak_elsewhere() const;
};

// Ties `stats` (compute_stats of the model's file) to the model's collective spans: one pass over
// the communication spans of every rank. Pure.
Analysis analyze(const Model& model, analysis::RunStats stats);
// compute_stats of the model's file, then analyze: the viewer runs it on a background thread after
// loading (a 10 M-event trace takes a few seconds). Throws trace::TraceError as the Reader does.
Analysis analyze_file(const Model& model);

// An arrow of the flow view: from one span to another (both may be on different ranks).
struct Flow {
  SpanRef from, to;
  enum Kind { HookToBucket, BucketToLaunch, LaunchToCollective, SameCollective } kind;
};
// The flows of `selected`: a hook -> its bucket's ready -> launch -> the collective, and that
// collective's twins on the other ranks; for a collective (or its wait or launch) the twins.
std::vector<Flow> flows_of(const Model& model, const Analysis& analysis, const SpanRef& selected);

// Count, total and mean duration of the spans wholly inside [t0, t1], by span_label.
struct RangeRow {
  std::string label;
  int64_t count = 0;
  double sum_ns = 0;
  double avg_ns() const { return count ? sum_ns / double(count) : 0; }
};
// Sorted by total time, largest first. Visits every span in the range once.
std::vector<RangeRow> summarize_range(const Model& model, int64_t t0, int64_t t1);

// A compiled find query: case-insensitive substring of a span's label or of its kind's name
// ("hook", "collective", "phase"); "kind:NAME" matches the kind only. Spaces around the text
// are ignored; empty (or only spaces) matches nothing.
class FindQuery {
 public:
  FindQuery() = default;
  FindQuery(const Model& model, const std::string& text);
  bool empty() const { return text_.empty(); }
  const std::string& text() const { return text_; }
  // O(1): looks the span's kind / name / op / state up in tables built by the constructor.
  bool matches(const Span& span) const;

 private:
  std::string text_;
  bool kind_match_[trace::kEventKindCount] = {};
  std::vector<uint8_t> name_match_;                        // by NameId, for phases and marks
  bool collective_match_[trace::kCollectiveOpCount] = {};  // by op: "allreduce"
  bool wait_match_[trace::kCollectiveOpCount] = {};        // by op: "wait allreduce"
  bool state_match_[trace::kUnitStateCount] = {};          // by unit state
};

struct FindResult {
  int64_t total = 0;             // every matching span
  std::vector<SpanRef> first;    // the `limit` earliest matches, in time order (ties: rank, lane)
};
FindResult find_spans(const Model& model, const FindQuery& query, size_t limit);

}  // namespace dpscope::view
