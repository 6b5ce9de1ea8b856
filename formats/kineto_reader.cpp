// The streaming Kineto reader: zlib's gzread (which reads plain files as they are) behind a
// RapidJSON input stream, and a SAX handler that keeps one event at a time. See
// docs/kineto.md, "Reading", for why RapidJSON's SAX reader.
#include "formats/kineto_reader.h"

#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

namespace dpscope::formats {
namespace {

// A RapidJSON input stream over a gzFile: a fixed buffer refilled by gzread, so the file is never
// in memory as a whole. A gzip error ends the stream ('\0') and is kept for the caller, who tells
// it from a JSON error that the early end causes.
class GzStream {
 public:
  using Ch = char;

  explicit GzStream(const std::string& path) : path_(path) {
    file_ = gzopen(path.c_str(), "rb");
    if (!file_) {
      throw KinetoError(path + ": cannot open it (" + std::strerror(errno) +
                        "); check the path and that it is readable");
    }
    gzbuffer(file_, 1 << 18);
    buffer_.resize(1 << 18);
  }
  ~GzStream() {
    if (file_) gzclose(file_);
  }
  GzStream(const GzStream&) = delete;
  GzStream& operator=(const GzStream&) = delete;

  Ch Peek() {
    if (at_ == size_) refill();
    return at_ < size_ ? buffer_[at_] : '\0';
  }
  Ch Take() {
    if (at_ == size_) refill();
    if (at_ >= size_) return '\0';
    return buffer_[at_++];
  }
  size_t Tell() const { return consumed_ + at_; }
  // Writing is not supported (RapidJSON's in-situ parsing is not used).
  Ch* PutBegin() { return nullptr; }
  void Put(Ch) {}
  void Flush() {}
  size_t PutEnd(Ch*) { return 0; }

  // The gzip error that ended the stream early, with the compressed offset; "" when none.
  const std::string& gzip_error() const { return gzip_error_; }

 private:
  void refill() {
    if (done_) return;
    consumed_ += size_;
    at_ = 0;
    size_ = 0;
    const int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    if (n > 0) {
      size_ = static_cast<size_t>(n);
      return;
    }
    done_ = true;
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      gzip_error_ = path_ + ": at byte " + std::to_string(gzoffset(file_)) +
                    " of the compressed file: the gzip stream is damaged or cut short (" +
                    (message ? message : "read error") +
                    "); copy the file again from where the profiler wrote it";
    }
  }

  std::string path_;
  gzFile file_ = nullptr;
  std::vector<char> buffer_;
  size_t at_ = 0, size_ = 0, consumed_ = 0;
  bool done_ = false;
  std::string gzip_error_;
};

// Where the SAX handler is: the kind of each open container.
enum class Ctx : uint8_t {
  RootObject, RootList, TraceEvents, Event, Args, InputDims, InputDimsEntry, InputTypes,
  DistributedInfo, Skip
};

struct Frame {
  Ctx ctx;
  std::string key;  // the last key read in this object
  int entries = 0;  // arrays: entries begun so far
};

// The SAX handler: a stack of frames, one KinetoEvent filled field by field and handed to the
// visitor when its object closes. Returns false (ending the parse) after an error it records.
class Handler : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Handler> {
 public:
  Handler(GzStream& stream, const std::function<void(const KinetoEvent&)>& visit)
      : stream_(stream), visit_(visit) {}

  KinetoRunInfo info;
  std::string error;      // why the handler stopped the parse
  size_t error_at = 0;    // the byte offset of that

