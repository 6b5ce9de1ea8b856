// The Reducer's built-in reductions of one bucket: the dense sum all-reduce (the bucket was
// divided while filled) and the sparse all-reduce of an embedding's gradient, which gathers every
// rank's indices and values and sums them, as ProcessGroupGloo's sparse all-reduce does.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

#include "engine/comm/process_group.h"
#include "engine/ddp/comm_hook.h"

namespace dpscope::ddp {

// A sum all-reduce of `tensor` in place (PyTorch's _AllReduceBySumCommHook).
std::unique_ptr<PendingReduction> launch_sum_all_reduce(comm::ProcessGroup& group,
                                                        at::Tensor tensor,
                                                        const comm::CollectiveTag& tag);

// Sums the sparse COO tensor `gradient` over the group and writes the coalesced sum divided by
// `divide_by` back into it. Three collectives: an all-gather of every rank's number of non-zeros
// (issued here), then all-gathers of the padded indices and values (issued by wait(); See Note
// [Hook collective order]).
std::unique_ptr<PendingReduction> launch_sparse_all_reduce(comm::ProcessGroup& group,
                                                           at::Tensor gradient, double divide_by,
                                                           const comm::CollectiveTag& tag);
// The same collectives contributing nothing: what a joined rank sends for a sparse bucket of
// parameter `param`.
std::unique_ptr<PendingReduction> launch_sparse_all_reduce_zeros(comm::ProcessGroup& group,
                                                                 const at::Tensor& param,
                                                                 const comm::CollectiveTag& tag);

}  // namespace dpscope::ddp
