// export_chrome: streams a trace into Chrome trace event JSON (see export_chrome.h). Events are
// formatted by hand into a buffer: a nlohmann object of a multi-million-event trace would hold
// gigabytes and take minutes.
#include "formats/export_chrome.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "trace/error.h"
#include "trace/saturate.h"

namespace dpscope::formats {
namespace {

using trace::detail::saturating_add;
using trace::detail::saturating_sub;

// Length of the valid UTF-8 sequence starting at text[i], 0 if the bytes there are not one.
size_t utf8_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t n = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size() || byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

// The output file behind a large buffer. Removes the file if destroyed before close(), so a
// failed export leaves no half-written JSON behind.
class JsonFile {
 public:
  explicit JsonFile(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "wb")) {
    if (!file_) fail("cannot be created", errno);
    buffer_.reserve(kFlushBytes + 4096);
  }
  ~JsonFile() {
    if (file_) {
      std::fclose(file_);
      std::remove(path_.c_str());
    }
  }
  JsonFile(const JsonFile&) = delete;
  JsonFile& operator=(const JsonFile&) = delete;

  void raw(std::string_view text) {
    buffer_.append(text);
    if (buffer_.size() >= kFlushBytes) flush();
  }
  void integer(int64_t value) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof(digits), value).ptr;
    buffer_.append(digits, end);
  }
  // Nanoseconds as microseconds with three exact decimals: "12.345".
  void micros(int64_t ns) {
    // The magnitude as unsigned: -INT64_MIN does not fit in an int64_t.
    uint64_t magnitude = static_cast<uint64_t>(ns);
    if (ns < 0) {
      buffer_ += '-';
      magnitude = ~magnitude + 1;
    }
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof(digits), magnitude / 1000).ptr;
    buffer_.append(digits, end);
    const int frac = static_cast<int>(magnitude % 1000);
    const char decimals[5] = {'.', char('0' + frac / 100), char('0' + frac / 10 % 10),
                              char('0' + frac % 10), '\0'};
    buffer_.append(decimals, 4);
  }
  // A JSON string; invalid UTF-8 becomes U+FFFD so strict parsers accept the file.
  void string(std::string_view text) {
    buffer_ += '"';
    for (size_t i = 0; i < text.size();) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c >= 0x80) {
        const size_t n = utf8_length(text, i);
        if (n == 0) {
          buffer_ += "\xEF\xBF\xBD";
          ++i;
        } else {
          buffer_.append(text.substr(i, n));
          i += n;
        }
        continue;
      }
      if (c == '"' || c == '\\') {
        buffer_ += '\\';
        buffer_ += char(c);
      } else if (c < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
        buffer_ += escaped;
      } else {
        buffer_ += char(c);
      }
      ++i;
    }
    buffer_ += '"';
  }
  // Starts the next element of traceEvents.
  void next_event() {
    raw(events_ == 0 ? "\n" : ",\n");
    ++events_;
  }

  // Writes out the rest and closes the file; returns its size.
  int64_t close() {
    flush();
    FILE* file = file_;
    file_ = nullptr;
    if (std::fclose(file) != 0) {
      const int error = errno;
      std::remove(path_.c_str());
      fail("could not be written completely", error);
    }
    return bytes_;
  }
  int64_t events() const { return events_; }

 private:
  static constexpr size_t kFlushBytes = size_t{1} << 20;

  void flush() {
    if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
      fail("could not be written completely", errno);
    }
    bytes_ += static_cast<int64_t>(buffer_.size());
    buffer_.clear();
  }
  [[noreturn]] void fail(const char* what, int error) {
    throw trace::TraceError(path_ + ": the Chrome trace " + what + " (" + std::strerror(error) +
                     "); check that its directory exists, is writable and has space");
  }

  std::string path_;
  FILE* file_;
  std::string buffer_;
  int64_t bytes_ = 0;
  int64_t events_ = 0;
};

bool is_collective(trace::EventKind kind) {
  return kind == trace::EventKind::Collective || kind == trace::EventKind::CollectiveWait;
}

// The op column by name: a CollectiveOp for collectives and their waits, a UnitState for unit
// states; a plain number for anything else.
void write_op(JsonFile& out, const trace::Event& e) {
  if (is_collective(e.kind)) out.string(to_string(static_cast<trace::CollectiveOp>(e.op)));
  else if (e.kind == trace::EventKind::UnitState) out.string(to_string(static_cast<trace::UnitState>(e.op)));
  else out.integer(e.op);
}

