// The import's second pass and its orchestration (kineto_import.h): each file surveyed, its rank
// settled and checked against the others, then streamed again into the run file through
// trace::Writer, event by event, under a temporary name renamed over the output at the end.
#include "formats/kineto_import.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "formats/kineto_align.h"
#include "formats/kineto_buckets.h"
#include "formats/kineto_survey.h"
#include "formats/kineto_units.h"
#include "formats/kineto_sync.h"
#include "trace/vocabulary.h"
#include "trace/writer.h"

namespace dpscope::formats {
namespace {

constexpr int64_t kImportRowsPerTransaction = 50000;

// Rows into the Writer: names interned as they first appear, a transaction every
// kImportRowsPerTransaction rows.
class RunSink {
 public:
  explicit RunSink(trace::Writer& writer) : writer_(writer) { writer_.begin(); }

  trace::NameId name(const std::string& text) {
    const auto found = names_.find(text);
    if (found != names_.end()) return found->second;
    const trace::NameId id = next_name_++;
    names_.emplace(text, id);
    writer_.add_name(id, text);
    return id;
  }
  void event(const trace::Event& e) {
    writer_.add_event(e);
    ++result.events;
    if (e.kind == trace::EventKind::Collective) ++result.collectives;
    row();
  }
  void memory(const trace::MemorySample& m) {
    writer_.add_memory(m);
    ++result.memory_samples;
    row();
  }
  void commit() { writer_.commit(); }
  trace::Writer& writer() { return writer_; }

  KinetoImportResult result;

 private:
  void row() {
    if (++in_transaction_ < kImportRowsPerTransaction) return;
    writer_.commit();
    writer_.begin();
    in_transaction_ = 0;
  }

  trace::Writer& writer_;
  std::unordered_map<std::string, trace::NameId> names_;
  trace::NameId next_name_ = 1;
  int64_t in_transaction_ = 0;
};

// The first and last event of a kind in an iteration, on the lane of the first: a phase derived
// where the trace has no annotation of its own (backward from the autograd functions, as in
// PyTorch's own DDP on the CPU; forward from FSDP2's forward hooks).
struct DerivedBounds {
  int64_t begin_ns = INT64_MAX;
  int64_t end_ns = INT64_MIN;
  trace::LaneId lane = 0;

  void add(int64_t begin, int64_t end, trace::LaneId on) {
    if (begin < begin_ns) lane = on;
    begin_ns = std::min(begin_ns, begin);
    end_ns = std::max(end_ns, end);
  }
};

// What a derived phase is derived for: its name, the iterations with bounds, and those that have
// the phase annotated already.
struct DerivedPhase {
  std::string_view name;
  std::map<int32_t, DerivedBounds> bounds;
  std::set<int32_t> annotated;
};

// One file's second pass: its lanes, then each event mapped and written, then its derived
// backward phases and its ranks row.
class RankImporter {
 public:
  RankImporter(RunSink& sink, const KinetoSurvey& survey, int32_t rank)
      : sink_(sink), survey_(survey), rank_(rank), groups_(survey.groups) {
    assign_lanes();
  }

