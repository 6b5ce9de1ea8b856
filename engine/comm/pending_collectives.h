// The collectives a process group issued that have not finished: recorded with an open end when
// the rank ends before they do (SIGTERM from the launcher, Ctrl-C, an error), so that a hung
// run's trace says which collective each rank was stuck in (Note [Collective end state]).
#pragma once

#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "trace/flush_guard.h"

namespace dpscope::comm {

class Work;

// Note [Pending collectives]
// ProcessGroup::issue tracks every Work it issues here, and Work::finish untracks it (recording
// it as a collective, completed or not). Whatever is still tracked when the rank ends is recorded
// by close(): each Work as a collective that ends when the recorder closes, flagged started or
// issued (trace/collective_state.h). close() is called by the flush guard (trace/flush_guard.h)
// on SIGINT, SIGTERM, std::terminate and exit(): the object registers itself as a FlushTarget when
// its group is made, after the group's recorder, and the guard closes the latest registered first
// (trace/flush_guard.cpp), so the pending collectives go into the recorder before it closes.
// Thread-safety: every method may be called from any thread.
class PendingCollectives final : public trace::FlushTarget {
 public:
  PendingCollectives();
  ~PendingCollectives();
  PendingCollectives(const PendingCollectives&) = delete;
  PendingCollectives& operator=(const PendingCollectives&) = delete;

  void track(const std::shared_ptr<Work>& work);
  void untrack(const Work* work);
  // Records a "stuck" mark for each Work pending longer than Work::kStuckAfter at `now_ns`
  // (Note [A stuck collective]). Returns whether it recorded any.
  bool record_stuck(int64_t now_ns);
  // Records every Work still tracked as never completed (Work::record_unfinished) and forgets
  // them. `status` (the rank's end) is not used: the recorder records it.
  void close(std::string_view status) override;

 private:
  std::mutex mutex_;
  std::vector<std::weak_ptr<Work>> works_;  // issue order
};

}  // namespace dpscope::comm
