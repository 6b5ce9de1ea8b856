// dpscope-view in a real window driven by scripted input: xdotool (scripts/setup installs it)
// moves the pointer, turns the wheel and presses keys in the window the suite's Xvfb display
// shows; the test reads the viewer's CPU time from /proc and what it drew with xwd (x11-apps).
// Without a display, xdotool or xwd these tests skip.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"
#include "tests/viewer/image_checks.h"
#include "trace/synth.h"

extern char** environ;

using dpscope::testing::column_where;
using dpscope::testing::Image;
using dpscope::testing::pixels_near;
using dpscope::testing::rows_with;
using dpscope::testing::run_command;
using dpscope::testing::same_rows;
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
bool have_xwd() { return run_command("command -v xwd").exit_code == 0; }

uint32_t big_endian(const unsigned char* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// What the window shows, read back with xwd (a ZPixmap of 32 bits per pixel, as Xvfb at depth
// 24 writes it); empty when it cannot be read.
Image capture(const std::string& window, const std::string& file) {
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

// A synthetic run of `events` events on `ranks` ranks, written into `dir`: its path.
std::string synth_trace(const TempDir& dir, int ranks, int64_t events) {
  dpscope::trace::SynthOptions options;
  options.events = events;
  options.ranks = ranks;
  options.out = dir.file("synth.sqlite");
  dpscope::trace::synthesize(options);
  return options.out;
}

// The window of `viewer` once it has loaded and analysed its trace: its CPU time stops growing
// (at most a minute on a loaded machine). "" when it opened none.
std::string settled_window(const ViewerProcess& viewer) {
  const std::string window = window_of(viewer.pid());
  for (int i = 0; !window.empty() && i < 60 && cpu_over(viewer, std::chrono::milliseconds(1000)) > 0.05; ++i) {
  }
  return window;
}

// See Note [Quiet when idle]: left alone, the window sleeps; moved over, it draws.
TEST(ViewerInteractive, AnIdleWindowSleepsAndInputWakesIt) {
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`";
  if (!have_xdotool()) GTEST_SKIP() << "xdotool is missing: apt-get install xdotool (scripts/setup)";
  TempDir dir;
  ViewerProcess viewer(synth_trace(dir, 4, 200000));
  ASSERT_GT(viewer.pid(), 0);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";

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

// The keys and the wheel, as a teacher uses them: step (->), play (space), find (Ctrl+F), text
// size (Ctrl +), zoom (wheel); each checked on what the window then shows.
TEST(ViewerInteractive, StepPlayFindZoomAndScaleWithTheKeysAndTheWheel) {
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`";
  if (!have_xdotool() || !have_xwd()) GTEST_SKIP() << "xdotool or xwd is missing: apt-get install xdotool x11-apps (scripts/setup)";
  TempDir dir;
  ViewerProcess viewer(synth_trace(dir, 2, 40000));
  ASSERT_GT(viewer.pid(), 0);
  const std::string window = settled_window(viewer);
  ASSERT_FALSE(window.empty()) << "dpscope-view opened no window";
  // The pointer away from the timeline (no tooltip), the keyboard on the window.
  run_command("xdotool mousemove --window " + window + " 5 795");
  run_command("xdotool windowfocus --sync " + window);
  const auto settle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(400)); };
  const auto key = [&](const std::string& keys) {
    ASSERT_EQ(run_command("xdotool key --delay 60 " + keys).exit_code, 0) << keys;
    settle();
  };
  const std::array<int, 3> narration = {255, 219, 115}, found = {255, 230, 0};
  // The playhead's green, drawn translucent and anti-aliased (so fainter where it falls between
  // two columns) over whatever lies beneath; a column of it is a line, not a green span's edge.
  const auto is_playhead = [](const unsigned char* p) { return p[1] > 90 && p[1] > p[0] + 40 && p[1] > p[2] + 20; };
  settle();
  const Image start = capture(window, dir.file("start.xwd"));
  ASSERT_GT(start.width, 0) << "xwd read nothing back";

  // -> : the playhead moves to the next step; the narration line (rows 24-50) says another thing.
  key("Right Right");
  const Image stepped = capture(window, dir.file("stepped.xwd"));
  EXPECT_GT(pixels_near(stepped, 24, 50, narration), 100) << "no narration after stepping";
  EXPECT_FALSE(same_rows(stepped, start, 24, 50)) << "the narration line did not change";

  // The wheel over the playhead zooms in around it: the ruler (rows 50-90) shows other times.
  const int playhead_x = column_where(stepped, 100, 500, is_playhead);
  ASSERT_GE(playhead_x, 0) << "no playhead drawn";
  run_command("xdotool mousemove --window " + window + " " + std::to_string(playhead_x) +
              " 300 click --repeat 20 --delay 30 4");
  run_command("xdotool mousemove --window " + window + " 5 795");
  settle();
  const Image zoomed = capture(window, dir.file("zoom.xwd"));
  EXPECT_FALSE(same_rows(zoomed, stepped, 50, 90)) << "the ruler did not change after the wheel";

  // space: playing moves the playhead between two frames; space again pauses.
  key("space");
  const int x0 = column_where(capture(window, dir.file("play0.xwd")), 100, 500, is_playhead);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  const int x1 = column_where(capture(window, dir.file("play1.xwd")), 100, 500, is_playhead);
  key("space");
  EXPECT_GE(x0, 0);
  EXPECT_GT(x1, x0) << "the playhead did not move while playing";

  // Ctrl+F, a query, Return: the matches in view are outlined in the find colour.
  const int found_before = pixels_near(capture(window, dir.file("find0.xwd")), 50, 520, found);
  key("ctrl+f");
  ASSERT_EQ(run_command("xdotool type --delay 40 allreduce").exit_code, 0);
  key("Return");
  const int found_after = pixels_near(capture(window, dir.file("find1.xwd")), 50, 520, found);
  EXPECT_GT(found_after, found_before + 50) << "no matches outlined after typing in the find box";
  key("Escape");

  // Click a gradient hook: it is selected and its flows are drawn, the one to the other rank's
  // all-reduce in the skew colour (orange, translucent over the lanes).
  key("Escape");
  const Image before_click = capture(window, dir.file("click0.xwd"));
  int hook_x = -1, hook_y = -1;
  for (int y = 100; y < 500 && hook_x < 0; ++y) {
    for (int x = 150; x < before_click.width - 30 && hook_x < 0; ++x) {
      const unsigned char* p = before_click.at(x, y);
      if (dpscope::testing::near(p, {230, 200, 60}) || dpscope::testing::near(p, {200, 170, 30})) hook_x = x, hook_y = y;
    }
  }
  ASSERT_GE(hook_x, 0) << "no hook drawn to click";
  const auto is_skew = [](const unsigned char* p) { return p[0] > 200 && p[1] > 100 && p[1] < 160 && p[2] < 60; };
  const auto skew_pixels = [&](const Image& image) {
    int n = 0;
    for (int y = 100; y < 500; ++y) {
      for (int x = 0; x < image.width; ++x) n += is_skew(image.at(x, y));
    }
    return n;
  };
  run_command("xdotool mousemove --window " + window + " " + std::to_string(hook_x + 1) + " " +
              std::to_string(hook_y) + " click 1");
  run_command("xdotool mousemove --window " + window + " 5 795");
  settle();
  const Image clicked = capture(window, dir.file("click1.xwd"));
  EXPECT_GT(skew_pixels(clicked), skew_pixels(before_click) + 30) << "no flow to the other rank after clicking a hook";

  // D held pans: the ruler shows other times.
  ASSERT_EQ(run_command("xdotool keydown d sleep 0.5 keyup d").exit_code, 0);
  settle();
  EXPECT_FALSE(same_rows(capture(window, dir.file("pan.xwd")), clicked, 50, 90)) << "D did not pan";

  // Ctrl + four times: x2 text, the narration line's glyphs about twice as tall.
  const int rows_small = rows_with(stepped, 0, 120, narration);
  key("ctrl+equal ctrl+equal ctrl+equal ctrl+equal");
  const int rows_large = rows_with(capture(window, dir.file("large.xwd")), 0, 160, narration);
  EXPECT_GE(rows_large, rows_small * 17 / 10) << rows_small << " rows of narration, then " << rows_large;
  EXPECT_TRUE(viewer.running()) << "the viewer exited";
}

}  // namespace
