// What the viewer computes from a loaded Model beyond drawing: per-rank and per-iteration
// compute / communication / overlap / exposed time, exposed time per bucket, collectives matched
// across ranks by sequence number (skew, mismatches), flows from a hook to its bucket and
// all-reduce, range statistics by name, and find. Pure functions of the Model; no ImGui.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

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
const EventSpan& span_of(const Model& model, const SpanRef& ref);

// Compute vs communication, as trace/stats.h defines them: compute is the union of the phases
// forward, backward and optimizer_step; comm the union of collectives; overlap their
// intersection; exposed = comm - overlap (communication nothing hides). Milliseconds.
struct Overlap {
  double compute_ms = 0, comm_ms = 0, overlap_ms = 0, exposed_ms = 0;
};

struct BucketExposure {
  int32_t bucket = 0;
  int64_t collectives = 0;  // collectives carrying this bucket (all iterations)
  double comm_ms = 0;       // their total time
  double exposed_ms = 0;    // the part no compute hides
};

struct RankAnalysis {
  std::vector<Overlap> iterations;  // by iteration number (0 .. Model::iterations - 1)
  Overlap total;
  std::vector<BucketExposure> buckets;  // by bucket index
};

// The same collective (process-group sequence number) on every rank that ran it.
struct CollectiveMatch {
  int32_t seq = 0;
  uint8_t op = 0xff;
  std::vector<SpanRef> spans;  // one per rank that ran it, by rank
  int64_t skew_ns = 0;         // latest begin - earliest begin
  // Ranks disagree on the op, on the bytes or the dtype (when analyze had the payloads), or not
  // every rank ran it.
  bool mismatch = false;
  std::string why;             // what disagrees, for the stats panel
};

struct Analysis {
  std::vector<RankAnalysis> ranks;  // by Model::ranks index
  std::vector<CollectiveMatch> collectives;  // by seq
  std::unordered_map<int32_t, size_t> by_seq;  // seq -> index in `collectives`
  int64_t mismatches = 0;
  const CollectiveMatch* match(int32_t seq) const;
};

// One pass over the phases and collectives of every rank. `payloads` (read_collective_payloads,
// any order) says what each collective moved; with them, a collective whose bytes or dtype
// differ between ranks is a mismatch too. A 10 M-event model takes a few hundred milliseconds;
// the viewer runs it on a background thread after loading. Pure.
Analysis analyze(const Model& model, const std::vector<trace::CollectivePayload>& payloads = {});

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
// ("hook", "collective", "phase"); "kind:NAME" matches the kind only. Empty matches nothing.
class FindQuery {
 public:
  FindQuery() = default;
  FindQuery(const Model& model, const std::string& text);
  bool empty() const { return text_.empty(); }
  const std::string& text() const { return text_; }
  // O(1): looks the span's kind / name / op up in tables built by the constructor.
  bool matches(const EventSpan& span) const;

 private:
  std::string text_;
  bool kind_match_[trace::kEventKindCount] = {};
  std::vector<uint8_t> name_match_;                  // by NameId, for phases and marks
  uint8_t op_match_[trace::kEventKindCount][256] = {};  // by (kind, op), for ops and states
};

struct FindResult {
  int64_t total = 0;             // every matching span
  std::vector<SpanRef> first;    // the first `limit` matches, by rank, lane, row, time
};
FindResult find_spans(const Model& model, const FindQuery& query, size_t limit);

}  // namespace dpscope::view
