// FSDP's modes as `dpscope train` and the trace spell them: the sharding strategy, backward
// prefetch and the compute precision. They are the trace's vocabulary (trace/vocabulary.h), so
// the engine, the analysis and the viewer share one type and one spelling of each; named here
// in fsdp:: for the engine's code. Needs no LibTorch.
#pragma once

#include "trace/vocabulary.h"

namespace dpscope::fsdp {

using trace::BackwardPrefetch;
using trace::ComputePrecision;
using trace::kBackwardPrefetches;
using trace::kComputePrecisions;
using trace::kShardingStrategies;
using trace::ShardingStrategy;
using trace::to_string;

}  // namespace dpscope::fsdp
