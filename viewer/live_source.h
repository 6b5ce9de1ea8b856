// What --live follows when it is given a run directory or a path that does not exist yet: it
// waits for the run to start, merges the rank files into one scratch file while the ranks write
// them (again whenever one grows or a new one appears), and switches to the merged run.sqlite
// that `dpscope launch` leaves when the run ends. A plain trace file is followed as it is.
#pragma once

#include <chrono>
#include <future>
#include <string>
#include <vector>

namespace dpscope::view {

// Thread-safety: poll() and status() from one thread (the UI thread); the merges run on a
// thread of their own and share nothing but their inputs' paths.
class LiveSource {
 public:
  // `path`: a trace file, a run directory (as `dpscope launch --trace-dir` leaves it: rank<R>
  // .sqlite while the run goes, run.sqlite at its end) or a path that does not exist yet.
  // `scratch`: where the rank files are merged to (removed by the destructor).
  LiveSource(std::string path, std::string scratch,
             std::chrono::milliseconds interval = std::chrono::milliseconds(250));
  ~LiveSource();
  LiveSource(const LiveSource&) = delete;
  LiveSource& operator=(const LiveSource&) = delete;

  // The file to show now, "" while there is none yet: `path` when it is a file; in a directory
  // its run.sqlite once that exists, else the scratch file merged from the rank files found so
  // far. Looks at the disk at most once per interval; a merge runs in the background and its
  // file is returned once it is whole (the scratch file is replaced, so a LiveFollower on it
  // loads it afresh). Cheap; call every frame.
  std::string poll();
  // What it follows, in words, for the window's header: "waiting for traces/t04 (no trace
  // yet)", "2 rank files of traces/t04, merged as they grow", "traces/t04/run.sqlite".
  std::string status() const;
  // Merges done so far (tests).
  int merges() const { return merges_; }

 private:
  std::vector<std::string> rank_files() const;
  std::string signature(const std::vector<std::string>& files) const;

  std::string path_;
  std::string scratch_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_check_{};
  std::string current_;          // what poll() returns
  size_t rank_count_ = 0;        // rank files in the last merge
  std::string merged_signature_; // of the rank files the scratch file holds
  std::string pending_signature_;
  size_t pending_count_ = 0;
  std::future<void> pending_;    // a merge in flight
  int merges_ = 0;
};

}  // namespace dpscope::view
