// FSDP2's options (fsdp2_options.h): the spelling of reshard_after_forward and its check against
// the world size, as PyTorch's _get_post_forward_mesh_info makes it; HSDP's shard group size.
#include "engine/fsdp2/fsdp2_options.h"

#include <charconv>

namespace dpscope::fsdp2 {

std::string ReshardSpec::text() const {
  if (mode == ReshardAfterForward::ToGroupSize) return std::to_string(group_size);
  return std::string(trace::to_string(mode));
}

ReshardSpec parse_reshard_spec(std::string_view text, std::string_view flag) {
  if (const auto word = trace::parse_mode(trace::kReshardAfterForwardWords, text)) {
    return {*word, 0};
  }
  int n = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (error != std::errc() || end != text.data() + text.size() || n < 1) {
    throw std::invalid_argument(std::string(flag) + " '" + std::string(text) +
                                "': give true (free the unsharded parameters after forward), "
                                "false (keep them for backward) or a group size N that divides "
                                "the world size");
  }
  return ReshardSpec::to_group_size(n);
}

ReshardAfterForward resolve_reshard(const ReshardSpec& spec, int world_size) {
  if (spec.mode != ReshardAfterForward::ToGroupSize) return spec.mode;
  const int n = spec.group_size;
  if (n < 1 || n > world_size || world_size % n != 0) {
    throw Fsdp2Error("reshard_after_forward " + std::to_string(n) + ": the int form is the size "
                     "of the group parameters are resharded to after forward, and must be a "
                     "factor of the size of the group they are sharded over (the world, or "
                     "HSDP's shard group) " + std::to_string(world_size) + " (1.." +
                     std::to_string(world_size) + "); or give true or false");
  }
  if (n == world_size) return ReshardAfterForward::Reshard;
  if (n == 1) return ReshardAfterForward::Keep;
  return ReshardAfterForward::ToGroupSize;
}

}  // namespace dpscope::fsdp2