  bool Null() { return scalar_end(); }
  bool Bool(bool) { return scalar_end(); }
  bool Int(int v) { return number(double(v), v); }
  bool Uint(unsigned v) { return number(double(v), int64_t(v)); }
  bool Int64(int64_t v) { return number(double(v), v); }
  bool Uint64(uint64_t v) { return number(double(v), v > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(v)); }
  bool Double(double v) {
    if (!stack_.empty() && stack_.back().ctx == Ctx::Event && stack_.back().key == "ts") {
      info.fractional_ts = true;
    }
    return number(v, std::isfinite(v) ? int64_t(std::llround(v)) : kAbsent);
  }
  bool String(const char* s, rapidjson::SizeType n, bool) { return string(std::string_view(s, n)); }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    stack_.back().key.assign(s, n);
    return true;
  }
  bool StartObject() { return start(true); }
  bool EndObject(rapidjson::SizeType) { return end(); }
  bool StartArray() { return start(false); }
  bool EndArray(rapidjson::SizeType) { return end(); }

  bool saw_trace_events() const { return saw_trace_events_; }

 private:
  bool fail(const std::string& why) {
    error = why;
    error_at = stream_.Tell();
    return false;
  }
  // A scalar where an event must be: the list is not a list of events.
  bool scalar_end() {
    if (stack_.empty()) return fail("the file is a single JSON value, not a trace");
    const Ctx c = stack_.back().ctx;
    if (c == Ctx::TraceEvents || c == Ctx::RootList) {
      return fail("an entry of the event list is not an object, so this is not a PyTorch profiler trace");
    }
    return true;
  }

  bool number(double d, int64_t i) {
    if (!scalar_end()) return false;
    Frame& f = stack_.back();
    const std::string& k = f.key;
    switch (f.ctx) {
      case Ctx::RootObject:
        if (k == "baseTimeNanoseconds") info.base_time_ns = i;
        break;
      case Ctx::DistributedInfo:
        if (k == "rank") info.rank = i;
        else if (k == "world_size") info.world_size = i;
        break;
      case Ctx::Event:
        if (k == "ts") { event_.ts_us = d; event_.has_ts = true; }
        else if (k == "dur") { event_.dur_us = d; event_.has_dur = true; }
        else if (k == "pid") event_.pid = std::to_string(i);
        else if (k == "tid") event_.tid = std::to_string(i);
        break;
      case Ctx::Args: number_arg(k, i); break;
      case Ctx::InputDimsEntry:
        if (stack_[stack_.size() - 2].entries == 1) {  // the first entry of Input Dims
          KinetoArgs& a = event_.args;
          a.first_input_numel = (a.first_input_numel == kAbsent ? 1 : a.first_input_numel) * i;
        }
        break;
      default: break;
    }
    return true;
  }

  void number_arg(const std::string& k, int64_t i) {
    KinetoArgs& a = event_.args;
    if (k == "stream") a.stream = i;
    else if (k == "device") a.device = i;
    else if (k == "correlation") a.correlation = i;
    else if (k == "wait_on_stream") a.wait_on_stream = i;
    else if (k == "wait_on_cuda_event_record_corr_id") a.wait_on_event_record_correlation = i;
    else if (k == "In msg nelems") a.in_msg_nelems = i;
    else if (k == "Seq") a.seq = i;
    else if (k == "Total Allocated") a.total_allocated = i;
    else if (k == "Total Reserved") a.total_reserved = i;
    else if (k == "Device Type") a.device_type = i;
  }

  bool string(std::string_view s) {
    if (!scalar_end()) return false;
    Frame& f = stack_.back();
    const std::string& k = f.key;
    switch (f.ctx) {
      case Ctx::DistributedInfo:
        if (k == "backend") info.backend = s;
        else if (k == "nccl_version") info.nccl_version = s;
        break;
      case Ctx::Event:
        if (k == "ph") event_.ph = s.empty() ? 0 : s[0];
        else if (k == "cat") event_.cat = s;
        else if (k == "name") { event_.name = s; event_.has_name = true; }
        else if (k == "pid") event_.pid = s;
        else if (k == "tid") event_.tid = s;
        break;
      case Ctx::Args: {
        KinetoArgs& a = event_.args;
        if (k == "Collective name") a.collective_name = s;
        else if (k == "dtype") a.dtype = s;
        else if (k == "Process Group Name") a.process_group = s;
        else if (k == "name") a.name = s;
        break;
      }
      case Ctx::InputTypes:
        if (f.entries == 0) event_.args.first_input_type = s;
        ++f.entries;
        break;
      default: break;
    }
    return true;
  }

