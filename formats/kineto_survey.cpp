// The import's first pass and its classification of events (kineto_survey.h): which role each
// Kineto event plays, the names of collectives and dtypes, and what the second pass needs to
// know before it writes an event (lanes, steps, launch times, collective order).
#include "formats/kineto_survey.h"

#include "formats/kineto_buckets.h"
#include "formats/kineto_units.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

namespace dpscope::formats {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}
bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// The names that mark a training phase (docs/kineto.md, "The mapping"). Whole forwards: DDP's
// module and FSDP1's root (FullyShardedDataParallel.forward), and the "## name ##" annotations of
// HTA's and torchrec's traces. FSDP2 annotates only its hooks: FSDP::pre_forward and
// post_forward bound a derived forward; FSDP's backward hooks (both versions) are short marks,
// the backward itself coming from the autograd functions.
bool is_forward(std::string_view n) {
  return n == "DistributedDataParallel.forward" || n == "FullyShardedDataParallel.forward" ||
         n == "## forward ##";
}
bool is_forward_hook(std::string_view n) {
  return starts_with(n, "FSDP::pre_forward") || starts_with(n, "FSDP::post_forward") ||
         starts_with(n, "FSDP::root_pre_forward");
}
bool is_backward(std::string_view n) { return n == "## backward ##"; }
bool is_optimizer(std::string_view n) {
  return starts_with(n, "Optimizer.step#") || n == "## optimizer ##";
}

std::string normalized(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(c));
  }
  return out;
}

bool is_gpu_category(std::string_view cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
}

}  // namespace

KinetoRole kineto_role(const KinetoEvent& e, bool nccl_kernels) {
  if (e.ph == 'i' || e.ph == 'I') {
    if (!e.has_ts || !e.has_name) {
      throw KinetoError(std::string("an instant event without \"") + (e.has_ts ? "name" : "ts") +
                        "\"; the trace is damaged: export it again");
    }
    if (e.name == "[memory]") return KinetoRole::Memory;
    // Kineto's own bookkeeping ("Iteration Start: PyTorch Profiler", "Record Window End") sits
    // on pseudo processes named by text ("Traces", ""), not on a thread of the program.
    const bool program_thread = !e.pid.empty() && std::all_of(e.pid.begin(), e.pid.end(), [](char c) {
      return (c >= '0' && c <= '9') || c == '-';
    });
    return program_thread ? KinetoRole::Instant : KinetoRole::Ignored;
  }
  if (e.ph != 'X') return KinetoRole::Ignored;
  if (!e.has_ts || !e.has_dur || !e.has_name) {
    const char* missing = !e.has_ts ? "ts" : !e.has_dur ? "dur" : "name";
    throw KinetoError(std::string("a complete ('X') event without \"") + missing +
                      "\"; the trace is damaged: export it again");
  }
  if (e.cat == "Trace") return KinetoRole::Ignored;
  if (is_gpu_category(e.cat)) {
    return e.cat == "kernel" && is_nccl_kernel(e.name) ? KinetoRole::GpuCollective
                                                        : KinetoRole::GpuKernel;
  }
  if (e.cat == "gpu_user_annotation") return KinetoRole::GpuAnnotation;
  const std::string_view n = e.name;
  if (starts_with(n, "ProfilerStep#")) return KinetoRole::Iteration;
  if (is_forward(n)) return KinetoRole::Forward;
  if (is_forward_hook(n)) return KinetoRole::ForwardHook;
  if (is_backward(n)) return KinetoRole::Backward;
  if (is_optimizer(n)) return KinetoRole::OptimizerStep;
  if (starts_with(n, "gloo:")) return KinetoRole::HostCollective;
  if (starts_with(n, "nccl:")) return nccl_kernels ? KinetoRole::HostSpan : KinetoRole::HostCollective;
  if (starts_with(n, "autograd::engine::evaluate_function")) return KinetoRole::Autograd;
  return KinetoRole::HostSpan;
}

bool is_nccl_kernel(std::string_view name) {
  return starts_with(name, "nccl") || contains(name, "ncclKernel") || contains(name, "ncclDevKernel");
}

