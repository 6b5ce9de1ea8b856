// The Gloo backend: a ProcessGroup over Gloo's TCP transport, the engine's CPU backend
// (docs/communication.md). Collectives run in issue order on the group's
// communication threads (options.gloo_threads, 2 by default, as PyTorch's ProcessGroupGloo), so
// they overlap with the caller's work (backward on the autograd thread); an all-reduce may also
// start while earlier all-reduces of other tensors still run (Note [Gloo overlap]).
#pragma once

#include <memory>

#include "engine/comm/process_group.h"

namespace c10d {
class Store;
}
namespace gloo::rendezvous {
class Context;
}

namespace dpscope::comm {

// Creates a process group of `size` ranks over Gloo's TCP transport and connects it: every rank
// must call it with the same size and options.group_id, in the same order as its other groups.
// Blocks until all ranks have connected (at most options.timeout). Gloo's pair addresses are
// exchanged through `store` under keys of this group; the network interface comes from
// GLOO_SOCKET_IFNAME or MASTER_ADDR (see gloo_device.h). Throws CommError naming this rank when
// the group cannot be set up.
//
// The group reduces (all_reduce and reduce_scatter: sum, average, max) float32, float64,
// float16, bfloat16 (in float32) and int32 and int64 (no average) tensors; other dtypes fail that
// collective with a CommError naming the dtype and leave the group usable. broadcast, all_gather
// and barrier take any dtype. reduce_scatter is a ring over Gloo's unbound buffers, as NCCL's
// (Note [Gloo reduce-scatter] in gloo_reduce_scatter.h). CUDA tensors are staged
// through host memory. A collective that fails in Gloo (a peer gone, a timeout) marks the group
// broken: later collectives fail at once, naming the first failure. Thread-safety: ProcessGroup's.
//
// Destroying the group runs every collective still queued, then waits (at most
// min(options.timeout, 10 s)) for the other ranks to finish theirs before closing connections,
// so a rank that is done first cannot break a peer's last collective by leaving; ranks should
// destroy their groups in the same order.
std::shared_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<c10d::Store> store, int rank,
                                              int size, ProcessGroupOptions options);

// For benchmarks only (bench/bench_comm, with GlooReference): the connected Gloo context of a
// group that make_gloo_group made, so that a raw Gloo call can run on the group's own connections.
// Throws CommError if `group` is not a Gloo group.
std::shared_ptr<gloo::rendezvous::Context> gloo_context_of(ProcessGroup& group);

}  // namespace dpscope::comm
