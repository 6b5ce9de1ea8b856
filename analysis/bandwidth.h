// The bandwidth of a collective as nccl-tests defines it (its PERFORMANCE.md): algbw, the bytes
// over the transfer's time, and busbw, algbw scaled by what the algorithm must move, comparable
// across ops and rank counts with the link's own bandwidth. In gigabits per second, as the
// emulated link is given (nccl-tests prints GB/s, gigabytes: 8 times smaller numbers). Pure.
#pragma once

#include <cstdint>
#include <optional>

#include "trace/schema.h"

namespace dpscope::analysis {

// Note [Bus bandwidth]
// nccl-tests times a collective and divides its size S by that time: algbw = S / t. S is the
// whole buffer: the all-reduced tensor, all-gather's output (n times one rank's input, what the
// trace counts), reduce-scatter's input, the broadcast tensor, all-to-all's input. busbw = algbw x
// 2(n-1)/n for all-reduce (a ring moves each byte 2(n-1)/n times), x (n-1)/n for all-gather,
// reduce-scatter and all-to-all, x 1 for broadcast and send/recv: what one rank's link carried,
// so a good all-reduce's busbw reads close to the link's bandwidth whatever n is.
// The time t here is the transfer, not the span: from the moment every rank has begun the
// collective (its last rank's begin; on the cluster clock, when the link takes it) to the rank's
// end (Note [Waiting and transfer]), so that waiting for a late rank does not read as a slow link.
// On an emulated link the cluster clock's busbw of a large all-reduce is the link's bandwidth
// less its latency term: 2(n-1) L of the ring's time carries no bytes (docs/communication.md).
struct Bandwidth {
  double algbw_gbps = 0;
  double busbw_gbps = 0;
};

// The bandwidth of one collective `op` of `bytes` (as the trace counts them: Work::bytes()) among
// `ranks` ranks that transferred for `transfer_ns`; nullopt for a barrier, unknown bytes, no
// transfer time or fewer than two ranks.
std::optional<Bandwidth> bandwidth_of(trace::CollectiveOp op, int64_t bytes, int ranks, int64_t transfer_ns);

}  // namespace dpscope::analysis
