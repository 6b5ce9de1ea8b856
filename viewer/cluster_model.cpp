// The cluster clock's Model (cluster_model.h): the trace read once more with every event and
// memory sample mapped onto the cluster clock, sorted into lanes as load_model does, and its
// statistics on that clock.
#include "viewer/cluster_model.h"

#include <algorithm>
#include <utility>

#include "analysis/stats.h"
#include "trace/reader.h"

namespace dpscope::view {
namespace {

// The drawing columns of `e` as the reader's bulk scan packs them (trace::EventSpan), so that a
// mapped event becomes a Span by the one unpacking there is (Span::from_trace).
trace::EventSpan packed(const trace::Event& e) {
  trace::EventSpan row;
  row.begin_ns = e.begin_ns;
  row.end_ns = e.end_ns;
  row.name = e.name;
  row.seq_or_iteration = e.seq != trace::kNone64 ? static_cast<int32_t>(e.seq) : e.iteration;
  row.rank = e.rank;
  row.lane = e.lane;
  row.bucket_or_unit = static_cast<int16_t>(e.bucket != trace::kNone ? e.bucket : e.unit);
  row.kind = e.kind;
  row.op = e.op;
  return row;
}

// `measured`'s tables and ranks with empty lanes and its memory series mapped by `run`.
std::shared_ptr<Model> empty_copy(const Model& measured, const analysis::ClusterClockRun& run) {
  auto model = std::make_shared<Model>();
  model->path = measured.path;
  model->schema_version = measured.schema_version;
  model->meta = measured.meta;
  model->names = measured.names;
  model->params = measured.params;
  model->buckets = measured.buckets;
  model->units = measured.units;
  model->unit_shards = measured.unit_shards;
  model->file_device = measured.file_device;
  model->file_inode = measured.file_inode;
  model->events_read_to = measured.events_read_to;
  model->memory_read_to = measured.memory_read_to;
  for (const RankData& from : measured.ranks) {
    RankData rank;
    rank.info = from.info;
    rank.lanes.resize(from.lanes.size());
    for (size_t l = 0; l < from.lanes.size(); ++l) rank.lanes[l].info = from.lanes[l].info;
    for (size_t c = 0; c < rank.memory.size(); ++c) {
      rank.memory[c].bytes = from.memory[c].bytes;
      rank.memory[c].ts.reserve(from.memory[c].ts.size());
      for (const int64_t ts : from.memory[c].ts) rank.memory[c].ts.push_back(run.to_cluster(from.info.rank, ts));
    }
    model->ranks.push_back(std::move(rank));
  }
  return model;
}

}  // namespace

ClusterView cluster_view(const Model& measured, const std::optional<core::LinkSpec>& link) {
  trace::Reader reader(measured.path);
  auto replay = std::make_shared<const analysis::ClusterClockRun>(analysis::cluster_clock(reader, measured.path, link));
  const analysis::ClusterClockRun& run = *replay;
  std::shared_ptr<Model> model = empty_copy(measured, run);
  // for_each_event comes by (rank, lane, begin): each lane's spans arrive together.
  std::vector<Span> spans;
  std::vector<uint16_t> span_rows;
  Lane* lane = nullptr;
  auto finish_lane = [&] {
    if (!lane) return;
    build_rows(*lane, spans, span_rows, 0);
    // Their events are found by measured times (Note [Span to event]): none to look up here.
    for (Span& s : lane->spans) s.set_same_begin_index(Span::kNoEvent);
    spans.clear();
  };
  reader.for_each_event([&](const trace::Event& e) {
    if (e.rank < 0 || e.lane < 0) return true;
    if (!lane || lane->info.rank != e.rank || lane->info.lane != e.lane) {
      finish_lane();  // before ranks or lanes grow, which moves them
      RankData* rank = nullptr;
      for (RankData& r : model->ranks) rank = r.info.rank == e.rank ? &r : rank;
      if (!rank) {
        model->ranks.emplace_back();  // a rank the ranks table lacks, as load_model draws it
        rank = &model->ranks.back();
        rank->info.rank = e.rank;
      }
      if (rank->lanes.size() <= size_t(e.lane)) rank->lanes.resize(size_t(e.lane) + 1);
      lane = &rank->lanes[size_t(e.lane)];
      lane->info.rank = e.rank;
      lane->info.lane = e.lane;
      if (lane->info.name.empty()) lane->info.name = "lane " + std::to_string(e.lane);
    }
    spans.push_back(Span::from_trace(packed(run.to_cluster(e))));
    return true;
  });
  finish_lane();
  std::sort(model->ranks.begin(), model->ranks.end(),
            [](const RankData& a, const RankData& b) { return a.info.rank < b.info.rank; });
  // Empty lanes get their rows too, as load_model leaves them.
  for (RankData& rank : model->ranks) {
    for (Lane& l : rank.lanes) {
      if (l.row_start.empty()) build_rows(l);
    }
  }
  derive_from_rows(*model);
  model->load_ms = measured.load_ms;

  ClusterView view;
  view.label = analysis::ClockLabel{analysis::Clock::Cluster, run.link.gbps, run.link.latency_us, run.compute};
  view.warnings = run.warnings;
  view.analysis = std::make_shared<const Analysis>(analyze(*model, analysis::compute_stats(reader, run)));
  view.model = std::move(model);
  view.run = std::move(replay);
  return view;
}

}  // namespace dpscope::view
