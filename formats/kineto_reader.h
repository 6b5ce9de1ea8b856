// The streaming reader of PyTorch profiler (Kineto) trace files: a `.json` or `.json.gz` file read
// through zlib and RapidJSON's SAX parser, handed to a visitor one event at a time, so that memory
// does not grow with the file (docs/kineto.md, "Reading"). Knows JSON and Kineto's fields, not
// dpscope's trace: the mapping is kineto_import.cpp's.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace dpscope::formats {

// A file that cannot be imported: the message names the file, the byte offset where one is known,
// what is wrong and what to do. One line.
class KinetoError : public std::runtime_error {
 public:
  explicit KinetoError(const std::string& message) : std::runtime_error(message) {}
};

inline constexpr int64_t kAbsent = INT64_MIN;  // a numeric field the event does not have

// The arguments of an event that the import reads (`args` in the JSON); everything else in
// `args` is skipped. Numbers are kAbsent, strings empty, when the event lacks them.
struct KinetoArgs {
  int64_t stream = kAbsent;          // GPU events: the stream
  int64_t device = kAbsent;          // GPU events: the device
  int64_t correlation = kAbsent;     // a launch (cuda_runtime) and the kernel it launched
  // CUDA event syncs (cuda_sync's Stream Wait Event, Event Sync): the stream the event was
  // recorded on, and the correlation of the cudaEventRecord call that recorded it.
  int64_t wait_on_stream = kAbsent;
  int64_t wait_on_event_record_correlation = kAbsent;
  int64_t in_msg_nelems = kAbsent;   // collectives: elements of the input ("In msg nelems")
  int64_t seq = kAbsent;             // record_param_comms: the collective's number in its group ("Seq")
  std::string collective_name;       // collectives: "allreduce", "broadcast", ...
  std::string dtype;                 // collectives: "Float", "Half", ...
  std::string process_group;         // collectives: "Process Group Name"
  int64_t first_input_numel = kAbsent;  // the product of the first "Input Dims" entry
  std::string first_input_type;         // the first "Input type" entry ("float", ...)
  // [memory] instants: the allocator's totals, and whose allocator (Device Type 0 = CPU).
  int64_t total_allocated = kAbsent;
  int64_t total_reserved = kAbsent;
  int64_t device_type = kAbsent;
  std::string name;  // metadata events (ph "M"): the process or thread name
};

// One event of `traceEvents` as the file has it. pid and tid are kept as text (Kineto writes
// numbers, and strings such as "Spans" for its own rows).
struct KinetoEvent {
  char ph = 0;  // 'X' complete, 'i'/'I' instant, 'M' metadata, 's'/'f' flow, ...; 0 when absent
  std::string cat;
  std::string name;
  std::string pid;
  std::string tid;
  bool has_name = false;
  bool has_ts = false;
  bool has_dur = false;
  double ts_us = 0;   // microseconds, as written
  double dur_us = 0;  // microseconds
  KinetoArgs args;
  int64_t offset = 0;  // byte offset of the event's opening brace in the (decompressed) JSON
};

// What the file says about its run beside the events.
struct KinetoRunInfo {
  enum class Form { Object, List };  // {"traceEvents": [...]}, or the older bare list
  Form form = Form::Object;
  bool has_distributed_info = false;
  int64_t rank = kAbsent;        // distributedInfo.rank
  int64_t world_size = kAbsent;  // distributedInfo.world_size
  std::string backend;           // distributedInfo.backend
  std::string nccl_version;      // distributedInfo.nccl_version
  int64_t base_time_ns = 0;      // baseTimeNanoseconds: added to every ts (0 when absent)
  // Some event's ts is written as a JSON fraction (1.5, 2.0): nanosecond timestamps, which HTA
  // rounds to whole microseconds (analysis/gpu_breakdown.h, Note [GPU breakdown]).
  bool fractional_ts = false;
  int64_t events = 0;            // events handed to the visitor
};

// Reads `path` (plain JSON, or gzip: told by its magic bytes, not its name) from start to end,
// calling `visit` for each event of traceEvents in file order; the KinetoEvent is reused between
// calls. Returns what the file says about its run; distributedInfo and baseTimeNanoseconds may
// come after the events, so they are known only at the end. Throws KinetoError naming the file
// and the byte offset for: a missing or unreadable file, a damaged or truncated gzip stream
// (offset in the compressed file), invalid JSON (offset in the JSON), JSON that is not a trace
// (no traceEvents, events that are not objects), and an exception thrown by `visit` (its message
// is kept, the file and offset put in front). Thread-safety: none shared; one call per thread.
KinetoRunInfo read_kineto_file(const std::string& path,
                               const std::function<void(const KinetoEvent&)>& visit);

}  // namespace dpscope::formats
