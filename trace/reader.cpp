// Reader: validation of a trace file on open and the typed queries of reader.h.
#include "trace/reader.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>

#include "trace/collective_state.h"
#include "trace/error.h"
#include "trace/page_scan.h"
#include "trace/saturate.h"
#include "trace/sqlite_db.h"

namespace dpscope::trace {
namespace {

// A SELECT of every column of one table, as a file of the reader's schema version holds them
// (columns_as_of), then `rest` (WHERE, ORDER BY): the table's column enum `C` names each value,
// whose index is the column's position. Parameters of `rest` are bound by their number.
template <typename C>
class TableQuery {
 public:
  TableQuery(detail::Db& db, int version, std::string_view rest)
      : TableQuery(db, columns_as_of(table_of(C{}), version), table_of(C{}).name, rest) {}
  // The same with the select list and the FROM clause given: columns_as_of with a column read
  // through a join.
  TableQuery(detail::Db& db, const std::vector<std::string>& columns, std::string_view from,
             std::string_view rest)
      : statement_(db, "SELECT " + comma_separated(columns) + " FROM " + std::string(from) +
                           (rest.empty() ? "" : " ") + std::string(rest)) {}

  void bind_int(int parameter, int64_t value) { statement_.bind_int(parameter, value); }
  void bind_text(int parameter, std::string_view value) {
    statement_.bind_text(parameter, value);
  }
  bool step() { return statement_.step(); }

  int64_t column_int(C column) const { return statement_.column_int(column_position(column)); }
  // kNone64 where the column is NULL.
  int64_t column_int_or_none(C column) const {
    return statement_.column_int_or_none(column_position(column));
  }
  bool column_is_null(C column) const {
    return statement_.column_is_null(column_position(column));
  }
  double column_double(C column) const {
    return statement_.column_double(column_position(column));
  }
  std::string column_text(C column) const {
    return statement_.column_text(column_position(column));
  }

