// The first of the import's two passes over a Kineto file, and the event classification both
// passes share: what each event becomes in dpscope's trace (docs/kineto.md, "The mapping"). The
// survey keeps what the second pass needs to place an event as it streams by: the file's run
// information, its lanes, its ProfilerSteps, each launch's CPU time by correlation id, and the
// collectives by group, each with its begin, end and op (for their sequence numbers and the
// ranks' alignment, kineto_align.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "formats/kineto_reader.h"
#include "trace/records.h"
#include "trace/schema.h"

namespace dpscope::formats {

// What one Kineto event becomes. Decided from its phase, category and name alone.
enum class KinetoRole : uint8_t {
  Ignored,         // metadata, flows, counters, B/E pairs, Kineto's own "Trace" span and instants
  GpuKernel,       // a kernel, memcpy or memset on a GPU stream: a Mark flagged kFlagGpuKernel
  GpuCollective,   // an NCCL kernel: a Collective on its stream, flagged kFlagGpuKernel
  GpuAnnotation,   // gpu_user_annotation: a Mark on the stream
  Iteration,       // ProfilerStep#N: the phase `iteration`
  Forward,         // DDP's and FSDP1's forward annotations, "## forward ##": the phase `forward`
  ForwardHook,     // FSDP2's forward hooks: a Mark; bound a derived forward
  Backward,        // "## backward ##": the phase `backward`
  OptimizerStep,   // Optimizer.step#..., "## optimizer ##": the phase `optimizer_step`
  HostCollective,  // gloo:* ops, and nccl:* ops of a trace without NCCL kernels: a Collective
  Autograd,        // autograd::engine::evaluate_function: a Mark; bound a derived backward
  HostSpan,        // any other CPU op, annotation or runtime call: a Mark slice
  Instant,         // an instant ('i') on a thread of the program: a Mark instant
  Memory,          // [memory]: memory samples
};

// The role of `e`. Throws KinetoError for a complete ('X') event without ts, dur or name, or an
// instant without ts or name (the reader puts the file and offset in front). `nccl_kernels`: whether the file has NCCL kernels (then its nccl:* CPU ops
// are marks: the kernels are the collectives).
KinetoRole kineto_role(const KinetoEvent& e, bool nccl_kernels);

// Whether a GPU kernel's name is an NCCL (or RCCL) communication kernel.
bool is_nccl_kernel(std::string_view name);
// The collective a name or "Collective name" argument spells ("nccl:all_reduce", "allreduce",
// "ncclKernel_AllReduce_RING_LL_Sum_float", "gloo:broadcast", ...); 0xff when none.
uint8_t collective_op_of(std::string_view text);
// The DType of a profiler's dtype text ("Float", "c10::Half", "float", ...); 0xff when unknown.
uint8_t dtype_of(std::string_view text);
// Bytes of one element of `dtype` (a DType value); 0 for 0xff.
int64_t dtype_size(uint8_t dtype);
// The process group id of a "Process Group Name" ("0" -> 0; "" -> 0; other text -> 1000 + its
// index in `groups`, which it joins).
int16_t group_of(const std::string& name, std::map<std::string, int16_t>& groups);
// A time of the file in dpscope's nanoseconds: baseTimeNanoseconds + ts (µs) x 1000, rounded.
// Throws KinetoError for a time outside ±2.3e18 ns (about 2^61).
int64_t to_ns(int64_t base_time_ns, double us);

// A lane of the file: a CPU thread (pid, tid) or a GPU stream (device, stream).
struct KinetoLaneKey {
  bool gpu = false;
  std::string pid;
  std::string tid;  // the thread, or the stream's number
  bool operator<(const KinetoLaneKey& o) const {
    return std::tie(gpu, pid, tid) < std::tie(o.gpu, o.pid, o.tid);
  }
};
KinetoLaneKey lane_key_of(const KinetoEvent& e, KinetoRole role);

// Note [Collective sequence numbers]
// A collective is matched across ranks by (group, seq). PyTorch's ProcessGroup numbers each
// collective of a group, and newer profilers record it as `Seq` in `record_param_comms` (the op
// around the collective's issue and its kernel's launch). Where every collective of a group has
// one, seq is Kineto's: ranks whose recordings start at different collectives still match. Where
// one lacks it (PyTorch 1.13, HTA's traces), seq is the collective's place among its group's
// collectives in time on that rank. kineto_align.h, the stats' matching and the straggler
// attribution all go by it.

// One collective as the survey saw it, in the file's own times: what the sequence numbers and
// the ranks' alignment (kineto_align.h) are made from.
struct SurveyedCollective {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  uint8_t op = 0xff;  // a CollectiveOp value; 0xff when the name spells none
  uint8_t dtype = 0xff;       // a DType value; 0xff when the record names none
  int64_t numel = kAbsent;    // elements ("In msg nelems", else the first "Input Dims")
  int64_t issue_ns = 0;       // when the program issued it: a kernel's launch, a host op's begin
  int64_t correlation = kAbsent;  // a kernel's launch, until the survey resolves issue_ns
  int32_t bucket = trace::kNone;  // DDP's bucket (kineto_buckets.h)
  int32_t unit = trace::kNone;    // FSDP2's unit that issued it (kineto_units.h)
  // Its sequence number in its group: Kineto's own `Seq` (from the record_param_comms around its
  // launch, or its own args) where every collective of the group has one, else its place among
  // the group's collectives in time. Matching across ranks goes by it (Note [Collective sequence
  // numbers]).
  int64_t seq = 0;
  int64_t kineto_seq = kAbsent;  // Kineto's Seq, until the survey settles `seq`
  int32_t thread = -1;           // the issuing thread: a host op's, a kernel's launch's (its Seq, its unit)

