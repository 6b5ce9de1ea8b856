// HostValues: a collective on values the engine keeps on the host (model verification's shapes,
// the rebuild order, the used-parameter map, Join's counts, sparse sizes), run on a copy on the
// group's device and read back. The one place such a round trip is written.
#pragma once
#include <ATen/core/Tensor.h>
#include "engine/comm/process_group.h"

namespace dpscope::comm {

// See Note [Collective tensors on the group's device] (process_group.h). As PyTorch's DDP does
// with its metadata, the values travel to the process group's device (a GPU for NCCL; nothing
// moves for Gloo), the collective runs there, and wait() copies the result back to the host.
//
// Construct one with a collective below, keep it until wait(); it owns the collective's tensors
// (the device copy, and an all_gather's input too), which must stay alive until the collective
// is done (Note [Who frees a collective's tensors]). Thread-safety: one thread at a time.
class HostValues {
 public:
  // ---- Issue (asynchronous, as the group's collectives). `host` is a CPU tensor; its contents
  // are read when the collective is issued; on a CPU group the collective runs on `host` itself
  // (an all_reduce or broadcast changes it in place).
  static HostValues all_reduce(ProcessGroup& group, const at::Tensor& host, ReduceOp op,
                               CollectiveTag tag = {}, CallSite site = CallSite::here());
  // Root's `host` values to every rank.
  static HostValues broadcast(ProcessGroup& group, const at::Tensor& host, int root,
                              CollectiveTag tag = {}, CallSite site = CallSite::here());
  // Every rank's `host` (same shape on all ranks), rank after rank: size() * numel values.
  static HostValues all_gather(ProcessGroup& group, const at::Tensor& host,
                               CollectiveTag tag = {}, CallSite site = CallSite::here());

  // Waits for the collective (rethrowing its error; recorded on `lane`) and returns its result as
  // a CPU tensor: `host`'s shape for all_reduce and broadcast, flat for all_gather.
  at::Tensor wait(trace::LaneId lane = 0);
  const WorkHandle& work() const { return work_; }

 private:
  HostValues(ProcessGroup& group, at::Tensor on_device, at::Tensor input, WorkHandle work)
      : group_(&group),
        on_device_(std::move(on_device)),
        input_(std::move(input)),
        work_(std::move(work)) {}

  ProcessGroup* group_;
  at::Tensor on_device_;  // the collective's tensor (all_gather: its output)
  at::Tensor input_;      // all_gather's input; undefined for the others
  WorkHandle work_;
};

}  // namespace dpscope::comm