 private:
  detail::Statement statement_;
};

Event event_from_row(const TableQuery<EventsColumn>& s) {
  using C = EventsColumn;
  Event e;
  e.rank = static_cast<int16_t>(s.column_int(C::Rank));
  e.lane = static_cast<LaneId>(s.column_int(C::Lane));
  e.kind = static_cast<EventKind>(s.column_int(C::Kind));
  e.name = static_cast<NameId>(s.column_int_or_none(C::Name));
  e.begin_ns = s.column_int(C::BeginNs);
  e.end_ns = s.column_int(C::EndNs);
  e.iteration = static_cast<int32_t>(s.column_int_or_none(C::Iteration));
  e.param = static_cast<int32_t>(s.column_int_or_none(C::Param));
  e.bucket = static_cast<int32_t>(s.column_int_or_none(C::Bucket));
  e.unit = static_cast<int32_t>(s.column_int_or_none(C::Unit));
  e.op = s.column_is_null(C::Op) ? 0xff : static_cast<uint8_t>(s.column_int(C::Op));
  e.grp = static_cast<int16_t>(s.column_int_or_none(C::Grp));
  e.seq = s.column_int_or_none(C::Seq);
  e.bytes = s.column_int_or_none(C::Bytes);
  e.dtype = s.column_is_null(C::Dtype) ? 0xff : static_cast<uint8_t>(s.column_int(C::Dtype));
  e.value = s.column_int_or_none(C::Value);
  e.enqueue_ns = s.column_int_or_none(C::EnqueueNs);
  e.flags = static_cast<uint8_t>(s.column_int(C::Flags));
  e.cpu_begin_ns = s.column_int_or_none(C::CpuBeginNs);
  e.cpu_end_ns = s.column_int_or_none(C::CpuEndNs);
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

// The events columns an EventSpan is made of, in the order dpscope_scan receives them: a
// subset, since every argument costs time in a scan of millions of rows.
constexpr EventsColumn kSpanColumns[] = {
    EventsColumn::Rank,    EventsColumn::Lane, EventsColumn::Kind,   EventsColumn::Name,
    EventsColumn::BeginNs, EventsColumn::EndNs, EventsColumn::Op,    EventsColumn::Bucket,
    EventsColumn::Unit,    EventsColumn::Seq,   EventsColumn::Iteration};

// The argument of dpscope_scan that holds `column` in a span scan (kSpanArgument below).
constexpr int span_argument(EventsColumn column) {
  for (size_t i = 0; i < std::size(kSpanColumns); ++i) {
    if (kSpanColumns[i] == column) return static_cast<int>(i);
  }
  throw "not one of kSpanColumns";
}
// The same, computed while compiling: a column that is not among kSpanColumns does not compile.
template <EventsColumn column>
constexpr int kSpanArgument = span_argument(column);

// dpscope_scan's arguments in a span scan, as a file of schema version `version` holds them.
std::string span_arguments(int version) {
  std::vector<std::string> arguments;
  for (EventsColumn column : kSpanColumns) {
    arguments.push_back(column_as_of(column_of(column), version));
  }
  return comma_separated(arguments);
}

// The value of a nullable column, or `none` where it is NULL.
int64_t value_or(const detail::ColumnValue& v, int64_t none) { return v.null ? none : v.value; }

// One EventSpan from its kSpanColumns values, whichever way they were read (SQL or pages).
EventSpan span_of_columns(const detail::ColumnValue* v) {
  using C = EventsColumn;
  EventSpan e;
  e.rank = static_cast<int16_t>(v[kSpanArgument<C::Rank>].value);
  e.lane = static_cast<LaneId>(v[kSpanArgument<C::Lane>].value);
  e.kind = static_cast<EventKind>(v[kSpanArgument<C::Kind>].value);
  e.name = static_cast<NameId>(value_or(v[kSpanArgument<C::Name>], kNone));
  e.begin_ns = v[kSpanArgument<C::BeginNs>].value;
  e.end_ns = v[kSpanArgument<C::EndNs>].value;
  e.op = static_cast<uint8_t>(value_or(v[kSpanArgument<C::Op>], 0xff));
  e.bucket_or_unit = static_cast<int16_t>(
      value_or(v[kSpanArgument<C::Bucket>], value_or(v[kSpanArgument<C::Unit>], kNone)));
  e.seq_or_iteration = static_cast<int32_t>(
      value_or(v[kSpanArgument<C::Seq>], value_or(v[kSpanArgument<C::Iteration>], kNone)));
  return e;
}

EventSpan span_of_values(sqlite3_value** v) {
  detail::ColumnValue columns[std::size(kSpanColumns)];
  for (size_t i = 0; i < std::size(kSpanColumns); ++i) {
    columns[i].null = sqlite3_value_type(v[i]) == SQLITE_NULL;
    columns[i].value = columns[i].null ? 0 : sqlite3_value_int64(v[i]);
  }
  return span_of_columns(columns);
}

// A memory scan's values are every column of memory in order (columns_as_of).
MemorySample sample_of_columns(const detail::ColumnValue* v) {
  using C = MemoryColumn;
  MemorySample m;
  m.rank = static_cast<int32_t>(v[column_position(C::Rank)].value);
  m.ts_ns = v[column_position(C::TsNs)].value;
  m.category = static_cast<MemoryCategory>(v[column_position(C::Category)].value);
  m.bytes = v[column_position(C::Bytes)].value;
  return m;
}

MemorySample sample_of_values(sqlite3_value** v) {
  detail::ColumnValue columns[std::size(kMemoryColumns)];
  for (size_t i = 0; i < std::size(kMemoryColumns); ++i) columns[i].value = sqlite3_value_int64(v[i]);
  return sample_of_columns(columns);
}

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

// One bulk scan of rows of type Row, converted from a row's Values (SQLite's values, or the
// page scan's columns): batches of up to 4096 rows go to `batch`.
template <typename Row, typename Values = sqlite3_value**>
struct BulkScan {
  Row (*convert)(Values);
  const std::function<bool(const Row*, size_t)>* batch;
  std::vector<Row> rows;
  std::exception_ptr failure;  // thrown by `batch`; rethrown once SQLite (or the page scan) has let go

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
  static bool row(void* self, Values values) {
    auto* scan = static_cast<BulkScan*>(self);
    scan->rows.push_back(scan->convert(values));
    return scan->rows.size() < 4096 || scan->flush();
  }
  static bool page_row(void* self, int64_t, Values values) { return row(self, values); }
};

// A bulk scan started from inside another one's batch on the same Reader: refused, whichever
// way either reads (SQL or pages), since both share the Reader's connection and mapping.
void refuse_nested_scan(const detail::Db& db, const detail::BulkSink& sink) {
  if (sink.row) {
    throw TraceError("trace file " + db.path() +
                     ": a bulk scan was started from inside another one on the same Reader; "
                     "open a second Reader for it");
  }
}

// Marks a page scan in progress in the Reader's BulkSink for its duration, as bulk_scan marks
// its query: the sink's row function is never called meanwhile.
class PageScanInProgress {
 public:
  PageScanInProgress(const detail::Db& db, detail::BulkSink& sink) : sink_(sink) {
    refuse_nested_scan(db, sink);
    sink_.row = [](void*, sqlite3_value**) { return false; };
  }
  ~PageScanInProgress() { sink_.row = nullptr; }
  PageScanInProgress(const PageScanInProgress&) = delete;
  PageScanInProgress& operator=(const PageScanInProgress&) = delete;

 private:
  detail::BulkSink& sink_;
};

// Runs the aggregate query of Note [Bulk scans] over rowids [first, last] of `table`, on the
// rows that also satisfy `filter` (SQL, or "" for all).
template <typename Row>
void bulk_scan(detail::Db& db, detail::BulkSink& sink, const std::string& arguments,
               const Table& table, const std::string& filter, int64_t first, int64_t last,
               Row (*convert)(sqlite3_value**), const std::function<bool(const Row*, size_t)>& batch) {
  refuse_nested_scan(db, sink);
  BulkScan<Row> scan{convert, &batch, {}, nullptr};
  scan.rows.reserve(4096);
  const std::string sql = "SELECT dpscope_scan(" + arguments + ") FROM " + std::string(table.name) +
                          " WHERE rowid BETWEEN ?1 AND ?2" + (filter.empty() ? "" : " AND ") +
                          filter;
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) {
    db.fail("cannot prepare a scan of " + std::string(table.name));
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
    db.fail("cannot scan " + std::string(table.name));
  }
  if (!scan.rows.empty()) {
    scan.flush();
    if (scan.failure) std::rethrow_exception(scan.failure);
  }
}

// A read transaction held for a page scan (Note [Reading pages]): while it lasts, no writer
// changes the pages of its snapshot. Inside a transaction the caller already holds, it adds none.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(detail::Db& db) : db_(db), began_(sqlite3_get_autocommit(db.handle()) != 0) {
    if (began_) db_.exec("BEGIN");
  }
  ~ReadSnapshot() {
    if (began_) sqlite3_exec(db_.handle(), "COMMIT", nullptr, nullptr, nullptr);
  }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  detail::Db& db_;
  bool began_;
};

