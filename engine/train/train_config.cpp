// validate_train_config (train_config.h): the checks of a TrainConfig that need no LibTorch, so
// that `dpscope train` can make them in parse-only mode too (cli/cmd_train.cpp, the CLI fuzzer).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/link_model.h"
#include "engine/models/model_config.h"
#include "engine/train/train_config.h"

namespace dpscope::train {

namespace {

// Bucket sizes in MiB are turned into bytes in an int64_t: 1 TiB is far beyond any bucket and
// keeps the conversion defined (inf, NaN or 1e300 MiB would not be).
constexpr double kMaxBucketMb = 1 << 20;

bool bucket_size_ok(double mb, bool zero_ok) {
  return std::isfinite(mb) && (zero_ok ? mb >= 0 : mb > 0) && mb <= kMaxBucketMb;
}

// --device and --backend together: "cpu" or "cuda"; cuda only in a CUDA build (else one line
// saying how to get one); nccl only with cuda. (run_device.h picks the device itself.)
void check_device_and_backend(std::string_view device_text, std::string_view backend_text) {
  const std::optional<trace::Device> device = trace::parse_mode(trace::kDevices, device_text);
  if (!device) {
    throw std::invalid_argument("--device must be cpu or cuda, not '" + std::string(device_text) + "'");
  }
  const std::optional<trace::Backend> backend =
      backend_text.empty() ? std::nullopt : trace::parse_mode(trace::kBackends, backend_text);
  if (!backend_text.empty() && !backend) {
    throw std::invalid_argument("--backend must be gloo or nccl, not '" + std::string(backend_text) + "'");
  }
#ifndef DPSCOPE_HAVE_CUDA
  if (*device == trace::Device::Cuda) {
    throw std::invalid_argument("--device cuda: this build has no CUDA (its LibTorch is CPU-only); "
                                "build against a CUDA LibTorch (docs/gpu.md), or use --device cpu");
  }
#endif
  if (backend == trace::Backend::Nccl && *device != trace::Device::Cuda) {
    throw std::invalid_argument("--backend nccl runs on GPUs: add --device cuda, or use --backend "
                                "gloo on the CPU");
  }
}

// The flags of DDP and of FSDP1 that FSDP2 has no use for, each refused by name (their defaults
// pass): fully_shard always shards fully, reduces each group in one reduce-scatter, and prefetches
// in backward by the post-forward order. (--mixed-precision, --reduce-fp32 and --cpu-offload are
// FSDP2's too.)
const char* option_fsdp2_refuses(const TrainConfig& c) {
  const TrainConfig defaults;
  if (c.comm_hook != defaults.comm_hook) return "--comm-hook";
  if (c.initial_buckets != defaults.initial_buckets) return "--initial-buckets";
  if (c.find_unused_parameters) return "--find-unused-parameters";
  if (c.gradient_as_bucket_view) return "--gradient-as-bucket-view";
  if (c.static_graph) return "--static-graph";
  if (c.backward_prefetch != defaults.backward_prefetch) return "--backward-prefetch";
  if (c.forward_prefetch) return "--forward-prefetch";
  if (c.limit_all_gathers != defaults.limit_all_gathers) return "--limit-all-gathers";
  if (c.limit_reduce_scatters != defaults.limit_reduce_scatters) return "--limit-reduce-scatters";
  if (c.reduce_bucket_mb != defaults.reduce_bucket_mb) return "--reduce-bucket-mb";
  return nullptr;
}

void check_fsdp2_options(const TrainConfig& c) {
  if (const char* flag = option_fsdp2_refuses(c)) {
    throw std::invalid_argument(std::string(flag) + " is not an option of --strategy fsdp2 "
                                "(docs/fsdp2.md lists FSDP2's: --reshard-after-forward, --sharding "
                                "full|hybrid, --shard-group-size, --explicit-prefetch, "
                                "--wrap-min-params, --mixed-precision, --reduce-fp32, --cpu-offload, "
                                "--grad-accum); drop it or use --strategy "
                                "fsdp or ddp");
  }
  if (c.explicit_prefetch < 0) {
    throw std::invalid_argument("--explicit-prefetch must be 0 (the implicit prefetch only) or "
                                "more (the groups each group prefetches, ahead in forward and "
                                "behind in backward)");
  }
  if (c.wrap_min_params < 0) {
    throw std::invalid_argument("--wrap-min-params must be 0 (fully_shard on the root only) or more");
  }
  if (c.sharding == fsdp::ShardingStrategy::ShardGradOp) {
    throw std::invalid_argument("--sharding grad_op is FSDP1's SHARD_GRAD_OP; with --strategy fsdp2 "
                                "give --reshard-after-forward false instead (full or hybrid are "
                                "FSDP2's --sharding)");
  }
  if (c.sharding == fsdp::ShardingStrategy::NoShard) {
    throw std::invalid_argument("--sharding no_shard: FSDP2 always shards; use --strategy ddp, or "
                                "--sharding hybrid --shard-group-size 1 (every gradient all-reduced)");
  }
}

// --shard-group-size goes with --sharding hybrid and only with it (its check against the world
// size waits for the world: comm::check_shard_group_size).
void check_shard_group_size_flag(const TrainConfig& c) {
  const bool hybrid = c.sharding == fsdp::ShardingStrategy::HybridShard;
  if (c.shard_group_size < 0) {
    throw std::invalid_argument("--shard-group-size must be at least 1 (a divisor of the world size)");
  }
  if (hybrid && !trace::is_fsdp_family(c.strategy)) {
    throw std::invalid_argument("--sharding hybrid (HSDP) is FSDP's: use --strategy fsdp2 or fsdp");
  }
  if (hybrid && c.shard_group_size == 0) {
    throw std::invalid_argument("--sharding hybrid needs --shard-group-size N: the ranks each "
                                "parameter is sharded over (a host's ranks, say), N dividing the "
                                "world size");
  }
  if (!hybrid && c.shard_group_size != 0) {
    throw std::invalid_argument("--shard-group-size is HSDP's: add --sharding hybrid (with "
                                "--strategy fsdp2 or fsdp), or drop --shard-group-size");
  }
}

}  // namespace

LossAllReduce parse_loss_all_reduce(const std::string& text) {
  if (text == "local") return LossAllReduce::None;
  if (text == "all-ranks") return LossAllReduce::AllRanks;
  if (text == "rank-0-only") return LossAllReduce::RankZeroOnly;
  throw std::invalid_argument("--all-reduce-loss '" + text + "': give local, all-ranks or rank-0-only");
}

StragglerSpec parse_straggler(const std::string& text) {
  const auto bad = [&] {
    return std::invalid_argument("--straggler '" + text + "': give RANK:MS, a rank and the extra "
                                 "milliseconds it works each step (0 < MS <= 60000), e.g. --straggler 2:30");
  };
  const size_t colon = text.find(':');
  if (colon == std::string::npos) throw bad();
  StragglerSpec spec;
  try {
    size_t used = 0;
    spec.rank = std::stoi(text.substr(0, colon), &used);
    if (used != colon) throw bad();
    const std::string ms = text.substr(colon + 1);
    spec.ms = std::stod(ms, &used);
    if (used != ms.size()) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  if (spec.rank < 0 || !(spec.ms > 0 && spec.ms <= 60000)) throw bad();
  return spec;
}

void validate_train_config(const TrainConfig& c) {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw std::invalid_argument(message);
  };
  const auto train_strategy = std::find(kTrainStrategies.begin(), kTrainStrategies.end(), c.strategy);
  require(train_strategy != kTrainStrategies.end(), "--strategy must be ddp, fsdp or fsdp2");
  require(c.steps >= 1, "--steps must be at least 1");
  require(c.batch_size >= 1, "--batch-size must be at least 1");
  require(c.grad_accum >= 1, "--grad-accum must be at least 1");
  require(c.lr > 0, "--lr must be positive");
  require(c.momentum >= 0 && c.momentum < 1, "--momentum must be in [0, 1)");
  require(c.bucket_cap_mb > 0 && c.first_bucket_mb > 0,
          "--bucket-cap-mb and --first-bucket-mb must be positive");
  require(bucket_size_ok(c.bucket_cap_mb, false) && bucket_size_ok(c.first_bucket_mb, false),
          "--bucket-cap-mb and --first-bucket-mb must be at most 1048576 (1 TiB)");
  require(c.eval_fraction >= 0 && c.eval_fraction < 1, "--eval-fraction must be in [0, 1)");
  models::check_model_config(c.model);
  // gpt predicts the next character, which only the text has; the other models have nothing to
  // predict in it.
  if (c.model.name == "gpt" && c.data != "text") {
    throw std::invalid_argument("--model gpt is a character-level language model; train it on "
                                "--data text");
  }
  if (c.data == "text" && c.model.name != "gpt") {
    throw std::invalid_argument("--data text is for the language model: use --model gpt (the " +
                                c.model.name + " model trains on digits or synthetic data)");
  }
  core::check_link(c.link_gbps, c.link_latency_us, core::kLinkGbpsFlag, core::kLinkLatencyFlag);
  if (!(c.timeout_s >= 0.1 && c.timeout_s <= 86400)) {
    throw std::invalid_argument("--timeout " + std::to_string(c.timeout_s) +
                                ": give the seconds a collective may take, from 0.1 to 86400 "
                                "(default 300; the hang lessons use 3)");
  }
  check_device_and_backend(c.device, c.backend);
  if (c.strategy != Strategy::Fsdp2 &&
      c.reshard_after_forward.mode != fsdp2::ReshardAfterForward::Reshard) {
    throw std::invalid_argument("--reshard-after-forward is an FSDP2 option; drop it or use "
                                "--strategy fsdp2 (FSDP1's --sharding grad_op keeps parameters "
                                "from forward to backward)");
  }
  if (c.strategy != Strategy::Fsdp2 && c.explicit_prefetch != 0) {
    throw std::invalid_argument("--explicit-prefetch is an FSDP2 option; drop it or use "
                                "--strategy fsdp2 (FSDP1 prefetches with --forward-prefetch and "
                                "--backward-prefetch)");
  }
  if (c.strategy == Strategy::Fsdp2) check_fsdp2_options(c);
  check_shard_group_size_flag(c);
  if (c.strategy == Strategy::Fsdp) {
    const char* ddp_only = c.comm_hook != trace::CommHookKind::None        ? "--comm-hook"
                           : c.initial_buckets != trace::InitialBuckets::PyTorch
                               ? "--initial-buckets"
                           : c.find_unused_parameters   ? "--find-unused-parameters"
                           : c.gradient_as_bucket_view  ? "--gradient-as-bucket-view"
                           : c.static_graph             ? "--static-graph"
                                                        : nullptr;
    if (ddp_only) {
      throw std::invalid_argument(std::string(ddp_only) + " is a DDP option; drop it or use "
                                  "--strategy ddp");
    }
    require(c.wrap_min_params >= 0, "--wrap-min-params must be 0 (wrap nothing) or more");
    require(c.limit_all_gathers >= 0, "--limit-all-gathers must be 0 (no limit) or more");
    require(c.limit_reduce_scatters >= 0, "--limit-reduce-scatters must be 0 (no limit) or more");
    require(c.reduce_bucket_mb >= 0, "--reduce-bucket-mb must be 0 (no bucketing) or more");
    require(bucket_size_ok(c.reduce_bucket_mb, true),
            "--reduce-bucket-mb must be at most 1048576 (1 TiB)");
  }
}

std::string config_json(const TrainConfig& c) {
  namespace config_key = trace::config_key;
  const models::ModelConfig model = models::with_defaults(c.model);
  nlohmann::ordered_json json;
  json[config_key::kModel] = c.model.name;
  json[config_key::kHidden] = model.hidden.value_or(0);
  json[config_key::kLayers] = model.layers.value_or(0);
  json[config_key::kHeads] = model.heads.value_or(0);
  json[config_key::kSequence] = model.sequence.value_or(0);
  json[config_key::kData] = c.data;
  json[config_key::kSteps] = c.steps;
  json[config_key::kBatchSize] = c.batch_size;
  json[config_key::kLr] = c.lr;
  json[config_key::kMomentum] = c.momentum;
  json[config_key::kSeed] = c.seed;
  json[config_key::kGradAccum] = c.grad_accum;
  json[config_key::kBucketCapMb] = c.bucket_cap_mb;
  json[config_key::kFirstBucketMb] = c.first_bucket_mb;
  json[config_key::kInitialBuckets] = trace::to_string(c.initial_buckets);
  json[config_key::kFindUnusedParameters] = c.find_unused_parameters;
  json[config_key::kGradientAsBucketView] = c.gradient_as_bucket_view;
  json[config_key::kStaticGraph] = c.static_graph;
  json[config_key::kBroadcastBuffers] = c.broadcast_buffers;
  json[config_key::kCommHook] = trace::to_string(c.comm_hook);
  json[config_key::kStrategy] = trace::to_string(c.strategy);
  json[config_key::kSharding] = trace::to_string(c.sharding);
  json[config_key::kWrapMinParams] = c.wrap_min_params;
  json[config_key::kMixedPrecision] = trace::to_string(c.mixed_precision);
  json[config_key::kReduceFp32] = c.reduce_fp32;
  json[config_key::kCpuOffload] = c.cpu_offload;
  json[config_key::kBackwardPrefetch] = trace::to_string(c.backward_prefetch);
  json[config_key::kForwardPrefetch] = c.forward_prefetch;
  json[config_key::kLimitAllGathers] = c.limit_all_gathers;
  json[config_key::kLimitReduceScatters] = c.limit_reduce_scatters;
  json[config_key::kReduceBucketMb] = c.reduce_bucket_mb;
  json[config_key::kReshardAfterForward] = c.reshard_after_forward.text();
  json[config_key::kExplicitPrefetch] = c.explicit_prefetch;
  json[config_key::kShardGroupSize] = c.shard_group_size;
  json[config_key::kStraggler] =
      c.straggler ? nlohmann::ordered_json{{config_key::kStragglerRank, c.straggler->rank},
                                           {config_key::kStragglerMs, c.straggler->ms}}
                  : nlohmann::ordered_json(nullptr);
  return json.dump();
}

}  // namespace dpscope::train
