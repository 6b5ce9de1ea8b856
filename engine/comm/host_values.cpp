// HostValues: host values through a collective on the group's device and back (see
// host_values.h and Note [Collective tensors on the group's device]).
#include "engine/comm/host_values.h"

#include <ATen/ops/empty.h>

namespace dpscope::comm {

HostValues HostValues::all_reduce(ProcessGroup& group, const at::Tensor& host, ReduceOp op,
                                  CollectiveTag tag, CallSite site) {
  at::Tensor on_device = group.host_to_device(host.contiguous());
  WorkHandle work = group.all_reduce(on_device, op, tag, site);
  return HostValues(group, std::move(on_device), at::Tensor(), std::move(work));
}

HostValues HostValues::broadcast(ProcessGroup& group, const at::Tensor& host, int root,
                                 CollectiveTag tag, CallSite site) {
  at::Tensor on_device = group.host_to_device(host.contiguous());
  WorkHandle work = group.broadcast(on_device, root, tag, site);
  return HostValues(group, std::move(on_device), at::Tensor(), std::move(work));
}

HostValues HostValues::all_gather(ProcessGroup& group, const at::Tensor& host, CollectiveTag tag,
                                  CallSite site) {
  at::Tensor input = group.host_to_device(host.contiguous().reshape({-1}));
  at::Tensor output =
      group.host_to_device(at::empty({group.size() * host.numel()}, host.options()));
  WorkHandle work = group.all_gather(output, input, tag, site);
  return HostValues(group, std::move(output), std::move(input), std::move(work));
}

at::Tensor HostValues::wait(trace::LaneId lane) {
  work_->wait(lane);
  input_ = at::Tensor();
  return group_->device_to_host(on_device_);
}

}  // namespace dpscope::comm