  void on_event(const KinetoEvent& e) {
    if (e.ph == 'M') return;
    const KinetoRole role = kineto_role(e, survey_.nccl_kernels);
    if (role == KinetoRole::Ignored) return;
    if (role == KinetoRole::Memory) return memory(e);
    const auto lane = lanes_.find(lane_key_of(e, role));
    if (lane == lanes_.end()) return;  // not in the survey: cannot happen for the same file
    const int64_t raw_begin = to_ns(0, e.ts_us);
    const int64_t raw_end = role == KinetoRole::Instant ? raw_begin
                                                        : raw_begin + std::max<int64_t>(0, to_ns(0, e.dur_us));
    trace::Event ev;
    ev.rank = static_cast<int16_t>(rank_);
    ev.lane = lane->second;
    ev.begin_ns = base() + raw_begin;
    ev.end_ns = base() + raw_end;
    ev.name = sink_.name(e.name);
    ev.kind = trace::EventKind::Mark;
    ev.iteration = survey_.iteration_at(raw_begin);
    place(e, role, raw_begin, ev);
    // Kineto's category (cpu_op, cuda_runtime, user_annotation, ...): what the critical path's graph
    // tells operators from annotations by (analysis/critical_path_kineto.cpp, docs/kineto.md).
    if (ev.kind != trace::EventKind::Phase && !e.cat.empty()) ev.value = sink_.name(e.cat);
    keep_event_sync(e, survey_, base(), [&](const KinetoLaneKey& key) -> std::optional<trace::LaneId> {
      const auto found = lanes_.find(key);
      return found == lanes_.end() ? std::nullopt : std::optional<trace::LaneId>(found->second);
    }, ev);
    sink_.event(ev);
    first_ns_ = std::min(first_ns_, ev.begin_ns);
    last_ns_ = std::max(last_ns_, ev.end_ns);
    ++events_;
  }

  // The derived backward phases, the units' states and the rank's row (written, and returned for
  // the alignment).
  trace::RankInfo finish() {
    write_unit_states();
    for (const DerivedPhase* derived : {&derived_forward_, &derived_backward_}) {
      for (const auto& [iteration, b] : derived->bounds) {
        if (derived->annotated.count(iteration)) continue;
        trace::Event ev;
        ev.rank = static_cast<int16_t>(rank_);
        ev.lane = b.lane;
        ev.kind = trace::EventKind::Phase;
        ev.name = sink_.name(std::string(derived->name));
        ev.begin_ns = b.begin_ns;
        ev.end_ns = b.end_ns;
        ev.iteration = iteration;
        sink_.event(ev);
        ++events_;
      }
    }
    trace::RankInfo info;
    info.rank = rank_;
    info.local_rank = rank_;
    info.pid = parse_pid(survey_.main_pid);
    info.device = gpu_device_.empty() ? std::string(trace::to_string(trace::Device::Cpu))
                                      : std::string(trace::to_string(trace::Device::Cuda)) + ":" + gpu_device_;
    info.start_ns = events_ ? first_ns_ : 0;
    info.end_ns = events_ ? last_ns_ : 0;
    info.events = events_;
    info.status = trace::to_string(trace::RankStatus::Complete);
    sink_.writer().put_rank(info);
    return info;
  }

 private:
  int64_t base() const { return survey_.info.base_time_ns; }

  static int64_t parse_pid(const std::string& text) {
    if (text.empty() || text.size() > 18 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return 0;
    }
    return std::stoll(text);
  }

  // Lane 0 is the thread that runs the ProfilerSteps (else the first CPU thread); the other CPU
  // threads follow in order of appearance, then the GPU streams by device and stream.
  void assign_lanes() {
    std::vector<std::pair<int, KinetoLaneKey>> host, gpu;
    for (const auto& [key, order] : survey_.first_seen) (key.gpu ? gpu : host).emplace_back(order, key);
    std::sort(host.begin(), host.end());
    auto numeric = [](const std::string& s) { return parse_pid(s); };
    std::sort(gpu.begin(), gpu.end(), [&](const auto& a, const auto& b) {
      return std::make_pair(numeric(a.second.pid), numeric(a.second.tid)) <
             std::make_pair(numeric(b.second.pid), numeric(b.second.tid));
    });
    if (survey_.has_main_thread) {
      std::stable_partition(host.begin(), host.end(),
                            [&](const auto& h) { return !(h.second < survey_.main_thread) &&
                                                        !(survey_.main_thread < h.second); });
    }
    if (host.size() + gpu.size() > 32767) {
      throw KinetoError("more than 32767 threads and streams; dpscope's lanes cannot hold them");
    }
    for (const auto& [order, key] : host) add_lane(key, lane_name(key), trace::LaneKind::Host);
    for (const auto& [order, key] : gpu) {
      if (gpu_device_.empty()) gpu_device_ = key.pid;
      add_lane(key, "GPU " + key.pid + " stream " + key.tid, trace::LaneKind::Stream);
    }
    // FSDP2's units (kineto_units.h), named as dpscope's own FSDP2 runs name their lanes.
    for (size_t u = 0; u < survey_.fsdp_units.size(); ++u) {
      const std::string& module = survey_.fsdp_units[u];
      const auto id = static_cast<trace::LaneId>(lanes_.size() + unit_lanes_.size());
      unit_lanes_.push_back(id);
      sink_.writer().add_lane(trace::LaneInfo{rank_, id, "unit " + std::to_string(u) + " " + (module.empty() ? "root" : module),
                                              trace::LaneKind::Unit});
    }
  }