uint8_t collective_op_of(std::string_view text) {
  const std::string n = normalized(text);
  using trace::CollectiveOp;
  auto op = [](CollectiveOp o) { return static_cast<uint8_t>(o); };
  if (contains(n, "reducescatter")) return op(CollectiveOp::ReduceScatter);
  if (contains(n, "allgather")) return op(CollectiveOp::AllGather);
  if (contains(n, "allreduce")) return op(CollectiveOp::AllReduce);
  if (contains(n, "alltoall")) return op(CollectiveOp::AllToAll);
  if (contains(n, "broadcast")) return op(CollectiveOp::Broadcast);
  if (contains(n, "barrier")) return op(CollectiveOp::Barrier);
  if (contains(n, "sendrecv") || contains(n, "send") || contains(n, "recv")) {
    return op(CollectiveOp::SendRecv);
  }
  return 0xff;
}

uint8_t dtype_of(std::string_view text) {
  std::string n = normalized(text);
  if (starts_with(n, "c10")) n = n.substr(3);
  using trace::DType;
  auto d = [](DType t) { return static_cast<uint8_t>(t); };
  if (n == "float" || n == "float32") return d(DType::Float32);
  if (n == "half" || n == "float16") return d(DType::Float16);
  if (n == "bfloat16") return d(DType::BFloat16);
  if (n == "double" || n == "float64") return d(DType::Float64);
  if (n == "long" || n == "longint" || n == "int64") return d(DType::Int64);
  if (n == "int" || n == "int32") return d(DType::Int32);
  if (n == "char" || n == "signedchar" || n == "int8") return d(DType::Int8);
  if (n == "byte" || n == "unsignedchar" || n == "uint8") return d(DType::UInt8);
  if (n == "bool") return d(DType::Bool);
  return 0xff;
}

int64_t dtype_size(uint8_t dtype) {
  using trace::DType;
  switch (static_cast<DType>(dtype)) {
    case DType::Float32: case DType::Int32: return 4;
    case DType::Float16: case DType::BFloat16: return 2;
    case DType::Float64: case DType::Int64: return 8;
    case DType::Int8: case DType::UInt8: case DType::Bool: return 1;
  }
  return 0;
}

int16_t group_of(const std::string& name, std::map<std::string, int16_t>& groups) {
  if (name.empty()) return 0;
  if (name.size() <= 4 && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return static_cast<int16_t>(std::stoi(name));
  }
  const auto found = groups.find(name);
  if (found != groups.end()) return found->second;
  const auto id = static_cast<int16_t>(std::min<size_t>(1000 + groups.size(), INT16_MAX));
  groups.emplace(name, id);
  return id;
}

int64_t to_ns(int64_t base_time_ns, double us) {
  // Within ±2^61 ns (73 years), and so is baseTimeNanoseconds (survey_kineto_file): a time plus
  // a duration plus the base never overflows.
  if (!(std::fabs(us) < 2.3e15)) {
    throw KinetoError("a time of " + std::to_string(us) + " µs is out of range; the trace is damaged");
  }
  // The whole microseconds and the fraction apart: an epoch-sized time in µs times 1000 as one
  // double would land on its 256-ns grid; the whole part is exact, and so is the fraction.
  const double whole = std::floor(us);
  return base_time_ns + static_cast<int64_t>(whole) * 1000 + std::llround((us - whole) * 1000.0);
}

KinetoLaneKey lane_key_of(const KinetoEvent& e, KinetoRole role) {
  // A CUDA sync record of one stream (Stream Sync, Event Sync, Stream Wait Event) belongs to that
  // stream's lane; Context Sync (stream 2^32-1: every stream) stays on its own row.
  const bool stream_sync = e.cat == "cuda_sync" && e.args.stream >= 0 && e.args.stream < UINT32_MAX;
  const bool gpu = role == KinetoRole::GpuKernel || role == KinetoRole::GpuCollective ||
                   role == KinetoRole::GpuAnnotation || stream_sync;
  if (!gpu) return KinetoLaneKey{false, e.pid, e.tid};
  const std::string stream = e.args.stream != kAbsent ? std::to_string(e.args.stream) : e.tid;
  const std::string device = e.args.device != kAbsent ? std::to_string(e.args.device) : e.pid;
  return KinetoLaneKey{true, device, stream};
}

int32_t KinetoSurvey::iteration_at(int64_t t_ns) const {
  auto after = std::upper_bound(steps.begin(), steps.end(), t_ns,
                                [](int64_t t, const KinetoStep& s) { return t < s.begin_ns; });
  if (after == steps.begin()) return trace::kNone;
  --after;
  return t_ns < after->end_ns ? static_cast<int32_t>(after - steps.begin()) : trace::kNone;
}

const SurveyedCollective* KinetoSurvey::collective_at(int16_t grp, int64_t begin_ns) const {
  const auto found = collectives.find(grp);
  if (found == collectives.end()) return nullptr;
  const auto& v = found->second;
  SurveyedCollective key;
  key.begin_ns = begin_ns;
  const auto at = std::lower_bound(v.begin(), v.end(), key);
  return at == v.end() ? nullptr : &*at;
}

