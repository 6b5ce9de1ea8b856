// Flight-recorder dumps both ways (flight_recorder.h, Note [Flight-recorder fields]): the export
// of a trace's collectives as one JSON dump per rank, and the import of JSON or pickle dumps.
#include "formats/flight_recorder.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "formats/pickle_reader.h"
#include "trace/collective_state.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"
#include "trace/writer.h"

namespace dpscope::formats {
namespace {

using ExportJson = nlohmann::ordered_json;

// LibTorch's names of the trace's dtypes, in trace::DType's order, and their sizes.
constexpr std::array<std::string_view, trace::kDTypeCount> kTorchDTypes = {
    "Float", "Half", "BFloat16", "Double", "Long", "Int", "Char", "Byte", "Bool"};
constexpr std::array<int64_t, trace::kDTypeCount> kDTypeBytes = {4, 2, 2, 8, 8, 4, 1, 1, 1};

std::string_view torch_dtype(uint8_t dtype) {
  return dtype < trace::kDTypeCount ? kTorchDTypes[dtype] : std::string_view("Byte");
}
int64_t dtype_bytes(uint8_t dtype) { return dtype < trace::kDTypeCount ? kDTypeBytes[dtype] : 1; }

// The NCCL profiling names the analyzer knows, by dpscope's op; empty where it has none.
std::string_view profiling_op(trace::CollectiveOp op) {
  switch (op) {
    case trace::CollectiveOp::Broadcast: return "broadcast";
    case trace::CollectiveOp::AllReduce: return "all_reduce";
    case trace::CollectiveOp::AllGather: return "_all_gather_base";
    case trace::CollectiveOp::ReduceScatter: return "_reduce_scatter_base";
    case trace::CollectiveOp::Barrier: return "all_reduce_barrier";
    case trace::CollectiveOp::AllToAll: return "all_to_all";
    case trace::CollectiveOp::SendRecv: return "";
  }
  return "";
}

std::string_view state_word(trace::CollectiveEndState state) {
  switch (state) {
    case trace::CollectiveEndState::Completed: return "completed";
    case trace::CollectiveEndState::Started: return "started";
    case trace::CollectiveEndState::Issued: return "scheduled";
  }
  return "scheduled";
}

std::string ranks_text(const std::set<int32_t>& ranks) {
  std::string out = "[";
  for (const int32_t r : ranks) out += (out.size() > 1 ? ", " : "") + std::to_string(r);
  return out + "]";
}

// The name of each group as its communication lane says it: "gloo comm (world)" -> "world".
std::map<int32_t, std::string> group_names(trace::Reader& reader, const std::vector<trace::Event>& collectives) {
  std::map<std::pair<int32_t, int32_t>, std::string> lane_names;
  for (const trace::LaneInfo& lane : reader.lanes()) lane_names[{lane.rank, lane.lane}] = lane.name;
  std::map<int32_t, std::string> names;
  for (const trace::Event& e : collectives) {
    if (names.count(e.grp)) continue;
    const std::string& lane = lane_names[{e.rank, e.lane}];
    const size_t open = lane.rfind('('), close = lane.rfind(')');
    names[e.grp] = open != std::string::npos && close != std::string::npos && close > open + 1
                       ? lane.substr(open + 1, close - open - 1)
                       : (e.grp == 0 ? "world" : "group " + std::to_string(e.grp));
  }
  return names;
}

ExportJson entry_json(const trace::Event& e, int64_t record_id, const std::string& group_name, int32_t group_size) {
  const auto op = static_cast<trace::CollectiveOp>(e.op);
  const trace::CollectiveEndState state = trace::collective_end_state(e.flags);
  const int64_t elements = e.bytes > 0 ? e.bytes / dtype_bytes(e.dtype) : 0;
  int64_t in = elements, out = elements;
  if (op == trace::CollectiveOp::AllGather) out = elements * group_size;
  if (op == trace::CollectiveOp::ReduceScatter) out = group_size > 0 ? elements / group_size : elements;
  const int64_t seq_id = e.seq + 1;
  const bool started = state != trace::CollectiveEndState::Issued;
  const bool completed = state == trace::CollectiveEndState::Completed;
  ExportJson j;
  j["record_id"] = record_id;
  j["pg_id"] = e.grp;
  j["process_group"] = ExportJson::array({std::to_string(e.grp), group_name});
  j["thread_name"] = "dpscope comm";
  j["thread_id"] = "0";
  j["collective_seq_id"] = seq_id;
  j["p2p_seq_id"] = 0;
  j["op_id"] = seq_id;
  j["profiling_name"] = "nccl:" + std::string(profiling_op(op));
  j["time_created_ns"] = e.enqueue_ns != trace::kNone64 ? e.enqueue_ns : e.begin_ns;
  if (completed) j["duration_ms"] = static_cast<double>(e.end_ns - e.begin_ns) / 1e6;
  j["input_sizes"] = ExportJson::array({ExportJson::array({in})});
  j["input_dtypes"] = ExportJson::array({std::string(torch_dtype(e.dtype))});
  j["output_sizes"] = ExportJson::array({ExportJson::array({out})});
  j["output_dtypes"] = ExportJson::array({std::string(torch_dtype(e.dtype))});
  j["state"] = std::string(state_word(state));
  j["time_discovered_started_ns"] = started ? e.begin_ns : 0;
  j["time_discovered_completed_ns"] = completed ? e.end_ns : 0;
  j["retired"] = completed;
  j["timeout_ms"] = 0;
  j["is_p2p"] = false;
  j["frames"] = ExportJson::array();
  return j;
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string temp = path + ".writing-" + std::to_string(::getpid());
  {
    std::ofstream file(temp, std::ios::binary | std::ios::trunc);
    file << text;
    file.flush();
    if (!file) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      throw FlightRecorderError("export: cannot write " + path + "; check the folder exists and has room");
    }
  }
  std::error_code error;
  std::filesystem::rename(temp, path, error);
  if (error) {
    std::filesystem::remove(temp, error);
    throw FlightRecorderError("export: cannot write " + path + " (" + error.message() + ")");
  }
}

}  // namespace