  // FSDP2's unit states on their lanes (kineto_units.h).
  void write_unit_states() {
    for (const SurveyedUnitState& state : survey_.unit_states) {
      trace::Event ev;
      ev.rank = static_cast<int16_t>(rank_);
      ev.lane = unit_lanes_[size_t(state.unit)];
      ev.kind = trace::EventKind::UnitState;
      ev.begin_ns = base() + state.begin_ns;
      ev.end_ns = base() + std::max(state.begin_ns, state.end_ns);
      ev.iteration = survey_.iteration_at(state.begin_ns);
      ev.unit = state.unit;
      ev.op = static_cast<uint8_t>(state.state);
      sink_.event(ev);
      ++events_;
    }
  }

  std::string lane_name(const KinetoLaneKey& key) const {
    const auto named = survey_.thread_names.find(key);
    return named != survey_.thread_names.end() ? named->second : "thread " + key.tid;
  }

  void add_lane(const KinetoLaneKey& key, const std::string& name, trace::LaneKind kind) {
    const auto id = static_cast<trace::LaneId>(lanes_.size());
    lanes_.emplace(key, id);
    sink_.writer().add_lane(trace::LaneInfo{rank_, id, name, kind});
  }

  void phase(std::string_view name, trace::Event& ev) {
    ev.value = ev.name;  // the source event's name, kept beside the phase's (docs/kineto.md)
    ev.kind = trace::EventKind::Phase;
    ev.name = sink_.name(std::string(name));
  }

  void place(const KinetoEvent& e, KinetoRole role, int64_t raw_begin, trace::Event& ev) {
    switch (role) {
      case KinetoRole::GpuKernel:
      case KinetoRole::GpuCollective: {
        const auto launch = e.args.correlation == kAbsent ? survey_.launches.end()
                                                          : survey_.launches.find(e.args.correlation);
        if (launch != survey_.launches.end()) {
          ev.enqueue_ns = base() + launch->second.begin_ns;
          ev.iteration = survey_.iteration_at(launch->second.begin_ns);
        }
        ev.flags = trace::kFlagGpuTime | trace::kFlagGpuKernel;
        if (role == KinetoRole::GpuCollective) collective(e, raw_begin, ev);
        break;
      }
      case KinetoRole::GpuAnnotation: ev.flags = trace::kFlagGpuTime; break;
      case KinetoRole::Iteration: phase(trace::kPhaseIteration, ev); break;
      case KinetoRole::Forward:
        phase(trace::kPhaseForward, ev);
        derived_forward_.annotated.insert(ev.iteration);
        break;
      case KinetoRole::Backward:
        phase(trace::kPhaseBackward, ev);
        derived_backward_.annotated.insert(ev.iteration);
        break;
      case KinetoRole::ForwardHook:
        if (ev.iteration != trace::kNone) derived_forward_.bounds[ev.iteration].add(ev.begin_ns, ev.end_ns, ev.lane);
        break;
      case KinetoRole::OptimizerStep: phase(trace::kPhaseOptimizerStep, ev); break;
      case KinetoRole::HostCollective:
        collective(e, raw_begin, ev);
        ev.enqueue_ns = ev.begin_ns;  // the op issues the collective as it begins
        break;
      case KinetoRole::Autograd:
        if (ev.iteration != trace::kNone) derived_backward_.bounds[ev.iteration].add(ev.begin_ns, ev.end_ns, ev.lane);
        break;
      default: break;
    }
  }

