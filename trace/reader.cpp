// Reader: validation of a trace file on open and the typed queries of reader.h.
#include "trace/reader.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>

#include "trace/error.h"
#include "trace/saturate.h"
#include "trace/sqlite_db.h"

namespace dpscope::trace {
namespace {

// The columns event_from_row reads, in its order. Files of schema version 3 and older have no
// CPU times: NULL stands in for them (kNone64).
std::string event_columns(int schema_version) {
  return std::string(
             "rank, lane, kind, name, begin_ns, end_ns, iteration, param, bucket, unit, op, grp,"
             " seq, bytes, dtype, value, enqueue_ns, flags, ") +
         (schema_version >= 4 ? "cpu_begin_ns, cpu_end_ns" : "NULL, NULL");
}

Event event_from_row(const detail::Statement& s) {
  Event e;
  e.rank = static_cast<int16_t>(s.column_int(0));
  e.lane = static_cast<LaneId>(s.column_int(1));
  e.kind = static_cast<EventKind>(s.column_int(2));
  e.name = static_cast<NameId>(s.column_int_or_none(3));
  e.begin_ns = s.column_int(4);
  e.end_ns = s.column_int(5);
  e.iteration = static_cast<int32_t>(s.column_int_or_none(6));
  e.param = static_cast<int32_t>(s.column_int_or_none(7));
  e.bucket = static_cast<int32_t>(s.column_int_or_none(8));
  e.unit = static_cast<int32_t>(s.column_int_or_none(9));
  e.op = s.column_is_null(10) ? 0xff : static_cast<uint8_t>(s.column_int(10));
  e.grp = static_cast<int16_t>(s.column_int_or_none(11));
  e.seq = s.column_int_or_none(12);
  e.bytes = s.column_int_or_none(13);
  e.dtype = s.column_is_null(14) ? 0xff : static_cast<uint8_t>(s.column_int(14));
  e.value = s.column_int_or_none(15);
  e.enqueue_ns = s.column_int_or_none(16);
  e.flags = static_cast<uint8_t>(s.column_int(17));
  e.cpu_begin_ns = s.column_int_or_none(18);
  e.cpu_end_ns = s.column_int_or_none(19);
  return e;
}

uint32_t big_endian32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

bool file_exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

// Checks the 100-byte SQLite header before SQLite sees the file: tells "not a database" and
// "cut short" apart from everything else with a message a user can act on.
void check_header(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    throw TraceError(path + ": no such trace file (check the path; `dpscope train --trace PATH` "
                            "writes one per rank, `dpscope merge` joins them)");
  }
  if (S_ISDIR(info.st_mode)) throw TraceError(path + ": is a directory, not a trace file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TraceError(path + ": cannot be read (check its permissions)");
  unsigned char header[100] = {};
  in.read(reinterpret_cast<char*>(header), sizeof(header));
  if (in.gcount() < 100 || std::memcmp(header, "SQLite format 3", 16) != 0) {
    throw TraceError(path + ": not a dpscope trace (not an SQLite database at all; " +
                     std::to_string(info.st_size) + " bytes)");
  }
  uint32_t page_size = (uint32_t(header[16]) << 8) | header[17];
  if (page_size == 1) page_size = 65536;
  const uint32_t pages = big_endian32(header + 28);
  const bool size_valid = std::memcmp(header + 24, header + 92, 4) == 0 && pages > 0;
  // With a WAL beside it the main file may legitimately be shorter than the header says.
  if (size_valid && !file_exists(path + "-wal")) {
    const uint64_t expected = uint64_t(pages) * page_size;
    if (uint64_t(info.st_size) < expected) {
      throw TraceError(path + ": truncated trace file (" + std::to_string(info.st_size) +
                       " of " + std::to_string(expected) +
                       " bytes); it was cut short while copying or writing: copy it again or "
                       "re-run the training");
    }
  }
}

// [min, max] of a table's integer key, or {0, -1} when the table is empty: the id ranges that
// the bulk scans split between threads. Two statements, not one: SQLite answers a lone min() or
// max() of a rowid from the b-tree's edge, but "SELECT min(id), max(id)" scans the whole table
// (about a second on 10 M events).
std::pair<int64_t, int64_t> key_range(detail::Db& db, const char* key, const char* table) {
  detail::Statement first(db, std::string("SELECT min(") + key + ") FROM " + table);
  if (!first.step() || first.column_is_null(0)) return {0, -1};
  detail::Statement last(db, std::string("SELECT max(") + key + ") FROM " + table);
  if (!last.step() || last.column_is_null(0)) return {0, -1};
  return {first.column_int(0), last.column_int(0)};
}

// The value of an integer column, or `none` where it is NULL.
int64_t value_or(sqlite3_value* v, int64_t none) {
  return sqlite3_value_type(v) == SQLITE_NULL ? none : sqlite3_value_int64(v);
}

EventSpan span_of_values(sqlite3_value** v) {
  // Arguments as kSpanArguments lists them.
  EventSpan e;
  e.rank = static_cast<int16_t>(sqlite3_value_int64(v[0]));
  e.lane = static_cast<LaneId>(sqlite3_value_int64(v[1]));
  e.kind = static_cast<EventKind>(sqlite3_value_int64(v[2]));
  e.name = static_cast<NameId>(value_or(v[3], kNone));
  e.begin_ns = sqlite3_value_int64(v[4]);
  e.end_ns = sqlite3_value_int64(v[5]);
  e.op = static_cast<uint8_t>(value_or(v[6], 0xff));
  e.bucket_or_unit = static_cast<int16_t>(value_or(v[7], value_or(v[8], kNone)));
  e.seq_or_iteration = static_cast<int32_t>(value_or(v[9], value_or(v[10], kNone)));
  return e;
}
constexpr const char* kSpanArguments =
    "rank, lane, kind, name, begin_ns, end_ns, op, bucket, unit, seq, iteration";

MemorySample sample_of_values(sqlite3_value** v) {
  return MemorySample{static_cast<int32_t>(sqlite3_value_int64(v[0])), sqlite3_value_int64(v[1]),
                      static_cast<MemoryCategory>(sqlite3_value_int64(v[2])),
                      sqlite3_value_int64(v[3])};
}
constexpr const char* kSampleArguments = "rank, ts_ns, category, bytes";

}  // namespace

// Note [Bulk scans]
// The bulk scans do not step a SELECT row by row: they run one aggregate query,
// "SELECT dpscope_scan(columns...) FROM table WHERE rowid BETWEEN ? AND ?", whose step function
// (bulk_step) receives each row's columns as sqlite3_values. That saves the return from
// sqlite3_step per row and two API calls per nullable column (sqlite3_column_type and
// sqlite3_column_int64), about a quarter of the time of a 10 M-event scan (bench/README.md,
// "Viewer"). The function is registered once per connection; `BulkSink` carries the scan in
// progress. A batch callback that returns false or throws stops the query through an error
// result, which the scan then tells apart from a real SQLite error.
namespace detail {
struct BulkSink {
  // Converts one row and keeps it; false stops the scan. Set by the scan in progress.
  bool (*row)(void* scan, sqlite3_value** values) = nullptr;
  void* scan = nullptr;
  bool stopped = false;
};
}  // namespace detail

namespace {

void bulk_step(sqlite3_context* context, int, sqlite3_value** values) {
  auto* sink = static_cast<detail::BulkSink*>(sqlite3_user_data(context));
  if (!sink->row || !sink->row(sink->scan, values)) {
    sink->stopped = true;
    sqlite3_result_error(context, "dpscope scan stopped", -1);
  }
}

void bulk_final(sqlite3_context* context) { sqlite3_result_null(context); }

// One bulk scan of rows of type Row: batches of up to 4096 rows go to `batch`.
template <typename Row>
struct BulkScan {
  Row (*convert)(sqlite3_value**);
  const std::function<bool(const Row*, size_t)>* batch;
  std::vector<Row> rows;
  std::exception_ptr failure;  // thrown by `batch`; rethrown once SQLite has let go

