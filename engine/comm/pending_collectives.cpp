// The pending collectives of a process group (pending_collectives.h, Note [Pending
// collectives]): tracked from issue to finish, recorded open-ended when the rank ends first.
#include "engine/comm/pending_collectives.h"

#include <algorithm>

#include "engine/comm/process_group.h"
#include "trace/clock.h"

namespace dpscope::comm {

PendingCollectives::PendingCollectives() { trace::register_recorder(this); }

PendingCollectives::~PendingCollectives() { trace::unregister_recorder(this); }

void PendingCollectives::track(const std::shared_ptr<Work>& work) {
  std::lock_guard<std::mutex> lock(mutex_);
  works_.push_back(work);
}

void PendingCollectives::untrack(const Work* work) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Works finish in issue order (Note [Collective order]): the one to go is nearly always first.
  const auto found = std::find_if(works_.begin(), works_.end(), [&](const std::weak_ptr<Work>& w) {
    const std::shared_ptr<Work> alive = w.lock();
    return alive.get() == work;
  });
  if (found != works_.end()) works_.erase(found);
}

bool PendingCollectives::record_stuck(int64_t now_ns) {
  std::vector<std::weak_ptr<Work>> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending = works_;
  }
  bool recorded = false;
  for (const std::weak_ptr<Work>& w : pending) {
    if (const std::shared_ptr<Work> work = w.lock()) recorded = work->record_if_stuck(now_ns) || recorded;
  }
  return recorded;
}

void PendingCollectives::close(std::string_view) {
  std::vector<std::weak_ptr<Work>> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending.swap(works_);
  }
  const int64_t end_ns = trace::now_ns();
  for (const std::weak_ptr<Work>& w : pending) {
    if (const std::shared_ptr<Work> work = w.lock()) work->record_unfinished(end_ns);
  }
}

}  // namespace dpscope::comm