  bool operator<(const SurveyedCollective& o) const { return begin_ns < o.begin_ns; }
};

// One ProfilerStep: the iteration it becomes is its index among the file's steps by begin.
struct KinetoStep {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t optimizer_ns = INT64_MAX;  // the first optimizer step's begin in it; INT64_MAX: none
};

// A state of one of FSDP2's units over a span of the file's time (kineto_units.h).
struct SurveyedUnitState {
  int32_t unit = 0;
  trace::UnitState state = trace::UnitState::Gathering;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

// One of DDP's buckets as a rank's records give it (kineto_buckets.h): its size where known.
struct SurveyedBucket {
  int64_t numel = kAbsent;
  uint8_t dtype = 0xff;
};

// What the first pass learns about a file. Its times are the file's own (to_ns with no base:
// baseTimeNanoseconds may come after the events), as the second pass looks them up. Memory: a few words per lane, step and collective,
// and two per launch (the map from correlation id to launch time and thread).
// A CPU launch of a kernel (a cuda_runtime call with a correlation id): when, and on which thread
// (an index the survey gives each CPU thread, SurveyedCollective::thread's).
struct KinetoLaunch {
  int64_t begin_ns = 0;
  int32_t thread = -1;
};

struct KinetoSurvey {
  KinetoRunInfo info;
  std::map<KinetoLaneKey, int> first_seen;               // lane -> order of first appearance
  std::map<KinetoLaneKey, std::string> thread_names;     // from thread_name metadata
  std::vector<KinetoStep> steps;                         // sorted by begin
  std::unordered_map<int64_t, KinetoLaunch> launches;    // by correlation
  bool nccl_kernels = false;
  bool ddp = false, fsdp = false, fsdp2 = false, gloo = false, nccl = false;
  // Collectives by group, sorted by begin: a collective's seq is its index here.
  std::map<int16_t, std::vector<SurveyedCollective>> collectives;
  std::map<std::string, int16_t> groups;
  std::string main_pid;  // the process of the thread that runs the ProfilerSteps (or the first)
  KinetoLaneKey main_thread;
  bool has_main_thread = false;
  // DDP's buckets in launch order, from the steps that have the most common count of them
  // (kineto_buckets.h); empty when the trace is not DDP's or no step all-reduces.
  std::vector<SurveyedBucket> ddp_buckets;
  // FSDP2's units by index (their module paths, "" for the root) and their states in time
  // (kineto_units.h); empty for a trace without FSDP2's records.
  std::vector<std::string> fsdp_units;
  std::vector<SurveyedUnitState> unit_states;

  // The iteration whose step holds `t_ns`; kNone outside every step.
  int32_t iteration_at(int64_t t_ns) const;
  // The collective of group `grp` that begins at `begin_ns`; nullptr when the survey has none.
  const SurveyedCollective* collective_at(int16_t grp, int64_t begin_ns) const;
};

// Pass 1 over `path`. Throws KinetoError as read_kineto_file does, and for a baseTimeNanoseconds
// outside ±2.3e18.
KinetoSurvey survey_kineto_file(const std::string& path);

}  // namespace dpscope::formats
