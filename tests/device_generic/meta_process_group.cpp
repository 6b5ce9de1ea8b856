// MetaProcessGroup: collectives on meta tensors complete at once; those on comm::HostValues'
// tensors run on the host values through a real group (see meta_process_group.h).
#include "tests/device_generic/meta_process_group.h"

#include <ATen/ops/empty_like.h>

namespace dpscope::testing {

MetaProcessGroup::MetaProcessGroup(std::shared_ptr<c10d::Store> store,
                                   std::shared_ptr<comm::ProcessGroup> host_group,
                                   comm::ProcessGroupOptions options)
    : ProcessGroup(std::move(store), host_group->rank(), host_group->size(), std::move(options),
                   "meta comm", trace::LaneKind::Comm, c10::Device(c10::kMeta)),
      host_group_(std::move(host_group)) {}

MetaProcessGroup::~MetaProcessGroup() { stop_heartbeat(); }

at::Tensor MetaProcessGroup::host_to_device(const at::Tensor& host) {
  at::Tensor meta = at::empty_like(host, host.options().device(c10::kMeta));
  std::lock_guard<std::mutex> lock(mutex_);
  staged_[meta.unsafeGetTensorImpl()] = {meta, host.clone()};
  return meta;
}

at::Tensor MetaProcessGroup::device_to_host(const at::Tensor& on_device) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = staged_.find(on_device.unsafeGetTensorImpl());
  if (found == staged_.end()) {
    throw comm::CommError("MetaProcessGroup: device_to_host of a tensor that host_to_device did "
                          "not make; values read back from a collective must go through "
                          "comm::HostValues");
  }
  at::Tensor host = found->second.host;
  staged_.erase(found);
  return host;
}

std::vector<MetaProcessGroup::Issued> MetaProcessGroup::issued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return issued_;
}

const MetaProcessGroup::Staged* MetaProcessGroup::staged_locked(const at::Tensor& tensor) {
  if (!tensor.defined()) return nullptr;
  const auto found = staged_.find(tensor.unsafeGetTensorImpl());
  return found == staged_.end() ? nullptr : &found->second;
}

void MetaProcessGroup::enqueue(std::shared_ptr<Request> request) {
  const int64_t begin = trace::now_ns();
  std::exception_ptr error;
  try {
    at::Tensor input;  // the host values behind the request's tensors, if staged
    at::Tensor output;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (const Staged* staged = staged_locked(request->input)) input = staged->host;
      if (const Staged* staged = staged_locked(request->output)) output = staged->host;
      issued_.push_back({request->op, request->site.str(), input.defined()});
    }
    if (input.defined() && !output.defined()) {
      throw comm::CommError("MetaProcessGroup: collective issued at " + request->site.str() +
                            " has host values in but none out");
    }
    // The host group runs them in the order issued here, which is the same on every rank.
    if (input.defined()) {
      switch (request->op) {
        case trace::CollectiveOp::AllReduce:
          host_group_->all_reduce(input, request->reduce)->wait();
          break;
        case trace::CollectiveOp::Broadcast:
          host_group_->broadcast(input, request->root)->wait();
          break;
        case trace::CollectiveOp::AllGather:
          host_group_->all_gather(output, input)->wait();
          break;
        default:
          throw comm::CommError("MetaProcessGroup: host values through " +
                                std::string(trace::to_string(request->op)) +
                                " are not served (issued at " + request->site.str() + ")");
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  request->work->finish(begin, trace::now_ns(), error);
}

}  // namespace dpscope::testing
