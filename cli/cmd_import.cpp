// dpscope import FILE... -o RUN.sqlite [--rank N] [--align collective-ends|none]: PyTorch profiler (Kineto) traces, one per rank,
// into one dpscope run file (formats/kineto_import.h, docs/kineto.md), or PyTorch's flight-recorder
// dumps, one per rank (formats/flight_recorder.h, docs/hangs.md). Warnings go to stderr, one line
// each; the summary to stdout.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "formats/flight_recorder.h"
#include "formats/kineto_import.h"
#include "trace/vocabulary.h"

namespace dpscope::cli {
namespace {

void run_import(const formats::KinetoImportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const formats::KinetoImportResult result = formats::import_kineto(options, [](const std::string& line) {
    const std::string text = "dpscope: warning: " + line + "\n";
    std::cerr.write(text.data(), static_cast<std::streamsize>(text.size()));
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("import: %d rank%s, %lld events (%lld collectives), %lld memory samples, %d profiler "
              "steps, clocks aligned by %s, %.2f s -> %s\n",
              result.ranks, result.ranks == 1 ? "" : "s", static_cast<long long>(result.events),
              static_cast<long long>(result.collectives), static_cast<long long>(result.memory_samples),
              result.iterations, std::string(trace::to_string(result.alignment)).c_str(), seconds,
              options.out.c_str());
}

// Flight-recorder dumps, when every input is one; profiler traces when none is.
bool inputs_are_flight_recorder_dumps(const formats::KinetoImportOptions& options) {
  size_t dumps = 0;
  for (const std::string& input : options.inputs) dumps += formats::is_flight_recorder_dump(input) ? 1 : 0;
  if (dumps == 0) return false;
  if (dumps != options.inputs.size()) {
    throw CliFailure("import: some inputs are flight-recorder dumps and some are not; import the "
                     "profiler traces and the dumps into two run files");
  }
  if (options.rank != trace::kNone || options.align) {
    throw CliFailure("import: --rank and --align are for profiler traces; a flight-recorder dump's "
                     "rank is the number its name ends with (rank_3)");
  }
  return true;
}

void run_flight_recorder_import(const formats::KinetoImportOptions& options) {
  try {
    const formats::FlightRecorderImportResult result =
        formats::import_flight_recorder(options.inputs, options.out, options.command_line);
    std::printf("import: %d flight-recorder dump%s, %lld collectives%s -> %s\n", result.ranks,
                result.ranks == 1 ? "" : "s", static_cast<long long>(result.entries),
                result.missing_ranks ? (", " + std::to_string(result.missing_ranks) + " rank" +
                                        (result.missing_ranks == 1 ? "" : "s") + " of the groups left no dump")
                                           .c_str()
                                     : "",
                options.out.c_str());
  } catch (const formats::FlightRecorderError& error) {
    throw CliFailure(error.what());
  }
}

}  // namespace

void add_import_command(CLI::App& app, CommandMode mode) {
  auto options = std::make_shared<formats::KinetoImportOptions>();
  CLI::App* command = app.add_subcommand(
      "import", "Turn PyTorch profiler (Kineto) traces, one .json or .json.gz per rank, or PyTorch "
                "flight-recorder dumps, one per rank, into one run file");
  command->add_option("FILES", options->inputs, "The Kineto trace files or flight-recorder dumps, one per rank")
      ->required();
  command->add_option("-o,--out", options->out, "The run file to write (replaced only when the import succeeds)")
      ->required();
  command->add_option("--rank", options->rank,
                      "The rank of a single file without distributedInfo (default: its place in the list)");
  auto align = std::make_shared<std::string>();
  command->add_option("--align", *align,
                      "How the ranks are put on one clock: collective-ends (each rank shifted so "
                      "that the blocking collectives it shares with the lowest rank end together) "
                      "or none (default: collective-ends when two ranks share one, else none)")
      ->check(CLI::IsMember(trace::mode_spellings(trace::kImportAlignments)));
  command->callback([options, align, mode] {
    if (!align->empty()) options->align = trace::parse_mode(trace::kImportAlignments, *align);
    if (mode == CommandMode::Validate) {
      try {
        formats::check_kineto_options(*options);
      } catch (const formats::KinetoError& error) {
        throw CliFailure(error.what());
      }
      return;
    }
    std::string line = "dpscope import";
    for (const std::string& input : options->inputs) line += " " + input;
    line += " -o " + options->out;
    if (options->rank != trace::kNone) line += " --rank " + std::to_string(options->rank);
    if (!align->empty()) line += " --align " + *align;
    options->command_line = line;
    if (inputs_are_flight_recorder_dumps(*options)) {
      run_flight_recorder_import(*options);
    } else {
      run_import(*options);
    }
  });
}

}  // namespace dpscope::cli