  // A collective's op, group, sequence number, dtype and bytes from its name and arguments.
  void collective(const KinetoEvent& e, int64_t raw_begin, trace::Event& ev) {
    const KinetoArgs& a = e.args;
    ev.kind = trace::EventKind::Collective;
    ev.op = collective_op_of(a.collective_name.empty() ? e.name : a.collective_name);
    ev.grp = group_of(a.process_group, groups_);
    if (const SurveyedCollective* surveyed = survey_.collective_at(ev.grp, raw_begin)) {
      ev.seq = surveyed->seq;
      ev.bucket = surveyed->bucket;
      ev.unit = surveyed->unit;
    }
    ev.dtype = dtype_of(a.dtype.empty() ? a.first_input_type : a.dtype);
    const int64_t size = dtype_size(ev.dtype);
    if (a.in_msg_nelems != kAbsent && size > 0) ev.bytes = a.in_msg_nelems * size;
    else if (a.first_input_numel != kAbsent && size > 0) ev.bytes = a.first_input_numel * size;
  }

  void memory(const KinetoEvent& e) {
    const KinetoArgs& a = e.args;
    if (a.total_allocated == kAbsent) return;
    const int64_t ts = base() + to_ns(0, e.ts_us);
    if (a.device_type == 0) {
      sink_.memory({rank_, ts, trace::MemoryCategory::AllocatorTotal, a.total_allocated});
    } else if (a.device_type == 1) {
      sink_.memory({rank_, ts, trace::MemoryCategory::CudaAllocated, a.total_allocated});
      if (a.total_reserved != kAbsent) {
        sink_.memory({rank_, ts, trace::MemoryCategory::CudaReserved, a.total_reserved});
      }
    }
  }