void write_name(JsonFile& out, const trace::Event& e, const std::vector<std::string>& names) {
  if (e.name >= 0 && static_cast<size_t>(e.name) < names.size() &&
      !names[static_cast<size_t>(e.name)].empty()) {
    out.string(names[static_cast<size_t>(e.name)]);
    return;
  }
  // Every piece below is plain ASCII: no escaping needed.
  out.raw("\"");
  switch (e.kind) {
    case trace::EventKind::Hook:
      out.raw("hook");
      if (e.param != trace::kNone) {
        out.raw(" p");
        out.integer(e.param);
      }
      break;
    case trace::EventKind::BucketReady:
    case trace::EventKind::BucketLaunch:
    case trace::EventKind::BucketDone:
      out.raw(to_string(e.kind));
      if (e.bucket != trace::kNone) {
        out.raw(" b");
        out.integer(e.bucket);
      }
      break;
    case trace::EventKind::Collective:
    case trace::EventKind::CollectiveWait:
      if (e.kind == trace::EventKind::CollectiveWait) out.raw("wait ");
      out.raw(e.op == 0xff ? "collective" : to_string(static_cast<trace::CollectiveOp>(e.op)));
      if (e.seq != trace::kNone64) {
        out.raw(" #");
        out.integer(e.seq);
      }
      break;
    case trace::EventKind::UnitState:
      out.raw(e.op == 0xff ? "unit" : to_string(static_cast<trace::UnitState>(e.op)));
      if (e.unit != trace::kNone) {
        out.raw(" u");
        out.integer(e.unit);
      }
      break;
    default:
      out.raw(to_string(e.kind));
  }
  out.raw("\"");
}

void write_args(JsonFile& out, const trace::Event& e, int64_t t0) {
  bool first = true;
  const auto key = [&](const char* name) {
    out.raw(first ? "\"" : ",\"");
    out.raw(name);
    out.raw("\":");
    first = false;
  };
  const auto int_field = [&](const char* name, int64_t value, int64_t none) {
    if (value == none) return;
    key(name);
    out.integer(value);
  };
  out.raw(",\"args\":{");
  int_field("iteration", e.iteration, trace::kNone);
  int_field("param", e.param, trace::kNone);
  int_field("bucket", e.bucket, trace::kNone);
  int_field("unit", e.unit, trace::kNone);
  if (e.op != 0xff) {
    key("op");
    write_op(out, e);
  }
  int_field("seq", e.seq, trace::kNone64);
  int_field("bytes", e.bytes, trace::kNone64);
  if (e.dtype != 0xff) {
    key("dtype");
    out.string(to_string(static_cast<trace::DType>(e.dtype)));
  }
  int_field("value", e.value, trace::kNone64);
  int_field("grp", e.grp, trace::kNone);
  if (e.enqueue_ns != trace::kNone64) {
    key("enqueue_ns");
    out.integer(saturating_sub(e.enqueue_ns, t0));
  }
  int_field("flags", e.flags, 0);
  // The recording thread's CPU time over the span (Note [Thread CPU time]); not the raw clock
  // values, which mean nothing outside their thread.
  if (e.cpu_begin_ns != trace::kNone64 && e.cpu_end_ns != trace::kNone64) {
    key("cpu_ns");
    out.integer(saturating_sub(e.cpu_end_ns, e.cpu_begin_ns));
  }
  out.raw("}");
}

void write_event(JsonFile& out, const trace::Event& e, const std::vector<std::string>& names,
                 int64_t t0) {
  const bool instant = e.end_ns <= e.begin_ns;
  out.next_event();
  out.raw(instant ? "{\"ph\":\"i\",\"s\":\"t\",\"pid\":" : "{\"ph\":\"X\",\"pid\":");
  out.integer(e.rank);
  out.raw(",\"tid\":");
  out.integer(e.lane);
  out.raw(",\"ts\":");
  out.micros(saturating_sub(e.begin_ns, t0));
  if (!instant) {
    out.raw(",\"dur\":");
    out.micros(saturating_sub(e.end_ns, e.begin_ns));
  }
  out.raw(",\"name\":");
  write_name(out, e, names);
  out.raw(",\"cat\":\"");
  out.raw(to_string(e.kind));
  out.raw("\"");
  write_args(out, e, t0);
  out.raw("}");
}

