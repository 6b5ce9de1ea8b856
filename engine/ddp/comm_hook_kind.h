// The communication hooks `dpscope train --comm-hook` and the trace name: an enum with its one
// spelling (to_string; parsed by train::parse_mode). Needs no LibTorch, so the command line and
// the CLI fuzzer can use it; make_comm_hook (comm_hook.h) builds the hook.
#pragma once

#include <array>
#include <string_view>

namespace dpscope::ddp {

enum class CommHookKind {
  None,       // no hook: the Reducer's own all-reduce
  AllReduce,  // PyTorch's allreduce_hook (the same sums, through the hook interface)
  Fp16,       // fp16_compress_hook
  Bf16,       // bf16_compress_hook
  PowerSgd,   // powerSGD_hook
};
inline constexpr std::array<CommHookKind, 5> kCommHookKinds{
    CommHookKind::None, CommHookKind::AllReduce, CommHookKind::Fp16, CommHookKind::Bf16,
    CommHookKind::PowerSgd};

// "none" | "allreduce" | "fp16" | "bf16" | "powersgd": also each hook's CommHook::name().
constexpr std::string_view to_string(CommHookKind kind) {
  switch (kind) {
    case CommHookKind::None: return "none";
    case CommHookKind::AllReduce: return "allreduce";
    case CommHookKind::Fp16: return "fp16";
    case CommHookKind::Bf16: return "bf16";
    case CommHookKind::PowerSgd: return "powersgd";
  }
  return "?";
}

}  // namespace dpscope::ddp