  // The context a container opening inside the current one gets.
  Ctx child(bool object) {
    if (stack_.empty()) {
      info.form = object ? KinetoRunInfo::Form::Object : KinetoRunInfo::Form::List;
      return object ? Ctx::RootObject : Ctx::RootList;
    }
    Frame& f = stack_.back();
    switch (f.ctx) {
      case Ctx::RootObject:
        if (f.key == "traceEvents") return object ? Ctx::Skip : Ctx::TraceEvents;
        if (f.key == "distributedInfo" && object) return Ctx::DistributedInfo;
        return Ctx::Skip;
      case Ctx::TraceEvents:
      case Ctx::RootList: return object ? Ctx::Event : Ctx::Skip;
      case Ctx::Event: return object && f.key == "args" ? Ctx::Args : Ctx::Skip;
      case Ctx::Args:
        if (!object && f.key == "Input Dims") return Ctx::InputDims;
        if (!object && f.key == "Input type") return Ctx::InputTypes;
        return Ctx::Skip;
      case Ctx::InputDims: ++f.entries; return object ? Ctx::Skip : Ctx::InputDimsEntry;
      default: return Ctx::Skip;
    }
  }

  bool start(bool object) {
    if (!stack_.empty()) {
      const Ctx c = stack_.back().ctx;
      if ((c == Ctx::TraceEvents || c == Ctx::RootList) && !object) {
        return fail("an entry of the event list is a list, not an event object");
      }
      if (c == Ctx::RootObject && stack_.back().key == "traceEvents") {
        if (object) return fail("traceEvents is an object, not a list of events");
        saw_trace_events_ = true;
      }
    }
    const Ctx c = child(object);
    if (c == Ctx::Event) {
      event_ = KinetoEvent{};
      event_.offset = static_cast<int64_t>(stream_.Tell()) - 1;
    }
    if (c == Ctx::DistributedInfo) info.has_distributed_info = true;
    stack_.push_back(Frame{c, {}, 0});
    return true;
  }

  bool end() {
    const Ctx c = stack_.back().ctx;
    stack_.pop_back();
    if (c == Ctx::RootList) saw_trace_events_ = true;
    if (c != Ctx::Event) return true;
    try {
      visit_(event_);
    } catch (const std::exception& e) {
      error = e.what();
      error_at = static_cast<size_t>(event_.offset);
      return false;
    }
    ++info.events;
    return true;
  }

  GzStream& stream_;
  const std::function<void(const KinetoEvent&)>& visit_;
  std::vector<Frame> stack_;
  KinetoEvent event_;
  bool saw_trace_events_ = false;
};

}  // namespace

KinetoRunInfo read_kineto_file(const std::string& path,
                               const std::function<void(const KinetoEvent&)>& visit) {
  GzStream stream(path);
  Handler handler(stream, visit);
  rapidjson::Reader reader;
  constexpr unsigned kFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseNanAndInfFlag;
  const rapidjson::ParseResult result = reader.Parse<kFlags>(stream, handler);
  if (!stream.gzip_error().empty()) throw KinetoError(stream.gzip_error());
  if (!handler.error.empty()) {
    throw KinetoError(path + ": at byte " + std::to_string(handler.error_at) + ": " + handler.error);
  }
  if (result.IsError()) {
    throw KinetoError(path + ": at byte " + std::to_string(result.Offset()) + ": invalid JSON (" +
                      rapidjson::GetParseError_En(result.Code()) +
                      "); the file is cut short or not JSON: export the trace again");
  }
  if (!handler.saw_trace_events()) {
    throw KinetoError(path + ": not a PyTorch profiler trace: it has no \"traceEvents\" list; "
                      "give the JSON that torch.profiler's export_chrome_trace or "
                      "tensorboard_trace_handler wrote");
  }
  return handler.info;
}

}  // namespace dpscope::formats
