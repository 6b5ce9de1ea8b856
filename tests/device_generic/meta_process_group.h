// MetaProcessGroup: a process group on LibTorch's meta device, for the DeviceGeneric tests. It
// refuses a tensor on any other device, as NCCL refuses one off its GPU, and records where every
// collective was issued, so that DDP and FSDP can be proven device-generic without a GPU.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/comm/process_group.h"

namespace dpscope::testing {

// See Note [Collective tensors on the group's device] (engine/comm/process_group.h).
// Collectives on meta tensors carry no values: they complete at once. comm::HostValues is served
// for real: host_to_device keeps the host values beside the meta tensor it returns, and a
// collective on such a tensor runs on those values through `host_group` (a real group of the same
// ranks), so verification, the rebuild order, the used-parameter map and Join agree across ranks
// as on any device. Thread-safety: ProcessGroup's.
class MetaProcessGroup final : public comm::ProcessGroup {
 public:
  // `options.group_id` must differ from host_group's.
  MetaProcessGroup(std::shared_ptr<c10d::Store> store,
                   std::shared_ptr<comm::ProcessGroup> host_group,
                   comm::ProcessGroupOptions options);
  ~MetaProcessGroup() override;

  std::string backend_name() const override { return "meta"; }
  at::Tensor host_to_device(const at::Tensor& host) override;
  at::Tensor device_to_host(const at::Tensor& on_device) override;

  // One issued collective: its op, its call site ("engine/ddp/reducer.cpp:245") and whether its
  // tensor came from comm::HostValues.
  struct Issued {
    trace::CollectiveOp op;
    std::string site;
    bool host_values;
  };
  // Every collective issued so far, in issue order.
  std::vector<Issued> issued() const;

 protected:
  void enqueue(std::shared_ptr<Request> request) override;

 private:
  // The host values behind a meta tensor that host_to_device made (the meta tensor is kept alive
  // with them, so that its address names it until device_to_host).
  struct Staged {
    at::Tensor meta;
    at::Tensor host;
  };
  // The staged entry of `tensor`, or null. mutex_ held.
  const Staged* staged_locked(const at::Tensor& tensor);

  std::shared_ptr<comm::ProcessGroup> host_group_;
  mutable std::mutex mutex_;
  std::unordered_map<const void*, Staged> staged_;
  std::vector<Issued> issued_;
};

}  // namespace dpscope::testing
