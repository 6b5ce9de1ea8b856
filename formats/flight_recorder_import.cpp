// The flight-recorder import (flight_recorder.h, Note [Flight-recorder fields]): dumps, JSON or
// pickle, checked field by field, into a run file whose collectives carry their states.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "formats/flight_recorder.h"
#include "formats/pickle_reader.h"
#include "trace/collective_state.h"
#include "trace/error.h"
#include "trace/vocabulary.h"
#include "trace/writer.h"

namespace dpscope::formats {
namespace {

using DumpJson = nlohmann::json;

constexpr std::array<std::string_view, trace::kDTypeCount> kTorchDTypeNames = {
    "Float", "Half", "BFloat16", "Double", "Long", "Int", "Char", "Byte", "Bool"};
constexpr std::array<int64_t, trace::kDTypeCount> kTorchDTypeBytes = {4, 2, 2, 8, 8, 4, 1, 1, 1};

struct Dump {
  std::string file;
  int32_t rank = 0;
  DumpJson root;
};

// A value from the dump as an error message quotes it: on one line, control characters and
// bytes past ASCII as \xNN, at most 40 of them.
std::string quoted_value(const std::string& value) {
  std::string out;
  for (size_t i = 0; i < value.size() && i < 40; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  return "'" + out + (value.size() > 40 ? "...'" : "'");
}

[[noreturn]] void refuse_dump(const std::string& file, const std::string& what) {
  throw FlightRecorderError(file + ": not a flight-recorder dump dpscope reads: " + what);
}

int32_t rank_of_file_name(const std::string& file) {
  static const std::regex trailing(R"((\d+)$)");
  const std::string name = std::filesystem::path(file).filename().string();
  std::smatch match;
  if (!std::regex_search(name, match, trailing) || match[1].length() > 5 || std::stoi(match[1]) > INT16_MAX) {
    throw FlightRecorderError(file + ": a flight-recorder dump's name ends with its rank (rank_3, "
                                     "nccl_trace_rank_3), as PyTorch's analyzer reads it; rename it so");
  }
  return std::stoi(match[1]);
}

Dump read_dump(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw FlightRecorderError(file + ": cannot open it; check the path");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string text = bytes.str();
  Dump dump{file, rank_of_file_name(file), {}};
  if (!text.empty() && static_cast<uint8_t>(text[0]) == 0x80) {
    try {
      dump.root = read_pickle(text, file);
    } catch (const PickleError& error) {
      throw FlightRecorderError(error.what());
    }
  } else {
    try {
      dump.root = DumpJson::parse(text);
    } catch (const DumpJson::exception& error) {
      // parse_error, and out_of_range for a number past 64 bits (the fuzzer's first finding).
      refuse_dump(file, std::string("bad JSON (") + error.what() + "); a truncated or damaged dump?");
    }
  }
  if (!dump.root.is_object()) refuse_dump(file, "its top level is not a dict");
  const DumpJson& version = dump.root.contains("version") ? dump.root["version"] : DumpJson();
  if (!version.is_string() || version.get<std::string>().rfind("2.", 0) != 0) {
    refuse_dump(file, "no version \"2.x\" (dpscope reads the dumps of FlightRecorder.hpp's version 2)");
  }
  if (!dump.root.contains("pg_config") || !dump.root["pg_config"].is_object()) refuse_dump(file, "no pg_config dict");
  if (dump.root.contains("entries") && !dump.root["entries"].is_array()) refuse_dump(file, "entries is not a list");
  return dump;
}

// A field of entry `index` of `file`, of the type `check` accepts.
const DumpJson& entry_field(const Dump& d, const DumpJson& entry, size_t index, const char* name, bool (DumpJson::*check)() const) {
  if (!entry.contains(name) || !(entry[name].*check)()) {
    refuse_dump(d.file, std::string("entry ") + std::to_string(index) + " has no " + name + " of the right type");
  }
  return entry[name];
}

int64_t time_or_zero(const DumpJson& entry, const char* name) {
  if (!entry.contains(name) || !entry[name].is_number_integer()) return 0;
  return std::max<int64_t>(0, entry[name].get<int64_t>());
}

// "nccl:all_reduce" -> the op; false for what dpscope has no op for (gather, scatter, reduce,
// coalesced markers).
bool op_of_profiling_name(const std::string& profiling_name, trace::CollectiveOp& op) {
  const size_t colon = profiling_name.find(':');
  std::string name = colon == std::string::npos ? profiling_name : profiling_name.substr(colon + 1);
  name = name.substr(0, name.find(' '));
  static const std::map<std::string, trace::CollectiveOp> kOps = {
      {"all_reduce", trace::CollectiveOp::AllReduce},
      {"allreduce_coalesced", trace::CollectiveOp::AllReduce},
      {"broadcast", trace::CollectiveOp::Broadcast},
      {"_broadcast_oop", trace::CollectiveOp::Broadcast},
      {"all_gather", trace::CollectiveOp::AllGather},
      {"_all_gather_base", trace::CollectiveOp::AllGather},
      {"all_gather_into_tensor_coalesced", trace::CollectiveOp::AllGather},
      {"reduce_scatter", trace::CollectiveOp::ReduceScatter},
      {"_reduce_scatter_base", trace::CollectiveOp::ReduceScatter},
      {"reduce_scatter_tensor_coalesced", trace::CollectiveOp::ReduceScatter},
      {"all_reduce_barrier", trace::CollectiveOp::Barrier},
      {"barrier", trace::CollectiveOp::Barrier},
      {"all_to_all", trace::CollectiveOp::AllToAll},
      {"send", trace::CollectiveOp::SendRecv},
      {"recv", trace::CollectiveOp::SendRecv},
  };
  const auto found = kOps.find(name);
  if (found == kOps.end()) return false;
  op = found->second;
  return true;
}

// Elements over the entry's input tensors, and its first dtype.
void size_of(const Dump& d, const DumpJson& entry, size_t index, int64_t& bytes, uint8_t& dtype) {
  int64_t elements = 0;
  if (entry.contains("input_sizes") && entry["input_sizes"].is_array()) {
    for (const DumpJson& shape : entry["input_sizes"]) {
      if (!shape.is_array()) refuse_dump(d.file, "entry " + std::to_string(index) + " has an input size that is not a list");
      int64_t n = 1;
      for (const DumpJson& dim : shape) {
        if (!dim.is_number_integer() || dim.get<int64_t>() < 0 || dim.get<int64_t>() > (int64_t{1} << 40)) {
          refuse_dump(d.file, "entry " + std::to_string(index) + " has an input size that is not a count");
        }
        n = std::min<int64_t>(n * std::max<int64_t>(dim.get<int64_t>(), 0), int64_t{1} << 50);
      }
      elements = std::min<int64_t>(elements + n, int64_t{1} << 50);
    }
  }
  dtype = 0xff;
  int64_t size = 1;
  if (entry.contains("input_dtypes") && entry["input_dtypes"].is_array() && !entry["input_dtypes"].empty() &&
      entry["input_dtypes"][0].is_string()) {
    const std::string name = entry["input_dtypes"][0].get<std::string>();
    for (size_t i = 0; i < kTorchDTypeNames.size(); ++i) {
      if (name == kTorchDTypeNames[i]) {
        dtype = static_cast<uint8_t>(i);
        size = kTorchDTypeBytes[i];
      }
    }
  }
  bytes = elements * size;
}

// The ranks of a pg_config entry: "[0, 1, 2]" (its usual form) or a list.
std::set<int32_t> ranks_of(const Dump& d, const DumpJson& config) {
  std::set<int32_t> ranks;
  if (!config.is_object() || !config.contains("ranks")) return ranks;
  const DumpJson& value = config["ranks"];
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  static const std::regex number(R"(\d+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), number); it != std::sregex_iterator(); ++it) {
    if (it->length() > 5 || std::stoi(it->str()) > INT16_MAX) refuse_dump(d.file, "a group rank out of range in pg_config");
    ranks.insert(std::stoi(it->str()));
  }
  return ranks;
}

struct Group {
  int16_t id = 0;
  std::string desc;
  std::set<int32_t> ranks;
};

void remove_partial_dump_import(const std::string& path) {
  std::error_code ignored;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix, ignored);
}

// Every group the dumps name, by its name: pg_config's description and ranks, and the id its
// entries carry (pg_id), else its place among the names.
std::map<std::string, Group> groups_of(const std::vector<Dump>& dumps) {
  std::map<std::string, Group> groups;
  for (const Dump& d : dumps) {
    for (const auto& [name, config] : d.root["pg_config"].items()) {
      Group& g = groups[name];
      if (config.is_object() && config.contains("desc") && config["desc"].is_string()) g.desc = config["desc"];
      const std::set<int32_t> ranks = ranks_of(d, config);
      g.ranks.insert(ranks.begin(), ranks.end());
    }
  }
  int16_t next = 0;
  for (auto& [name, g] : groups) g.id = next++;
  for (const Dump& d : dumps) {
    if (!d.root.contains("entries")) continue;
    for (const DumpJson& entry : d.root["entries"]) {
      if (!entry.is_object() || !entry.contains("process_group") || !entry["process_group"].is_array() ||
          entry["process_group"].empty() || !entry["process_group"][0].is_string()) {
        continue;
      }
      const auto found = groups.find(entry["process_group"][0].get<std::string>());
      if (found != groups.end() && entry.contains("pg_id") && entry["pg_id"].is_number_integer() &&
          entry["pg_id"].get<int64_t>() >= 0 && entry["pg_id"].get<int64_t>() <= INT16_MAX) {
        found->second.id = static_cast<int16_t>(entry["pg_id"].get<int64_t>());
      }
    }
  }
  return groups;
}

struct RankRows {
  std::vector<trace::Event> events;
  std::vector<trace::LaneInfo> lanes;
  int64_t start_ns = std::numeric_limits<int64_t>::max();
  int64_t end_ns = 0;
};

// One dump's entries as collective events on a lane per group.
RankRows rows_of(const Dump& d, std::map<std::string, Group>& groups) {
  RankRows rows;
  rows.lanes.push_back(trace::LaneInfo{d.rank, 0, "main", trace::LaneKind::Host});
  if (!d.root.contains("entries")) return rows;
  const DumpJson& entries = d.root["entries"];
  int64_t last_ns = 0;
  for (const DumpJson& entry : entries) {
    if (!entry.is_object()) continue;
    for (const char* name : {"time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns"}) {
      last_ns = std::max(last_ns, time_or_zero(entry, name));
    }
  }
  std::map<std::string, trace::LaneId> lane_of_group;
  for (size_t i = 0; i < entries.size(); ++i) {
    const DumpJson& entry = entries[i];
    if (!entry.is_object()) refuse_dump(d.file, "entry " + std::to_string(i) + " is not a dict");
    const int64_t seq_id = entry_field(d, entry, i, "collective_seq_id", &DumpJson::is_number_integer).get<int64_t>();
    const std::string profiling = entry_field(d, entry, i, "profiling_name", &DumpJson::is_string).get<std::string>();
    const DumpJson& pg = entry_field(d, entry, i, "process_group", &DumpJson::is_array);
    if (pg.empty() || !pg[0].is_string() || !groups.count(pg[0].get<std::string>())) {
      refuse_dump(d.file, "entry " + std::to_string(i) + " names a process group pg_config does not hold");
    }
    const std::string state = entry_field(d, entry, i, "state", &DumpJson::is_string).get<std::string>();
    if (state != "scheduled" && state != "started" && state != "completed") {
      refuse_dump(d.file, "entry " + std::to_string(i) + " has state " + quoted_value(state) + " (scheduled, started or completed)");
    }
    const int64_t created = entry_field(d, entry, i, "time_created_ns", &DumpJson::is_number_integer).get<int64_t>();
    trace::CollectiveOp op = trace::CollectiveOp::AllReduce;
    if (!op_of_profiling_name(profiling, op)) continue;  // a coalescing marker or an op dpscope has no word for
    const bool p2p = entry.contains("is_p2p") && entry["is_p2p"].is_boolean() && entry["is_p2p"].get<bool>();
    const Group& group = groups.at(pg[0].get<std::string>());
    auto [lane, added] = lane_of_group.emplace(pg[0].get<std::string>(), static_cast<trace::LaneId>(lane_of_group.size() + 1));
    if (added) {
      rows.lanes.push_back(trace::LaneInfo{d.rank, lane->second, "nccl comm (" + (group.desc.empty() ? pg[0].get<std::string>() : group.desc) + ")",
                                           trace::LaneKind::Comm});
    }
    trace::Event e;
    e.kind = trace::EventKind::Collective;
    e.rank = static_cast<int16_t>(d.rank);
    e.lane = lane->second;
    e.op = static_cast<uint8_t>(op);
    e.grp = group.id;
    e.seq = p2p || seq_id < 1 ? trace::kNone64 : seq_id - 1;
    size_of(d, entry, i, e.bytes, e.dtype);
    const trace::CollectiveEndState end_state = state == "completed" ? trace::CollectiveEndState::Completed
                                                : state == "started" ? trace::CollectiveEndState::Started
                                                                     : trace::CollectiveEndState::Issued;
    const int64_t started = time_or_zero(entry, "time_discovered_started_ns");
    const int64_t completed = time_or_zero(entry, "time_discovered_completed_ns");
    e.enqueue_ns = std::max<int64_t>(0, created);
    e.begin_ns = started > 0 ? started : e.enqueue_ns;
    e.end_ns = std::max(e.begin_ns, end_state == trace::CollectiveEndState::Completed && completed > 0 ? completed : last_ns);
    e.flags = trace::collective_state_flags(end_state);
    rows.start_ns = std::min(rows.start_ns, e.enqueue_ns);
    rows.end_ns = std::max(rows.end_ns, e.end_ns);
    rows.events.push_back(e);
  }
  return rows;
}

FlightRecorderImportResult write_run(trace::Writer& writer, const std::vector<Dump>& dumps,
                                     std::map<std::string, Group>& groups, const std::string& command_line) {
  FlightRecorderImportResult result;
  std::set<int32_t> all_ranks;
  for (const auto& [name, g] : groups) all_ranks.insert(g.ranks.begin(), g.ranks.end());
  std::string from;
  writer.begin();
  int64_t first_ns = std::numeric_limits<int64_t>::max();
  std::map<int32_t, RankRows> by_rank;
  for (const Dump& d : dumps) {
    all_ranks.insert(d.rank);
    from += (from.empty() ? "" : " ") + d.file;
    try {
      by_rank[d.rank] = rows_of(d, groups);
    } catch (const DumpJson::exception& error) {
      refuse_dump(d.file, std::string("a field of another type than the recorder writes (") + error.what() + ")");
    }
    first_ns = std::min(first_ns, by_rank[d.rank].start_ns);
  }
  if (first_ns == std::numeric_limits<int64_t>::max()) first_ns = 0;
  for (const int32_t rank : all_ranks) {
    trace::RankInfo info;
    info.rank = rank;
    info.local_rank = rank;
    info.device = "";
    const auto found = by_rank.find(rank);
    if (found == by_rank.end()) {
      info.start_ns = info.end_ns = first_ns;
      info.status = "no flight-recorder dump";
      writer.put_rank(info);
      writer.add_lane(trace::LaneInfo{rank, 0, "main", trace::LaneKind::Host});
      ++result.missing_ranks;
      continue;
    }
    RankRows& rows = found->second;
    for (const trace::LaneInfo& lane : rows.lanes) writer.add_lane(lane);
    for (const trace::Event& e : rows.events) writer.add_event(e);
    info.start_ns = rows.events.empty() ? first_ns : rows.start_ns;
    info.end_ns = rows.events.empty() ? first_ns : rows.end_ns;
    info.events = static_cast<int64_t>(rows.events.size());
    info.status = "flight-recorder dump";
    writer.put_rank(info);
    result.entries += info.events;
    ++result.ranks;
  }
  namespace key = trace::meta_key;
  writer.set_meta(key::kImportedFrom, "PyTorch flight recorder: " + from);
  writer.set_meta(key::kWorldSize, std::to_string(all_ranks.size()));
  writer.set_meta(key::kTraceLevel, trace::to_string(trace::TraceLevel::Summary));
  if (!command_line.empty()) writer.set_meta(key::kCommandLine, command_line);
  writer.commit();
  return result;
}

}  // namespace

FlightRecorderImportResult import_flight_recorder(const std::vector<std::string>& inputs,
                                                  const std::string& out, const std::string& command_line) {
  if (inputs.empty()) throw FlightRecorderError("import: no dumps; give one flight-recorder dump per rank");
  if (out.empty()) throw FlightRecorderError("import: no output; give -o RUN.sqlite");
  std::vector<Dump> dumps;
  std::set<int32_t> seen;
  for (const std::string& input : inputs) {
    dumps.push_back(read_dump(input));
    if (!seen.insert(dumps.back().rank).second) {
      throw FlightRecorderError(input + ": a second dump of rank " + std::to_string(dumps.back().rank) +
                                "; give one dump per rank");
    }
  }
  std::map<std::string, Group> groups;
  try {
    groups = groups_of(dumps);
  } catch (const DumpJson::exception& error) {
    throw FlightRecorderError(inputs.front() + ": not a flight-recorder dump dpscope reads: pg_config (" +
                              error.what() + ")");
  }
  const std::filesystem::path out_path(out);
  const std::filesystem::path dir = out_path.has_parent_path() ? out_path.parent_path() : std::filesystem::path(".");
  const std::string temp = (dir / ("." + out_path.filename().string() + ".importing-" + std::to_string(::getpid()))).string();
  remove_partial_dump_import(temp);
  FlightRecorderImportResult result;
  try {
    {
      trace::Writer writer(temp);
      result = write_run(writer, dumps, groups, command_line);
      writer.finish();
    }
    std::filesystem::rename(temp, out);
  } catch (...) {
    remove_partial_dump_import(temp);
    throw;
  }
  return result;
}

}  // namespace dpscope::formats