// Whether a write-ahead log beside the file may hold pages newer than the file's.
bool log_in_use(const std::string& path) {
  struct stat info;
  return ::stat((path + "-wal").c_str(), &info) == 0 && info.st_size > 0;
}

// Where a page scan left a bulk scan: done (every row handed over, or `batch` stopped it), or
// SQL goes on from `resume`.
struct PageScanLeft {
  bool done = false;
  int64_t resume = 0;
};

// Rows [first, last] of `table`, the columns `wanted` (names of its columns), read from the
// file's pages as far as Note [Reading pages] allows, handed to `batch` as bulk_scan does.
// `file` is the Reader's mapping, opened here on first use.
template <typename Row>
PageScanLeft page_scan(detail::Db& db, detail::BulkSink& sink, std::unique_ptr<detail::PageFile>& file, const Table& table,
                       const std::vector<const Column*>& wanted, int64_t first, int64_t last,
                       Row (*convert)(const detail::ColumnValue*),
                       const std::function<bool(const Row*, size_t)>& batch) {
  PageScanInProgress in_progress(db, sink);
  const PageScanLeft sql{false, first};
  if (first > last) return PageScanLeft{true, first};
  ReadSnapshot snapshot(db);
  uint32_t root = 0;
  std::vector<int> columns;
  try {
    detail::Statement schema(db, "SELECT rootpage FROM sqlite_schema WHERE type = 'table' AND name = ?");
    schema.bind_text(1, table.name);
    if (!schema.step() || schema.column_is_null(0)) return sql;
    root = uint32_t(schema.column_int(0));
    std::map<std::string, int, std::less<>> positions;
    // table_xinfo, not table_info: a generated column has a place in the list but none in a
    // record, so a table with one is read through SQL.
    detail::Statement info(db, "SELECT cid, name, pk, upper(type), hidden FROM pragma_table_xinfo(?)");
    info.bind_text(1, table.name);
    int primary_keys = 0;
    std::string rowid_alias;
    while (info.step()) {
      if (info.column_int(4) != 0) return sql;
      positions[info.column_text(1)] = int(info.column_int(0));
      if (info.column_int(2) > 0) {
        ++primary_keys;
        if (info.column_text(3) == "INTEGER") rowid_alias = info.column_text(1);
      }
    }
    for (const Column* column : wanted) {
      const auto found = positions.find(column->name);
      if (found == positions.end()) return sql;  // an older file without it: SQL fills it in
      columns.push_back(primary_keys == 1 && found->first == rowid_alias ? -1 : found->second);
    }
  } catch (const TraceError&) {
    return sql;  // SQLite says what is wrong when the scan asks it
  }
  if (log_in_use(db.path())) return sql;
  if (!file) file = detail::PageFile::open(db.path());
  if (!file) return sql;
  BulkScan<Row, const detail::ColumnValue*> scan{convert, &batch, {}, nullptr};
  scan.rows.reserve(4096);
  const detail::PageScanResult result =
      file->scan(root, first, last, columns, &BulkScan<Row, const detail::ColumnValue*>::page_row, &scan);
  if (scan.failure) std::rethrow_exception(scan.failure);
  if (result.end == detail::PageScanEnd::Stopped) return PageScanLeft{true, result.next_rowid};
  if (!scan.rows.empty() && !scan.flush()) {
    if (scan.failure) std::rethrow_exception(scan.failure);
    return PageScanLeft{true, result.next_rowid};
  }
  if (result.end == detail::PageScanEnd::Finished) return PageScanLeft{true, result.next_rowid};
  return PageScanLeft{false, result.next_rowid};
}

}  // namespace

