// `import_kineto`: PyTorch profiler (Kineto) trace files, one per rank, into one dpscope run file
// that the viewer, `dpscope stats`, `dpscope export` and the cluster clock read like any other
// (docs/kineto.md). Streaming: two passes over each file (kineto_survey.h, then the writing pass),
// each holding one event at a time, so memory grows with the number of lanes, steps, launches and
// distinct names, not with the file.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/kineto_reader.h"
#include "trace/schema.h"
#include "trace/vocabulary.h"

namespace dpscope::formats {

struct KinetoImportOptions {
  std::vector<std::string> inputs;  // one Kineto file per rank (.json or .json.gz)
  std::string out;                  // the run file to write; replaced only when the import succeeds
  // The rank of a single input without distributedInfo (`--rank`); kNone: by file order.
  int32_t rank = trace::kNone;
  std::string command_line;         // stored as meta `command_line` when not empty
  // How the ranks are put on one clock (`--align`; meta `clock_alignment`): nullopt chooses
  // collective-ends when two ranks share a blocking collective, else none (formats/kineto_align.h).
  std::optional<trace::ClockAlignment> align;
};

struct KinetoImportResult {
  int32_t ranks = 0;
  int64_t events = 0;       // rows of the events table
  int64_t collectives = 0;  // of which collectives
  int64_t memory_samples = 0;
  int32_t iterations = 0;   // the most ProfilerSteps of any rank
  trace::ClockAlignment alignment = trace::ClockAlignment::None;  // how the ranks' clocks were aligned
};

// Checks the options without reading any input: at least one input, an output path, --rank with
// one input only and not negative. Throws KinetoError saying what to change.
void check_kineto_options(const KinetoImportOptions& options);

// Imports `options.inputs` into `options.out`. The run file is written under a temporary name in
// the same directory and renamed over `out` only when complete, so a failure leaves nothing
// half-written (and an older `out` untouched). `warn` receives one line per warning (a file
// without distributedInfo, whose rank comes from --rank or the file order; a --rank that its
// distributedInfo contradicts, which is ignored). Throws KinetoError
// naming the file (and byte offset) for bad input: an unreadable, truncated or invalid file, JSON
// that is not a trace, events missing fields, two files of the same rank, files of different runs
// (their distributedInfo differs in world size, backend or NCCL version); and trace::TraceError
// when the output cannot be written. Thread-safety: none shared.
KinetoImportResult import_kineto(const KinetoImportOptions& options,
                                 const std::function<void(const std::string&)>& warn);

// Whether `path` names a profiler trace by its ending: ".json" or ".json.gz".
bool is_kineto_file_name(std::string_view path);

// A run imported into a temporary file (in $TMPDIR) for a program that opens it at once, the
// viewer: `dpscope-view rank-*.json.gz`. The file is removed when the object dies. Throws as
// import_kineto. Not copyable; one owner.
class TemporaryImport {
 public:
  TemporaryImport(const std::vector<std::string>& inputs, const std::function<void(const std::string&)>& warn);
  ~TemporaryImport();
  TemporaryImport(const TemporaryImport&) = delete;
  TemporaryImport& operator=(const TemporaryImport&) = delete;

  const std::string& path() const { return path_; }
  const KinetoImportResult& result() const { return result_; }

 private:
  std::string dir_;
  std::string path_;
  KinetoImportResult result_;
};

}  // namespace dpscope::formats
