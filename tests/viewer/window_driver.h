// Drives dpscope-view in a real window under the suite's Xvfb display, as a teacher would: the
// viewer as a child process (its stdout, where F9 writes the window's JSON line, into a file),
// xdotool's keys and pointer, and xwd's read-back of what the window shows once it has drawn.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/synth.h"
#include "tests/test_util.h"
#include "tests/viewer/image_checks.h"
#include "tests/viewer/screenshot_json.h"

extern char** environ;

namespace dpscope::testing {

// dpscope-view on `trace`, killed when the test ends.
// With `stdout_file`, the viewer's standard output goes there (F9's lines: f9_report).
class ViewerProcess {
 public:
  explicit ViewerProcess(const std::string& trace, std::vector<std::string> args = {},
                         const std::string& stdout_file = "") {
    const std::string viewer = std::string(DPSCOPE_BIN_DIR) + "/dpscope-view";
    args.insert(args.begin(), {viewer, trace});
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (!stdout_file.empty()) {
      posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    if (posix_spawn(&pid_, viewer.c_str(), &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
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

inline bool have_xdotool() { return run_command("command -v xdotool").exit_code == 0; }
inline bool have_xwd() { return run_command("command -v xwd").exit_code == 0; }

inline uint32_t big_endian(const unsigned char* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// What the window shows, read back with xwd (a ZPixmap of 32 bits per pixel, as Xvfb at depth
// 24 writes it); empty when it cannot be read.
inline Image capture(const std::string& window, const std::string& file) {
  Image image;
  if (run_command("xwd -silent -id " + window + " -out " + file).exit_code != 0) return image;
  std::ifstream in(file, std::ios::binary);
  const std::vector<unsigned char> d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (d.size() < 100) return image;
  const uint32_t header = big_endian(&d[0]), bits_per_pixel = big_endian(&d[44]);
  const uint32_t bytes_per_line = big_endian(&d[48]), colours = big_endian(&d[76]);
  image.width = int(big_endian(&d[16]));
  image.height = int(big_endian(&d[20]));
  const size_t pixels = size_t(header) + size_t(colours) * 12;
  if (bits_per_pixel != 32 || d.size() < pixels + size_t(bytes_per_line) * size_t(image.height)) return Image{};
  image.rgb.resize(size_t(image.width) * size_t(image.height) * 3);
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      const unsigned char* p = &d[pixels + size_t(y) * bytes_per_line + size_t(x) * 4];  // B G R X
      unsigned char* q = &image.rgb[(size_t(y) * size_t(image.width) + size_t(x)) * 3];
      q[0] = p[2], q[1] = p[1], q[2] = p[0];
    }
  }
  return image;
}

// The window `viewer` shows, waiting up to 30 s for it to map ("" if none, or once the viewer
// has exited: its error is then in the test's output).
inline std::string window_of(const ViewerProcess& viewer) {
  for (int attempt = 0; attempt < 60 && viewer.running(); ++attempt) {
    const auto found = run_command("xdotool search --onlyvisible --pid " + std::to_string(viewer.pid()));
    std::istringstream ids(found.output);
    std::string id;
    if (found.exit_code == 0 && (ids >> id)) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return "";
}

inline double cpu_over(const ViewerProcess& viewer, std::chrono::milliseconds wall,
                const std::function<void()>& meanwhile = {}) {
  const double before = viewer.cpu_seconds();
  const auto end = std::chrono::steady_clock::now() + wall;
  if (meanwhile) {
    while (std::chrono::steady_clock::now() < end) meanwhile();
  }
  std::this_thread::sleep_until(end);
  return viewer.cpu_seconds() - before;
}

// A synthetic run of `events` events on `ranks` ranks, written into `dir`: its path.
inline std::string synth_trace(const TempDir& dir, int ranks, int64_t events, const std::string& name = "synth.sqlite",
                        uint64_t seed = 1) {
  dpscope::formats::SynthOptions options;
  options.events = events;
  options.ranks = ranks;
  options.seed = seed;
  options.out = dir.file(name);
  dpscope::formats::synthesize(options);
  return options.out;
}

// The pointer away from the timeline (no tooltip over a span), the keyboard on `window`.
inline void take_keyboard(const std::string& window) {
  run_command("xdotool mousemove --window " + window + " 5 795");
  run_command("xdotool windowfocus --sync " + window);
}

// The viewer's main thread as /proc/PID/task/PID/stat has it: its state letter (S: asleep) and
// the clock ticks it has run (user plus system).
inline std::pair<char, long long> main_thread(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t name_end = text.rfind(')');
  if (name_end == std::string::npos) return {'?', -1};
  std::istringstream fields(text.substr(name_end + 2));
  char state = '?';
  std::string field;
  long long utime = 0, stime = 0;
  fields >> state;
  for (int i = 4; fields >> field && i <= 15; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  return {state, utime + stime};
}

// Whether the viewer has drawn every frame its input asked for: its main thread asleep waiting
// for the next input (Note [Quiet when idle]) at both ends of 100 ms in which it did not run.
// Under load a thread that still has frames to draw is runnable (R), not asleep, however long
// the machine keeps it waiting: a condition, where a fixed sleep was a guess.
inline bool drawn_and_asleep(const ViewerProcess& viewer) {
  const auto before = main_thread(viewer.pid());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto after = main_thread(viewer.pid());
  return before.first == 'S' && after.first == 'S' && before.second == after.second;
}

// What the window shows once the viewer has drawn what the input asked for and gone back to
// sleep, and (given `unlike`) the picture differs from it; at most 15 s, then what it shows. Not
// for a window that keeps drawing (playing).
inline Image settled_capture(const ViewerProcess& viewer, const std::string& window, const std::string& file,
                      const Image* unlike = nullptr) {
  for (int attempt = 0; attempt < 150; ++attempt) {
    if (!drawn_and_asleep(viewer)) continue;
    Image shot = capture(window, file);
    if (!unlike || shot.rgb != unlike->rgb) return shot;
  }
  std::fprintf(stderr, "settled_capture: after 15 s the viewer is %s (%s)\n",
               unlike ? "asleep or not, and the picture unchanged" : "still drawing", file.c_str());
  return capture(window, file);
}

// Presses `keys` in the window that has the keyboard and returns the picture once they have
// changed it and the viewer has drawn all it will.
inline Image press(const ViewerProcess& viewer, const std::string& window, const std::string& keys, const std::string& file) {
  const Image before = settled_capture(viewer, window, file);
  EXPECT_EQ(run_command("xdotool key --delay 60 " + keys).exit_code, 0) << keys;
  return settled_capture(viewer, window, file, &before);
}

// The window of `viewer` once it has loaded and analysed its trace: its CPU time stops growing
// (at most a minute on a loaded machine). "" when it opened none.
inline std::string settled_window(const ViewerProcess& viewer) {
  const std::string window = window_of(viewer);
  for (int i = 0; !window.empty() && i < 60 && cpu_over(viewer, std::chrono::milliseconds(1000)) > 0.05; ++i) {
  }
  return window;
}


// Presses F9 and returns the JSON line the viewer then wrote to `stdout_file` (the window's state
// as drawn now: docs/viewer.md), waiting up to 15 s for it; discarded when none came.
inline nlohmann::json f9_report(const ViewerProcess& viewer, const std::string& window, const std::string& stdout_file) {
  const std::string before = read_text(stdout_file);
  const auto lines_before = std::count(before.begin(), before.end(), '\n');
  settled_capture(viewer, window, stdout_file + ".xwd");
  run_command("xdotool key --delay 80 F9");
  for (int attempt = 0; attempt < 150; ++attempt) {
    const std::string text = read_text(stdout_file);
    if (std::count(text.begin(), text.end(), '\n') > lines_before) return screenshot_json(text);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return nlohmann::json::parse("", nullptr, false);
}

}  // namespace dpscope::testing