  RunSink& sink_;
  const KinetoSurvey& survey_;
  int32_t rank_;
  std::map<std::string, int16_t> groups_;
  std::map<KinetoLaneKey, trace::LaneId> lanes_;
  std::vector<trace::LaneId> unit_lanes_;  // by unit
  DerivedPhase derived_forward_{trace::kPhaseForward, {}, {}};
  DerivedPhase derived_backward_{trace::kPhaseBackward, {}, {}};
  std::string gpu_device_;
  int64_t first_ns_ = INT64_MAX, last_ns_ = INT64_MIN, events_ = 0;
};

// What every file of one run shares, from the first file with distributedInfo.
struct RunIdentity {
  std::string path;
  KinetoRunInfo info;
};

void check_same_run(const std::string& path, const KinetoRunInfo& info, std::optional<RunIdentity>& first) {
  if (!info.has_distributed_info) return;
  if (!first) {
    first = RunIdentity{path, info};
    return;
  }
  const KinetoRunInfo& f = first->info;
  auto differ = [&](const std::string& what, const std::string& mine, const std::string& theirs) {
    throw KinetoError(path + ": is from another run than " + first->path + ": its distributedInfo says " +
                      what + " " + mine + ", the other's " + theirs +
                      "; import the files of one run together");
  };
  if (info.world_size != f.world_size) {
    differ("world_size", std::to_string(info.world_size), std::to_string(f.world_size));
  }
  if (info.backend != f.backend) differ("backend", info.backend, f.backend);
  if (info.nccl_version != f.nccl_version) differ("nccl_version", info.nccl_version, f.nccl_version);
}

int32_t rank_of(const std::string& path, const KinetoSurvey& survey, const KinetoImportOptions& options,
                size_t index, const std::function<void(const std::string&)>& warn) {
  if (survey.info.rank != kAbsent) {
    if (survey.info.rank < 0 || survey.info.rank > INT16_MAX) {
      throw KinetoError(path + ": distributedInfo.rank " + std::to_string(survey.info.rank) +
                        " is out of range (0..32767); the trace is damaged");
    }
    if (options.rank != trace::kNone && options.rank != survey.info.rank) {
      warn(path + ": --rank " + std::to_string(options.rank) + " ignored: its distributedInfo says rank " +
           std::to_string(survey.info.rank));
    }
    return static_cast<int32_t>(survey.info.rank);
  }
  const int32_t rank = options.rank != trace::kNone ? options.rank : static_cast<int32_t>(index);
  warn(path + ": no distributedInfo.rank; imported as rank " + std::to_string(rank) +
       (options.rank != trace::kNone ? " (--rank)" : " (its place among the files; --rank N sets it for one file)"));
  return rank;
}

void write_meta(trace::Writer& w, const KinetoImportOptions& options, const std::vector<KinetoSurvey>& surveys,
                const std::vector<int32_t>& fractional_us_ranks) {
  namespace key = trace::meta_key;
  bool ddp = false, fsdp = false, fsdp2 = false, gloo = false, nccl = false, gpu = false;
  std::string backend;
  int64_t world_size = kAbsent;
  for (const KinetoSurvey& s : surveys) {
    ddp |= s.ddp; fsdp |= s.fsdp; fsdp2 |= s.fsdp2; gloo |= s.gloo; nccl |= s.nccl;
    for (const auto& [lane, order] : s.first_seen) gpu |= lane.gpu;
    if (backend.empty()) backend = s.info.backend;
    if (world_size == kAbsent) world_size = s.info.world_size;
  }
  if (backend.empty() && (nccl || gloo)) {
    backend = trace::to_string(nccl ? trace::Backend::Nccl : trace::Backend::Gloo);
  }
  if (!backend.empty()) w.set_meta(key::kBackend, backend);
  w.set_meta(key::kWorldSize, std::to_string(world_size != kAbsent ? world_size : int64_t(surveys.size())));
  if (fsdp2) w.set_meta(key::kStrategy, trace::to_string(trace::Strategy::Fsdp2));
  else if (fsdp) w.set_meta(key::kStrategy, trace::to_string(trace::Strategy::Fsdp));
  else if (ddp) w.set_meta(key::kStrategy, trace::to_string(trace::Strategy::Ddp));
  w.set_meta(key::kDevice, trace::to_string(gpu ? trace::Device::Cuda : trace::Device::Cpu));
  w.set_meta(key::kTraceLevel, trace::to_string(trace::TraceLevel::Full));
  std::string from;
  for (const std::string& input : options.inputs) {
    from += (from.empty() ? "" : ", ") + std::filesystem::path(input).filename().string();
  }
  w.set_meta(key::kImportedFrom, "PyTorch profiler (Kineto): " + from);
  if (!options.command_line.empty()) w.set_meta(key::kCommandLine, options.command_line);
  std::string ranks;
  for (const int32_t r : fractional_us_ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
  if (!ranks.empty()) w.set_meta(key::kImportedFractionalUsRanks, ranks);
}

// DDP's bucket plan from the ranks' records, lowest rank first (kineto_buckets.h).
void write_buckets(trace::Writer& writer, const std::vector<KinetoSurvey>& surveys,
                   const std::vector<trace::RankInfo>& infos, const std::function<void(const std::string&)>& warn) {
  std::vector<std::pair<int32_t, const KinetoSurvey*>> ranks;
  for (size_t i = 0; i < surveys.size(); ++i) ranks.emplace_back(infos[i].rank, &surveys[i]);
  std::sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const trace::BucketInfo& bucket : ddp_bucket_plan(ranks, warn)) writer.add_bucket(bucket);
}

// FSDP2's units from the lowest rank's records (kineto_units.h): every rank of a run has the same
// groups; a rank whose differ is said.
void write_units(trace::Writer& writer, const std::vector<KinetoSurvey>& surveys,
                 const std::vector<trace::RankInfo>& infos, const std::function<void(const std::string&)>& warn) {
  const KinetoSurvey* lowest = nullptr;
  int32_t lowest_rank = INT32_MAX;
  for (size_t i = 0; i < surveys.size(); ++i) {
    if (!surveys[i].fsdp_units.empty() && infos[i].rank < lowest_rank) {
      lowest = &surveys[i];
      lowest_rank = infos[i].rank;
    }
  }
  if (!lowest) return;
  for (size_t i = 0; i < surveys.size(); ++i) {
    if (&surveys[i] != lowest && surveys[i].fsdp_units != lowest->fsdp_units) {
      warn("import: rank " + std::to_string(infos[i].rank) + "'s FSDP2 units differ from rank " +
           std::to_string(lowest_rank) + "'s (" + std::to_string(surveys[i].fsdp_units.size()) + " against " +
           std::to_string(lowest->fsdp_units.size()) + "); the units table keeps rank " + std::to_string(lowest_rank) + "'s");
    }
  }
  for (size_t u = 0; u < lowest->fsdp_units.size(); ++u) {
    trace::UnitInfo unit;
    unit.index = static_cast<int32_t>(u);
    unit.name = lowest->fsdp_units[u];
    writer.add_unit(unit);
  }
}

// The ranks' offsets (kineto_align.h) written into their rows and applied to their times, and
// the method in meta. A refused alignment is said once through `warn` and in meta.
trace::ClockAlignment align_clocks(trace::Writer& writer, const KinetoImportOptions& options,
                  const std::vector<KinetoSurvey>& surveys, std::vector<trace::RankInfo>& infos,
                  const std::function<void(const std::string&)>& warn) {
  std::vector<RankCollectives> ranks;
  for (size_t i = 0; i < surveys.size(); ++i) {
    ranks.push_back({infos[i].rank, surveys[i].info.base_time_ns, &surveys[i].collectives});
  }
  const bool can_align = can_align_collective_ends(ranks);
  // Asked for by name on files that cannot give it: a refusal, not a run that only looks aligned.
  if (options.align == trace::ClockAlignment::CollectiveEnds && !can_align) {
    throw KinetoError(std::string("import: --align collective-ends needs two or more ranks that share a blocking "
                                  "collective (all-reduce, all-gather, reduce-scatter, broadcast, barrier, "
                                  "all-to-all), and ") +
                      (ranks.size() < 2 ? "one rank's file was given" : "these files share none") +
                      ": give the files of two or more ranks of one run, or --align none");
  }
  const trace::ClockAlignment asked =
      options.align.value_or(can_align ? trace::ClockAlignment::CollectiveEnds : trace::ClockAlignment::None);
  const Alignment alignment = align_ranks(ranks, asked);
  namespace key = trace::meta_key;
  writer.set_meta(key::kClockAlignment, trace::to_string(alignment.method));
  if (!alignment.note.empty()) {
    writer.set_meta(key::kClockAlignmentNote, alignment.note);
    warn("import: " + alignment.note);
  }
  if (alignment.method != trace::ClockAlignment::CollectiveEnds) return alignment.method;
  for (size_t i = 0; i < infos.size(); ++i) {
    trace::RankInfo& info = infos[i];
    info.clock_offset_ns = alignment.ranks[i].offset_ns;
    info.clock_uncertainty_ns = alignment.ranks[i].uncertainty_ns;
    if (info.events > 0) {
      info.start_ns += info.clock_offset_ns;
      info.end_ns += info.clock_offset_ns;
    }
    writer.put_rank(info);
  }
  writer.commit();
  writer.apply_clock_offsets();
  writer.begin();
  return alignment.method;
}

// Every file, surveyed and written into `writer`.
KinetoImportResult import_into(trace::Writer& writer, const KinetoImportOptions& options,
                               const std::function<void(const std::string&)>& warn) {
  RunSink sink(writer);
  std::vector<KinetoSurvey> surveys;
  std::map<int32_t, std::string> ranks;
  std::optional<RunIdentity> first;
  std::vector<int32_t> fractional_us_ranks;
  std::vector<trace::RankInfo> infos;
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    const std::string& path = options.inputs[i];
    KinetoSurvey survey = survey_kineto_file(path);
    check_same_run(path, survey.info, first);
    const int32_t rank = rank_of(path, survey, options, i, warn);
    const auto [at, fresh] = ranks.emplace(rank, path);
    if (!fresh) {
      throw KinetoError(path + ": rank " + std::to_string(rank) + " again (" + at->second +
                        " is rank " + std::to_string(rank) + " too); give each rank's file once");
    }
    RankImporter importer(sink, survey, rank);
    read_kineto_file(path, [&](const KinetoEvent& e) { importer.on_event(e); });
    infos.push_back(importer.finish());
    if (survey.info.fractional_ts) fractional_us_ranks.push_back(rank);
    sink.result.iterations = std::max(sink.result.iterations, static_cast<int32_t>(survey.steps.size()));
    survey.launches.clear();  // the biggest part, not needed for the meta
    surveys.push_back(std::move(survey));
  }
  write_meta(writer, options, surveys, fractional_us_ranks);
  write_buckets(writer, surveys, infos, warn);
  write_units(writer, surveys, infos, warn);
  sink.result.alignment = align_clocks(writer, options, surveys, infos, warn);
  sink.commit();
  sink.result.ranks = static_cast<int32_t>(ranks.size());
  return sink.result;
}

void remove_partial(const std::string& path) {
  std::error_code ignored;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix, ignored);
}

}  // namespace

