// --live: watch a growing trace file and reload it in the background (see live.h).
#include "viewer/live.h"

#include <sys/stat.h>

#include "trace/error.h"

namespace dpscope::view {

LiveFollower::LiveFollower(std::string path, std::chrono::milliseconds interval)
    : path_(std::move(path)), interval_(interval) {
  loaded_signature_ = signature();
}

LiveFollower::~LiveFollower() {
  if (pending_.valid()) pending_.wait();
}

std::string LiveFollower::signature() const {
  std::string s;
  for (const char* suffix : {"", "-wal"}) {
    struct stat info;
    if (::stat((path_ + suffix).c_str(), &info) == 0) {
      s += std::to_string(info.st_size) + ":" + std::to_string(info.st_mtim.tv_sec) + "." +
           std::to_string(info.st_mtim.tv_nsec) + ";";
    } else {
      s += "-;";
    }
  }
  return s;
}

std::shared_ptr<const Model> LiveFollower::poll() {
  if (pending_.valid()) {
    if (pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return nullptr;
    std::shared_ptr<const Model> model;
    try {
      model = pending_.get();
    } catch (const trace::TraceError&) {
      return nullptr;  // caught the writer mid-way; the next change retries
    }
    loaded_signature_ = pending_signature_;
    ++reloads_;
    return model;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - last_check_ < interval_) return nullptr;
  last_check_ = now;
  const std::string current = signature();
  if (current == loaded_signature_) return nullptr;
  pending_signature_ = current;
  // One reading thread: a live trace is small, and the UI keeps the other core.
  pending_ = std::async(std::launch::async, [path = path_] { return load_model(path, nullptr, 1); });
  return nullptr;
}

}  // namespace dpscope::view