  bool flush() {
    try {
      const bool more = (*batch)(rows.data(), rows.size());
      rows.clear();
      return more;
    } catch (...) {
      failure = std::current_exception();  // never let an exception unwind through SQLite
      return false;
    }
  }
  static bool row(void* self, sqlite3_value** values) {
    auto* scan = static_cast<BulkScan*>(self);
    scan->rows.push_back(scan->convert(values));
    return scan->rows.size() < 4096 || scan->flush();
  }
};

// Runs the aggregate query of Note [Bulk scans] over rowids [first, last] of `table`, on the
// rows that also satisfy `filter` (SQL, or "" for all).
template <typename Row>
void bulk_scan(detail::Db& db, detail::BulkSink& sink, const char* arguments, const char* table,
               const std::string& filter, int64_t first, int64_t last,
               Row (*convert)(sqlite3_value**), const std::function<bool(const Row*, size_t)>& batch) {
  if (sink.row) {
    throw TraceError("trace file " + db.path() +
                     ": a bulk scan was started from inside another one on the same Reader; "
                     "open a second Reader for it");
  }
  BulkScan<Row> scan{convert, &batch, {}, nullptr};
  scan.rows.reserve(4096);
  const std::string sql = std::string("SELECT dpscope_scan(") + arguments + ") FROM " + table +
                          " WHERE rowid BETWEEN ?1 AND ?2" + (filter.empty() ? "" : " AND ") +
                          filter;
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) {
    db.fail("cannot prepare a scan of " + std::string(table));
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> statement(raw, sqlite3_finalize);
  sqlite3_bind_int64(raw, 1, first);
  sqlite3_bind_int64(raw, 2, last);
  sink = detail::BulkSink{&BulkScan<Row>::row, &scan, false};
  const int rc = sqlite3_step(raw);
  const bool stopped = sink.stopped;
  sink = detail::BulkSink{};
  if (scan.failure) std::rethrow_exception(scan.failure);
  if (stopped) return;
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    db.fail("cannot scan " + std::string(table));
  }
  if (!scan.rows.empty()) {
    scan.flush();
    if (scan.failure) std::rethrow_exception(scan.failure);
  }
}

}  // namespace

