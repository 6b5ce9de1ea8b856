// DetailSource (detail_source.h): a span's own event by its place in its lane, and lane ranges,
// through one trace::Reader, cached.
#include "viewer/detail_source.h"

namespace dpscope::view {

DetailSource::DetailSource(const std::string& path) : reader_(path) {}

const trace::Event* DetailSource::event(const Model& model, const SpanRef& ref) {
  const auto key = std::make_tuple(ref.rank, ref.lane, ref.index);
  auto it = by_ref_.find(key);
  if (it != by_ref_.end()) return &it->second;
  const Span& s = span_of(model, ref);
  if (s.same_begin_index() == Span::kNoEvent) return nullptr;
  const RankData& rank = model.ranks[static_cast<size_t>(ref.rank)];
  const trace::LaneId lane = rank.lanes[static_cast<size_t>(ref.lane)].info.lane;
  // Longest 0: only the events that begin at s.begin_ns, by (begin_ns, id). See Note [Span to event].
  const std::vector<trace::Event> beginning =
      reader_.events(rank.info.rank, lane, s.begin_ns, s.begin_ns, 0);
  if (s.same_begin_index() >= beginning.size()) return nullptr;
  const trace::Event& e = beginning[s.same_begin_index()];
  // A file replaced under the viewer (--live) may hold another event there.
  if (e.end_ns != s.end_ns || e.kind != s.kind()) return nullptr;
  return &(by_ref_[key] = e);
}

const std::vector<trace::Event>& DetailSource::events(int32_t rank, const Lane& lane, int64_t t0,
                                                      int64_t t1) {
  const auto key = std::make_tuple(rank, int32_t{lane.info.lane}, t0, t1);
  auto it = ranges_.find(key);
  if (it != ranges_.end()) return it->second;
  if (ranges_.size() > 256) ranges_.clear();
  return ranges_[key] = reader_.events(rank, lane.info.lane, t0, t1, lane.longest_ns);
}

}  // namespace dpscope::view
