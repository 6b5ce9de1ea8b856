// The trace's vocabulary: every word that a writer records and a reader compares — the meta
// table's keys and the config object's fields, the strategies and their families, backends,
// devices, trace levels, rank statuses, DDP's comm hooks and first buckets, FSDP's sharding,
// prefetch, precision and resharding modes, the phase and metric names — each an enum or a
// constant with its one spelling. The engine, the analysis, the CLI, the viewer and the tutorials
// share these types; no mode is compared, offered as a choice or written to meta as a string
// outside this header and vocabulary.cpp (tests/docs/test_vocabulary.cpp). Constants and pure
// functions only: thread-safe.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace/schema.h"

namespace dpscope::trace {

// ---- Meta keys -----------------------------------------------------------------------------
// The keys of the `meta` table (docs/trace-format.md lists them with their values). Written by
// the trainer, the tutorials, the engine's wrappers, link emulation and synth; read by the
// analysis, the what-if replays and the viewer.
namespace meta_key {
inline constexpr std::string_view kSchemaVersion = "schema_version";  // written by the Writer
inline constexpr std::string_view kCreatedUnixMs = "created_unix_ms";
inline constexpr std::string_view kCommandLine = "command_line";
inline constexpr std::string_view kConfig = "config";          // the run's settings, a JSON object
inline constexpr std::string_view kStrategy = "strategy";      // a Strategy's spelling
inline constexpr std::string_view kBackend = "backend";        // "gloo" | "nccl"
inline constexpr std::string_view kWorldSize = "world_size";
inline constexpr std::string_view kModel = "model";
inline constexpr std::string_view kModelSummary = "model_summary";
inline constexpr std::string_view kTraceLevel = "trace_level";  // "off" | "summary" | "full"
inline constexpr std::string_view kDevice = "device";           // "cpu" | "cuda"
// LibTorch's intra-op threads per rank; see Note [Thread CPU time] (schema.h).
inline constexpr std::string_view kIntraOpThreads = "intra_op_threads";
// How the memory samples' categories were counted: a MemoryAccounting's spelling. Absent: tracking
// (every run before ownership existed).
inline constexpr std::string_view kMemoryAccounting = "memory_accounting";
inline constexpr std::string_view kTutorial = "tutorial";       // the tutorial and its part
inline constexpr std::string_view kFaultInjected = "fault_injected";  // DPSCOPE_FAULT's text
inline constexpr std::string_view kStraggler = "straggler";     // --straggler RANK:MS
inline constexpr std::string_view kLinkGbps = "link_gbps";      // the emulated link, when one
inline constexpr std::string_view kLinkLatencyUs = "link_latency_us";
inline constexpr std::string_view kDdpInitialBuckets = "ddp_initial_buckets";  // an InitialBuckets
inline constexpr std::string_view kFsdpSharding = "fsdp.sharding";  // a ShardingStrategy
// HybridShard: the ranks a parameter is sharded over (a shard group's size, N), as a number.
inline constexpr std::string_view kFsdpShardGroupSize = "fsdp.shard_group_size";
inline constexpr std::string_view kFsdpBackwardPrefetch = "fsdp.backward_prefetch";  // a BackwardPrefetch
inline constexpr std::string_view kFsdpForwardPrefetch = "fsdp.forward_prefetch";  // "true" | "false"
inline constexpr std::string_view kFsdpComputeDtype = "fsdp.compute_dtype";  // LibTorch's dtype name
inline constexpr std::string_view kFsdpReduceDtype = "fsdp.reduce_dtype";
// FSDP2's root: its ReshardAfterForward's spelling, or the group size N of the int form ("2").
inline constexpr std::string_view kFsdp2ReshardAfterForward = "fsdp2.reshard_after_forward";
inline constexpr std::string_view kMergedRanks = "merged_ranks";  // written by merge: how many rank files
// Written by `dpscope import`: the PyTorch profiler (Kineto) files the run was imported from.
inline constexpr std::string_view kImportedFrom = "imported_from";
// Written by `dpscope import`: the ranks whose profiler trace had fractional-microsecond times
// ("0,1"), whose GPU breakdown rounds times as HTA does (analysis/gpu_breakdown.h).
inline constexpr std::string_view kImportedFractionalUsRanks = "imported_fractional_us_ranks";
// How the ranks' clocks were put on one clock: a ClockAlignment's spelling. Absent: rendezvous
// (dpscope's own runs) or, in a file imported before alignment existed, none.
inline constexpr std::string_view kClockAlignment = "clock_alignment";
// Written by `dpscope import` when it kept every offset 0: why (one line).
inline constexpr std::string_view kClockAlignmentNote = "clock_alignment_note";
}  // namespace meta_key

// ---- Config keys ---------------------------------------------------------------------------
// The fields of the meta `config` object (the run's settings as `dpscope train` and `dpscope
// synth` gave them), which the what-if replays read back. The object is written and read with
// nlohmann-json; docs/trace-format.md lists every field.
namespace config_key {
inline constexpr const char* kModel = "model";
inline constexpr const char* kHidden = "hidden";
inline constexpr const char* kLayers = "layers";
inline constexpr const char* kHeads = "heads";
inline constexpr const char* kSequence = "seq";
inline constexpr const char* kData = "data";
inline constexpr const char* kSteps = "steps";
inline constexpr const char* kBatchSize = "batch_size";
inline constexpr const char* kLr = "lr";
inline constexpr const char* kMomentum = "momentum";
inline constexpr const char* kSeed = "seed";
inline constexpr const char* kGradAccum = "grad_accum";
inline constexpr const char* kBucketCapMb = "bucket_cap_mb";
inline constexpr const char* kFirstBucketMb = "first_bucket_mb";
inline constexpr const char* kInitialBuckets = "initial_buckets";  // an InitialBuckets
inline constexpr const char* kFindUnusedParameters = "find_unused_parameters";
inline constexpr const char* kGradientAsBucketView = "gradient_as_bucket_view";
inline constexpr const char* kStaticGraph = "static_graph";
inline constexpr const char* kBroadcastBuffers = "broadcast_buffers";
inline constexpr const char* kCommHook = "comm_hook";  // a CommHookKind
inline constexpr const char* kStrategy = "strategy";    // a Strategy
inline constexpr const char* kSharding = "sharding";    // a ShardingStrategy
inline constexpr const char* kWrapMinParams = "wrap_min_params";
inline constexpr const char* kMixedPrecision = "mixed_precision";  // a ComputePrecision
inline constexpr const char* kReduceFp32 = "reduce_fp32";
inline constexpr const char* kCpuOffload = "cpu_offload";
inline constexpr const char* kBackwardPrefetch = "backward_prefetch";  // a BackwardPrefetch
inline constexpr const char* kForwardPrefetch = "forward_prefetch";
inline constexpr const char* kLimitAllGathers = "limit_all_gathers";
inline constexpr const char* kLimitReduceScatters = "limit_reduce_scatters";
inline constexpr const char* kReduceBucketMb = "reduce_bucket_mb";
// FSDP2: a ReshardAfterForward's spelling, or the group size N as its number ("2").
inline constexpr const char* kReshardAfterForward = "reshard_after_forward";
inline constexpr const char* kExplicitPrefetch = "explicit_prefetch";
inline constexpr const char* kShardGroupSize = "shard_group_size";
inline constexpr const char* kStraggler = "straggler";  // {"rank": R, "ms": MS}, or null
inline constexpr const char* kStragglerRank = "rank";
inline constexpr const char* kStragglerMs = "ms";
// Written by `dpscope synth` (formats/synth.h) in place of the training flags above.
inline constexpr const char* kSynthetic = "synthetic";  // true
inline constexpr const char* kEvents = "events";
inline constexpr const char* kFirstBucketBytes = "first_bucket_bytes";
inline constexpr const char* kBucketCapBytes = "bucket_cap_bytes";
inline constexpr const char* kLinkGbps = "link_gbps";
inline constexpr const char* kLinkLatencyUs = "link_latency_us";
}  // namespace config_key

// ---- Strategies ----------------------------------------------------------------------------
// What a run's ranks do to stay in step (meta key `strategy`). Unknown: absent, or a word this
// version does not know (the analysis keeps the recorded text to show it).
enum class Strategy {
  Unknown,
  Ddp,          // DistributedDataParallel (engine/ddp)
  Fsdp,         // FullyShardedDataParallel, flat parameters (engine/fsdp)
  Zero1,        // ZeRO-1: DDP with the optimizer state sharded (engine/zero)
  Collectives,  // tutorial 01: bare collectives, no training
  Fsdp2,        // fully_shard, per-parameter dim-0 shards (engine/fsdp2)
};
inline constexpr std::array<Strategy, 5> kStrategies{Strategy::Ddp, Strategy::Fsdp, Strategy::Zero1,
                                                     Strategy::Collectives, Strategy::Fsdp2};
// "ddp" | "fsdp" | "zero1" | "collectives" | "fsdp2"; "" for Unknown.
std::string_view to_string(Strategy strategy);
// The strategy `text` spells, Unknown for anything else ("" included).
Strategy parse_strategy(std::string_view text);
// The FSDP family: the strategies that shard parameters into units gathered for use (FSDP1's flat
// parameters, FSDP2's dim-0 shards). Their runs have units, unit states and the FSDP what-if;
// HSDP (`--sharding hybrid`) is theirs alone.
constexpr bool is_fsdp_family(Strategy strategy) {
  return strategy == Strategy::Fsdp || strategy == Strategy::Fsdp2;
}

// ---- The run's machine -----------------------------------------------------------------------
// The communication library (meta key `backend`, `--backend`).
enum class Backend {
  Gloo,  // CPU tensors (and CUDA tensors staged through the host)
  Nccl,  // CUDA tensors, on the GPUs' own links
};
inline constexpr std::array<Backend, 2> kBackends{Backend::Gloo, Backend::Nccl};
// "gloo" | "nccl".
std::string_view to_string(Backend backend);

// Where a rank's tensors live (meta key `device`, `--device`).
enum class Device { Cpu, Cuda };
inline constexpr std::array<Device, 2> kDevices{Device::Cpu, Device::Cuda};
// "cpu" | "cuda".
std::string_view to_string(Device device);

// How much a run records (meta key `trace_level`, `--trace`); TraceLevel is the schema's
// (trace/schema.h: its values are stored), spelled by to_string(TraceLevel).
inline constexpr std::array<TraceLevel, 3> kTraceLevels{TraceLevel::Off, TraceLevel::Summary,
                                                        TraceLevel::Full};

// How a run's memory samples split the device's memory into categories (meta key
// `memory_accounting`, `--memory-accounting`; engine/memory/ownership_registry.h).
enum class MemoryAccounting {
  Tracking,   // the tracking CPU allocator's category of each allocation (CPU memory only)
  Ownership,  // the storages the engine owns, by owner, on the run's device; the rest activations
};
inline constexpr std::array<MemoryAccounting, 2> kMemoryAccountings{MemoryAccounting::Tracking,
                                                                    MemoryAccounting::Ownership};
// "tracking" | "ownership".
std::string_view to_string(MemoryAccounting accounting);

// How a run's ranks were put on one clock (meta key `clock_alignment`, `dpscope import --align`).
enum class ClockAlignment {
  Rendezvous,      // dpscope's own runs: round trips through the store at startup
  CollectiveEnds,  // imported traces: the median shift that lines up the ends of shared blocking
                   // collectives (formats/kineto_align.h)
  None,            // every rank as its profiler recorded it (offset 0)
};
inline constexpr std::array<ClockAlignment, 3> kClockAlignments{
    ClockAlignment::Rendezvous, ClockAlignment::CollectiveEnds, ClockAlignment::None};
// What `dpscope import --align` offers.
inline constexpr std::array<ClockAlignment, 2> kImportAlignments{ClockAlignment::CollectiveEnds,
                                                                 ClockAlignment::None};
// "rendezvous" | "collective-ends" | "none".
std::string_view to_string(ClockAlignment alignment);

// ---- A rank's status -----------------------------------------------------------------------
// How a rank's recording ended (ranks.status). The file holds "running" while a rank writes and
// "complete" once it closed normally; any other text says how it ended ("interrupted (SIGINT)",
// "terminated: <why>", the launcher's "killed by signal 9 (SIGKILL)"), and reads as Ended.
enum class RankStatus {
  Running,   // still written, or the writer died before closing the file
  Complete,  // closed normally
  Ended,     // stopped early; the recorded text says how
};
// "running" | "complete"; "" for Ended, whose text is its own.
std::string_view to_string(RankStatus status);
// The status a recorded ranks.status text means.
RankStatus parse_rank_status(std::string_view recorded);

// ---- FSDP's modes --------------------------------------------------------------------------
// What each rank keeps between uses of a unit (ZeRO's stages; meta key `fsdp.sharding`).
enum class ShardingStrategy {
  FullShard,    // ZeRO-3: parameters, gradients and optimizer state sharded; full parameters
                // gathered for forward, freed, gathered again for backward
  ShardGradOp,  // ZeRO-2: like FullShard, but the full parameters stay from forward to backward
  NoShard,      // DDP-like: every rank keeps everything; gradients are all-reduced
  HybridShard,  // HSDP: FullShard within groups of N ranks (meta `fsdp.shard_group_size`), the
                // groups replicas of each other; gradients reduce-scattered within a group, then
                // all-reduced across the groups (See Note [HSDP mesh] in engine/comm/device_mesh.h)
};
inline constexpr std::array<ShardingStrategy, 4> kShardingStrategies{
    ShardingStrategy::FullShard, ShardingStrategy::ShardGradOp, ShardingStrategy::NoShard,
    ShardingStrategy::HybridShard};
// "full" | "grad_op" | "no_shard" | "hybrid".
std::string_view to_string(ShardingStrategy strategy);

// When backward gathers the next unit's parameters ahead of need (meta key
// `fsdp.backward_prefetch`).
enum class BackwardPrefetch {
  None,
  Pre,   // BACKWARD_PRE: when this unit's backward begins (more overlap, more memory)
  Post,  // BACKWARD_POST: when this unit's gradient is complete
};
inline constexpr std::array<BackwardPrefetch, 3> kBackwardPrefetches{
    BackwardPrefetch::Pre, BackwardPrefetch::Post, BackwardPrefetch::None};
// "none" | "pre" | "post".
std::string_view to_string(BackwardPrefetch prefetch);

// The dtype units compute in (`--mixed-precision`); the engine's MixedPrecision derives the
// dtypes of parameters, reductions and buffers from it.
enum class ComputePrecision { Fp32, Fp16, Bf16 };
inline constexpr std::array<ComputePrecision, 3> kComputePrecisions{
    ComputePrecision::Fp32, ComputePrecision::Fp16, ComputePrecision::Bf16};
// "none" (float32: mixed precision off) | "fp16" | "bf16".
std::string_view to_string(ComputePrecision precision);

// ---- DDP's modes ---------------------------------------------------------------------------
// The communication hook a DDP run's buckets go through (`--comm-hook`, config key `comm_hook`;
// engine/ddp/comm_hook.h builds each).
enum class CommHookKind {
  None,       // no hook: the Reducer's own all-reduce
  AllReduce,  // PyTorch's allreduce_hook (the same sums, through the hook interface)
  Fp16,       // fp16_compress_hook
  Bf16,       // bf16_compress_hook
  PowerSgd,   // powerSGD_hook
};
inline constexpr std::array<CommHookKind, 5> kCommHookKinds{
    CommHookKind::None, CommHookKind::AllReduce, CommHookKind::Fp16, CommHookKind::Bf16,
    CommHookKind::PowerSgd};
// "none" | "allreduce" | "fp16" | "bf16" | "powersgd": also each hook's CommHook::name().
std::string_view to_string(CommHookKind kind);
// Whether the hook's all-reduce moves the bucket as it is, in full (None, AllReduce): the what-if
// replays only such runs' buckets.
constexpr bool reduces_buckets_unchanged(CommHookKind kind) {
  return kind == CommHookKind::None || kind == CommHookKind::AllReduce;
}

// How DDP buckets its first iteration (meta key `ddp_initial_buckets`, `--initial-buckets`;
// See Note [The first iteration's buckets] in engine/ddp/initial_buckets.h).
enum class InitialBuckets {
  PyTorch,  // PyTorch >= 1.12: one bucket, unless find_unused_parameters without static_graph
  BySize,   // PyTorch <= 1.11: [first_bucket, cap] by size in reverse registration order
};
inline constexpr std::array<InitialBuckets, 2> kInitialBuckets{InitialBuckets::PyTorch,
                                                               InitialBuckets::BySize};
// "pytorch" | "by-size".
std::string_view to_string(InitialBuckets policy);

// ---- FSDP2's modes -------------------------------------------------------------------------
// What a fully_shard group keeps between its forward and its backward (PyTorch's
// reshard_after_forward: True, False or an int; meta key `fsdp2.reshard_after_forward`).
enum class ReshardAfterForward {
  Reshard,      // True: free the unsharded parameters; backward all-gathers them again
  Keep,         // False: keep them until the group's gradients are reduced (ZeRO-2's memory)
  ToGroupSize,  // an int N: keep a 1/N slice, all-gathered within N ranks in backward
};
// The two spelled as words; ToGroupSize is spelled by its number (engine/fsdp2/fsdp2_options.h).
inline constexpr std::array<ReshardAfterForward, 2> kReshardAfterForwardWords{
    ReshardAfterForward::Reshard, ReshardAfterForward::Keep};
// "true" | "false"; "" for ToGroupSize.
std::string_view to_string(ReshardAfterForward mode);
// A recorded reshard_after_forward (meta `fsdp2.reshard_after_forward`) read as PyTorch reads it
// against `shard_size`, the ranks its parameters are sharded over: "true" or N == shard_size is
// Reshard, "false" or N == 1 is Keep, another N is ToGroupSize; nullopt for any other text.
std::optional<ReshardAfterForward> read_reshard_after_forward(std::string_view recorded,
                                                              int shard_size);

// A meta value that says yes or no (`fsdp.forward_prefetch`): "true" | "false".
std::string_view flag_text(bool value);
// true for "true", false for "false", nullopt for anything else.
std::optional<bool> parse_flag(std::string_view text);

// The mode whose spelling is `text` among `modes`, or nullopt: the caller names the flag (or the
// meta key) and the choices.
template <typename Mode, size_t N>
std::optional<Mode> parse_mode(const std::array<Mode, N>& modes, std::string_view text) {
  for (Mode mode : modes) {
    if (to_string(mode) == text) return mode;
  }
  return std::nullopt;
}

// Every mode's spelling, in `modes`' order: the choices a flag lists (CLI::IsMember).
template <typename Mode, size_t N>
std::vector<std::string> mode_spellings(const std::array<Mode, N>& modes) {
  std::vector<std::string> spellings;
  for (Mode mode : modes) spellings.emplace_back(to_string(mode));
  return spellings;
}

// ---- The training step's names -------------------------------------------------------------
// Phase and metric names that the analysis (compute, overlap, step time, DDP's timings), what-if,
// the viewer (iterations, colours, narration) and the tests read by name. `dpscope train`, the
// tutorials and synthetic traces record them; a program on the engine that records its own
// steps must use them for its steps to be measured (See Note [Compute and exposed communication]).
inline constexpr std::string_view kPhaseIteration = "iteration";    // one optimizer step
inline constexpr std::string_view kPhaseForward = "forward";
inline constexpr std::string_view kPhaseBackward = "backward";
inline constexpr std::string_view kPhaseOptimizerStep = "optimizer_step";
inline constexpr std::string_view kPhaseFinalizeBackward = "finalize_backward";  // DDP: buckets written back
inline constexpr std::string_view kPhaseStragglerDelay = "straggler_delay";  // --straggler's sleep
inline constexpr std::string_view kPhaseEvaluation = "evaluation";  // held-out forward, no iteration
inline constexpr std::string_view kMetricStepMs = "step_ms";  // one step's wall time
inline constexpr std::string_view kMetricLoss = "loss";       // summed over the step's backward passes
inline constexpr std::string_view kMetricResidentMb = "resident_mb";  // the process's resident memory, MiB

}  // namespace dpscope::trace
