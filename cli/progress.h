// Progress of long CLI work on stderr: one line per tenth done, with the seconds so far — plain
// lines, so they read the same in a terminal, a log file and CI output.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace dpscope::cli {

// Work on fewer events than this finishes in a second or two: progress lines would be noise.
inline constexpr int64_t kProgressMinEvents = 1'000'000;

// A progress callback for trace/'s long operations (fraction done in [0, 1]) that prints
// "<what>: 30% (1.2 s)" at each new tenth below 100 %, or an empty callback when `enabled` is
// false (small inputs finish before progress would say anything).
inline std::function<void(double)> progress_lines(std::string what, bool enabled = true) {
  if (!enabled) return {};
  return [what = std::move(what), start = std::chrono::steady_clock::now(),
          reported = 0](double fraction) mutable {
    const int tenths = static_cast<int>(fraction * 10 + 1e-9);
    if (tenths <= reported || tenths >= 10) return;
    reported = tenths;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%s: %d%% (%.1f s)\n", what.c_str(), tenths * 10, seconds);
  };
}

}  // namespace dpscope::cli
