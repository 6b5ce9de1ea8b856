// What the trace fuzzers do with each input file: every public read of trace/ (Reader's queries
// and bulk scans, stats and both renderings, the Chrome export, merge and re-reading the merge).
// The contract under test: each either works or throws TraceError naming a file it was given.
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "analysis/stats.h"
#include "analysis/stats_report.h"
#include "formats/export_chrome.h"
#include "trace/error.h"
#include "trace/merge.h"
#include "trace/reader.h"

namespace dpscope::fuzz {

inline void remove_trace_files(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
}

// A private directory for the fuzzer's files, made once per process (under TMPDIR, /tmp
// without it) and named after the target; removed when the process exits normally (after a
// crash it stays, with the input that crashed in it).
inline std::string& scratch_path() {
  static std::string dir;
  return dir;
}

inline std::string scratch_dir(const char* target) {
  std::string& dir = scratch_path();
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/dpscope-" + target + "-XXXXXX";
    if (!::mkdtemp(pattern.data())) {
      std::fprintf(stderr, "cannot create a directory %s (TMPDIR)\n", pattern.c_str());
      std::abort();
    }
    dir = pattern;
    std::atexit([] {
      const std::string& d = scratch_path();
      for (const char* name : {"/input.sqlite", "/merged.sqlite", "/merged.sqlite.partial"}) {
        remove_trace_files(d + name);
      }
      std::remove((d + "/out.json").c_str());
      for (const char* name : {"/base-ddp_run.sqlite", "/base-fsdp_rank1.sqlite", "/base-synth.sqlite"}) {
        remove_trace_files(d + name);
      }
      ::rmdir(d.c_str());
    });
  }
  return dir;
}

// A TraceError must name one of the files involved; anything else is a finding.
inline void check_message(const trace::TraceError& error, const std::string& a,
                          const std::string& b) {
  const std::string message = error.what();
  if (message.find(a) == std::string::npos && message.find(b) == std::string::npos) {
    std::fprintf(stderr, "TraceError does not name the file: %s\n", message.c_str());
    std::abort();
  }
  if (message.find('\n') != std::string::npos) {
    std::fprintf(stderr, "TraceError is not one line: %s\n", message.c_str());
    std::abort();
  }
}

// Whether SQLite's own PRAGMA quick_check finds the file sound (its b-trees well formed, their
// keys in order).
inline bool sqlite_finds_sound(const std::string& path) {
  sqlite3* db = nullptr;
  bool sound = false;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* check = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &check, nullptr) == SQLITE_OK &&
        sqlite3_step(check) == SQLITE_ROW) {
      const unsigned char* verdict = sqlite3_column_text(check, 0);
      sound = verdict && std::string(reinterpret_cast<const char*>(verdict)) == "ok";
    }
    sqlite3_finalize(check);
  }
  sqlite3_close(db);
  return sound;
}

