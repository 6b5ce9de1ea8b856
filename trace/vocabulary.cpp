// The spellings of the vocabulary's enums (vocabulary.h): the one place each mode's text is
// written, so that a recorded trace, `dpscope train`'s flags and the readers agree.
#include "trace/vocabulary.h"

#include <charconv>

namespace dpscope::trace {

std::string_view to_string(Strategy strategy) {
  switch (strategy) {
    case Strategy::Unknown: return "";
    case Strategy::Ddp: return "ddp";
    case Strategy::Fsdp: return "fsdp";
    case Strategy::Zero1: return "zero1";
    case Strategy::Collectives: return "collectives";
    case Strategy::Fsdp2: return "fsdp2";
  }
  return "";
}

Strategy parse_strategy(std::string_view text) {
  return parse_mode(kStrategies, text).value_or(Strategy::Unknown);
}

std::string_view flag_text(bool value) { return value ? "true" : "false"; }

std::optional<bool> parse_flag(std::string_view text) {
  if (text == flag_text(true)) return true;
  if (text == flag_text(false)) return false;
  return std::nullopt;
}

std::string_view to_string(Backend backend) {
  switch (backend) {
    case Backend::Gloo: return "gloo";
    case Backend::Nccl: return "nccl";
  }
  return "?";
}

std::string_view to_string(Device device) {
  switch (device) {
    case Device::Cpu: return "cpu";
    case Device::Cuda: return "cuda";
  }
  return "?";
}

std::string_view to_string(MemoryAccounting accounting) {
  switch (accounting) {
    case MemoryAccounting::Tracking: return "tracking";
    case MemoryAccounting::Ownership: return "ownership";
  }
  return "?";
}

std::string_view to_string(ClockAlignment alignment) {
  switch (alignment) {
    case ClockAlignment::Rendezvous: return "rendezvous";
    case ClockAlignment::CollectiveEnds: return "collective-ends";
    case ClockAlignment::None: return "none";
  }
  return "?";
}

std::string_view to_string(RankStatus status) {
  switch (status) {
    case RankStatus::Running: return "running";
    case RankStatus::Complete: return "complete";
    case RankStatus::Ended: return "";
  }
  return "";
}

RankStatus parse_rank_status(std::string_view recorded) {
  if (recorded == to_string(RankStatus::Running)) return RankStatus::Running;
  if (recorded == to_string(RankStatus::Complete)) return RankStatus::Complete;
  return RankStatus::Ended;
}

std::string_view to_string(CommHookKind kind) {
  switch (kind) {
    case CommHookKind::None: return "none";
    case CommHookKind::AllReduce: return "allreduce";
    case CommHookKind::Fp16: return "fp16";
    case CommHookKind::Bf16: return "bf16";
    case CommHookKind::PowerSgd: return "powersgd";
  }
  return "?";
}

std::string_view to_string(InitialBuckets policy) {
  switch (policy) {
    case InitialBuckets::PyTorch: return "pytorch";
    case InitialBuckets::BySize: return "by-size";
  }
  return "?";
}

std::string_view to_string(ShardingStrategy strategy) {
  switch (strategy) {
    case ShardingStrategy::FullShard: return "full";
    case ShardingStrategy::ShardGradOp: return "grad_op";
    case ShardingStrategy::NoShard: return "no_shard";
    case ShardingStrategy::HybridShard: return "hybrid";
  }
  return "?";
}

std::string_view to_string(ReshardAfterForward mode) {
  switch (mode) {
    case ReshardAfterForward::Reshard: return "true";
    case ReshardAfterForward::Keep: return "false";
    case ReshardAfterForward::ToGroupSize: return "";
  }
  return "";
}

std::optional<ReshardAfterForward> read_reshard_after_forward(std::string_view recorded,
                                                              int shard_size) {
  if (const std::optional<ReshardAfterForward> word = parse_mode(kReshardAfterForwardWords, recorded)) {
    return word;
  }
  int n = 0;
  const auto [end, error] = std::from_chars(recorded.data(), recorded.data() + recorded.size(), n);
  if (error != std::errc() || end != recorded.data() + recorded.size() || n < 1) return std::nullopt;
  if (n == shard_size) return ReshardAfterForward::Reshard;
  if (n == 1) return ReshardAfterForward::Keep;
  return ReshardAfterForward::ToGroupSize;
}

std::string_view to_string(BackwardPrefetch prefetch) {
  switch (prefetch) {
    case BackwardPrefetch::None: return "none";
    case BackwardPrefetch::Pre: return "pre";
    case BackwardPrefetch::Post: return "post";
  }
  return "?";
}

std::string_view to_string(ComputePrecision precision) {
  switch (precision) {
    case ComputePrecision::Fp32: return "none";
    case ComputePrecision::Fp16: return "fp16";
    case ComputePrecision::Bf16: return "bf16";
  }
  return "?";
}

}  // namespace dpscope::trace
