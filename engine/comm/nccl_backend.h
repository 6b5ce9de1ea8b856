// The NCCL backend: a ProcessGroup over NCCL, the engine's GPU backend (docs/communication.md).
// Collectives run on one CUDA communication stream per group, ordered after the
// issuing thread's compute stream by CUDA events, so the host never waits to start one.
#pragma once

#include <memory>

#include "engine/comm/process_group.h"

namespace c10d {
class Store;
}

namespace dpscope::comm {

#ifdef DPSCOPE_HAVE_CUDA

// Creates a process group of `size` ranks over NCCL on CUDA device `device_index` of this
// process (the caller picks it; under a launcher, LOCAL_RANK) and connects it: every rank must
// call it with the same size and options.group_id, in the same order as its other groups.
// Blocks until all ranks have joined. Each rank publishes its device's UUID through `store`, and
// rank 0 the ncclUniqueId, under keys of this group; ranks that never publish theirs within
// options.timeout are named in the error. Throws CommError naming this rank, and saying what to
// change, when no CUDA device is visible, `device_index` does not exist, two ranks share one GPU
// (NCCL cannot run that; --backend gloo can), or NCCL fails to set up.
//
// The group reduces (all_reduce and reduce_scatter: sum, average, max) float32, float64,
// float16, bfloat16, int64, int32, int8 and uint8 tensors (average: floating types only); other
// dtypes fail that collective with a CommError naming the dtype and leave the group usable.
// broadcast, all_gather and barrier take any dtype. Tensors must be CUDA tensors on
// `device_index`; others fail the collective the same way.
//
// Streams (Note [Streams] in nccl_backend.cpp): a collective waits on the GPU for the work
// queued on the issuing thread's current stream before it was issued, then runs on the group's
// communication stream; the host does not wait. Its tensors are kept alive, and recorded on the
// communication stream with the caching allocator, until it has ended on the GPU, so the caller
// may drop them at once. Its Work is finished, with begin and end taken from CUDA events and
// converted to the host clock, when it has ended on the GPU; Work::wait() therefore means "the
// result is in memory and any stream may use it". The trace lane is a Stream lane,
// "nccl stream (<name>)".
//
// A collective that fails in NCCL or CUDA, or does not end within options.timeout, aborts the
// group's NCCL communicator (so that no kernel stays stuck in it) and marks the group broken:
// later collectives fail at once, naming the first failure. Thread-safety: ProcessGroup's.
//
// Destroying the group waits until every queued collective has ended on the GPU (or failed),
// then waits (at most min(options.timeout, 10 s)) for the other ranks to destroy theirs, and
// destroys the communicator, or aborts it when the group is broken or a rank did not arrive;
// ranks should destroy their groups in the same order.
std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<c10d::Store> store, int rank,
                                              int size, ProcessGroupOptions options,
                                              int device_index);

// Makes the current CUDA stream of the collective's device wait for `work`'s collective to end
// on the GPU, without blocking the host: work queued on that stream afterwards (the optimizer
// reading averaged gradients, a unit's forward reading its gathered parameters) sees the result.
// Use it on the thread, and with the current stream, that will consume the result.
//
// For a collective that has already finished, that never reached the GPU (refused, or its
// group was broken), or whose group is on an emulated link (Note [Link emulation]), it is
// Work::wait(lane): the host waits and the collective's error is rethrown. A collective that
// fails after this call is not reported here (the stream's wait ends when the communicator is
// aborted, and the result is garbage): a Work::wait() later in the step, e.g. on the last
// bucket's collective, reports it. Not recorded in the trace (no host time is spent). Any
// thread; `work` may come from any group, of any backend: for a Gloo collective it is
// Work::wait(lane).
void wait_on_stream(const WorkHandle& work, trace::LaneId lane = 0);

#else

// Without CUDA every collective ends on a host thread, so waiting for it "on the stream" is
// waiting for it on the host.
inline void wait_on_stream(const WorkHandle& work, trace::LaneId lane = 0) { work->wait(lane); }

#endif

}  // namespace dpscope::comm