// The bulk scans through the page decoder (the Reader's default, Note [Reading pages]) and
// through SQL: where both read the file to its end, they must hand over the same rows. Not on a
// file SQLite's quick_check calls damaged: in a b-tree whose keys are out of order SQL's cursor
// meets a stray cell that a scan resumed at the next rowid seeks past, and neither set of rows
// is the file's (found by fuzz_trace_bytes, 2026-12-06).
inline void compare_scan_paths(trace::Reader& reader) {
  using namespace dpscope::trace;
  auto read = [](Reader& r, std::vector<EventSpan>& spans, std::vector<MemorySample>& samples) {
    const auto [first, last] = r.event_id_range();
    r.scan_event_spans(first, last, [&](const EventSpan* rows, size_t n) {
      spans.insert(spans.end(), rows, rows + n);
      return true;
    });
    const auto [m_first, m_last] = r.memory_rowid_range();
    r.scan_memory(m_first, m_last, [&](const MemorySample* rows, size_t n) {
      samples.insert(samples.end(), rows, rows + n);
      return true;
    });
  };
  std::vector<EventSpan> spans, sql_spans;
  std::vector<MemorySample> samples, sql_samples;
  read(reader, spans, samples);
  try {
    Reader sql(reader.path());
    sql.set_bulk_scan_path(BulkScanPath::Sql);
    read(sql, sql_spans, sql_samples);
  } catch (const TraceError&) {
    return;  // SQLite gave up where the page decoder did not: nothing to compare
  }
  if (!sqlite_finds_sound(reader.path())) return;
  bool same = spans.size() == sql_spans.size() && samples.size() == sql_samples.size();
  for (size_t i = 0; same && i < spans.size(); ++i) {
    const EventSpan &a = spans[i], &b = sql_spans[i];
    same = a.begin_ns == b.begin_ns && a.end_ns == b.end_ns && a.name == b.name &&
           a.seq_or_iteration == b.seq_or_iteration && a.rank == b.rank && a.lane == b.lane &&
           a.bucket_or_unit == b.bucket_or_unit && a.kind == b.kind && a.op == b.op;
  }
  for (size_t i = 0; same && i < samples.size(); ++i) {
    const MemorySample &a = samples[i], &b = sql_samples[i];
    same = a.rank == b.rank && a.ts_ns == b.ts_ns && a.category == b.category && a.bytes == b.bytes;
  }
  if (!same) {
    std::fprintf(stderr, "the page scan and SQL read different rows of %s (%zu/%zu events, %zu/%zu samples)\n",
                 reader.path().c_str(), spans.size(), sql_spans.size(), samples.size(), sql_samples.size());
    std::abort();
  }
}

// Reads everything of `reader` through every query the CLI and the viewer use.
inline void read_all(trace::Reader& reader) {
  using namespace dpscope::trace;
  reader.meta();
  reader.meta_value("world_size");
  reader.ranks();
  const auto lanes = reader.lanes();
  reader.names();
  reader.params();
  reader.buckets();
  reader.units();
  reader.unit_shards();
  reader.event_count();
  const auto [t0, t1] = reader.time_range();
  size_t lanes_read = 0;
  for (const LaneInfo& lane : lanes) {
    if (++lanes_read > 8) break;
    reader.events(lane.rank, lane.lane, t0, t1);
    reader.events(lane.rank, lane.lane, t0 / 2 + t1 / 2, t1);
  }
  reader.events_of_kind(EventKind::Collective);
  reader.events_of_kind(EventKind::Phase, 0);
  reader.for_each_event([](const Event&) { return true; }, [](double) {});
  compare_scan_paths(reader);
  reader.memory();
  reader.memory(0);
  reader.metrics();
  reader.metrics(1);
}

// Opens `path` and runs every read, stats, export and (with merge) a merge on it. Output files
// go to `dir`.
inline void exercise_trace(const std::string& path, const std::string& dir, bool merge) {
  using namespace dpscope::trace;
  using analysis::compute_stats;
  using analysis::RunStats;
  using formats::export_chrome;
  const std::string json = dir + "/out.json";
  const std::string merged = dir + "/merged.sqlite";
  try {
    Reader reader(path);
    read_all(reader);
    const RunStats stats = compute_stats(reader);
    stats_json(stats);
    stats_text(stats);
    export_chrome(reader, json);
  } catch (const TraceError& error) {
    check_message(error, path, json);
  }
  std::remove(json.c_str());
  if (!merge) return;
  bool merged_ok = false;
  try {
    merge_traces({path}, merged);
    merged_ok = true;
  } catch (const TraceError& error) {
    // A bad input must be named (the merge's own output only alongside it).
    check_message(error, path, path);
  }
  if (merged_ok) {
    try {
      // A merge copies rows as they are, damage included: reading it may fail like the input.
      Reader again(merged);
      read_all(again);
      const RunStats stats = compute_stats(again);
      stats_json(stats);
    } catch (const TraceError& error) {
      check_message(error, merged, merged);
      // A merge that succeeded must not have written a physically damaged file.
      if (std::string(error.what()).find("malformed") != std::string::npos) {
        std::fprintf(stderr, "merge wrote a damaged file: %s\n", error.what());
        std::abort();
      }
    }
  }
  remove_trace_files(merged);
  remove_trace_files(merged + ".partial");
}

}  // namespace dpscope::fuzz
