// The spellings of the vocabulary's enums (vocabulary.h): the one place each mode's text is
// written, so that a recorded trace, `dpscope train`'s flags and the readers agree.
#include "trace/vocabulary.h"

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