Reader::Reader(const std::string& path) : path_(path) {
  check_header(path);
  db_ = std::make_unique<detail::Db>(path, detail::OpenMode::ReadOnly);
  validate();
}

Reader::~Reader() = default;

void Reader::validate() {
  int64_t application_id = 0, version = 0;
  try {
    application_id = db_->query_int("PRAGMA application_id");
    version = db_->query_int("PRAGMA user_version");
  } catch (const TraceError& error) {
    throw TraceError(path_ + ": damaged trace file, SQLite cannot read it (" + error.what() + ")");
  }
  if (application_id != kApplicationId) {
    throw TraceError(path_ + ": an SQLite database but not a dpscope trace (application_id " +
                     std::to_string(application_id) + "); open a file written by dpscope");
  }
  if (version > kSchemaVersion) {
    throw TraceError(path_ + ": written by a newer dpscope (trace schema version " +
                     std::to_string(version) + "; this build reads versions up to " +
                     std::to_string(kSchemaVersion) + "): update dpscope to read it");
  }
  if (version < 1) {
    throw TraceError(path_ + ": a dpscope trace without a schema version; it is damaged");
  }
  schema_version_ = static_cast<int>(version);
  try {
    for (const char* table : {"meta", "ranks", "lanes", "names", "events", "memory", "metrics",
                              "params", "buckets", "bucket_params", "units", "unit_shards"}) {
      if (db_->query_int(std::string("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                     "AND name = '") + table + "'") != 1) {
        throw TraceError(path_ + ": damaged trace file: table '" + table + "' is missing");
      }
    }
    db_->query_int("SELECT count(*) FROM ranks");
  } catch (const TraceError& error) {
    if (std::string(error.what()).rfind(path_ + ": damaged", 0) == 0) throw;
    throw TraceError(path_ + ": damaged trace file, SQLite cannot read it (" + error.what() + ")");
  }
}

std::map<std::string, std::string> Reader::meta() {
  std::map<std::string, std::string> result;
  detail::Statement s(*db_, "SELECT key, value FROM meta");
  while (s.step()) result[s.column_text(0)] = s.column_text(1);
  return result;
}

std::string Reader::meta_value(const std::string& key, const std::string& fallback) {
  detail::Statement s(*db_, "SELECT value FROM meta WHERE key = ?");
  s.bind_text(1, key);
  return s.step() ? s.column_text(0) : fallback;
}

std::vector<RankInfo> Reader::ranks() {
  std::vector<RankInfo> result;
  // Version 2 files have no clock_uncertainty_ns: 0 for them.
  detail::Statement s(*db_, std::string("SELECT rank, host, pid, local_rank, device, clock_offset_ns, start_ns,"
                                        " end_ns, events, dropped_events, status, ") +
                                (schema_version_ >= 3 ? "clock_uncertainty_ns" : "0") +
                                " FROM ranks ORDER BY rank");
  while (s.step()) {
    RankInfo r;
    r.rank = static_cast<int32_t>(s.column_int(0));
    r.host = s.column_text(1);
    r.pid = s.column_int(2);
    r.local_rank = static_cast<int32_t>(s.column_int(3));
    r.device = s.column_text(4);
    r.clock_offset_ns = s.column_int(5);
    r.start_ns = s.column_int(6);
    r.end_ns = s.column_int(7);
    r.events = s.column_int(8);
    r.dropped_events = s.column_int(9);
    r.status = s.column_text(10);
    r.clock_uncertainty_ns = s.column_int(11);
    result.push_back(std::move(r));
  }
  return result;
}

std::vector<LaneInfo> Reader::lanes() {
  std::vector<LaneInfo> result;
  detail::Statement s(*db_, "SELECT rank, lane, name, kind FROM lanes ORDER BY rank, lane");
  while (s.step()) {
    result.push_back(LaneInfo{static_cast<int32_t>(s.column_int(0)),
                              static_cast<LaneId>(s.column_int(1)), s.column_text(2),
                              static_cast<LaneKind>(s.column_int(3))});
  }
  return result;
}

std::vector<std::string> Reader::names() {
  // Every writer numbers names 1, 2, 3, ..., so the result is a dense table. An id far beyond
  // the number of names (a damaged file may say 10^15) cannot be held densely: it is left out
  // like a negative one, and events that refer to it read as unnamed.
  const int64_t limit = std::min<int64_t>(db_->query_int("SELECT count(*) FROM names") + 65536,
                                          INT32_MAX);
  std::vector<std::string> result;
  detail::Statement s(*db_, "SELECT id, name FROM names ORDER BY id");
  while (s.step()) {
    const int64_t id = s.column_int(0);
    if (id < 0 || id > limit) continue;
    if (static_cast<size_t>(id) >= result.size()) result.resize(static_cast<size_t>(id) + 1);
    result[static_cast<size_t>(id)] = s.column_text(1);
  }
  return result;
}

std::vector<ParamInfo> Reader::params() {
  std::vector<ParamInfo> result;
  detail::Statement s(*db_,
                      "SELECT param, name, shape, numel, dtype, requires_grad, sparse, bucket,"
                      " rebuilt_bucket, unit, unit_offset FROM params ORDER BY param");
  while (s.step()) {
    ParamInfo p;
    p.index = static_cast<int32_t>(s.column_int(0));
    p.name = s.column_text(1);
    p.shape = shape_from_json(s.column_text(2));
    p.numel = s.column_int(3);
    p.dtype = static_cast<DType>(s.column_int(4));
    p.requires_grad = s.column_int(5) != 0;
    p.sparse = s.column_int(6) != 0;
    p.bucket = static_cast<int32_t>(s.column_int_or_none(7));
    p.rebuilt_bucket = static_cast<int32_t>(s.column_int_or_none(8));
    p.unit = static_cast<int32_t>(s.column_int_or_none(9));
    p.unit_offset = s.column_int_or_none(10);
    result.push_back(std::move(p));
  }
  return result;
}

std::vector<BucketInfo> Reader::buckets() {
  std::vector<BucketInfo> result;
  detail::Statement s(*db_,
                      "SELECT generation, bucket, bytes, numel, dtype FROM buckets"
                      " ORDER BY generation, bucket");
  while (s.step()) {
    BucketInfo b;
    b.generation = static_cast<int32_t>(s.column_int(0));
    b.index = static_cast<int32_t>(s.column_int(1));
    b.bytes = s.column_int(2);
    b.numel = s.column_int(3);
    b.dtype = static_cast<DType>(s.column_int(4));
    result.push_back(std::move(b));
  }
  detail::Statement p(*db_,
                      "SELECT generation, bucket, param, offset FROM bucket_params"
                      " ORDER BY generation, bucket, position");
  std::map<std::pair<int32_t, int32_t>, BucketInfo*> by_key;
  for (auto& b : result) by_key[{b.generation, b.index}] = &b;
  while (p.step()) {
    auto it = by_key.find({static_cast<int32_t>(p.column_int(0)),
                           static_cast<int32_t>(p.column_int(1))});
    if (it == by_key.end()) continue;
    it->second->params.push_back(static_cast<int32_t>(p.column_int(2)));
    it->second->offsets.push_back(p.column_int(3));
  }
  return result;
}

std::vector<UnitInfo> Reader::units() {
  std::vector<UnitInfo> result;
  detail::Statement s(*db_,
                      "SELECT unit, name, parent, numel, padded_numel, shard_numel FROM units"
                      " ORDER BY unit");
  while (s.step()) {
    UnitInfo u;
    u.index = static_cast<int32_t>(s.column_int(0));
    u.name = s.column_text(1);
    u.parent = static_cast<int32_t>(s.column_int_or_none(2));
    u.numel = s.column_int(3);
    u.padded_numel = s.column_int(4);
    u.shard_numel = s.column_int(5);
    result.push_back(std::move(u));
  }
  return result;
}

std::vector<UnitShard> Reader::unit_shards() {
  std::vector<UnitShard> result;
  detail::Statement s(*db_,
                      "SELECT unit, rank, shard_begin, shard_end, real_numel FROM unit_shards"
                      " ORDER BY unit, rank");
  while (s.step()) {
    result.push_back(UnitShard{static_cast<int32_t>(s.column_int(0)),
                               static_cast<int32_t>(s.column_int(1)), s.column_int(2),
                               s.column_int(3), s.column_int(4)});
  }
  return result;
}

int64_t Reader::event_count() { return db_->query_int("SELECT count(*) FROM events"); }

std::pair<int64_t, int64_t> Reader::time_range() {
  detail::Statement s(*db_, "SELECT min(begin_ns), max(end_ns) FROM events");
  if (!s.step() || s.column_is_null(0)) return {0, 0};
  return {s.column_int(0), s.column_int(1)};
}

int64_t Reader::max_duration(int32_t rank, LaneId lane) {
  auto key = std::make_pair(rank, lane);
  auto it = max_duration_.find(key);
  if (it != max_duration_.end()) return it->second;
  detail::Statement s(*db_,
                      "SELECT max(end_ns - begin_ns) FROM events WHERE rank = ? AND lane = ?");
  s.bind_int(1, rank);
  s.bind_int(2, lane);
  const int64_t longest = s.step() && !s.column_is_null(0) ? s.column_int(0) : 0;
  max_duration_[key] = longest;
  return longest;
}

std::vector<Event> Reader::events(int32_t rank, LaneId lane, int64_t t0_ns, int64_t t1_ns) {
  return events(rank, lane, t0_ns, t1_ns, max_duration(rank, lane));
}

std::vector<Event> Reader::events(int32_t rank, LaneId lane, int64_t t0_ns, int64_t t1_ns,
                                  int64_t longest) {
  // begin_ns >= t0 - longest lets the (rank, lane, begin_ns) index bound the scan.
  detail::Statement s(*db_, "SELECT " + event_columns(schema_version_) +
                                " FROM events WHERE rank = ? AND lane = ? AND begin_ns >= ?"
                                " AND begin_ns <= ? AND end_ns >= ? ORDER BY begin_ns, id");
  s.bind_int(1, rank);
  s.bind_int(2, lane);
  s.bind_int(3, detail::saturating_sub(t0_ns, longest));
  s.bind_int(4, t1_ns);
  s.bind_int(5, t0_ns);
  std::vector<Event> result;
  while (s.step()) result.push_back(event_from_row(s));
  return result;
}

std::vector<Event> Reader::events_of_kind(EventKind kind, int32_t rank) {
  std::string sql = "SELECT " + event_columns(schema_version_) + " FROM events WHERE kind = ?";
  if (rank != kNone) sql += " AND rank = ?";
  sql += " ORDER BY rank, begin_ns, id";
  detail::Statement s(*db_, sql);
  s.bind_int(1, static_cast<int>(kind));
  if (rank != kNone) s.bind_int(2, rank);
  std::vector<Event> result;
  while (s.step()) result.push_back(event_from_row(s));
  return result;
}

void Reader::for_each_event(const std::function<bool(const Event&)>& visit,
                            const std::function<void(double)>& progress) {
  const int64_t total = progress ? event_count() : 0;
  const int64_t step = std::max<int64_t>(total / 100, 1);
  detail::Statement s(*db_, "SELECT " + event_columns(schema_version_) +
                                " FROM events ORDER BY rank, lane, begin_ns, id");
  int64_t seen = 0;
  while (s.step()) {
    if (!visit(event_from_row(s))) return;
    if (progress && ++seen % step == 0) progress(double(seen) / double(total));
  }
  if (progress) progress(1.0);
}

void Reader::prepare_bulk_scans() {
  if (bulk_) return;
  // Reading through mmap instead of SQLite's page cache nearly halves a full scan.
  db_->exec("PRAGMA mmap_size = 17179869184");
  bulk_ = std::make_unique<detail::BulkSink>();
  if (sqlite3_create_function_v2(db_->handle(), "dpscope_scan", -1, SQLITE_UTF8, bulk_.get(),
                                 nullptr, bulk_step, bulk_final, nullptr) != SQLITE_OK) {
    db_->fail("cannot register the bulk scan function");
  }
}

std::pair<int64_t, int64_t> Reader::event_id_range() {
  return key_range(*db_, "id", "events");
}

void Reader::scan_event_spans(int64_t first_id, int64_t last_id,
                              const std::function<bool(const EventSpan*, size_t)>& batch) {
  prepare_bulk_scans();
  bulk_scan<EventSpan>(*db_, *bulk_, kSpanArguments, "events", "", first_id, last_id,
                       span_of_values, batch);
}

std::pair<int64_t, int64_t> Reader::memory_rowid_range() {
  return key_range(*db_, "rowid", "memory");
}

void Reader::scan_memory(int64_t first_rowid, int64_t last_rowid,
                         const std::function<bool(const MemorySample*, size_t)>& batch) {
  prepare_bulk_scans();
  bulk_scan<MemorySample>(*db_, *bulk_, kSampleArguments, "memory", "", first_rowid,
                          last_rowid, sample_of_values, batch);
}

std::vector<MemorySample> Reader::memory(int32_t rank) {
  std::string sql = "SELECT rank, ts_ns, category, bytes FROM memory";
  if (rank != kNone) sql += " WHERE rank = ?";
  sql += " ORDER BY rank, ts_ns, rowid";
  detail::Statement s(*db_, sql);
  if (rank != kNone) s.bind_int(1, rank);
  std::vector<MemorySample> result;
  while (s.step()) {
    result.push_back(MemorySample{static_cast<int32_t>(s.column_int(0)), s.column_int(1),
                                  static_cast<MemoryCategory>(s.column_int(2)), s.column_int(3)});
  }
  return result;
}

std::vector<Metric> Reader::metrics(int32_t rank) {
  std::string sql =
      "SELECT m.rank, m.iteration, coalesce(n.name, ''), m.value FROM metrics m"
      " LEFT JOIN names n ON n.id = m.name";
  if (rank != kNone) sql += " WHERE m.rank = ?";
  sql += " ORDER BY m.rank, m.iteration, n.name";
  detail::Statement s(*db_, sql);
  if (rank != kNone) s.bind_int(1, rank);
  std::vector<Metric> result;
  while (s.step()) {
    result.push_back(Metric{static_cast<int32_t>(s.column_int(0)),
                            static_cast<int32_t>(s.column_int(1)), s.column_text(2),
                            s.column_double(3)});
  }
  return result;
}

}  // namespace dpscope::trace
