// What one rank of `dpscope train` does, as a plain struct: the model, the data, the strategy
// and its options, tracing, checkpoints. cli/cmd_train.cpp fills it from the command line
// (README.md, `dpscope train`); tutorials fill it in code.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/ddp/initial_buckets.h"
#include "engine/fsdp/fsdp_modes.h"
#include "engine/fsdp2/fsdp2_options.h"
#include "engine/models/model_config.h"
#include "trace/schema.h"
#include "trace/vocabulary.h"

namespace dpscope::train {

// The trace's strategies (trace/vocabulary.h), so that the meta key `strategy` and `--strategy`
// spell each one way.
using trace::Strategy;
// The ones a training runs (`--strategy ddp | fsdp | fsdp2`); validate_train_config refuses the
// others.
inline constexpr std::array<Strategy, 3> kTrainStrategies{Strategy::Ddp, Strategy::Fsdp,
                                                          Strategy::Fsdp2};

// --straggler RANK:MS: rank RANK works MS milliseconds longer each step, at the end of its
// forward (so before its backward and its first bucket): a slow rank to teach and to test the
// straggler analysis with (Note [Stragglers]). The trace shows the extra time as a phase
// "straggler_delay" inside "forward" and the meta key "straggler" as "RANK:MS".
struct StragglerSpec {
  int rank = 0;
  double ms = 0;
};
// Parses "RANK:MS" (e.g. "2:30"). Throws std::invalid_argument naming --straggler and the form.
StragglerSpec parse_straggler(const std::string& text);

// --all-reduce-loss: each step's loss averaged over the ranks for the progress line, by an
// all-reduce every rank issues (AllRanks), or by one rank 0 alone issues (RankZeroOnly: the
// classic `if rank == 0: dist.all_reduce(loss)` bug, which hangs the run; tutorial 21,
// docs/hangs.md).
enum class LossAllReduce { None, AllRanks, RankZeroOnly };
// "local" (no all-reduce) | "all-ranks" | "rank-0-only"; throws std::invalid_argument naming --all-reduce-loss.
LossAllReduce parse_loss_all_reduce(const std::string& text);

struct TrainConfig {
  models::ModelConfig model;
  std::string data = "synthetic";  // digits | text (gpt's) | synthetic
  int64_t synthetic_samples = 2048;
  // Train on the first (1 - eval_fraction) of the rows; report accuracy on the rest at the end.
  double eval_fraction = 0;

  int64_t steps = 20;
  int64_t batch_size = 32;  // per rank
  double lr = 0.05;
  double momentum = 0;
  uint64_t seed = 0;
  int threads = 0;  // 0: cores / local ranks
  int grad_accum = 1;

  Strategy strategy = Strategy::Ddp;
  std::string backend;  // "" = the device's own: nccl with --device cuda, gloo on the CPU
  std::string device = "cpu";  // or "cuda": cuda:LOCAL_RANK (run_device.h)
  // The link to emulate (--link-gbps, --link-latency-us; Note [Link emulation]): both or
  // neither. Neither: the one DPSCOPE_LINK_GBPS and DPSCOPE_LINK_LATENCY_US give, if any.
  std::optional<double> link_gbps;
  std::optional<double> link_latency_us;
  std::optional<StragglerSpec> straggler;  // none: every rank works as fast as it can
  // --timeout S: a collective not finished within S seconds fails, naming the ranks not heard
  // from (comm::Work::wait); the hang lessons use a few seconds (docs/hangs.md).
  double timeout_s = 300;
  LossAllReduce all_reduce_loss = LossAllReduce::None;

  // DDP.
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1;
  trace::InitialBuckets initial_buckets = trace::InitialBuckets::PyTorch;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  bool static_graph = false;
  bool broadcast_buffers = true;
  trace::CommHookKind comm_hook = trace::CommHookKind::None;

  // FSDP.
  fsdp::ShardingStrategy sharding = fsdp::ShardingStrategy::FullShard;
  int64_t wrap_min_params = 0;    // wrap each submodule with at least this many; 0: root only
  fsdp::ComputePrecision mixed_precision = fsdp::ComputePrecision::Fp32;
  bool reduce_fp32 = false;
  bool cpu_offload = false;
  fsdp::BackwardPrefetch backward_prefetch = fsdp::BackwardPrefetch::Pre;
  bool forward_prefetch = false;
  int limit_all_gathers = 0;  // 0: no limit
  int limit_reduce_scatters = 1;  // 0: no limit
  double reduce_bucket_mb = 1;  // the reduce-scatter bucket over all ranks; 0: no bucketing

  // FSDP2 (`--strategy fsdp2`; wrap_min_params picks the submodules fully_shard is applied to).
  fsdp2::ReshardSpec reshard_after_forward = fsdp2::ReshardSpec::reshard();
  // --explicit-prefetch N: each group (in the order fully_shard was applied) forward-prefetches
  // the next N and backward-prefetches the previous N, as PyTorch's FSDP2 example's
  // --explicit-prefetching does; 0: the implicit prefetch only.
  int explicit_prefetch = 0;
  // --sharding hybrid (FSDP2's HSDP, FSDP1's HYBRID_SHARD): the ranks each parameter is sharded
  // over; 0: not given.
  // Checked against the world size when the mesh is made (comm::check_shard_group_size).
  int shard_group_size = 0;

  std::string trace;  // "" = DPSCOPE_TRACE_DIR/rank<R>.sqlite, else traces/train-<model>.sqlite
  trace::TraceLevel trace_level = trace::TraceLevel::Full;
  // --memory-accounting: how memory samples split memory into categories (Note [Ownership
  // accounting]); none: the device's own, tracking on the CPU and ownership on a GPU.
  std::optional<trace::MemoryAccounting> memory_accounting;
  std::string save_init;
  std::string save_final;
  int progress_every = 10;  // print a progress line every N steps (0: none)
  std::string command_line;
};

// The checks run_training makes before it starts (steps, batch size, rates, device, the link,
// the model's sizes and its data, DDP-only options with FSDP, FSDP1-only ones with FSDP2); `dpscope train` in parse-only mode
// (the CLI fuzzer) makes them too. Throws std::invalid_argument naming the flag. Needs no
// LibTorch (train_config.cpp, models/model_config.cpp).
void validate_train_config(const TrainConfig& config);

// The run's settings as one JSON object, the trace's meta `config`: every field under its
// trace::config_key name, in the order of that namespace, written by nlohmann-json (escaped);
// sizes the model does not have are 0, and `straggler` is null without one. Needs no LibTorch.
std::string config_json(const TrainConfig& config);

// What a run measured, for the caller (tutorials, the demo, tests).
struct TrainResult {
  int rank = 0;
  int world_size = 1;
  double step_ms_median = 0;  // steps 3..K (all steps when K < 3)
  double final_loss = 0;
  double eval_accuracy = -1;  // with eval_fraction > 0
  int64_t peak_memory_bytes = 0;  // the tracking allocator's peak (trace level full), else 0
  std::string trace_path;
  // Rank 0: the file holding the whole run once it ended (the merged run file, or a single
  // rank's own); "" on other ranks, when the launcher merges, or without a trace.
  std::string run_file;
};

}  // namespace dpscope::train
