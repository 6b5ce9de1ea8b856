// Join for uneven inputs: the training side's notifications and the joined side's shadow loop.
// See Note [Join protocol] in join.h.
#include "engine/ddp/join.h"

#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>

#include <unordered_set>

#include "engine/comm/host_values.h"
#include "engine/replica/broadcast_coalesced.h"

namespace dpscope::ddp {

Join::Join(DistributedDataParallel& ddp) : ddp_(ddp) {
  if (ddp_.join_) throw DdpError("Join: this DDP module is already in a Join context");
  ddp_.join_ = this;
}

Join::~Join() {
  if (ddp_.join_ == this) ddp_.join_ = nullptr;
}

int64_t Join::all_reduce_count(int64_t value) {
  at::Tensor tensor = at::empty({1}, at::kLong);
  tensor.fill_(value);
  return comm::HostValues::all_reduce(ddp_.group(), tensor, comm::ReduceOp::Sum,
                                      collective_tag(ddp_.iteration()))
      .wait()
      .item<int64_t>();
}

void Join::notify_not_joined() { all_reduce_count(1); }

int Join::find_common_rank(int rank, bool candidate) {
  at::Tensor tensor = at::empty({1}, at::kLong);
  tensor.fill_(candidate ? rank : -1);
  const int64_t common = comm::HostValues::all_reduce(ddp_.group(), tensor, comm::ReduceOp::Max,
                                                      collective_tag(ddp_.iteration()))
                             .wait()
                             .item<int64_t>();
  if (common < 0) {
    throw DdpError("Join: no rank is a candidate to sync from; at least one rank must still be "
                   "training or be the last to join");
  }
  return static_cast<int>(common);
}

void Join::share_requires_sync(bool requires_sync) { all_reduce_count(requires_sync ? 1 : 0); }

void Join::join() {
  if (joined_) throw DdpError("Join::join() called twice on rank " + std::to_string(ddp_.group().rank()));
  joined_ = true;
  Reducer& reducer = ddp_.reducer();
  bool is_last_joiner = true;
  while (all_reduce_count(0) > 0) {
    is_last_joiner = false;
    reducer.set_iteration(ddp_.iteration_);
    reducer.rebuild_buckets();
    if (ddp_.will_sync_buffers()) ddp_.sync_buffers(find_common_rank(ddp_.group().rank(), false), ddp_.iteration_);
    const bool should_sync = all_reduce_count(0) > 0;
    ddp_.require_forward_param_sync_ = should_sync;
    if (!should_sync) continue;
    reducer.match_all_reduce_for_joined_rank();
    reducer.push_all_rebuilt_params();
    ++ddp_.iteration_;
    ++shadowed_;
  }
  // Everyone takes the model of the last rank to join: it trained on the most data.
  const int authoritative = find_common_rank(ddp_.group().rank(), is_last_joiner);
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> state;
  std::unordered_set<const void*> seen;
  for (const at::Tensor& param : ddp_.module().parameters(true)) {
    if (seen.insert(param.unsafeGetTensorImpl()).second) state.push_back(param);
  }
  for (const at::Tensor& buffer : ddp_.buffers_) state.push_back(buffer);
  replica::broadcast_coalesced(ddp_.group(), state, authoritative, replica::kBroadcastBufferBytes, 2,
                      collective_tag(ddp_.iteration()));
}

}  // namespace dpscope::ddp