Reader::Reader(const std::string& path) : path_(path) {
  check_header(path);
  db_ = std::make_unique<detail::Db>(path, detail::OpenMode::ReadOnly);
  validate();
}

Reader::~Reader() = default;

uint64_t Reader::pages_read() const { return pages_ ? pages_->pages_read() : 0; }

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
    for (const Table& table : kTables) {
      const std::string name(table.name);
      if (db_->query_int("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '" +
                         name + "'") != 1) {
        throw TraceError(path_ + ": damaged trace file: table '" + name + "' is missing");
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
  TableQuery<MetaColumn> s(*db_, schema_version_, "");
  while (s.step()) result[s.column_text(MetaColumn::Key)] = s.column_text(MetaColumn::Value);
  return result;
}

std::string Reader::meta_value(const std::string& key, const std::string& fallback) {
  TableQuery<MetaColumn> s(*db_, schema_version_, "WHERE key = ?");
  s.bind_text(1, key);
  return s.step() ? s.column_text(MetaColumn::Value) : fallback;
}

std::vector<RankInfo> Reader::ranks() {
  using C = RanksColumn;
  std::vector<RankInfo> result;
  TableQuery<RanksColumn> s(*db_, schema_version_, "ORDER BY rank");
  while (s.step()) {
    RankInfo r;
    r.rank = static_cast<int32_t>(s.column_int(C::Rank));
    r.host = s.column_text(C::Host);
    r.pid = s.column_int(C::Pid);
    r.local_rank = static_cast<int32_t>(s.column_int(C::LocalRank));
    r.device = s.column_text(C::Device);
    r.clock_offset_ns = s.column_int(C::ClockOffsetNs);
    r.start_ns = s.column_int(C::StartNs);
    r.end_ns = s.column_int(C::EndNs);
    r.events = s.column_int(C::Events);
    r.dropped_events = s.column_int(C::DroppedEvents);
    r.status = s.column_text(C::Status);
    r.clock_uncertainty_ns = s.column_int(C::ClockUncertaintyNs);
    result.push_back(std::move(r));
  }
  return result;
}

std::vector<LaneInfo> Reader::lanes() {
  using C = LanesColumn;
  std::vector<LaneInfo> result;
  TableQuery<LanesColumn> s(*db_, schema_version_, "ORDER BY rank, lane");
  while (s.step()) {
    result.push_back(LaneInfo{static_cast<int32_t>(s.column_int(C::Rank)),
                              static_cast<LaneId>(s.column_int(C::Lane)), s.column_text(C::Name),
                              static_cast<LaneKind>(s.column_int(C::Kind))});
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
  TableQuery<NamesColumn> s(*db_, schema_version_, "ORDER BY id");
  while (s.step()) {
    const int64_t id = s.column_int(NamesColumn::Id);
    if (id < 0 || id > limit) continue;
    if (static_cast<size_t>(id) >= result.size()) result.resize(static_cast<size_t>(id) + 1);
    result[static_cast<size_t>(id)] = s.column_text(NamesColumn::Name);
  }
  return result;
}

std::vector<ParamInfo> Reader::params() {
  using C = ParamsColumn;
  std::vector<ParamInfo> result;
  TableQuery<ParamsColumn> s(*db_, schema_version_, "ORDER BY param");
  while (s.step()) {
    ParamInfo p;
    p.index = static_cast<int32_t>(s.column_int(C::Param));
    p.name = s.column_text(C::Name);
    p.shape = shape_from_json(s.column_text(C::Shape));
    p.numel = s.column_int(C::Numel);
    p.dtype = static_cast<DType>(s.column_int(C::Dtype));
    p.requires_grad = s.column_int(C::RequiresGrad) != 0;
    p.sparse = s.column_int(C::Sparse) != 0;
    p.bucket = static_cast<int32_t>(s.column_int_or_none(C::Bucket));
    p.rebuilt_bucket = static_cast<int32_t>(s.column_int_or_none(C::RebuiltBucket));
    p.unit = static_cast<int32_t>(s.column_int_or_none(C::Unit));
    p.unit_offset = s.column_int_or_none(C::UnitOffset);
    result.push_back(std::move(p));
  }
  return result;
}

std::vector<BucketInfo> Reader::buckets() {
  std::vector<BucketInfo> result;
  {
    using C = BucketsColumn;
    TableQuery<BucketsColumn> s(*db_, schema_version_, "ORDER BY generation, bucket");
    while (s.step()) {
      BucketInfo b;
      b.generation = static_cast<int32_t>(s.column_int(C::Generation));
      b.index = static_cast<int32_t>(s.column_int(C::Bucket));
      b.bytes = s.column_int(C::Bytes);
      b.numel = s.column_int(C::Numel);
      b.dtype = static_cast<DType>(s.column_int(C::Dtype));
      result.push_back(std::move(b));
    }
  }
  using C = BucketParamsColumn;
  TableQuery<BucketParamsColumn> p(*db_, schema_version_, "ORDER BY generation, bucket, position");
  std::map<std::pair<int32_t, int32_t>, BucketInfo*> by_key;
  for (auto& b : result) by_key[{b.generation, b.index}] = &b;
  while (p.step()) {
    auto it = by_key.find({static_cast<int32_t>(p.column_int(C::Generation)),
                           static_cast<int32_t>(p.column_int(C::Bucket))});
    if (it == by_key.end()) continue;
    it->second->params.push_back(static_cast<int32_t>(p.column_int(C::Param)));
    it->second->offsets.push_back(p.column_int(C::Offset));
  }
  return result;
}

std::vector<UnitInfo> Reader::units() {
  using C = UnitsColumn;
  std::vector<UnitInfo> result;
  TableQuery<UnitsColumn> s(*db_, schema_version_, "ORDER BY unit");
  while (s.step()) {
    UnitInfo u;
    u.index = static_cast<int32_t>(s.column_int(C::Unit));
    u.name = s.column_text(C::Name);
    u.parent = static_cast<int32_t>(s.column_int_or_none(C::Parent));
    u.numel = s.column_int(C::Numel);
    u.padded_numel = s.column_int(C::PaddedNumel);
    u.shard_numel = s.column_int(C::ShardNumel);
    result.push_back(std::move(u));
  }
  return result;
}

std::vector<UnitShard> Reader::unit_shards() {
  using C = UnitShardsColumn;
  std::vector<UnitShard> result;
  TableQuery<UnitShardsColumn> s(*db_, schema_version_, "ORDER BY unit, rank");
  while (s.step()) {
    result.push_back(UnitShard{static_cast<int32_t>(s.column_int(C::Unit)),
                               static_cast<int32_t>(s.column_int(C::Rank)),
                               s.column_int(C::ShardBegin), s.column_int(C::ShardEnd),
                               s.column_int(C::RealNumel)});
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
  TableQuery<EventsColumn> s(*db_, schema_version_,
                             "WHERE rank = ? AND lane = ? AND begin_ns >= ? AND begin_ns <= ?"
                             " AND end_ns >= ? ORDER BY begin_ns, id");
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
  std::string where = "WHERE kind = ?";
  if (rank != kNone) where += " AND rank = ?";
  TableQuery<EventsColumn> s(*db_, schema_version_, where + " ORDER BY rank, begin_ns, id");
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
  TableQuery<EventsColumn> s(*db_, schema_version_, "ORDER BY rank, lane, begin_ns, id");
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
  if (scan_path_ == BulkScanPath::Pages) {
    std::vector<const Column*> wanted;
    for (EventsColumn column : kSpanColumns) wanted.push_back(&column_of(column));
    const PageScanLeft left = page_scan<EventSpan>(*db_, *bulk_, pages_, kEventsTable, wanted, first_id, last_id,
                                                   span_of_columns, batch);
    if (left.done) return;
    first_id = left.resume;
  }
  bulk_scan<EventSpan>(*db_, *bulk_, span_arguments(schema_version_), kEventsTable, "", first_id,
                       last_id, span_of_values, batch);
}

namespace {

// An event's kind and flags, for any_collective_not_completed's page scan.
struct KindAndFlags {
  uint8_t kind = 0;
  uint8_t flags = 0;
};

KindAndFlags kind_and_flags(const detail::ColumnValue* v) {
  return KindAndFlags{static_cast<uint8_t>(v[0].value), static_cast<uint8_t>(v[1].value)};
}

}  // namespace

bool Reader::any_collective_not_completed() {
  const auto not_completed = [](const KindAndFlags& e) {
    return e.kind == static_cast<uint8_t>(EventKind::Collective) && (e.flags & kFlagNotCompleted);
  };
  const auto [first, last] = event_id_range();
  if (first > last) return false;
  if (scan_path_ == BulkScanPath::Pages) {
    prepare_bulk_scans();
    bool found = false;
    const std::function<bool(const KindAndFlags*, size_t)> batch = [&](const KindAndFlags* rows, size_t n) {
      found = std::any_of(rows, rows + n, not_completed);
      return !found;
    };
    const PageScanLeft left = page_scan<KindAndFlags>(*db_, *bulk_, pages_, kEventsTable,
                                                      {&column_of(EventsColumn::Kind), &column_of(EventsColumn::Flags)},
                                                      first, last, kind_and_flags, batch);
    if (found) return true;
    if (left.done) return false;
  }
  detail::Statement exists(*db_, "SELECT EXISTS (SELECT 1 FROM events WHERE kind = ?1 AND (flags & ?2) != 0)");
  exists.bind_int(1, static_cast<int64_t>(EventKind::Collective));
  exists.bind_int(2, kFlagNotCompleted);
  return exists.step() && exists.column_int(0) != 0;
}

std::pair<int64_t, int64_t> Reader::memory_rowid_range() {
  return key_range(*db_, "rowid", "memory");
}

void Reader::scan_memory(int64_t first_rowid, int64_t last_rowid,
                         const std::function<bool(const MemorySample*, size_t)>& batch) {
  prepare_bulk_scans();
  if (scan_path_ == BulkScanPath::Pages) {
    std::vector<const Column*> wanted;
    for (const Column& column : kMemoryColumns) wanted.push_back(&column);
    const PageScanLeft left = page_scan<MemorySample>(*db_, *bulk_, pages_, kMemoryTable, wanted, first_rowid,
                                                      last_rowid, sample_of_columns, batch);
    if (left.done) return;
    first_rowid = left.resume;
  }
  const std::string arguments = comma_separated(columns_as_of(kMemoryTable, schema_version_));
  bulk_scan<MemorySample>(*db_, *bulk_, arguments, kMemoryTable, "", first_rowid, last_rowid,
                          sample_of_values, batch);
}

std::vector<MemorySample> Reader::memory(int32_t rank) {
  std::vector<MemorySample> result;
  for_each_memory_sample(rank, [&](const MemorySample& sample) {
    result.push_back(sample);
    return true;
  });
  return result;
}

void Reader::for_each_memory_sample(int32_t rank, const std::function<bool(const MemorySample&)>& visit) {
  using C = MemoryColumn;
  TableQuery<MemoryColumn> s(*db_, schema_version_,
                             std::string(rank != kNone ? "WHERE rank = ? " : "") +
                                 "ORDER BY rank, ts_ns, rowid");
  if (rank != kNone) s.bind_int(1, rank);
  while (s.step()) {
    const MemorySample sample{static_cast<int32_t>(s.column_int(C::Rank)), s.column_int(C::TsNs),
                              static_cast<MemoryCategory>(s.column_int(C::Category)),
                              s.column_int(C::Bytes)};
    if (!visit(sample)) return;
  }
}

std::vector<Metric> Reader::metrics(int32_t rank) {
  using C = MetricsColumn;
  // The name comes through names: its text, not its id.
  std::vector<std::string> columns = columns_as_of(kMetricsTable, schema_version_, "m.");
  columns[column_position(C::Name)] = "coalesce(n.name, '')";
  TableQuery<MetricsColumn> s(*db_, columns, "metrics m LEFT JOIN names n ON n.id = m.name",
                              std::string(rank != kNone ? "WHERE m.rank = ? " : "") +
                                  "ORDER BY m.rank, m.iteration, n.name");
  if (rank != kNone) s.bind_int(1, rank);
  std::vector<Metric> result;
  while (s.step()) {
    result.push_back(Metric{static_cast<int32_t>(s.column_int(C::Rank)),
                            static_cast<int32_t>(s.column_int(C::Iteration)),
                            s.column_text(C::Name), s.column_double(C::Value)});
  }
  return result;
}

}  // namespace dpscope::trace
