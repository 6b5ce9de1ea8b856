// A recording process for test_recorder_crash: records numbered Mark events into a trace and
// ends the way its mode says, so the test can check what each kind of ending leaves behind.
//   crash_child stream PATH  records until stopped (at most kStreamLimit events, then waits
//                            60 s to be stopped and exits 4);
//                            after each flush prints "committed N"
//   crash_child throw PATH   records 1234 events, then lets an exception escape main
//   crash_child exit PATH    records 777 events, then calls std::exit(3) without closing
//   crash_child complete PATH records 100 events and ends normally
// PATH "-" means $DPSCOPE_TRACE_DIR/rank$RANK.sqlite as rank $RANK, as under `dpscope launch`.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "trace/recorder.h"

using namespace dpscope::trace;

namespace {

// A stream nobody stops must not fill the disk: ~80 MB of events at most.
constexpr int64_t kStreamLimit = 1000000;

void record_numbered(Recorder& recorder, NameId name, int64_t from, int64_t count) {
  for (int64_t i = from; i < from + count; ++i) {
    Event e;
    e.kind = EventKind::Mark;
    e.name = name;
    e.begin_ns = e.end_ns = now_ns();
    e.value = i;
    recorder.record(TraceLevel::Full, e);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: crash_child stream|throw|exit|complete PATH\n");
    return 2;
  }
  const std::string mode = argv[1];
  RecorderOptions options;
  options.path = argv[2];
  if (options.path == "-") {
    const char* dir = std::getenv("DPSCOPE_TRACE_DIR");
    const char* rank = std::getenv("RANK");
    if (!dir || !rank) {
      std::fprintf(stderr, "crash_child: PATH - needs DPSCOPE_TRACE_DIR and RANK\n");
      return 2;
    }
    options.rank = std::atoi(rank);
    options.path = std::string(dir) + "/rank" + rank + ".sqlite";
  }
  options.flush_interval = std::chrono::milliseconds(5);
  // Owned by a static-free heap pointer: only the flush guards may close it.
  auto* recorder = new Recorder(options);
  const NameId name = recorder->name("numbered");
  if (mode == "stream") {
    for (int64_t next = 0; next < kStreamLimit; next += 1000) {
      record_numbered(*recorder, name, next, 1000);
      recorder->flush();
      std::printf("committed %lld\n", static_cast<long long>(next + 1000));
      std::fflush(stdout);
    }
    // At the cap, stop recording but stay alive to be stopped: a signal's flush runs on the
    // guards' thread, and this thread must not end the process normally before it re-raises.
    std::this_thread::sleep_for(std::chrono::seconds(60));
    std::fprintf(stderr, "crash_child: nobody stopped the stream\n");
    return 4;
  }
  if (mode == "throw") {
    record_numbered(*recorder, name, 0, 1234);
    throw std::runtime_error("boom");
  }
  if (mode == "exit") {
    record_numbered(*recorder, name, 0, 777);
    std::exit(3);
  }
  if (mode == "complete") {
    record_numbered(*recorder, name, 0, 100);
    delete recorder;
    return 0;
  }
  std::fprintf(stderr, "crash_child: unknown mode %s\n", mode.c_str());
  return 2;
}