// An "M" event `name` whose args are {arg: text}, or {arg: number} without text; of a thread
// when tid is given, else of a process.
void write_metadata(JsonFile& out, const char* name, int32_t pid, const trace::LaneId* tid,
                    const char* arg, const std::string* text, int64_t number) {
  out.next_event();
  out.raw("{\"ph\":\"M\",\"pid\":");
  out.integer(pid);
  if (tid) {
    out.raw(",\"tid\":");
    out.integer(*tid);
  }
  out.raw(",\"name\":\"");
  out.raw(name);
  out.raw("\",\"args\":{\"");
  out.raw(arg);
  out.raw("\":");
  if (text) out.string(*text);
  else out.integer(number);
  out.raw("}}");
}

// One counter event with the stacked categories (or the allocator read-outs) seen so far.
void write_counter(JsonFile& out, const char* name, int32_t rank, int64_t ts,
                   const std::array<int64_t, trace::kMemoryCategoryCount>& current,
                   const std::array<bool, trace::kMemoryCategoryCount>& seen, bool stacked) {
  out.next_event();
  out.raw("{\"ph\":\"C\",\"pid\":");
  out.integer(rank);
  out.raw(",\"ts\":");
  out.micros(ts);
  out.raw(",\"name\":\"");
  out.raw(name);
  out.raw("\",\"args\":{");
  bool first_arg = true;
  for (size_t c = 0; c < trace::kMemoryCategoryCount; ++c) {
    if (!seen[c] || trace::is_stacked(static_cast<trace::MemoryCategory>(c)) != stacked) continue;
    out.raw(first_arg ? "\"" : ",\"");
    out.raw(to_string(static_cast<trace::MemoryCategory>(c)));
    out.raw("\":");
    out.integer(current[c]);
    first_arg = false;
  }
  out.raw("}}");
}

// Memory samples of one rank (ordered by time) as counters: the full state after all samples
// of one timestamp, on "memory" when a stacked category changed and on "memory (allocator)"
// when an allocator category did.
void write_memory(JsonFile& out, int32_t rank, const trace::MemorySample* begin, const trace::MemorySample* end,
                  int64_t t0) {
  std::array<int64_t, trace::kMemoryCategoryCount> current{};
  std::array<bool, trace::kMemoryCategoryCount> seen{};
  bool stacked_changed = false, allocator_changed = false;
  for (const trace::MemorySample* s = begin; s != end; ++s) {
    const auto c = static_cast<size_t>(s->category);
    if (c >= trace::kMemoryCategoryCount) continue;
    current[c] = s->bytes;
    seen[c] = true;
    (trace::is_stacked(s->category) ? stacked_changed : allocator_changed) = true;
    if (s + 1 != end && s[1].ts_ns == s->ts_ns) continue;
    if (stacked_changed) {
      write_counter(out, "memory", rank, saturating_sub(s->ts_ns, t0), current, seen, true);
    }
    if (allocator_changed) {
      write_counter(out, "memory (allocator)", rank, saturating_sub(s->ts_ns, t0), current, seen,
                    false);
    }
    stacked_changed = allocator_changed = false;
  }
}

// Where a flow arrow attaches: inside its slice (the middle, so a viewer cannot bind it to a
// neighbour that starts or ends at the same time), or at an instant.
struct Anchor {
  trace::LaneId lane = 0;
  int64_t ts = 0;
};

Anchor anchor_of(const trace::Event& e) {
  return Anchor{e.lane, saturating_add(e.begin_ns,
                                       std::max<int64_t>(saturating_sub(e.end_ns, e.begin_ns), 0) / 2)};
}

// The flow ends of one rank, collected while its events stream by and written when the next
// rank starts: hooks to their bucket's BucketReady, BucketReady to the bucket's Collective.
class RankFlows {
 public:
  void add(const trace::Event& e) {
    if (e.bucket == trace::kNone) return;
    const Key key{e.iteration, e.bucket};
    if (e.kind == trace::EventKind::Hook) hooks_.emplace_back(key, anchor_of(e));
    else if (e.kind == trace::EventKind::BucketReady) earliest(ready_, key, anchor_of(e));
    else if (e.kind == trace::EventKind::Collective) earliest(collective_, key, anchor_of(e));
  }

