// `dpscope train`: one rank of a training run (README.md, Commands). Turns the flags into a
// TrainConfig and runs engine/train's loop; under `dpscope launch` or torchrun each rank runs one.
// The options need no LibTorch (train_config.h): DPSCOPE_TRAIN_OPTIONS_ONLY builds them without
// the engine, for parsing only (the CLI fuzzer); running then says the engine is missing.
#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#if defined(DPSCOPE_HAVE_ENGINE) || defined(DPSCOPE_TRAIN_OPTIONS_ONLY)
#define DPSCOPE_TRAIN_OPTIONS 1
#include "core/link_options.h"
#include "engine/train/train_config.h"
#include "trace/vocabulary.h"
#endif
#ifdef DPSCOPE_HAVE_ENGINE
#include <c10/util/Exception.h>

#include "cli/cluster_step.h"
#include "engine/train/trainer.h"
#endif

namespace dpscope::cli {
namespace {

constexpr const char* kNoEngine =
    "dpscope was built without the engine (LibTorch and Gloo not found); run scripts/setup and "
    "rebuild";

}  // namespace

#ifdef DPSCOPE_TRAIN_OPTIONS

#ifdef DPSCOPE_HAVE_ENGINE
namespace {

// This process's command line, for the trace's metadata.
std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& ch : text) {
    if (ch == '\0') ch = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// Rank 0 of a run on an emulated link that merged its run file itself (`--trace FILE`): the
// step on the cluster clock, under the measured step_ms (under the launcher without --trace the
// launcher merges and prints it). Nothing for other ranks or runs without a link.
void print_train_cluster_step(const std::string& run_file) {
  if (run_file.empty()) return;
  const ClusterStepReport report = cluster_step_report(run_file);
  for (const std::string& note : report.notes) std::fprintf(stderr, "dpscope train: %s\n", note.c_str());
  if (report.line) std::printf("%s\n", report.line->c_str());
  std::fflush(stdout);
}

}  // namespace
#endif

namespace {

// A flag that names one of `modes`, checked against their one spelling (trace::mode_spellings).
template <typename Mode, size_t N>
CLI::Option* add_mode_option(CLI::App* cmd, const std::string& name, std::string& text,
                             const std::array<Mode, N>& modes, const std::string& help) {
  return cmd->add_option(name, text, help)
      ->check(CLI::IsMember(trace::mode_spellings(modes)))
      ->capture_default_str();
}

// `dpscope train`'s flags: the TrainConfig they fill, and the text of those parsed after.
struct TrainFlags {
  train::TrainConfig config;
  std::string strategy{trace::to_string(train::Strategy::Ddp)};
  std::string initial_buckets{trace::to_string(trace::InitialBuckets::PyTorch)};
  std::string comm_hook{trace::to_string(trace::CommHookKind::None)};
  std::string sharding{fsdp::to_string(fsdp::ShardingStrategy::FullShard)};
  std::string mixed_precision{fsdp::to_string(fsdp::ComputePrecision::Fp32)};
  std::string backward_prefetch{fsdp::to_string(fsdp::BackwardPrefetch::Pre)};
  std::string reshard_after_forward{trace::to_string(fsdp2::ReshardAfterForward::Reshard)};
  std::string trace_level{trace::to_string(trace::TraceLevel::Full)};
  std::string memory_accounting;  // "" = the device's own
  bool no_broadcast_buffers = false;
  std::string straggler;  // "RANK:MS", parsed by train::parse_straggler
  std::string all_reduce_loss = "local";  // parsed by train::parse_loss_all_reduce
  core::LinkFlags link;
  int shard_group_size = 0;
  CLI::Option* shard_group_size_option = nullptr;
  CLI::Option* data_option = nullptr;
  std::vector<CLI::Option*> ddp_bucket_options;  // refused with --strategy fsdp and fsdp2
};

// The model and its data.
void add_model_options(CLI::App* cmd, TrainFlags& f) {
  train::TrainConfig& c = f.config;
  cmd->add_option("--model", c.model.name,
                  "toy | mlp | cnn | transformer | branch (an MLP with a head some batches skip) | "
                  "gpt (a GPT-2-shaped character-level language model: trains on --data text, "
                  "its default)")
      ->check(CLI::IsMember({"toy", "mlp", "cnn", "transformer", "branch", "gpt"}))
      ->capture_default_str();
  cmd->add_option("--hidden", c.model.hidden,
                  "mlp, branch: width of the hidden layers (default 256); gpt: width of the "
                  "residual stream, a multiple of --heads (default 128)");
  cmd->add_option("--layers", c.model.layers,
                  "mlp: Linear+ReLU blocks before the output layer (default 2); gpt: "
                  "transformer blocks (default 4)");
  cmd->add_option("--heads", c.model.heads, "gpt: attention heads (default 4)");
  cmd->add_option("--seq", c.model.sequence,
                  "gpt: context length in characters (default 64); transformer: sequence "
                  "length (default 8)");
  f.data_option = cmd->add_option("--data", c.data,
                                  "digits | text (data/opticks.txt.gz, for gpt) | synthetic "
                                  "(default: digits, text for --model gpt)")
                      ->check(CLI::IsMember({"digits", "text", "synthetic"}));
  cmd->add_option("--samples", c.synthetic_samples, "synthetic: number of samples")->capture_default_str();
  cmd->add_option("--eval-fraction", c.eval_fraction,
                  "Hold out the last fraction of the rows and report accuracy on it at the end")
      ->capture_default_str();
}

// Steps, batches, the optimizer, the strategy, the backend and the emulated link or straggler.
void add_run_options(CLI::App* cmd, TrainFlags& f) {
  train::TrainConfig& c = f.config;
  cmd->add_option("--steps", c.steps, "Optimizer steps")->capture_default_str();
  cmd->add_option("--batch-size", c.batch_size, "Samples per rank per micro-step")->capture_default_str();
  cmd->add_option("--grad-accum", c.grad_accum,
                  "Micro-steps per optimizer step (K-1 under no_sync, then one synced)")
      ->capture_default_str();
  cmd->add_option("--lr", c.lr, "SGD learning rate")->capture_default_str();
  cmd->add_option("--momentum", c.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--seed", c.seed, "Seed of the sampler, the synthetic data and the init")
      ->capture_default_str();
  cmd->add_option("--threads", c.threads, "Intra-op threads per rank (default: cores / local ranks)");
  add_mode_option(cmd, "--strategy", f.strategy, train::kTrainStrategies,
                  "ddp | fsdp (FSDP1: flat parameters) | fsdp2 (fully_shard: per-parameter dim-0 "
                  "shards; docs/fsdp2.md)");
  cmd->add_option("--backend", c.backend,
                  "gloo | nccl (default: nccl with --device cuda, gloo on the CPU; gloo with "
                  "--device cuda stages tensors through host memory)")
      ->check(CLI::IsMember(trace::mode_spellings(trace::kBackends)));
  cmd->add_option("--device", c.device,
                  "cpu | cuda: each rank on its own GPU, cuda:LOCAL_RANK (a CUDA build; docs/gpu.md)")
      ->capture_default_str();
  core::add_link_options(*cmd, f.link, core::LinkUse::Emulate);
  cmd->add_option("--timeout", c.timeout_s,
                  "Seconds a collective may take before it fails, naming the ranks not heard "
                  "from (a hung run then stops: docs/hangs.md)")
      ->capture_default_str();
  cmd->add_option("--all-reduce-loss", f.all_reduce_loss,
                  "local: each rank prints its own loss | all-ranks: each step's loss averaged over "
                  "the ranks for the progress line | "
                  "rank-0-only: the same all-reduce on rank 0 alone, the bug that hangs a run (docs/hangs.md)")
      ->check(CLI::IsMember({"local", "all-ranks", "rank-0-only"}))
      ->capture_default_str();
  cmd->add_option("--straggler", f.straggler,
                  "RANK:MS: rank RANK works MS milliseconds longer each step, before its backward "
                  "(a slow rank for the straggler analysis of `dpscope stats`)");
}

// DDP's options (refused with --strategy fsdp: validate_train_config, config_from).
void add_ddp_options(CLI::App* cmd, TrainFlags& f) {
  train::TrainConfig& c = f.config;
  f.ddp_bucket_options = {
      cmd->add_option("--bucket-cap-mb", c.bucket_cap_mb, "DDP bucket size cap (MiB)")
          ->capture_default_str(),
      cmd->add_option("--first-bucket-mb", c.first_bucket_mb, "DDP first bucket cap (MiB)")
          ->capture_default_str(),
      add_mode_option(cmd, "--initial-buckets", f.initial_buckets, trace::kInitialBuckets,
                      "DDP's first iteration: pytorch (PyTorch >= 1.12: one bucket, then buckets "
                      "rebuilt from the order gradients arrived) | by-size (PyTorch <= 1.11: "
                      "buckets by size in reverse registration order from the start)"),
  };
  cmd->add_flag("--find-unused-parameters", c.find_unused_parameters,
                "Walk the autograd graph each iteration for parameters without gradients");
  cmd->add_flag("--gradient-as-bucket-view", c.gradient_as_bucket_view,
                "Gradients are views into the buckets (no copy)");
  cmd->add_flag("--static-graph", c.static_graph, "The set of used parameters never changes");
  cmd->add_flag("--no-broadcast-buffers", f.no_broadcast_buffers,
                "Do not broadcast rank 0's buffers before each forward");
  add_mode_option(cmd, "--comm-hook", f.comm_hook, trace::kCommHookKinds,
                  "DDP: how each bucket is reduced (none: the Reducer's own all-reduce)");
}

// FSDP's options.
void add_fsdp_options(CLI::App* cmd, TrainFlags& f) {
  train::TrainConfig& c = f.config;
  add_mode_option(cmd, "--sharding", f.sharding, fsdp::kShardingStrategies,
                  "FSDP: full (ZeRO-3), grad_op (ZeRO-2), no_shard (DDP-like) or hybrid "
                  "(HYBRID_SHARD: sharded within groups of --shard-group-size ranks, replicated "
                  "across them); FSDP2: full or hybrid (HSDP)");
  cmd->add_option("--wrap-min-params", c.wrap_min_params,
                  "FSDP: wrap each submodule with at least N parameters as its own unit (0: root only)")
      ->capture_default_str();
  add_mode_option(cmd, "--mixed-precision", f.mixed_precision, fsdp::kComputePrecisions,
                  "FSDP: the dtype units compute in (none: float32)");
  cmd->add_flag("--reduce-fp32", c.reduce_fp32, "FSDP mixed precision: reduce-scatter in float32");
  cmd->add_flag("--cpu-offload", c.cpu_offload,
                "FSDP and FSDP2 (CPUOffloadPolicy): keep shards, their gradients and the "
                "optimizer on the CPU");
  add_mode_option(cmd, "--backward-prefetch", f.backward_prefetch, fsdp::kBackwardPrefetches,
                  "FSDP: gather the next unit when a unit's backward begins (pre), when its "
                  "gradient is complete (post), or not ahead (none)");
  cmd->add_flag("--forward-prefetch", c.forward_prefetch,
                "FSDP: gather the next unit when a unit's forward begins");
  cmd->add_option("--limit-all-gathers", c.limit_all_gathers,
                  "FSDP: at most N all-gathers in flight (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--limit-reduce-scatters", c.limit_reduce_scatters,
                  "FSDP: at most N reduce-scatters (full gradients) in flight (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--reduce-bucket-mb", c.reduce_bucket_mb,
                  "FSDP: reduce-scatter bucket over all ranks, MiB (0: no bucketing)")
      ->capture_default_str();
}

// FSDP2's options (with --wrap-min-params, FSDP1's, which picks the submodules fully_shard is
// applied to).
void add_fsdp2_options(CLI::App* cmd, TrainFlags& f) {
  cmd->add_option("--reshard-after-forward", f.reshard_after_forward,
                  "FSDP2: true (free each group's unsharded parameters after its forward), false "
                  "(keep them for backward) or N, a group size dividing the world size")
      ->capture_default_str();
  cmd->add_option("--explicit-prefetch", f.config.explicit_prefetch,
                  "FSDP2: each group gathers the next N groups when its forward begins and the "
                  "previous N when its backward begins (set_modules_to_forward_prefetch and "
                  "_backward_prefetch); 0: the implicit prefetch only")
      ->capture_default_str();
  f.shard_group_size_option = cmd->add_option(
      "--shard-group-size", f.shard_group_size,
      "FSDP and FSDP2 --sharding hybrid: shard each parameter over groups of N consecutive ranks (a "
      "host's), replicated across world / N groups; N divides the world size");
}

// The trace, the checkpoints and the progress lines.
void add_trace_options(CLI::App* cmd, TrainFlags& f) {
  train::TrainConfig& c = f.config;
  cmd->add_option("--trace", c.trace,
                  "Trace file (.sqlite) or directory for rank<R>.sqlite (default: "
                  "$DPSCOPE_TRACE_DIR, else traces/train-<model>.sqlite)");
  cmd->add_option("--trace-level", f.trace_level, "off | summary | full")
      ->check(CLI::IsMember(trace::mode_spellings(trace::kTraceLevels)))
      ->capture_default_str();
  add_mode_option(cmd, "--memory-accounting", f.memory_accounting, trace::kMemoryAccountings,
                  "tracking (the CPU allocator's category of each allocation) | ownership (the "
                  "storages the engine owns, on the run's device; the rest activations); default: "
                  "tracking on the CPU, ownership on a GPU (docs/trace-format.md)");
  cmd->add_option("--save-init", c.save_init,
                  "Rank 0 writes the parameters after DDP's construction (torch.load-able)");
  cmd->add_option("--save-final", c.save_final, "Rank 0 writes the final parameters");
  cmd->add_option("--progress-every", c.progress_every, "Progress line every N steps (0: none)")
      ->capture_default_str();
}

// The TrainConfig the parsed flags give; refuses DDP's bucket flags with FSDP.
train::TrainConfig config_from(const TrainFlags& f) {
  train::TrainConfig config = f.config;
  config.strategy = *trace::parse_mode(train::kTrainStrategies, f.strategy);
  config.broadcast_buffers = !f.no_broadcast_buffers;
  config.initial_buckets = *trace::parse_mode(trace::kInitialBuckets, f.initial_buckets);
  config.comm_hook = *trace::parse_mode(trace::kCommHookKinds, f.comm_hook);
  config.sharding = *trace::parse_mode(fsdp::kShardingStrategies, f.sharding);
  config.mixed_precision = *trace::parse_mode(fsdp::kComputePrecisions, f.mixed_precision);
  config.backward_prefetch = *trace::parse_mode(fsdp::kBackwardPrefetches, f.backward_prefetch);
  config.reshard_after_forward =
      fsdp2::parse_reshard_spec(f.reshard_after_forward, "--reshard-after-forward");
  // FSDP has buckets of its own (FSDP1's --reduce-bucket-mb, FSDP2's one reduce-scatter a
  // group): DDP's bucket flags would be ignored.
  const char* own_buckets = config.strategy == train::Strategy::Fsdp
                                ? "FSDP's reduce-scatter bucket is --reduce-bucket-mb"
                            : config.strategy == train::Strategy::Fsdp2
                                ? "FSDP2 reduces each fully_shard group in one reduce-scatter"
                                : nullptr;
  for (const CLI::Option* option : f.ddp_bucket_options) {
    if (own_buckets && option->count()) {
      throw std::invalid_argument(option->get_name() + " is a DDP option; " + own_buckets +
                                  "; drop it or use --strategy ddp");
    }
  }
  // The language model has nothing to predict in the other data sets.
  if (config.model.name == "gpt" && !f.data_option->count()) config.data = "text";
  if (!f.straggler.empty()) config.straggler = train::parse_straggler(f.straggler);
  config.all_reduce_loss = train::parse_loss_all_reduce(f.all_reduce_loss);
  if (f.shard_group_size_option->count()) {
    if (f.shard_group_size < 1) {
      throw std::invalid_argument("--shard-group-size " + std::to_string(f.shard_group_size) +
                                  ": give N >= 1, a divisor of the world size");
    }
    config.shard_group_size = f.shard_group_size;
  }
  config.link_gbps = f.link.gbps;
  config.link_latency_us = f.link.latency_us;
  trace::parse_trace_level(f.trace_level, &config.trace_level);
  if (!f.memory_accounting.empty()) {
    config.memory_accounting = trace::parse_mode(trace::kMemoryAccountings, f.memory_accounting);
  }
  return config;
}

}  // namespace

void add_train_command(CLI::App& app, CommandMode mode) {
  auto flags = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand(
      "train", "One rank of a training run (run it under `dpscope launch -n N --`)");
  add_model_options(cmd, *flags);
  add_run_options(cmd, *flags);
  add_ddp_options(cmd, *flags);
  add_fsdp_options(cmd, *flags);
  add_fsdp2_options(cmd, *flags);
  add_trace_options(cmd, *flags);
  cmd->callback([flags, mode] {
    train::TrainConfig config = config_from(*flags);
    if (mode == CommandMode::Validate) {
      train::validate_train_config(config);  // run_training's own first step
      return;
    }
#ifndef DPSCOPE_HAVE_ENGINE
    throw CliFailure(kNoEngine);
#else
    config.command_line = own_command_line();
    try {
      const train::TrainResult result = train::run_training(config);
      print_train_cluster_step(result.run_file);
    } catch (const c10::Error& error) {
      // LibTorch's own errors: the message without the C++ stack behind it.
      throw std::runtime_error(error.what_without_backtrace());
    }
#endif
  });
}

#else

void add_train_command(CLI::App& app, CommandMode mode) {
  CLI::App* cmd = app.add_subcommand("train", "One rank of a training run (needs the engine)");
  cmd->allow_extras();
  cmd->callback([mode] {
    if (mode == CommandMode::Validate) return;  // without the engine there are no options
    throw CliFailure(kNoEngine);
  });
}

#endif

}  // namespace dpscope::cli