void check_kineto_options(const KinetoImportOptions& options) {
  if (options.inputs.empty()) throw KinetoError("import: no input files; give one Kineto JSON per rank");
  if (options.out.empty()) throw KinetoError("import: no output; give -o RUN.sqlite");
  if (options.rank != trace::kNone && (options.rank < 0 || options.rank > INT16_MAX)) {
    throw KinetoError("import: --rank " + std::to_string(options.rank) + " is out of range (0..32767)");
  }
  if (options.rank != trace::kNone && options.inputs.size() != 1) {
    throw KinetoError("import: --rank applies to a single input file; with several, each file's "
                      "distributedInfo or its place in the list gives its rank");
  }
}

KinetoImportResult import_kineto(const KinetoImportOptions& options,
                                 const std::function<void(const std::string&)>& warn) {
  check_kineto_options(options);
  const std::filesystem::path out(options.out);
  const std::filesystem::path dir = out.has_parent_path() ? out.parent_path() : std::filesystem::path(".");
  const std::string temp =
      (dir / ("." + out.filename().string() + ".importing-" + std::to_string(getpid()))).string();
  remove_partial(temp);
  KinetoImportResult result;
  try {
    {
      trace::Writer writer(temp);
      result = import_into(writer, options, warn);
      writer.finish();
    }
    std::filesystem::rename(temp, out);
  } catch (...) {
    remove_partial(temp);
    throw;
  }
  return result;
}

bool is_kineto_file_name(std::string_view path) {
  auto ends = [&](std::string_view tail) {
    return path.size() > tail.size() && path.compare(path.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends(".json") || ends(".json.gz");
}

TemporaryImport::TemporaryImport(const std::vector<std::string>& inputs,
                                 const std::function<void(const std::string&)>& warn) {
  std::string pattern = (std::filesystem::temp_directory_path() / "dpscope-import-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) {
    throw KinetoError("import: cannot make a temporary directory in " +
                      std::filesystem::temp_directory_path().string() + "; set TMPDIR to a writable one");
  }
  dir_ = pattern;
  path_ = (std::filesystem::path(dir_) / "run.sqlite").string();
  KinetoImportOptions options;
  options.inputs = inputs;
  options.out = path_;
  try {
    result_ = import_kineto(options, warn);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

TemporaryImport::~TemporaryImport() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace dpscope::formats
