// Following a trace that a running training is still writing (--live): notices that the file
// (or its -wal) changed and brings the Model up to date on a background thread, reading only the
// rows added since the last read (update_model), and hands the new Model over.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "viewer/model.h"

namespace dpscope::view {

// The size and modification time of a trace file and of its -wal: it changes whenever a writer
// commits, so comparing two tells whether a file grew. "-" for a part that does not exist.
std::string file_signature(const std::string& path);

// Thread-safety: poll() from one thread (the UI thread); the update itself runs on a thread of
// its own with its own trace::Reader connection and shares nothing but the (immutable) previous
// Model until handed over.
class LiveFollower {
 public:
  // Follows `loaded`'s file from `loaded` on. `interval`: how often poll() looks at the file.
  explicit LiveFollower(std::shared_ptr<const Model> loaded,
                        std::chrono::milliseconds interval = std::chrono::milliseconds(250));
  // Waits for an update in progress.
  ~LiveFollower();

  // Cheap; call every frame. Starts an update when the file changed and none is running;
  // returns the model of a finished update once, else null. An update that fails (the writer
  // was mid-transaction) is dropped silently and retried on the next change.
  std::shared_ptr<const Model> poll();
  int reloads() const { return reloads_; }
  // How often poll() looks at the file: the longest the UI may sleep while following it.
  std::chrono::milliseconds interval() const { return interval_; }
  // Events and memory samples the updates read, all together (the first load not counted).
  int64_t rows_read() const { return rows_read_; }

 private:
  std::string signature() const;  // sizes and modification times of the file and its -wal

  std::shared_ptr<const Model> current_;  // the newest model handed over (or the first)
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_check_{};
  std::string loaded_signature_;
  std::string pending_signature_;
  std::future<std::shared_ptr<const Model>> pending_;
  int reloads_ = 0;
  int64_t rows_read_ = 0;
};

}  // namespace dpscope::view