namespace {

// What the first pass gathers beside the survey: the collectives of both kinds, until it is
// known which kind the file's collectives are.
struct CollectiveCandidates {
  std::map<int16_t, std::vector<SurveyedCollective>> kernels, nccl_ops, gloo_ops;
  std::vector<int64_t> optimizer_begins;
  // What Kineto's Seq is read from (Note [Collective sequence numbers]): each thread's
  // record_param_comms ops that carry one, and each launch's thread.
  struct CommsRecord {
    int64_t begin_ns, end_ns, seq;
  };
  std::map<KinetoLaneKey, int32_t> thread_index;  // each CPU thread's index (KinetoLaunch::thread)
  std::map<int32_t, std::vector<CommsRecord>> comms_records;  // by thread
  std::vector<FsdpRecord> fsdp_records;                        // kineto_units.h

  int32_t thread_of(const KinetoLaneKey& key) {
    return thread_index.emplace(key, int32_t(thread_index.size())).first->second;
  }
};

// The collective's size from its record: "In msg nelems" (record_param_comms, NCCL kernels), else
// the first "Input Dims" with its "Input type" (nccl:* and gloo:* ops with record_shapes).
void add_size(const KinetoArgs& a, SurveyedCollective& c) {
  c.dtype = dtype_of(a.dtype.empty() ? a.first_input_type : a.dtype);
  c.numel = a.in_msg_nelems != kAbsent ? a.in_msg_nelems : a.first_input_numel;
}

void survey_event(const KinetoEvent& e, KinetoSurvey& s, CollectiveCandidates& c) {
  if (e.ph == 'M') {
    if (e.name == "thread_name" && !e.args.name.empty()) {
      s.thread_names[KinetoLaneKey{false, e.pid, e.tid}] = e.args.name;
    }
    return;
  }
  const KinetoRole role = kineto_role(e, false);
  if (role == KinetoRole::Ignored || role == KinetoRole::Memory) return;
  const KinetoLaneKey key = lane_key_of(e, role);
  s.first_seen.emplace(key, static_cast<int>(s.first_seen.size()));
  if (!key.gpu && s.main_pid.empty()) s.main_pid = e.pid;
  if (role == KinetoRole::Instant) return;
  const int64_t begin = to_ns(0, e.ts_us);
  if (!key.gpu && e.args.correlation != kAbsent) {
    s.launches.emplace(e.args.correlation, KinetoLaunch{begin, c.thread_of(key)});
  }
  if (!key.gpu && (role == KinetoRole::HostSpan || role == KinetoRole::ForwardHook)) {
    FsdpRecord record;
    if (parse_fsdp_record(e.name, record.step, record.module)) {
      s.fsdp2 = true;
      record.thread = c.thread_of(key);
      record.begin_ns = begin;
      record.end_ns = begin + std::max<int64_t>(0, to_ns(0, e.dur_us));
      c.fsdp_records.push_back(std::move(record));
    }
  }
  if (!key.gpu && e.args.seq != kAbsent && e.name == "record_param_comms") {
    c.comms_records[c.thread_of(key)].push_back({begin, begin + std::max<int64_t>(0, to_ns(0, e.dur_us)), e.args.seq});
  }
  SurveyedCollective collective{
      begin, begin + std::max<int64_t>(0, to_ns(0, e.dur_us)),
      collective_op_of(e.args.collective_name.empty() ? e.name : e.args.collective_name)};
  collective.issue_ns = begin;
  switch (role) {
    case KinetoRole::Iteration:
      s.steps.push_back({begin, begin + std::max<int64_t>(0, to_ns(0, e.dur_us))});
      if (!s.has_main_thread) {
        s.main_thread = key;
        s.main_pid = e.pid;
        s.has_main_thread = true;
      }
      break;
    case KinetoRole::Forward:
    case KinetoRole::ForwardHook:
      s.ddp = s.ddp || e.name == "DistributedDataParallel.forward";
      s.fsdp = s.fsdp || starts_with(e.name, "FullyShardedDataParallel") || starts_with(e.name, "FSDP::");
      break;
    case KinetoRole::OptimizerStep: c.optimizer_begins.push_back(begin); break;
    case KinetoRole::GpuCollective:
      s.nccl_kernels = true;
      add_size(e.args, collective);
      collective.correlation = e.args.correlation;
      collective.kineto_seq = e.args.seq;
      c.kernels[group_of(e.args.process_group, s.groups)].push_back(collective);
      break;
    case KinetoRole::HostCollective:
      add_size(e.args, collective);
      collective.kineto_seq = e.args.seq;
      collective.thread = c.thread_of(key);
      if (e.name.rfind("gloo:", 0) == 0) {
        s.gloo = true;
        c.gloo_ops[group_of(e.args.process_group, s.groups)].push_back(collective);
      } else {
        s.nccl = true;
        c.nccl_ops[group_of(e.args.process_group, s.groups)].push_back(collective);
      }
      break;
    default: break;
  }
}

// Kineto's Seq of a collective issued at `issue_ns` on `thread`: the record_param_comms op around
// that moment on that thread.
int64_t recorded_seq(const CollectiveCandidates& c, int32_t thread, int64_t issue_ns) {
  const auto records = c.comms_records.find(thread);
  if (records == c.comms_records.end()) return kAbsent;
  const auto& list = records->second;
  auto after = std::upper_bound(list.begin(), list.end(), issue_ns,
                                [](int64_t t, const CollectiveCandidates::CommsRecord& r) { return t < r.begin_ns; });
  // Records do not nest deeply: the one around the moment is among the last few that began.
  for (int back = 0; back < 4 && after != list.begin(); ++back) {
    --after;
    if (after->end_ns >= issue_ns) return after->seq;
  }
  return kAbsent;
}

// Each collective's seq (Note [Collective sequence numbers]): Kineto's where every collective of
// its group has one and they differ, else its place in time.
void settle_sequence_numbers(KinetoSurvey& s, CollectiveCandidates& c) {
  for (auto& [thread, list] : c.comms_records) {
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.begin_ns < b.begin_ns; });
  }
  for (auto& [grp, found] : s.collectives) {
    std::set<int64_t> seen;
    bool all_recorded = true;
    for (SurveyedCollective& collective : found) {
      if (collective.correlation != kAbsent) {
        const auto launch = s.launches.find(collective.correlation);
        collective.thread = launch == s.launches.end() ? -1 : launch->second.thread;
      }
      if (collective.kineto_seq == kAbsent) collective.kineto_seq = recorded_seq(c, collective.thread, collective.issue_ns);
      all_recorded = all_recorded && collective.kineto_seq != kAbsent && seen.insert(collective.kineto_seq).second;
    }
    for (size_t i = 0; i < found.size(); ++i) found[i].seq = all_recorded ? found[i].kineto_seq : int64_t(i);
  }
}

}  // namespace

