// `dpscope export --chrome OUT.json TRACE` and `dpscope export --format chrome|flight-recorder OUT
// TRACE`: a trace as Chrome trace event JSON for Perfetto or chrome://tracing, or as PyTorch's
// flight-recorder dumps, one per rank (OUT/rank_N, docs/hangs.md); progress on stderr for large
// traces, a summary line on stdout.
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/progress.h"
#include "formats/export_chrome.h"
#include "formats/flight_recorder.h"
#include "trace/reader.h"

namespace dpscope::cli {
namespace {

// What `dpscope export` writes.
enum class ExportFormat { Chrome, FlightRecorder };

struct ExportOptions {
  std::string chrome;             // --chrome OUT: the older spelling of --format chrome OUT
  std::string format;             // "" | "chrome" | "flight-recorder"
  std::vector<std::string> paths;  // TRACE, or OUT TRACE with --format
};

// The format, the output and the trace the options name. Throws CliFailure with the form.
std::pair<ExportFormat, std::pair<std::string, std::string>> resolve(const ExportOptions& o) {
  constexpr const char* kForm = "give --chrome OUT.json TRACE, or --format chrome|flight-recorder OUT TRACE";
  if (!o.chrome.empty() && !o.format.empty()) throw CliFailure(std::string("export: --chrome and --format together; ") + kForm);
  if (!o.chrome.empty()) {
    if (o.paths.size() != 1) throw CliFailure(std::string("export: --chrome OUT takes one TRACE; ") + kForm);
    return {ExportFormat::Chrome, {o.chrome, o.paths[0]}};
  }
  if (o.format.empty()) throw CliFailure(std::string("export: no format; ") + kForm);
  if (o.paths.size() != 2) throw CliFailure(std::string("export: --format ") + o.format + " takes OUT and TRACE; " + kForm);
  return {o.format == "chrome" ? ExportFormat::Chrome : ExportFormat::FlightRecorder, {o.paths[0], o.paths[1]}};
}

}  // namespace

void add_export_command(CLI::App& app, CommandMode mode) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand("export", "Export a trace to another format");
  cmd->add_option("--chrome", options->chrome,
                  "Write Chrome trace event JSON (open it in ui.perfetto.dev) to this file (as --format chrome)");
  cmd->add_option("--format", options->format,
                  "chrome: Chrome trace event JSON to the file OUT; flight-recorder: PyTorch's "
                  "flight-recorder dumps, one per rank, OUT/rank_N (docs/hangs.md)")
      ->check(CLI::IsMember({"chrome", "flight-recorder"}));
  cmd->add_option("PATHS", options->paths,
                  "TRACE (with --chrome), or OUT TRACE (with --format): a trace file, a rank file or a merged run file")
      ->required();
  cmd->callback([options, mode] {
    const auto [format, where] = resolve(*options);
    if (mode == CommandMode::Validate) return;
    const auto& [out, trace_path] = where;
    trace::Reader reader(trace_path);
    if (format == ExportFormat::FlightRecorder) {
      std::vector<std::string> files;
      try {
        files = formats::export_flight_recorder(reader, out);
      } catch (const formats::FlightRecorderError& error) {
        throw CliFailure(error.what());
      }
      std::printf("dpscope: wrote %zu flight-recorder dump%s (version %s, JSON) into %s\n", files.size(),
                  files.size() == 1 ? "" : "s", std::string(formats::kFlightRecorderVersion).c_str(), out.c_str());
      return;
    }
    const int64_t events = reader.event_count();
    const auto summary = formats::export_chrome(
        reader, out, progress_lines("export", events >= kProgressMinEvents));
    std::printf("dpscope: wrote %s: %lld trace events from %lld recorded events, %.1f MiB\n",
                out.c_str(), static_cast<long long>(summary.trace_events),
                static_cast<long long>(events), double(summary.bytes) / double(1 << 20));
  });
}

}  // namespace dpscope::cli
