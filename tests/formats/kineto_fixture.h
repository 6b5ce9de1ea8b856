// What the Kineto import's tests share: the shipped traces (tests/data/kineto), importing files
// into a temporary run file with the warnings kept, and writing small Kineto JSON files by hand.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "formats/kineto_import.h"
#include "tests/test_util.h"

namespace dpscope::formats::kineto_test {

using ::dpscope::testing::write_file;

// A shipped trace (tests/data/kineto/NAME).
inline std::string shipped(const std::string& name) {
  return std::string(DPSCOPE_SOURCE_DIR) + "/tests/data/kineto/" + name;
}

// A run file imported from `inputs` into a temporary directory, with the warnings.
struct Imported {
  testing::TempDir dir;
  std::string path;
  KinetoImportResult result;
  std::vector<std::string> warnings;
};

inline void import_into(Imported& run, const std::vector<std::string>& inputs,
                        int32_t rank = trace::kNone) {
  run.path = run.dir.file("run.sqlite");
  KinetoImportOptions options;
  options.inputs = inputs;
  options.out = run.path;
  options.rank = rank;
  run.result = import_kineto(options, [&](const std::string& line) { run.warnings.push_back(line); });
}

// One complete ('X') event as Kineto writes it; `args` is the inside of its args object.
inline std::string x_event(const std::string& cat, const std::string& name, int pid, int tid,
                           double ts, double dur, const std::string& args = "") {
  return "{\"ph\": \"X\", \"cat\": \"" + cat + "\", \"name\": \"" + name +
         "\", \"pid\": " + std::to_string(pid) + ", \"tid\": " + std::to_string(tid) +
         ", \"ts\": " + std::to_string(ts) + ", \"dur\": " + std::to_string(dur) +
         ", \"args\": {" + args + "}}";
}

// A trace of the object form around `events` (joined with commas); `distributed` is the inside
// of distributedInfo, or "" for a trace without it.
inline std::string object_trace(const std::vector<std::string>& events, const std::string& distributed) {
  std::string text = "{\"schemaVersion\": 1, ";
  if (!distributed.empty()) text += "\"distributedInfo\": {" + distributed + "}, ";
  text += "\"traceEvents\": [";
  for (size_t i = 0; i < events.size(); ++i) text += (i ? ",\n" : "\n") + events[i];
  return text + "\n]}";
}

}  // namespace dpscope::formats::kineto_test
