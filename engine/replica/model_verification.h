// Model verification: the first construction step of DDP and FSDP, before rank 0's state is
// broadcast (broadcast_coalesced.h). Compares each parameter's shape and strides with rank 0's,
// so that every rank wraps the same model.
#pragma once

#include <ATen/core/Tensor.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/comm/process_group.h"

namespace dpscope::replica {

// The models differ across ranks; the wrapper rethrows it as its own error (DdpError, FsdpError).
class ModelMismatchError : public std::runtime_error {
 public:
  explicit ModelMismatchError(const std::string& message) : std::runtime_error(message) {}
};


// Rank 0 broadcasts every parameter's shape and strides; each rank compares them with its own.
// If any rank differs, every rank throws ModelMismatchError (none hangs): the differing rank
// names the parameter's index and name, its shape and strides and rank 0's; the others name the
// ranks that differ. `wrapper` ("DistributedDataParallel") names what is being constructed in the
// message. Collective: every rank calls it with its parameters in registration order.
// PyTorch 1.13 (dist._verify_params_across_processes) all-gathers the parameter counts, then
// broadcasts the shapes and strides and checks locally, so only the differing rank fails and the
// others wait in the next collective until the timeout; the all-reduce that makes every rank fail
// at once is dpscope's.
void verify_params_across_ranks(comm::ProcessGroup& group, const std::vector<at::Tensor>& params,
                                const std::vector<std::string>& names, std::string_view wrapper);

}  // namespace dpscope::replica
