// Following a trace that a running training is still writing (--live): notices that the file
// (or its -wal) changed and reloads it on a background thread, handing the new Model over.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "viewer/model.h"

namespace dpscope::view {

// Thread-safety: poll() from one thread (the UI thread); the reload itself runs on a thread of
// its own with its own trace::Reader connections and shares nothing until handed over.
class LiveFollower {
 public:
  // `interval`: how often poll() looks at the file.
  explicit LiveFollower(std::string path,
                        std::chrono::milliseconds interval = std::chrono::milliseconds(250));
  // Waits for a reload in progress.
  ~LiveFollower();

  // Cheap; call every frame. Starts a reload when the file changed and none is running;
  // returns the model of a finished reload once, else null. A reload that fails (the writer was
  // mid-transaction) is dropped silently and retried on the next change.
  std::shared_ptr<const Model> poll();
  int reloads() const { return reloads_; }

 private:
  std::string signature() const;  // sizes and modification times of the file and its -wal

  std::string path_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_check_{};
  std::string loaded_signature_;
  std::string pending_signature_;
  std::future<std::shared_ptr<const Model>> pending_;
  int reloads_ = 0;
};

}  // namespace dpscope::view
