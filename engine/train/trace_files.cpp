// The trace files of a training run (Note [Trace files of a run]): the plan each rank follows and
// rank 0's merge at the end.
#include "engine/train/trace_files.h"

#include <cstdlib>
#include <filesystem>

#include "trace/merge.h"

namespace dpscope::train {

TraceFiles plan_trace_files(const std::string& trace_option, const std::string& model_name,
                            const comm::LaunchEnv& env) {
  namespace fs = std::filesystem;
  TraceFiles files;
  const char* launcher_dir = std::getenv("DPSCOPE_TRACE_DIR");
  std::string named = trace_option;
  if (named.empty() && !(launcher_dir && *launcher_dir)) named = "traces/train-" + model_name + ".sqlite";
  if (named.empty()) {
    // Under the launcher, which merges into its own run.sqlite.
    for (int r = 0; r < env.world_size; ++r) {
      files.rank_files.push_back((fs::path(launcher_dir) / ("rank" + std::to_string(r) + ".sqlite")).string());
    }
    files.rank_file = files.rank_files[static_cast<size_t>(env.rank)];
    return files;
  }
  const fs::path path(named);
  if (path.extension() == ".sqlite") {
    files.run_file = path.string();
    if (env.world_size == 1) {
      files.rank_file = files.run_file;
      files.rank_files = {files.run_file};
      return files;
    }
    for (int r = 0; r < env.world_size; ++r) {
      files.rank_files.push_back(
          (path.parent_path() / (path.stem().string() + ".rank" + std::to_string(r) + ".sqlite")).string());
    }
  } else {
    files.run_file = (path / "run.sqlite").string();
    for (int r = 0; r < env.world_size; ++r) {
      files.rank_files.push_back((path / ("rank" + std::to_string(r) + ".sqlite")).string());
    }
  }
  files.rank_file = files.rank_files[static_cast<size_t>(env.rank)];
  return files;
}

FinishedTrace finish_trace_files(const TraceFiles& files, const comm::LaunchEnv& env) {
  if (env.rank != 0 || files.run_file.empty()) return {};
  if (files.rank_files.size() < 2 || files.rank_file == files.run_file) return {"", files.run_file};
  if (env.local_world_size != env.world_size) {
    std::string command = "dpscope merge " + files.run_file;
    for (const std::string& file : files.rank_files) command += " " + file;
    return {"trace: the ranks ran on several hosts, so each left its own rank file (" +
           files.rank_files.front() + " ... " + files.rank_files.back() +
           "); gather them on one host and join them with: " + command, ""};
  }
  const trace::MergeResult merged = trace::merge_traces(files.rank_files, files.run_file);
  return {"trace " + files.run_file + " (merged from " + std::to_string(merged.ranks) + " rank files, " +
              std::to_string(merged.events) + " events)",
          files.run_file};
}

}  // namespace dpscope::train