KinetoSurvey survey_kineto_file(const std::string& path) {
  KinetoSurvey s;
  CollectiveCandidates c;
  s.info = read_kineto_file(path, [&](const KinetoEvent& e) { survey_event(e, s, c); });
  if (s.info.base_time_ns > int64_t(2.3e18) || s.info.base_time_ns < -int64_t(2.3e18)) {
    throw KinetoError(path + ": baseTimeNanoseconds " + std::to_string(s.info.base_time_ns) +
                      " is out of range (more than 73 years from 1970); the trace is damaged");
  }
  std::sort(s.steps.begin(), s.steps.end(),
            [](const KinetoStep& a, const KinetoStep& b) { return a.begin_ns < b.begin_ns; });
  // The collectives are the NCCL kernels when there are any, else the nccl:* ops; gloo's always.
  s.collectives = s.nccl_kernels ? std::move(c.kernels) : std::move(c.nccl_ops);
  for (auto& [grp, found] : c.gloo_ops) {
    auto& into = s.collectives[grp];
    into.insert(into.end(), found.begin(), found.end());
  }
  for (auto& [grp, found] : s.collectives) {
    std::stable_sort(found.begin(), found.end());
    for (SurveyedCollective& collective : found) {
      const auto launch = collective.correlation == kAbsent ? s.launches.end() : s.launches.find(collective.correlation);
      if (launch != s.launches.end()) collective.issue_ns = launch->second.begin_ns;
    }
  }
  for (const int64_t begin : c.optimizer_begins) {
    const int32_t step = s.iteration_at(begin);
    if (step != trace::kNone) s.steps[size_t(step)].optimizer_ns = std::min(s.steps[size_t(step)].optimizer_ns, begin);
  }
  s.nccl = s.nccl || s.nccl_kernels;
  settle_sequence_numbers(s, c);
  assign_ddp_buckets(s);
  assign_fsdp_units(s, std::move(c.fsdp_records));
  return s;
}

}  // namespace dpscope::formats
