// Fault injection for the reliability tests and the hang lessons (docs/reliability.md,
// docs/hangs.md): DPSCOPE_FAULT names a point of the engine, a rank and an occurrence; when that
// rank reaches it, the rank is killed, Ctrl-C is sent to its launcher, or the collective there is
// skipped or resized. Unset, every fault point costs one atomic load.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dpscope::fault {

// Note [Fault points]
// The engine calls reached("<point>") where a fault is worth provoking; the names are the
// contract of DPSCOPE_FAULT and are listed in kPoints (fault_injection.cpp):
//   construction   DDP and FSDP construction, between verifying the model and broadcasting it
//   backward       a gradient is ready: DDP's autograd hook, FSDP's post-backward hook
//   optimizer_step just before the optimizer's step (engine/train)
//   broadcast, allreduce, allgather, reduce_scatter, barrier
//                  a collective of that kind was just issued (engine/comm/process_group.cpp),
//                  so the other ranks are inside it when the fault strikes
// New points go into kPoints and docs/reliability.md together.
//
// Kill and Interrupt strike in reached(), just after the collective was issued. Skip and Resize
// act on the collective itself, so ProcessGroup::issue asks before_issue() first: a skipped
// collective is not issued and takes no sequence number (the rank took another branch), a
// resized one is issued with half its elements (a metric of another size). They are refused at
// the points that are not collectives.

enum class FaultAction {
  Kill,       // SIGKILL this rank: no flush, no goodbye (a crash, the OOM killer)
  Interrupt,  // SIGINT to the parent (the launcher), as Ctrl-C in its terminal does
  Skip,       // do not issue this collective; it uses no sequence number
  Resize,     // issue this collective with half its elements (at least one)
};

// What ProcessGroup::issue does with the collective it is about to issue.
enum class IssueFault {
  None,    // issue it as asked
  Skip,    // do not issue it
  Resize,  // issue it with half its elements
};

struct FaultSpec {
  std::string point;           // one of the names in Note [Fault points]
  int64_t occurrence = 1;      // strike on the Nth time this rank reaches the point
  int rank = 0;                // the rank that strikes; the others never do
  FaultAction action = FaultAction::Kill;
};

// Parses "<point>[#<occurrence>]@<rank>[:kill|:interrupt|:skip|:resize]", e.g. "allgather#3@1",
// "optimizer_step@0:interrupt" or "allreduce#7@1:skip". Throws std::invalid_argument naming what
// is wrong and the accepted form (skip and resize only at the collective points).
FaultSpec parse_fault_spec(std::string_view text);

// Reads DPSCOPE_FAULT (unset or empty: nothing armed) for the process whose rank is `rank`.
// Call once at start-up, before any fault point; throws std::invalid_argument on a bad value.
// Returns the armed spec, if any, for the caller to announce.
std::optional<FaultSpec> arm_from_environment(int rank);

// A fault point (Kill and Interrupt). Thread-safe; one atomic load when nothing is armed for
// this rank.
void reached(std::string_view point);

// A collective point, before the collective is issued (Skip and Resize): what to do with it.
// Counts this point's occurrences only when a Skip or Resize is armed for it, announces the
// fault on stderr when it strikes. Thread-safe; one atomic load when nothing is armed.
IssueFault before_issue(std::string_view point);

}  // namespace dpscope::fault
