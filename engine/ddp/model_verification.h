// Model verification and the coalesced broadcast: DDP's construction steps that make every rank
// start from the same model. Verification compares each parameter's shape and strides with rank
// 0's; the broadcast copies rank 0's parameters and buffers to every rank in flat buffers.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"

namespace dpscope::ddp {

// Rank 0 broadcasts every parameter's shape and strides; each rank compares them with its own.
// If any rank differs, every rank throws DdpError (none hangs): the differing rank names the
// parameter's index and name, its shape and strides and rank 0's; the others name the ranks that
// differ. Collective: every rank calls it with its parameters in registration order.
// PyTorch 1.13 (dist._verify_params_across_processes) all-gathers the parameter counts, then
// broadcasts the shapes and strides and checks locally, so only the differing rank fails and the
// others wait in the next collective until the timeout; the all-reduce that makes every rank fail
// at once is dpscope's.
void verify_params_across_ranks(comm::ProcessGroup& group, const std::vector<at::Tensor>& params,
                                const std::vector<std::string>& names);

// Copies rank `root`'s `tensors` into every rank's, coalesced: tensors of one dtype are packed
// into flat buffers of at most `buffer_bytes` (a larger tensor travels alone), at most
// `max_in_flight` broadcasts are outstanding, and each buffer is unpacked into place once its
// broadcast is done. Tensors need not be contiguous. Collective.
inline constexpr int64_t kBroadcastBufferBytes = 250LL * 1024 * 1024;
void broadcast_coalesced(comm::ProcessGroup& group, const std::vector<at::Tensor>& tensors,
                         int root = 0, int64_t buffer_bytes = kBroadcastBufferBytes,
                         int max_in_flight = 2, comm::CollectiveTag tag = {});

}  // namespace dpscope::ddp
