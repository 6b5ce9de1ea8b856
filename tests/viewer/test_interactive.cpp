// dpscope-view in a real window driven by scripted input: xdotool (scripts/setup installs it)
// moves the pointer and presses keys in the window the suite's Xvfb display shows, while the test
// reads the viewer's CPU time from /proc. Without a display or xdotool these tests skip.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"
#include "trace/synth.h"

extern char** environ;

using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

// dpscope-view on `trace`, killed when the test ends.
class ViewerProcess {
 public:
  explicit ViewerProcess(const std::string& trace) {
    const std::string viewer = std::string(DPSCOPE_BIN_DIR) + "/dpscope-view";
    std::vector<char*> argv = {const_cast<char*>(viewer.c_str()),
                               const_cast<char*>(trace.c_str()), nullptr};
    if (posix_spawn(&pid_, viewer.c_str(), nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
  }
  ~ViewerProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  // User plus system CPU time so far, seconds (/proc/PID/stat fields 14 and 15).
  double cpu_seconds() const {
    std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    // The command name (field 2) is in parentheses and may hold spaces: count after its ')'.
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string field;
    long long utime = 0, stime = 0;
    for (int i = 3; fields >> field; ++i) {
      if (i == 14) utime = std::stoll(field);
      if (i == 15) {
        stime = std::stoll(field);
        break;
      }
    }
    return double(utime + stime) / double(::sysconf(_SC_CLK_TCK));
  }

 private:
  pid_t pid_ = -1;
};

bool have_xdotool() { return run_command("command -v xdotool").exit_code == 0; }

// The window of process `pid`, waiting up to 30 s for it to map ("" if none).
std::string window_of(pid_t pid) {
  for (int attempt = 0; attempt < 60; ++attempt) {
    const auto found = run_command("xdotool search --onlyvisible --pid " + std::to_string(pid));
    std::istringstream ids(found.output);
    std::string id;
    if (found.exit_code == 0 && (ids >> id)) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return "";
}

double cpu_over(const ViewerProcess& viewer, std::chrono::milliseconds wall,
                const std::function<void()>& meanwhile = {}) {
  const double before = viewer.cpu_seconds();
  const auto end = std::chrono::steady_clock::now() + wall;
  if (meanwhile) {
    while (std::chrono::steady_clock::now() < end) meanwhile();
  }
  std::this_thread::sleep_until(end);
  return viewer.cpu_seconds() - before;
}

// See Note [Quiet when idle]: left alone, the window sleeps; moved over, it draws.
TEST(ViewerInteractive, AnIdleWindowSleepsAndInputWakesIt) {
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`";
  if (!have_xdotool()) GTEST_SKIP() << "xdotool is missing: apt-get install xdotool (scripts/setup)";
  TempDir dir;
  dpscope::trace::SynthOptions options;
  options.events = 200000;
  options.ranks = 4;
  options.out = dir.file("synth.sqlite");
  dpscope::trace::synthesize(options);

  ViewerProcess viewer(options.out);
  ASSERT_GT(viewer.pid(), 0);
  const std::string window = window_of(viewer.pid());
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  // Loaded and analysed: the CPU time stops growing (at most 60 s on a loaded machine).
  for (int i = 0; i < 60 && cpu_over(viewer, std::chrono::milliseconds(1000)) > 0.05; ++i) {
  }

  const double idle = cpu_over(viewer, std::chrono::milliseconds(4000));
  EXPECT_LE(idle, 0.05 * 4) << "idle, the viewer used " << idle << " s of CPU in 4 s";

  // The pointer moving over the timeline: every move is a frame (hover, tooltips).
  int moves = 0;
  const double moving = cpu_over(viewer, std::chrono::milliseconds(3000), [&] {
    const int x = 200 + (moves % 20) * 40;
    run_command("xdotool mousemove --window " + window + " " + std::to_string(x) + " 300");
    ++moves;
  });
  EXPECT_GT(moves, 10);
  EXPECT_GT(moving, idle + 0.05) << "the viewer drew nothing while the pointer moved (" << moves
                                 << " moves, " << moving << " s of CPU)";
  EXPECT_TRUE(viewer.running()) << "the viewer exited";

  // And quiet again once the input stops.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double after = cpu_over(viewer, std::chrono::milliseconds(3000));
  EXPECT_LE(after, 0.05 * 3) << "after the input, the viewer used " << after << " s in 3 s";
}

}  // namespace
