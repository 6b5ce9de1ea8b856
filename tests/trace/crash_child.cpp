// A recording process for test_recorder_crash: records numbered Mark events into a trace and
// ends the way its mode says, so the test can check what each kind of ending leaves behind.
//   crash_child stream PATH  records forever; after each flush prints "committed N"
//   crash_child throw PATH   records 1234 events, then lets an exception escape main
//   crash_child exit PATH    records 777 events, then calls std::exit(3) without closing
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "trace/recorder.h"

using namespace dpscope::trace;

namespace {

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
    std::fprintf(stderr, "usage: crash_child stream|throw|exit PATH\n");
    return 2;
  }
  const std::string mode = argv[1];
  RecorderOptions options;
  options.path = argv[2];
  options.flush_interval = std::chrono::milliseconds(5);
  // Owned by a static-free heap pointer: only the flush guards may close it.
  auto* recorder = new Recorder(options);
  const NameId name = recorder->name("numbered");
  if (mode == "stream") {
    for (int64_t next = 0;; next += 1000) {
      record_numbered(*recorder, name, next, 1000);
      recorder->flush();
      std::printf("committed %lld\n", static_cast<long long>(next + 1000));
      std::fflush(stdout);
    }
  }
  if (mode == "throw") {
    record_numbered(*recorder, name, 0, 1234);
    throw std::runtime_error("boom");
  }
  if (mode == "exit") {
    record_numbered(*recorder, name, 0, 777);
    std::exit(3);
  }
  std::fprintf(stderr, "crash_child: unknown mode %s\n", mode.c_str());
  return 2;
}
