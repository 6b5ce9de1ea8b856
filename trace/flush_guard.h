// Flush guards: leave readable trace files when a process ends abnormally. Every open Recorder
// is registered here; on SIGINT/SIGTERM, std::terminate and exit() the registered recorders are
// closed (drained, status recorded, file finished) before the process goes on to end.
#pragma once

#include <string>
#include <string_view>

namespace dpscope::trace {

// What the guards close when the process ends abnormally. The Recorder (recorder.h) is one; the
// guards know only this interface, so the store's layers run one way (recorder -> flush guard).
class FlushTarget {
 public:
  // Finishes the target's file with `status`. Must be idempotent and callable from any thread.
  virtual void close(std::string_view status) = 0;

 protected:
  ~FlushTarget() = default;
};

// Installs the handlers once per process (idempotent, thread-safe). A signal is re-raised with
// its default action after the flush, so the exit status still says which signal ended it.
// Also ignores SIGXFSZ (unless the program set it), so a file-size limit stops the tracing,
// not the process.
void install_flush_guards();

// "interrupted (SIGINT)" or "terminated (SIGTERM)" once such a signal has arrived, else "".
// A program that fails because of the signal (a system call interrupted by it) closes its
// recorder with this rather than with its own error: the signal is why it ended. Thread-safe.
std::string stop_signal_status();

// Called by Recorder's constructor and destructor. Thread-safe.
void register_recorder(FlushTarget* recorder);
void unregister_recorder(FlushTarget* recorder);

// Closes every registered recorder with `status`. Thread-safe.
void close_all_recorders(std::string_view status);

}  // namespace dpscope::trace
