// The coalesced broadcast: rank `root`'s tensors copied into every rank's in a few flat buffers,
// as PyTorch's _broadcast_coalesced does. DDP and FSDP construction broadcast rank 0's state with
// it (after model_verification.h), DDP's buffer sync and Join their buffers.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "engine/comm/process_group.h"

namespace dpscope::replica {

// Copies rank `root`'s `tensors` into every rank's, coalesced: tensors of one dtype are packed
// into flat buffers of at most `buffer_bytes` (a larger tensor travels alone), at most
// `max_in_flight` broadcasts are outstanding, and each buffer is unpacked into place once its
// broadcast is done. Tensors need not be contiguous. Collective.
inline constexpr int64_t kBroadcastBufferBytes = 250LL * 1024 * 1024;
void broadcast_coalesced(comm::ProcessGroup& group, const std::vector<at::Tensor>& tensors,
                         int root = 0, int64_t buffer_bytes = kBroadcastBufferBytes,
                         int max_in_flight = 2, comm::CollectiveTag tag = {});

}  // namespace dpscope::replica
