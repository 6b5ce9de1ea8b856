// A collective's end state: completed, started and never completed, or issued and never
// started. Kept in two bits of events.flags beside the kFlag* bits of schema.h, so that a hung
// run's trace keeps every collective its ranks issued (docs/hangs.md).
#pragma once

#include <cstdint>
#include <string_view>

namespace dpscope::trace {

// Note [Collective end state]
// A collective event is recorded when its Work finishes (engine/comm/process_group.cpp). One
// that never finishes successfully is recorded too, with one of these bits set:
//   - it failed (a timeout, a peer gone): when it failed, begin_ns when it started, or its issue
//     time if the backend refused it before starting;
//   - the rank ended (SIGTERM from the launcher, an error, Ctrl-C) while it was still queued or
//     running: when the recorder closed, as an open end, begin_ns when it started or, never
//     started, its issue time (engine/comm/pending_collectives.h).
// kFlagNotCompleted marks both; kFlagStarted says the backend had begun it (a communication
// thread was inside it). The columns are unchanged and the schema version stays 5: a reader
// that knows nothing of these bits reads such a collective as one that ran until its end_ns,
// which is what happened as far as the rank could see. A rank killed outright (SIGKILL) records
// nothing more than it had committed.
inline constexpr uint8_t kFlagNotCompleted = 1 << 6;
inline constexpr uint8_t kFlagStarted = 1 << 7;

enum class CollectiveEndState : uint8_t {
  Completed,  // it finished successfully
  Started,    // the backend began it; it never completed
  Issued,     // issued and queued, never begun (PyTorch's flight recorder: "scheduled")
};

inline CollectiveEndState collective_end_state(uint8_t flags) {
  if (!(flags & kFlagNotCompleted)) return CollectiveEndState::Completed;
  return (flags & kFlagStarted) ? CollectiveEndState::Started : CollectiveEndState::Issued;
}

// The flags bits of `state` (0 for Completed).
inline uint8_t collective_state_flags(CollectiveEndState state) {
  switch (state) {
    case CollectiveEndState::Completed: return 0;
    case CollectiveEndState::Started: return kFlagNotCompleted | kFlagStarted;
    case CollectiveEndState::Issued: return kFlagNotCompleted;
  }
  return 0;
}

// "completed", "started", "issued": as `dpscope stats --json` spells them.
inline std::string_view to_string(CollectiveEndState state) {
  switch (state) {
    case CollectiveEndState::Completed: return "completed";
    case CollectiveEndState::Started: return "started";
    case CollectiveEndState::Issued: return "issued";
  }
  return "completed";
}

}  // namespace dpscope::trace
