// Fuzz target: the trace reader on arbitrary bytes. Each input is written to a file and opened
// with trace::Reader, then read through every query, stats, the Chrome export and merge; the
// only allowed failure is a TraceError naming the file (tests/fuzz/README.md).
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "tests/fuzz/trace_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = dpscope::fuzz::scratch_dir("fuzz_trace_bytes");
  const std::string path = dir + "/input.sqlite";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  // Merging needs a file that opens; the few inputs that do open are worth the time.
  dpscope::fuzz::exercise_trace(path, dir, /*merge=*/true);
  dpscope::fuzz::remove_trace_files(path);
  return 0;
}
