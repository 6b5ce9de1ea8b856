// LiveSource (live_source.h): which file --live shows while a run is going, and the merge of
// its rank files into a scratch file on a background thread.
#include "viewer/live_source.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include "trace/error.h"
#include "trace/merge.h"
#include "viewer/background.h"
#include "viewer/live.h"

namespace dpscope::view {

namespace fs = std::filesystem;

LiveSource::LiveSource(std::string path, std::string scratch, std::chrono::milliseconds interval)
    : path_(std::move(path)), scratch_(std::move(scratch)), interval_(interval) {}

LiveSource::~LiveSource() {
  if (pending_.valid()) pending_.wait();
  std::error_code ignored;
  fs::remove(scratch_, ignored);
}

std::vector<std::string> LiveSource::rank_files() const {
  std::vector<std::string> files;
  std::error_code error;
  static const std::regex rank_file(R"(rank\d+\.sqlite)");
  for (const auto& entry : fs::directory_iterator(path_, error)) {
    if (entry.is_regular_file(error) && std::regex_match(entry.path().filename().string(), rank_file)) {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string LiveSource::signature(const std::vector<std::string>& files) const {
  std::string s;
  for (const std::string& file : files) s += file_signature(file) + "|";
  return s;
}

std::string LiveSource::poll() {
  if (pending_.valid()) {
    if (!background_done(pending_)) return current_;
    try {
      pending_.get();
      merged_signature_ = pending_signature_;
      rank_count_ = pending_count_;
      current_ = scratch_;
      ++merges_;
    } catch (const std::exception&) {
      // A rank file caught mid-way (or a rank's first transaction not in yet): the next change
      // merges again.
    }
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - last_check_ < interval_) return current_;
  last_check_ = now;
  std::error_code error;
  if (fs::is_regular_file(path_, error)) return current_ = path_;
  if (!fs::is_directory(path_, error)) return current_;  // not there yet
  const std::string merged = (fs::path(path_) / "run.sqlite").string();
  if (fs::is_regular_file(merged, error)) return current_ = merged;  // the run has ended
  const std::vector<std::string> files = rank_files();
  if (files.empty()) return current_;
  const std::string now_signature = signature(files);
  if (now_signature == merged_signature_) return current_;
  pending_signature_ = now_signature;
  pending_count_ = files.size();
  pending_ = start_background([files, out = scratch_] { trace::merge_traces(files, out); });
  return current_;
}

std::string LiveSource::status() const {
  if (current_.empty()) return "waiting for " + path_ + " (no trace yet)";
  if (current_ == scratch_) {
    return std::to_string(rank_count_) + " rank file" + (rank_count_ == 1 ? "" : "s") + " of " +
           path_ + ", merged as they grow";
  }
  return current_;
}

}  // namespace dpscope::view
