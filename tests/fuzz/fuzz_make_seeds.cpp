// fuzz_make_seeds OUTDIR: writes the small valid traces of seed_traces.h into OUTDIR, the seeds
// of corpus/trace_bytes/ (scripts/fuzz --make-seeds; tests/fuzz/README.md).
#include <cstdio>
#include <string>

#include "tests/fuzz/seed_traces.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds OUTDIR\n");
    return 2;
  }
  for (const std::string& name : dpscope::fuzz::seed_trace_names()) {
    const std::string path = std::string(argv[1]) + "/" + name;
    dpscope::fuzz::write_seed_trace(name, path);
    std::printf("%s\n", path.c_str());
  }
  return 0;
}
