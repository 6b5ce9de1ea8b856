// What a model derives from its rows (model_derive.h): series order and peaks, memory peaks,
// iterations, extents and totals, for the loader and for derive_from_rows (the cluster clock's
// model, whose times moved).
#include "viewer/model_derive.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <vector>

namespace dpscope::view {
namespace detail {

using trace::EventKind;
using trace::kNone;
constexpr size_t kCategories = trace::kMemoryCategoryCount;

PhaseNames phase_names(const Model& model) {
  PhaseNames names;
  for (size_t id = 0; id < model.names.size(); ++id) {
    if (model.names[id] == trace::kPhaseForward) names.forward = static_cast<trace::NameId>(id);
    if (model.names[id] == trace::kPhaseIteration) names.iteration = static_cast<trace::NameId>(id);
  }
  return names;
}

void sort_series(MemorySeries& series) {
  if (std::is_sorted(series.ts.begin(), series.ts.end())) return;
  std::vector<size_t> order(series.ts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return series.ts[a] < series.ts[b]; });
  MemorySeries sorted;
  sorted.ts.reserve(order.size());
  sorted.bytes.reserve(order.size());
  for (size_t i : order) {
    sorted.ts.push_back(series.ts[i]);
    sorted.bytes.push_back(series.bytes[i]);
  }
  series.ts = std::move(sorted.ts);
  series.bytes = std::move(sorted.bytes);
}

void set_memory_peak(RankData& rank, const analysis::MemoryAtPeak& peak) {
  rank.memory_peak_bytes = peak.total_bytes;
  const MemorySeries& gpu = rank.memory[static_cast<size_t>(trace::MemoryCategory::CudaAllocated)];
  for (const int64_t bytes : gpu.bytes) rank.gpu_memory_peak_bytes = std::max(rank.gpu_memory_peak_bytes, bytes);
  rank.memory_peak_ns = peak.found() ? peak.ts_ns : 0;
}

// The categories' series merged back into samples in time order, as the trace's definition and
// code have them (analysis/memory_peak.h).
void find_memory_peak(RankData& rank) {
  analysis::MemoryPeakFinder finder;
  std::array<size_t, kCategories> at{};
  for (;;) {
    int64_t t = INT64_MAX;
    for (size_t c = 0; c < kCategories; ++c) {
      if (at[c] < rank.memory[c].ts.size()) t = std::min(t, rank.memory[c].ts[at[c]]);
    }
    if (t == INT64_MAX) break;
    for (size_t c = 0; c < kCategories; ++c) {
      const MemorySeries& series = rank.memory[c];
      for (; at[c] < series.ts.size() && series.ts[at[c]] == t; ++at[c]) {
        finder.add(t, static_cast<trace::MemoryCategory>(c), series.bytes[at[c]]);
      }
    }
  }
  set_memory_peak(rank, finder.finish());
}

void build_iterations(RankData& rank, trace::NameId iteration, trace::NameId forward) {
  rank.iterations.clear();
  for (const Lane& lane : rank.lanes) {
    for (const Span& s : lane.spans) {
      if (s.kind() == EventKind::Phase && s.name() == iteration && iteration != kNone &&
          s.iteration() != kNone) {
        rank.iterations.push_back({s.iteration(), s.begin_ns, s.end_ns});
      }
    }
  }
  std::sort(rank.iterations.begin(), rank.iterations.end(),
            [](const IterationSpan& a, const IterationSpan& b) { return a.begin_ns < b.begin_ns; });
  if (!rank.iterations.empty() || forward == kNone) return;
  // No "iteration" phases: an iteration runs from one forward to the next.
  std::vector<int64_t> starts;
  for (const Lane& lane : rank.lanes) {
    for (const Span& s : lane.spans) {
      if (s.kind() == EventKind::Phase && s.name() == forward) starts.push_back(s.begin_ns);
    }
  }
  std::sort(starts.begin(), starts.end());
  int64_t last_end = 0;
  for (const Lane& lane : rank.lanes) {
    const int last_row = lane.rows() - 1;
    if (last_row >= 0 && lane.row_end(last_row) > lane.row_begin(last_row)) {
      last_end = std::max(last_end, lane.end_max(last_row, lane.row_end(last_row) - 1));
    }
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t end = i + 1 < starts.size() ? starts[i + 1] : last_end;
    rank.iterations.push_back({static_cast<int32_t>(i), starts[i], end});
  }
}

namespace {

// The first begin and the last end of each row of `lane` that has spans, to `extend`.
template <class Extend>
void lane_extent(const Lane& lane, Extend extend) {
  for (int row = 0; row < lane.rows(); ++row) {
    if (lane.row_begin(row) == lane.row_end(row)) continue;
    extend(lane.spans[lane.row_begin(row)].begin_ns, lane.end_max(row, lane.row_end(row) - 1));
  }
}

}  // namespace

void set_rank_extent(RankData& r) {
  bool any = false;
  const auto extend = [&](int64_t first, int64_t last) {
    r.t_begin = any ? std::min(r.t_begin, first) : first;
    r.t_end = any ? std::max(r.t_end, last) : last;
    any = true;
  };
  for (const Lane& lane : r.lanes) lane_extent(lane, extend);
  for (const MemorySeries& series : r.memory) {
    if (!series.ts.empty()) extend(series.ts.front(), series.ts.back());
  }
  if (!any) r.t_begin = r.t_end = 0;
}

void summarize(Model& model) {
  bool any = false;
  model.events = 0;
  model.iterations = 0;
  for (RankData& r : model.ranks) {
    model.events += r.events;
    for (const Lane& lane : r.lanes) {
      lane_extent(lane, [&](int64_t first, int64_t last) {
        model.t_begin = any ? std::min(model.t_begin, first) : first;
        model.t_end = any ? std::max(model.t_end, last) : last;
        any = true;
      });
    }
    set_rank_extent(r);
    for (const auto& it : r.iterations) model.iterations = std::max(model.iterations, it.iteration + 1);
  }
  if (!any) model.t_begin = model.t_end = 0;
}

}  // namespace detail

void derive_from_rows(Model& model) {
  const detail::PhaseNames phases = detail::phase_names(model);
  for (RankData& rank : model.ranks) {
    rank.events = 0;
    for (const Lane& lane : rank.lanes) rank.events += static_cast<int64_t>(lane.spans.size());
    for (MemorySeries& series : rank.memory) {
      detail::sort_series(series);
      series.peak = 0;
      for (int64_t b : series.bytes) series.peak = std::max(series.peak, b);
    }
    rank.gpu_memory_peak_bytes = -1;
    detail::find_memory_peak(rank);
    detail::build_iterations(rank, phases.iteration, phases.forward);
  }
  detail::summarize(model);
  arrange_lanes(model);
}

}  // namespace dpscope::view
