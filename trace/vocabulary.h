// The trace's vocabulary: every word that a writer records and a reader compares — the meta
// table's keys, the strategy names, FSDP's sharding, prefetch and precision modes, the phase and
// metric names — each an enum or a constant with its one spelling. The engine, the analysis, the
// CLI, the viewer and the tutorials share these types; no mode is compared as a string outside
// this header and vocabulary.cpp. Constants and pure functions only: thread-safe.
#pragma once

#include <array>
#include <optional>
#include <string_view>

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
}  // namespace meta_key

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

// ---- FSDP's modes --------------------------------------------------------------------------
// What each rank keeps between uses of a unit (ZeRO's stages; meta key `fsdp.sharding`).
enum class ShardingStrategy {
  FullShard,    // ZeRO-3: parameters, gradients and optimizer state sharded; full parameters
                // gathered for forward, freed, gathered again for backward
  ShardGradOp,  // ZeRO-2: like FullShard, but the full parameters stay from forward to backward
  NoShard,      // DDP-like: every rank keeps everything; gradients are all-reduced
  HybridShard,  // HSDP: FullShard within groups of N ranks (meta `fsdp.shard_group_size`), the
                // groups replicas of each other; gradients reduce-scattered within a group, then
                // all-reduced across the groups (See Note [HSDP mesh] in engine/fsdp2/fsdp_mesh.h)
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

// The mode whose spelling is `text` among `modes`, or nullopt: the caller names the flag (or the
// meta key) and the choices.
template <typename Mode, size_t N>
std::optional<Mode> parse_mode(const std::array<Mode, N>& modes, std::string_view text) {
  for (Mode mode : modes) {
    if (to_string(mode) == text) return mode;
  }
  return std::nullopt;
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
