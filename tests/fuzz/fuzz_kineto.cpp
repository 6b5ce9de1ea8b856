// Fuzz target: the PyTorch profiler (Kineto) import on arbitrary bytes. Each input is written to
// a .json file and imported; an import that succeeds is then read through every query, stats
// (the GPU breakdown included) and the Chrome export. The only allowed failures are a
// KinetoError naming the input, on one line, and what exercise_trace allows (tests/fuzz/README.md).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "formats/kineto_import.h"
#include "tests/fuzz/trace_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = dpscope::fuzz::scratch_dir("fuzz_kineto");
  const std::string input = dir + "/rank.json";
  const std::string run = dir + "/input.sqlite";  // removed at exit with the scratch directory
  {
    std::ofstream out(input, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  dpscope::formats::KinetoImportOptions options;
  options.inputs = {input};
  options.out = run;
  bool imported = false;
  try {
    dpscope::formats::import_kineto(options, [](const std::string&) {});
    imported = true;
  } catch (const dpscope::formats::KinetoError& error) {
    const std::string message = error.what();
    if (message.rfind(input, 0) != 0 || message.find('\n') != std::string::npos) {
      std::fprintf(stderr, "KinetoError does not name the input on one line: %s\n", message.c_str());
      std::abort();
    }
  }
  if (imported) dpscope::fuzz::exercise_trace(run, dir, /*merge=*/false);
  std::remove(input.c_str());
  dpscope::fuzz::remove_trace_files(run);
  return 0;
}
