// Helpers of the reliability tests: run a `dpscope train` job under the launcher (or by hand,
// rank by rank) with a fault armed, and check what every trace file it left says.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "trace/reader.h"

namespace dpscope::testing {

inline std::string train_command(const std::string& strategy, int steps,
                                 const std::string& extra = "") {
  return dpscope_bin() + " train --strategy " + strategy + " --steps " + std::to_string(steps) +
         " --progress-every 0 " + extra;
}

// `dpscope launch -n <ranks>` of `command` with `environment` ("NAME=value ..." or "").
inline CommandResult launch(const std::string& environment, int ranks,
                            const std::string& trace_dir, const std::string& command) {
  return run_command(environment + " " + dpscope_bin() + " launch -n " + std::to_string(ranks) +
                     " --stop-grace 5 --trace-dir " + trace_dir + " -- " + command);
}

struct TraceFile {
  std::string path;
  std::vector<trace::RankInfo> ranks;
  int64_t events = 0;
};

// Opens every *.sqlite file in `dir` with the Reader and reads its ranks and event count; a
// file that cannot be read fails the test with the Reader's message. Leftover partial merges
// fail it too.
inline std::vector<TraceFile> read_all_traces(const std::string& dir) {
  std::vector<TraceFile> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string path = entry.path().string();
    EXPECT_EQ(path.find(".partial"), std::string::npos) << "a partial merge was left: " << path;
    if (entry.path().extension() != ".sqlite") continue;
    try {
      trace::Reader reader(path);
      files.push_back(TraceFile{path, reader.ranks(), reader.event_count()});
      reader.time_range();
    } catch (const std::exception& error) {
      ADD_FAILURE() << "unreadable trace " << path << ": " << error.what();
    }
  }
  return files;
}

// The status a rank's own file gives it ("" when the file or the row is missing).
inline std::string rank_status(const std::string& dir, int rank) {
  const std::string path = dir + "/rank" + std::to_string(rank) + ".sqlite";
  if (!std::filesystem::exists(path)) return "";
  trace::Reader reader(path);
  for (const trace::RankInfo& info : reader.ranks()) {
    if (info.rank == rank) return info.status;
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace dpscope::testing