  void write(JsonFile& out, int32_t rank, int64_t t0, int64_t& next_id) {
    for (const auto& [key, hook] : hooks_) {
      const auto ready = ready_.find(key);
      if (ready != ready_.end()) {
        write_flow(out, "hook to bucket", rank, hook, ready->second, t0, next_id++);
      }
    }
    for (const auto& [key, ready] : ready_) {
      const auto collective = collective_.find(key);
      if (collective != collective_.end()) {
        write_flow(out, "bucket to collective", rank, ready, collective->second, t0, next_id++);
      }
    }
    hooks_.clear();
    ready_.clear();
    collective_.clear();
  }

 private:
  using Key = std::pair<int32_t, int32_t>;  // (iteration, bucket)

  static void earliest(std::map<Key, Anchor>& anchors, const Key& key, const Anchor& anchor) {
    const auto [it, inserted] = anchors.emplace(key, anchor);
    if (!inserted && anchor.ts < it->second.ts) it->second = anchor;
  }

  static void write_flow(JsonFile& out, const char* name, int32_t rank, const Anchor& from,
                         const Anchor& to, int64_t t0, int64_t id) {
    using End = std::pair<const char*, const Anchor*>;  // (phase, where)
    for (const auto& [phase, at] : {End{"s", &from}, End{"f", &to}}) {
      out.next_event();
      out.raw("{\"ph\":\"");
      out.raw(phase);
      out.raw("\",\"bp\":\"e\",\"id\":");
      out.integer(id);
      out.raw(",\"pid\":");
      out.integer(rank);
      out.raw(",\"tid\":");
      out.integer(at->lane);
      out.raw(",\"ts\":");
      out.micros(saturating_sub(at->ts, t0));
      out.raw(",\"name\":\"");
      out.raw(name);
      out.raw("\",\"cat\":\"flow\"}");
    }
  }

  std::vector<std::pair<Key, Anchor>> hooks_;
  std::map<Key, Anchor> ready_;
  std::map<Key, Anchor> collective_;
};

}  // namespace

ChromeExportSummary export_chrome(trace::Reader& reader, const std::string& out_path,
                                  const std::function<void(double)>& progress) {
  std::error_code ignored;
  if (std::filesystem::equivalent(out_path, reader.path(), ignored)) {
    throw trace::TraceError(out_path + ": is the trace being exported; choose another output file");
  }
  const auto names = reader.names();
  const auto lanes = reader.lanes();
  const auto memory = reader.memory();

  // Time zero: the earliest event or memory sample, so no timestamp is negative.
  int64_t t0 = std::numeric_limits<int64_t>::max();
  if (reader.event_count() > 0) t0 = reader.time_range().first;
  for (const trace::MemorySample& s : memory) t0 = std::min(t0, s.ts_ns);
  if (t0 == std::numeric_limits<int64_t>::max()) t0 = 0;

  std::set<int32_t> ranks;
  for (const trace::RankInfo& r : reader.ranks()) ranks.insert(r.rank);
  for (const trace::LaneInfo& l : lanes) ranks.insert(l.rank);

  JsonFile out(out_path);
  out.raw("{\"traceEvents\":[");
  for (int32_t rank : ranks) {
    const std::string name = "rank " + std::to_string(rank);
    write_metadata(out, "process_name", rank, nullptr, "name", &name, 0);
    write_metadata(out, "process_sort_index", rank, nullptr, "sort_index", nullptr, rank);
  }
  for (const trace::LaneInfo& l : lanes) {
    write_metadata(out, "thread_name", l.rank, &l.lane, "name", &l.name, 0);
    write_metadata(out, "thread_sort_index", l.rank, &l.lane, "sort_index", nullptr, l.lane);
  }

  RankFlows flows;
  int64_t next_flow_id = 1;
  int32_t flow_rank = trace::kNone;
  reader.for_each_event(
      [&](const trace::Event& e) {
        if (e.rank != flow_rank) {
          flows.write(out, flow_rank, t0, next_flow_id);
          flow_rank = e.rank;
        }
        write_event(out, e, names, t0);
        flows.add(e);
        return true;
      },
      progress);
  flows.write(out, flow_rank, t0, next_flow_id);

  for (auto begin = memory.begin(); begin != memory.end();) {
    const auto end = std::find_if(begin, memory.end(),
                                  [&](const trace::MemorySample& s) { return s.rank != begin->rank; });
    write_memory(out, begin->rank, &*begin, &*begin + (end - begin), t0);
    begin = end;
  }
  out.raw("\n],\"displayTimeUnit\":\"ns\"}\n");
  const int64_t events = out.events();
  return ChromeExportSummary{events, out.close()};
}

}  // namespace dpscope::formats
