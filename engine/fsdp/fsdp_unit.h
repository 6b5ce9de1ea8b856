// One FSDP unit (a wrapped module with its flat parameter) and its state: where its full
// parameter is (Residency) and how far this iteration's passes have come over it (UnitPass).
// Private to FullyShardedDataParallel, which alone changes them (Note [Unit lifecycle]).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/comm/process_group.h"
#include "engine/fsdp/flat_param.h"
#include "trace/records.h"

namespace dpscope::fsdp {

// Note [Unit lifecycle]
// A unit's state is two independent enums, each changed in one place:
//  - Residency, where its full parameter is; changed only by FullyShardedDataParallel::move_to,
//    which also records the span that ends as a UnitState slice on the unit's lane:
//        Sharded --issue_gather--> Gathering --wait_gather--> Full --reshard--> Sharded
//    (NO_SHARD with a cast copy goes Sharded -> Full at once; a unit whose full parameter is its
//    shard's own storage is Full from construction and never moves). The full parameter's memory
//    exists exactly while the unit is Gathering or Full (See Note [Full parameter storage]).
//  - UnitPass, how far this iteration's forward and backward have come over the unit; it only
//    moves forward (Unit::reach) until end_pass sets it back to NotYet:
//        NotYet --pre_forward--> Forwarded --pre_backward--> BackwardStarted
//               --post_backward--> BackwardDone --end_pass--> NotYet
//    end_pass (fsdp_backward.cpp) runs for every unit in the final callback, and for the units a
//    forward left Forwarded when the next root forward begins without their backward having run.
//    Prefetching skips a unit whose pass already came (See Note [FSDP hooks]).
enum class Residency : uint8_t { Sharded, Gathering, Full };
enum class UnitPass : uint8_t { NotYet, Forwarded, BackwardStarted, BackwardDone };

// Owns its flat parameter and, while Gathering, the all-gather's Work and input. Not thread-safe:
// the training loop thread and the backward on it (See FullyShardedDataParallel).
struct Unit {
  int32_t index = 0;
  std::string name;
  int32_t parent = -1;
  torch::nn::Module* module = nullptr;
  std::unique_ptr<FlatParameter> flat;
  bool reshard_after_forward = true;
  trace::LaneId lane = 0;

  // See Note [Unit lifecycle].
  Residency residency = Residency::Sharded;
  int64_t residency_since_ns = 0;  // when the current residency began (0: at construction)
  UnitPass pass = UnitPass::NotYet;

  comm::WorkHandle gather_work;  // while Gathering
  // Kept alive until the all-gather is done (Note [Who frees a collective's tensors]).
  at::Tensor gather_input;
  at::Tensor gather_output;
  int64_t reduce_begin_ns = 0;   // the last gradient reduction's issue time
  uintptr_t post_hook_key = 0;

  // Moves the pass forward to `next`; a later pass already reached stays.
  void reach(UnitPass next) { pass = std::max(pass, next); }
  bool reached(UnitPass p) const { return pass >= p; }
};

}  // namespace dpscope::fsdp
