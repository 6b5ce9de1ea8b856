// The viewer's Model (model.h): sorting a lane's spans into rows (Note [Lane rows]), memory step
// series lookups, iterations by time, names and labels. Reading a file into a Model is load.cpp's;
// nothing here touches SQLite or draws.
#include "viewer/model.h"

#include <algorithm>

#include "viewer/gallop.h"

namespace dpscope::view {
namespace {

using trace::EventKind;
using trace::kNone;

// Past this many rows of slices, a lane's further overlapping spans share its last row, so that
// a malformed lane cannot make row assignment quadratic. Real lanes nest a few levels deep.
constexpr size_t kMaxSliceRows = 64;

bool span_before(const Span& a, const Span& b) {
  if (a.begin_ns != b.begin_ns) return a.begin_ns < b.begin_ns;
  return a.end_ns > b.end_ns;  // the enclosing span first
}

// Spans arrive in the order they were recorded: by end, with parents after their children.
// That is nearly sorted by begin, so an insertion sort moves each parent back past its few
// children; on input that is far from sorted it gives up and sorts an index stably. `order`
// (each span's file-order key, below) moves with its span.
void sort_spans(std::vector<Span>& spans, std::vector<uint32_t>& order) {
  const size_t n = spans.size();
  size_t budget = 16 * n + 1024;
  for (size_t i = 1; i < n; ++i) {
    if (!span_before(spans[i], spans[i - 1])) continue;
    const Span moving = spans[i];
    const uint32_t moving_order = order[i];
    size_t j = i;
    while (j > 0 && span_before(moving, spans[j - 1])) {
      spans[j] = spans[j - 1];
      order[j] = order[j - 1];
      --j;
      if (--budget == 0) {
        spans[j] = moving;
        order[j] = moving_order;
        std::vector<uint32_t> index(n);
        for (size_t k = 0; k < n; ++k) index[k] = uint32_t(k);
        std::stable_sort(index.begin(), index.end(),
                         [&spans](uint32_t a, uint32_t b) { return span_before(spans[a], spans[b]); });
        std::vector<Span> sorted(n);
        std::vector<uint32_t> sorted_order(n);
        for (size_t k = 0; k < n; ++k) {
          sorted[k] = spans[index[k]];
          sorted_order[k] = order[index[k]];
        }
        spans.swap(sorted);
        order.swap(sorted_order);
        return;
      }
    }
    spans[j] = moving;
    order[j] = moving_order;
  }
}

// A span's file-order key while its lane is sorted (see Note [Span to event]): a span numbered
// before keeps its same_begin_index as its key (below kUnnumbered; those come first in the
// file), the others get kUnnumbered + their place among themselves (a lane holds far fewer than
// 2^31 spans). number_same_begin turns the keys into each span's place among the spans that
// begin at the same time. The keys live beside the spans, not in them: a Span's index field is
// 11 bits (Note [Span fields]).
constexpr uint32_t kUnnumbered = 1u << 31;

// Whether trace::Reader::events can return the span's event: not one that ends before it
// begins. See Note [Span to event].
bool findable(const Span& s) { return s.end_ns >= s.begin_ns; }

// Sets each span's same_begin_index from its file-order key in `order`. `spans` is sorted by
// begin, so the spans that begin together are neighbours; they rarely number more than one.
void number_same_begin(std::vector<Span>& spans, const std::vector<uint32_t>& order) {
  std::vector<uint32_t> places;
  for (size_t first = 0, last = 0; first < spans.size(); first = last) {
    last = first + 1;
    while (last < spans.size() && spans[last].begin_ns == spans[first].begin_ns) ++last;
    if (last - first == 1) {
      spans[first].set_same_begin_index(findable(spans[first]) ? 0 : Span::kNoEvent);
      continue;
    }
    places.clear();
    for (size_t i = first; i < last; ++i) {
      if (findable(spans[i])) places.push_back(order[i]);
    }
    std::sort(places.begin(), places.end());
    for (size_t i = first; i < last; ++i) {
      Span& s = spans[i];
      if (!findable(s)) {
        s.set_same_begin_index(Span::kNoEvent);
        continue;
      }
      const auto place = std::lower_bound(places.begin(), places.end(), order[i]);
      s.set_same_begin_index(static_cast<uint32_t>(place - places.begin()));
    }
  }
}

}  // namespace

int64_t MemorySeries::at(int64_t t, size_t* hint) const {
  if (ts.empty() || t < ts.front()) return 0;
  size_t i = hint ? std::min(*hint, ts.size() - 1) : 0;
  if (ts[i] > t) i = 0;
  // From the hint (the caller walks forward in time): the last sample at or before t.
  i = gallop(i, ts.size(), [&](size_t j) { return ts[j] <= t; }) - 1;
  if (hint) *hint = i;
  return bytes[i];
}

int32_t RankData::iteration_at(int64_t t) const {
  auto it = std::upper_bound(iterations.begin(), iterations.end(), t,
                             [](int64_t t, const IterationSpan& s) { return t < s.begin_ns; });
  if (it == iterations.begin()) return kNone;
  --it;
  return t <= it->end_ns ? it->iteration : kNone;
}

const IterationSpan* RankData::find_iteration(int32_t iteration) const {
  for (const auto& s : iterations) {
    if (s.iteration == iteration) return &s;
  }
  return nullptr;
}

const std::string& Model::name(trace::NameId id) const {
  static const std::string empty;
  return id >= 0 && static_cast<size_t>(id) < names.size() ? names[static_cast<size_t>(id)] : empty;
}

std::string Model::meta_value(std::string_view key, std::string_view fallback) const {
  auto it = meta.find(std::string(key));
  return it == meta.end() ? std::string(fallback) : it->second;
}

trace::Strategy Model::strategy() const { return trace::parse_strategy(meta_value(trace::meta_key::kStrategy)); }

bool Model::sharded_units() const { return trace::is_fsdp_family(strategy()); }

const RankData* Model::rank(int32_t rank) const {
  for (const auto& r : ranks) {
    if (r.info.rank == rank) return &r;
  }
  return nullptr;
}

std::string span_label(const Model& model, const Span& span) {
  switch (span.kind()) {
    case EventKind::Phase:
    case EventKind::Mark: {
      const std::string& n = model.name(span.name());
      return n.empty() ? std::string(trace::to_string(span.kind())) : n;
    }
    case EventKind::Collective:
      return span.op() ? std::string(trace::to_string(*span.op())) : "collective";
    case EventKind::CollectiveWait:
      return span.op() ? "wait " + std::string(trace::to_string(*span.op())) : "wait";
    case EventKind::UnitState:
      return span.state() ? std::string(trace::to_string(*span.state())) : "unit_state";
    default:
      return std::string(trace::to_string(span.kind()));
  }
}

void build_rows(Lane& lane) {
  std::vector<Span> spans;
  spans.swap(lane.spans);
  std::vector<uint16_t> span_rows;
  build_rows(lane, spans, span_rows, 0);
}

void build_rows(Lane& lane, std::vector<Span>& spans, std::vector<uint16_t>& span_rows,
                size_t numbered) {
  std::vector<uint32_t> order(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    order[i] = i < numbered ? spans[i].same_begin_index() : kUnnumbered + static_cast<uint32_t>(i - numbered);
  }
  sort_spans(spans, order);
  number_same_begin(spans, order);
  // Each slice takes the lowest free row below every row whose open span encloses it
  // (Note [Lane rows]); instants go to their own row. row_end[r] is the end of the last span
  // placed in row r: spans come by begin, so that span is the only one of row r still open.
  span_rows.resize(spans.size());
  std::vector<int64_t> row_end;
  bool instants = false;
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    if (s.begin_ns == s.end_ns) {
      span_rows[i] = 0xffff;
      instants = true;
      continue;
    }
    // Below the deepest enclosing span, searched from the bottom: on a thread's lane the rows
    // under the parent have all closed, so this stops a row or two down.
    size_t row = row_end.size();
    while (row > 0 && row_end[row - 1] < s.end_ns) --row;
    while (row < row_end.size() && row_end[row] > s.begin_ns) ++row;
    if (row == row_end.size()) {
      if (row_end.size() < kMaxSliceRows) {
        row_end.push_back(s.end_ns);
      } else {
        row = kMaxSliceRows - 1;
      }
    }
    row_end[row] = std::max(row_end[row], s.end_ns);
    span_rows[i] = static_cast<uint16_t>(row);
  }
  const size_t slice_rows = row_end.size();
  const size_t rows = slice_rows + (instants ? 1 : 0);
  // Counting sort by row keeps each row in begin order. One row (a communication lane, a unit
  // lane) is already in order.
  std::vector<uint32_t> start(rows + 1, 0);
  auto row_of = [&](uint16_t d) { return d == 0xffff ? slice_rows : size_t{d}; };
  for (size_t i = 0; i < spans.size(); ++i) ++start[row_of(span_rows[i]) + 1];
  for (size_t r = 0; r < rows; ++r) start[r + 1] += start[r];
  if (rows <= 1) {
    lane.spans.assign(spans.begin(), spans.end());
  } else {
    lane.spans.resize(spans.size());
    std::vector<uint32_t> fill(start.begin(), start.end() - 1);
    for (size_t i = 0; i < spans.size(); ++i) lane.spans[fill[row_of(span_rows[i])]++] = spans[i];
  }
  lane.row_start = std::move(start);
  lane.has_instant_row = instants;
  lane.end_max_offset.assign(static_cast<size_t>(lane.rows()), Lane::kEndsInOrder);
  lane.disordered_end_max.clear();
  lane.longest_ns = 0;
  for (int r = 0; r < lane.rows(); ++r) {
    bool in_order = true;
    for (size_t i = lane.row_begin(r); i < lane.row_end(r); ++i) {
      if (i > lane.row_begin(r) && lane.spans[i].end_ns < lane.spans[i - 1].end_ns) in_order = false;
      lane.longest_ns = std::max(lane.longest_ns, lane.spans[i].end_ns - lane.spans[i].begin_ns);
    }
    if (in_order) continue;  // See Note [Sparse end_max]
    lane.end_max_offset[static_cast<size_t>(r)] = static_cast<uint32_t>(lane.disordered_end_max.size());
    int64_t running = INT64_MIN;
    for (size_t i = lane.row_begin(r); i < lane.row_end(r); ++i) {
      running = std::max(running, lane.spans[i].end_ns);
      lane.disordered_end_max.push_back(running);
    }
  }
}

}  // namespace dpscope::view
