// Work the viewer does off its frame loop (loading, analyses, the cluster clock, what-if lanes,
// the critical path): one place that decides how it runs, so that the same panels poll it on
// the desktop, where it runs on a thread, and in the browser, where there are none.
#pragma once

#include <chrono>
#include <future>
#include <type_traits>
#include <utility>

namespace dpscope::view {

// Note [Background work in the browser]
// The desktop viewer starts each piece of slow work with std::async on a thread and polls its
// future once a frame, so that the frame loop goes on drawing (a progress bar, the measured
// clock while the cluster clock is built). The browser build (scripts/web, docs/web.md) has no
// threads: WebAssembly threads need SharedArrayBuffer, which a page gets only when its server
// sends cross-origin isolation headers, and a gallery must open from any static web server.
// There the work is deferred, and runs when a frame first asks whether it is done
// (background_done), in that frame: the frame before it has drawn what the wait looks like
// ("loading", "building the cluster clock"), and the frame after shows the result. A frame
// that runs the work is as long as the work; nothing else changes.

// Starts `work(args...)` in the background (a thread on the desktop, deferred in the browser);
// the arguments are copied, as std::async copies them.
template <class Work, class... Args>
std::future<std::invoke_result_t<std::decay_t<Work>, std::decay_t<Args>...>> start_background(Work&& work,
                                                                                              Args&&... args) {
#ifdef __EMSCRIPTEN__
  constexpr auto policy = std::launch::deferred;
#else
  constexpr auto policy = std::launch::async;
#endif
  return std::async(policy, std::forward<Work>(work), std::forward<Args>(args)...);
}

// Whether `pending` (valid, from start_background) has its result: at once on the desktop; in
// the browser, deferred work is run here first. Thread-safety: the thread that polls it.
template <class T>
bool background_done(const std::future<T>& pending) {
  const std::future_status status = pending.wait_for(std::chrono::seconds(0));
  if (status == std::future_status::deferred) {
    pending.wait();
    return true;
  }
  return status == std::future_status::ready;
}

}  // namespace dpscope::view