std::vector<std::string> export_flight_recorder(trace::Reader& reader, const std::string& dir) {
  std::vector<trace::Event> collectives = reader.events_of_kind(trace::EventKind::Collective);
  collectives.erase(std::remove_if(collectives.begin(), collectives.end(),
                                   [](const trace::Event& e) { return e.seq == trace::kNone64 || e.grp == trace::kNone; }),
                    collectives.end());
  const std::map<int32_t, std::string> names = group_names(reader, collectives);
  std::vector<int32_t> run_ranks;
  for (const trace::RankInfo& r : reader.ranks()) run_ranks.push_back(r.rank);
  // See Note [Subgroup collectives] in analysis/collective_match.h: a group's ranks are those that
  // recorded its collectives, the world group every rank.
  std::map<int32_t, std::set<int32_t>> members;
  for (const trace::Event& e : collectives) members[e.grp].insert(e.rank);
  for (auto& [grp, ranks] : members) {
    if (grp == 0 || ranks.size() == 1) ranks.insert(run_ranks.begin(), run_ranks.end());
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw FlightRecorderError("export: cannot make the folder " + dir + " (" + error.message() + ")");
  const std::string backend = reader.meta_value(std::string(trace::meta_key::kBackend), "gloo");
  std::vector<std::string> paths;
  for (const int32_t rank : run_ranks) {
    std::vector<const trace::Event*> mine;
    for (const trace::Event& e : collectives) {
      if (e.rank == rank) mine.push_back(&e);
    }
    // Issue order over the rank's groups: by the time each was issued.
    std::stable_sort(mine.begin(), mine.end(), [](const trace::Event* a, const trace::Event* b) {
      const int64_t ta = a->enqueue_ns != trace::kNone64 ? a->enqueue_ns : a->begin_ns;
      const int64_t tb = b->enqueue_ns != trace::kNone64 ? b->enqueue_ns : b->begin_ns;
      return ta != tb ? ta < tb : (a->grp != b->grp ? a->grp < b->grp : a->seq < b->seq);
    });
    ExportJson dump;
    dump["version"] = std::string(kFlightRecorderVersion);
    dump["comm_lib_version"] = "dpscope " + backend;
    ExportJson pg_config = ExportJson::object();
    ExportJson pg_status = ExportJson::object();
    for (const auto& [grp, ranks] : members) {
      if (!ranks.count(rank)) continue;
      const std::string name = std::to_string(grp);
      pg_config[name] = ExportJson{{"name", name}, {"desc", names.at(grp)}, {"ranks", ranks_text(ranks)}};
      int64_t enqueued = -1, started = -1, completed = -1;
      for (const trace::Event* e : mine) {
        if (e->grp != grp) continue;
        const trace::CollectiveEndState state = trace::collective_end_state(e->flags);
        enqueued = std::max(enqueued, e->seq + 1);
        if (state != trace::CollectiveEndState::Issued) started = std::max(started, e->seq + 1);
        if (state == trace::CollectiveEndState::Completed) completed = std::max(completed, e->seq + 1);
      }
      pg_status[name] = ExportJson{{"last_enqueued_collective", std::to_string(enqueued)},
                             {"last_started_collective", std::to_string(started)},
                             {"last_completed_collective", std::to_string(completed)}};
    }
    dump["pg_config"] = pg_config;
    dump["pg_status"] = pg_status;
    ExportJson entries = ExportJson::array();
    for (size_t i = 0; i < mine.size(); ++i) {
      entries.push_back(entry_json(*mine[i], static_cast<int64_t>(i), names.at(mine[i]->grp),
                                   static_cast<int32_t>(members.at(mine[i]->grp).size())));
    }
    dump["entries"] = entries;
    const std::string path = (std::filesystem::path(dir) / ("rank_" + std::to_string(rank))).string();
    write_atomically(path, dump.dump(-1, ' ', false, ExportJson::error_handler_t::replace));
    paths.push_back(path);
  }
  return paths;
}

bool is_flight_recorder_dump(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return false;
  std::string head(64 * 1024, '\0');
  file.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(file.gcount()));
  if (!head.empty() && static_cast<uint8_t>(head[0]) == 0x80) return true;
  const size_t first = head.find_first_not_of(" \t\r\n");
  return first != std::string::npos && head[first] == '{' && head.find("\"pg_config\"") != std::string::npos;
}

}  // namespace dpscope::formats
