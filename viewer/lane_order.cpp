// The lanes' drawing order and names (lane_order.h): dpscope's own runs as recorded, with U's
// secondary lanes marked; a profiler trace's GPU streams first, each by the role its busy time
// says, then its CPU threads (Note [GPU first]).
#include "viewer/lane_order.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <tuple>

#include "analysis/gpu_breakdown.h"
#include "viewer/model.h"

namespace dpscope::view {
namespace {

// In dpscope's own runs, the lanes U folds: an FSDP unit's, or a comm lane other than the rank's
// busiest — the process group that carries the training (the world's for DDP and FSDP; HSDP's
// shard group, where the world's lane holds construction only and the replicate group's one
// all-reduce a group); of two equally busy ones the first stays.
bool is_secondary_recorded_lane(const RankData& rank, size_t lane_index) {
  const trace::LaneKind kind = rank.lanes[lane_index].info.kind;
  if (kind == trace::LaneKind::Unit) return true;
  if (kind != trace::LaneKind::Comm) return false;
  const size_t mine = rank.lanes[lane_index].spans.size();
  for (size_t li = 0; li < rank.lanes.size(); ++li) {
    if (li == lane_index || rank.lanes[li].info.kind != trace::LaneKind::Comm) continue;
    const size_t other = rank.lanes[li].spans.size();
    if (other > mine || (other == mine && other > 0 && li < lane_index)) return true;
  }
  return false;
}

// The device and stream of a lane the import named "GPU d stream s", or nullopt.
struct StreamName {
  long device = 0, stream = 0;
};
std::optional<StreamName> parse_stream_name(const std::string& name) {
  StreamName parsed;
  int consumed = -1;
  if (std::sscanf(name.c_str(), "GPU %ld stream %ld%n", &parsed.device, &parsed.stream, &consumed) != 2 ||
      size_t(consumed) != name.size()) {
    return std::nullopt;
  }
  return parsed;
}

// The union of a lane's spans (instants take no time), and how much of it its collectives and
// its memory kernels take, in ns. The rows are each sorted by begin; they are merged by always
// taking the row whose next span begins first (a stream's lane has a few rows).
struct StreamTime {
  int64_t busy = 0, collectives = 0, memory = 0;
};
StreamTime stream_time(const Lane& lane, const std::vector<analysis::KernelClass>& classes) {
  StreamTime time;
  std::vector<size_t> next(size_t(lane.rows()));
  for (int row = 0; row < lane.rows(); ++row) next[size_t(row)] = lane.row_begin(row);
  int64_t open_begin = 0, open_end = std::numeric_limits<int64_t>::min();
  for (;;) {
    int earliest = -1;
    for (int row = 0; row < lane.rows(); ++row) {
      if (next[size_t(row)] == lane.row_end(row)) continue;
      if (earliest < 0 || lane.spans[next[size_t(row)]].begin_ns < lane.spans[next[size_t(earliest)]].begin_ns) {
        earliest = row;
      }
    }
    if (earliest < 0) break;
    const Span& s = lane.spans[next[size_t(earliest)]++];
    const int64_t length = s.end_ns - s.begin_ns;
    if (length <= 0) continue;
    if (s.kind() == trace::EventKind::Collective) time.collectives += length;
    const trace::NameId name = s.name();
    if (s.kind() == trace::EventKind::Mark && name >= 0 && size_t(name) < classes.size() &&
        classes[size_t(name)] == analysis::KernelClass::Memory) {
      time.memory += length;
    }
    if (s.begin_ns > open_end) {
      if (open_end > open_begin) time.busy += open_end - open_begin;
      open_begin = s.begin_ns;
      open_end = s.end_ns;
    } else {
      open_end = std::max(open_end, s.end_ns);
    }
  }
  if (open_end > open_begin) time.busy += open_end - open_begin;
  return time;
}

LaneRole stream_role(const StreamTime& time) {
  if (time.busy > 0 && 2 * time.collectives >= time.busy) return LaneRole::GpuCommunication;
  if (time.busy > 0 && 2 * time.memory >= time.busy) return LaneRole::GpuMemory;
  return LaneRole::GpuCompute;
}

std::string stream_label(LaneRole role, const StreamName& name) {
  const char* what = role == LaneRole::GpuCommunication ? "NCCL" : role == LaneRole::GpuMemory ? "memcpy" : "compute";
  return "GPU " + std::to_string(name.device) + " " + what + " (stream " + std::to_string(name.stream) + ")";
}

// The rank's lanes as recorded: every lane with spans in lane order, under its own name.
std::vector<DrawnLane> as_recorded(const RankData& rank) {
  std::vector<DrawnLane> drawn;
  for (size_t li = 0; li < rank.lanes.size(); ++li) {
    if (rank.lanes[li].spans.empty()) continue;
    drawn.push_back({uint32_t(li), LaneRole::Recorded,
                     is_secondary_recorded_lane(rank, li) ? LanePriority::Secondary : LanePriority::Primary,
                     rank.lanes[li].info.name});
  }
  return drawn;
}

// A GPU-first rank's lanes (Note [GPU first]), or nullopt when its Stream lanes are not all named
// as the import names them (or it has none).
std::optional<std::vector<DrawnLane>> gpu_first(const RankData& rank, const std::vector<analysis::KernelClass>& classes) {
  struct Stream {
    DrawnLane drawn;
    long device;
    int group;  // 0: the busiest compute stream, 1: NCCL, 2: the other compute streams, 3: memcpy
    int64_t busy;
  };
  std::vector<Stream> streams;
  std::vector<DrawnLane> threads;
  for (size_t li = 0; li < rank.lanes.size(); ++li) {
    const Lane& lane = rank.lanes[li];
    if (lane.info.kind != trace::LaneKind::Stream) {
      if (lane.spans.empty()) continue;
      const bool main = li == 0;
      threads.push_back({uint32_t(li), main ? LaneRole::MainThread : LaneRole::OtherThread,
                         main ? LanePriority::Supporting : LanePriority::Secondary, lane.info.name});
      continue;
    }
    const std::optional<StreamName> name = parse_stream_name(lane.info.name);
    if (!name) return std::nullopt;
    if (lane.spans.empty()) continue;
    const StreamTime time = stream_time(lane, classes);
    const LaneRole role = stream_role(time);
    const int group = role == LaneRole::GpuCommunication ? 1 : role == LaneRole::GpuMemory ? 3 : 2;
    streams.push_back({{uint32_t(li), role, LanePriority::Primary, stream_label(role, *name)}, name->device, group, time.busy});
  }
  if (streams.empty()) return std::nullopt;
  const auto busiest_first = [](const Stream& a, const Stream& b) {
    return std::make_tuple(a.device, a.group, -a.busy, a.drawn.lane) < std::make_tuple(b.device, b.group, -b.busy, b.drawn.lane);
  };
  std::sort(streams.begin(), streams.end(), busiest_first);
  // Each device's busiest compute stream goes before its NCCL streams.
  for (size_t i = 0; i < streams.size(); ++i) {
    if (streams[i].group == 2 && (i == 0 || streams[i - 1].device != streams[i].device || streams[i - 1].group == 1)) {
      streams[i].group = 0;
    }
  }
  std::sort(streams.begin(), streams.end(), busiest_first);
  std::vector<DrawnLane> drawn;
  for (Stream& s : streams) drawn.push_back(std::move(s.drawn));
  for (DrawnLane& t : threads) drawn.push_back(std::move(t));
  return drawn;
}

}  // namespace

bool is_gpu_role(LaneRole role) {
  return role == LaneRole::GpuCompute || role == LaneRole::GpuCommunication || role == LaneRole::GpuMemory;
}

void arrange_lanes(Model& model) {
  std::vector<analysis::KernelClass> classes;
  for (RankData& rank : model.ranks) {
    const bool has_streams = std::any_of(rank.lanes.begin(), rank.lanes.end(),
                                         [](const Lane& l) { return l.info.kind == trace::LaneKind::Stream; });
    if (has_streams && classes.empty()) classes = analysis::classify_names(model.names);
    std::optional<std::vector<DrawnLane>> gpu = has_streams ? gpu_first(rank, classes) : std::nullopt;
    rank.arrangement = gpu ? LaneArrangement::GpuFirst : LaneArrangement::AsRecorded;
    rank.drawn_lanes = gpu ? std::move(*gpu) : as_recorded(rank);
  }
}

const std::string& lane_label(const RankData& rank, size_t lane) {
  for (const DrawnLane& d : rank.drawn_lanes) {
    if (d.lane == lane) return d.label;
  }
  return rank.lanes[lane].info.name;
}

}  // namespace dpscope::view
