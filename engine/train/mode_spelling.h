// A mode enum from the text `dpscope train` (or a tutorial's flag) gives, by the mode's one
// spelling: to_string, found by argument-dependent lookup beside the enum (fsdp_modes.h,
// comm_hook_kind.h). Needs no LibTorch.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace/vocabulary.h"

namespace dpscope::train {

// The mode `text` spells, or nullopt (trace/vocabulary.h).
using trace::parse_mode;

// Every mode's spelling, in `modes`' order: the choices a flag lists.
template <typename Mode, size_t N>
std::vector<std::string> mode_spellings(const std::array<Mode, N>& modes) {
  std::vector<std::string> spellings;
  for (Mode mode : modes) spellings.emplace_back(to_string(mode));
  return spellings;
}

}  // namespace dpscope::train
