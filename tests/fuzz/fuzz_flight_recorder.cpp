// Fuzz target: the flight-recorder import (formats/flight_recorder.h) on arbitrary bytes, as a
// dump named rank_0: a pickle when the first byte is 0x80 (the strict reader, Note [Strict
// pickle]), JSON otherwise. A dump it imports is then read as fuzz_trace_bytes reads a file, its
// hang section included, and exported back as dumps. The only allowed failure is a
// FlightRecorderError naming the input, on one line, with no output left behind.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "analysis/hang.h"
#include "formats/flight_recorder.h"
#include "tests/fuzz/trace_exercise.h"
#include "trace/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = dpscope::fuzz::scratch_dir("fuzz_flight_recorder");
  const std::string input = dir + "/rank_0";
  const std::string run = dir + "/input.sqlite";  // removed at exit with the scratch directory
  {
    std::ofstream out(input, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  bool imported = false;
  try {
    dpscope::formats::import_flight_recorder({input}, run, "fuzz");
    imported = true;
  } catch (const dpscope::formats::FlightRecorderError& error) {
    const std::string message = error.what();
    if (message.rfind(input, 0) != 0 || message.find('\n') != std::string::npos) {
      std::fprintf(stderr, "FlightRecorderError does not name the input on one line: %s\n", message.c_str());
      std::abort();
    }
    if (std::filesystem::exists(run)) {
      std::fprintf(stderr, "a refused dump left %s behind\n", run.c_str());
      std::abort();
    }
  }
  if (imported) {
    {
      dpscope::trace::Reader reader(run);
      dpscope::analysis::analyze_hang(reader);
      dpscope::formats::export_flight_recorder(reader, dir + "/back");
    }
    dpscope::fuzz::exercise_trace(run, dir, /*merge=*/false);
    std::error_code ignored;
    std::filesystem::remove_all(dir + "/back", ignored);
  }
  std::remove(input.c_str());
  dpscope::fuzz::remove_trace_files(run);
  return 0;
}
