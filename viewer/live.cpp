// --live: watch a growing trace file and bring its Model up to date in the background, reading
// only the rows added since the last read (see live.h and update_model in model.h).
#include "viewer/live.h"

#include <sys/stat.h>

#include "trace/error.h"
#include "viewer/background.h"

namespace dpscope::view {

LiveFollower::LiveFollower(std::shared_ptr<const Model> loaded, std::chrono::milliseconds interval)
    : current_(std::move(loaded)), interval_(interval) {
  loaded_signature_ = signature();
}

LiveFollower::~LiveFollower() {
  if (pending_.valid()) pending_.wait();
}

std::string file_signature(const std::string& path) {
  std::string s;
  for (const char* suffix : {"", "-wal"}) {
    struct stat info;
    if (::stat((path + suffix).c_str(), &info) == 0) {
      s += std::to_string(info.st_size) + ":" + std::to_string(info.st_mtim.tv_sec) + "." +
           std::to_string(info.st_mtim.tv_nsec) + ";";
    } else {
      s += "-;";
    }
  }
  return s;
}

std::string LiveFollower::signature() const { return file_signature(current_->path); }

std::shared_ptr<const Model> LiveFollower::poll() {
  if (pending_.valid()) {
    if (!background_done(pending_)) return nullptr;
    std::shared_ptr<const Model> model;
    try {
      model = pending_.get();
    } catch (const trace::TraceError&) {
      return nullptr;  // caught the writer mid-way; the next change retries
    }
    loaded_signature_ = pending_signature_;
    current_ = model;
    ++reloads_;
    rows_read_ += model->rows_read;
    return model;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - last_check_ < interval_) return nullptr;
  last_check_ = now;
  const std::string current = signature();
  if (current == loaded_signature_) return nullptr;
  pending_signature_ = current;
  // One reading thread: the rows added in a quarter second are few, and the UI keeps the other
  // core.
  pending_ = start_background([previous = current_] { return update_model(*previous, nullptr, 1); });
  return nullptr;
}

}  // namespace dpscope::view
