// Flush guards: close every open Recorder on SIGINT/SIGTERM, std::terminate and exit(), so an
// interrupted or crashed run leaves finished, readable trace files (see flush_guard.h).
#include "trace/flush_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dpscope::trace {
namespace {

// Note [Signal flush]
// A signal handler may only call async-signal-safe functions, and closing a recorder takes
// locks and writes SQLite. So the handler only writes the signal number into a pipe; a watcher
// thread blocked on that pipe closes the recorders, restores the default action and re-raises
// the signal, so the process still ends "killed by SIGINT" as its parent expects.

std::mutex& registry_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::vector<FlushTarget*>& registry() {
  static std::vector<FlushTarget*> recorders;
  return recorders;
}

int g_signal_pipe[2] = {-1, -1};
std::terminate_handler g_previous_terminate = nullptr;

std::atomic<int> g_signal_received{0};
static_assert(std::atomic<int>::is_always_lock_free, "set from a signal handler");

std::string signal_status(int signal_number) {
  return signal_number == SIGINT    ? "interrupted (SIGINT)"
         : signal_number == SIGTERM ? "terminated (SIGTERM)"
                                    : "ended by signal " + std::to_string(signal_number);
}

void on_signal(int signal_number) {
  g_signal_received.store(signal_number);
  unsigned char byte = static_cast<unsigned char>(signal_number);
  ssize_t ignored = ::write(g_signal_pipe[1], &byte, 1);
  (void)ignored;
}

void watch_signals() {
  unsigned char byte = 0;
  for (;;) {
    ssize_t n = ::read(g_signal_pipe[0], &byte, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    return;
  }
  const int signal_number = byte;
  close_all_recorders(signal_status(signal_number));
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

void on_terminate() {
  std::string why = "terminated";
  if (auto current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& error) {
      why = std::string("terminated: ") + error.what();
    } catch (...) {
      why = "terminated: unknown exception";
    }
  }
  close_all_recorders(why);
  if (g_previous_terminate) g_previous_terminate();
  std::abort();
}

void on_exit() { close_all_recorders("complete (exit)"); }

}  // namespace

void install_flush_guards() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Construct the registry before atexit() registers on_exit, so it is destroyed after
    // on_exit has run.
    registry_mutex();
    registry();
    if (::pipe2(g_signal_pipe, O_CLOEXEC) == 0) {
      std::thread(watch_signals).detach();
      struct sigaction action = {};
      action.sa_handler = on_signal;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;
      for (int signal_number : {SIGINT, SIGTERM}) {
        struct sigaction previous = {};
        ::sigaction(signal_number, nullptr, &previous);
        // A program that ignores the signal or handles it itself keeps its choice.
        if (previous.sa_handler == SIG_DFL) ::sigaction(signal_number, &action, nullptr);
      }
    }
    // Past a file-size limit (ulimit -f) the default SIGXFSZ kills the process mid-write.
    // Ignored, the write fails with EFBIG instead: the recorder stops tracing with a warning
    // and the training goes on (docs/reliability.md). A program's own choice is kept.
    struct sigaction file_size = {};
    ::sigaction(SIGXFSZ, nullptr, &file_size);
    if (file_size.sa_handler == SIG_DFL) ::signal(SIGXFSZ, SIG_IGN);
    g_previous_terminate = std::set_terminate(on_terminate);
    std::atexit(on_exit);
  });
}

std::string stop_signal_status() {
  const int signal_number = g_signal_received.load();
  return signal_number ? signal_status(signal_number) : "";
}

void register_recorder(FlushTarget* recorder) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().push_back(recorder);
}

void unregister_recorder(FlushTarget* recorder) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& list = registry();
  list.erase(std::remove(list.begin(), list.end(), recorder), list.end());
}

// Holds the registry lock while closing, so a Recorder being destroyed on another thread waits
// in unregister_recorder() until its close here is done (Recorder::close is idempotent). The
// latest registered closes first: a target that records into a recorder registered before it
// (a process group's pending collectives, Note [Pending collectives] in
// engine/comm/pending_collectives.h) does so while that recorder is still open.
void close_all_recorders(std::string_view status) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const auto& targets = registry();
  for (auto target = targets.rbegin(); target != targets.rend(); ++target) (*target)->close(status);
}

}  // namespace dpscope::trace
