// The viewer before it has an App: the traces loading in the background with a progress box
// (with --live, the run's first file awaited first), then a load error kept in a dialog. The
// desktop window (window.cpp) and the browser page (web_main.cpp) both open traces through it.
#pragma once

#include <future>
#include <memory>
#include <string>

#include "viewer/app.h"
#include "viewer/live_source.h"
#include "viewer/model.h"

namespace dpscope::view {

class Window;

// The main trace's model and, with a compared trace, its model; each with the load of its
// memory samples still to run when they come after the first frame (else invalid).
struct Loaded {
  std::shared_ptr<const Model> main, compare;
  MemoryLoad main_memory, compare_memory;
};

// When load_both reads the memory samples: with the events (--live, whose updates copy the
// model), or after the first frame (Note [Memory after the first frame]): the App reads them.
enum class MemorySamples { WithEvents, AfterFirstFrame };

// Loads `path` and (if not empty) `compare`, reporting to `progress` (may be null). Throws
// trace::TraceError naming the file that cannot be read.
Loaded load_both(const std::string& path, const std::string& compare, LoadProgress* progress,
                 MemorySamples samples);

// Where --live merges a run directory's rank files while it follows them.
std::string live_scratch_path();

// Loads options' traces in the background (start_background) from construction on; poll()
// hands over the App. Thread-safety: the frame loop's thread only.
class Opening {
 public:
  // Keeps a reference to `options`, which must outlive it.
  explicit Opening(const AppOptions& options);
  Opening(const Opening&) = delete;
  Opening& operator=(const Opening&) = delete;
  // A load still running stops early; pending_'s destructor waits for it (progress_ outlives it).
  ~Opening() { progress_.cancel = true; }

  // The App once the load is done (it follows the live source, if any; otherwise it shows the
  // typical iteration), else null; a load error is kept for the dialog, but a --live file caught
  // mid-write is tried again.
  std::unique_ptr<App> poll(float font_scale);
  // How long the frame loop may sleep: the progress bar moves without input; an error waits.
  double wait_seconds() const;
  // The error dialog (its Quit closes `window`, null where there is nothing to close, as in the
  // browser), or the progress box.
  void draw(Window* window) const;
  const std::string& error() const { return error_; }

 private:
  void draw_error(Window* window) const;
  void draw_progress() const;

  const AppOptions& options_;
  LoadProgress progress_;
  std::unique_ptr<LiveSource> source_;
  std::string live_file_;  // the file being loaded for --live
  std::future<Loaded> pending_;
  std::string error_;
};

}  // namespace dpscope::view
