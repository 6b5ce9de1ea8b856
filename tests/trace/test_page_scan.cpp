// The bulk scans' page decoder (trace/page_scan.h, Note [Reading pages]) hands over exactly the
// rows SQLite does: on recorded files, deep trees of small pages, records spilling onto overflow
// pages, ranges of every shape, and where it must give way to SQL (a write-ahead log in use, an
// older table's short records, a value that is not an integer, a damaged page).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "tests/sqlite_edit.h"
#include "tests/test_util.h"
#include "trace/error.h"
#include "trace/page_scan.h"
#include "trace/reader.h"
#include "trace/writer.h"

using namespace dpscope::trace;
using dpscope::testing::exec_sql;
using dpscope::testing::TempDir;

namespace {

// A finished trace whose events use every drawing column, NULLs included, and memory samples.
void write_varied_trace(const std::string& path, int events) {
  std::mt19937 random(7);
  Writer writer(path);
  writer.begin();
  writer.put_rank(RankInfo{});
  for (int i = 0; i < events; ++i) {
    Event e;
    e.rank = int16_t(random() % 4);
    e.lane = LaneId(random() % 5);
    e.kind = static_cast<EventKind>(random() % 8);
    e.begin_ns = int64_t(random()) * 1000 - (int64_t{1} << 40);  // negative and beyond 32 bits
    e.end_ns = e.begin_ns + int64_t(random() % 100000);
    if (random() % 3) e.name = NameId(random() % 300);
    if (random() % 2) e.seq = int64_t(random() % 70000);
    if (random() % 2) e.iteration = int32_t(random() % 1000);
    if (random() % 3 == 0) e.bucket = int32_t(random() % 20);
    if (random() % 3 == 0) e.unit = int32_t(random() % 20);
    if (random() % 2) e.op = uint8_t(random() % 9);
    writer.add_event(e);
    if (i % 3 == 0) {
      writer.add_memory(MemorySample{int32_t(random() % 4), e.begin_ns,
                                     static_cast<MemoryCategory>(random() % 6),
                                     int64_t(random()) << (random() % 24)});
    }
  }
  writer.commit();
  writer.finish();
}

std::vector<EventSpan> spans(Reader& reader, int64_t first, int64_t last) {
  std::vector<EventSpan> rows;
  reader.scan_event_spans(first, last, [&](const EventSpan* batch, size_t n) {
    rows.insert(rows.end(), batch, batch + n);
    return true;
  });
  return rows;
}

std::vector<MemorySample> samples(Reader& reader, int64_t first, int64_t last) {
  std::vector<MemorySample> rows;
  reader.scan_memory(first, last, [&](const MemorySample* batch, size_t n) {
    rows.insert(rows.end(), batch, batch + n);
    return true;
  });
  return rows;
}

bool same(const EventSpan& a, const EventSpan& b) {
  return a.begin_ns == b.begin_ns && a.end_ns == b.end_ns && a.name == b.name &&
         a.seq_or_iteration == b.seq_or_iteration && a.rank == b.rank && a.lane == b.lane &&
         a.bucket_or_unit == b.bucket_or_unit && a.kind == b.kind && a.op == b.op;
}

bool same(const MemorySample& a, const MemorySample& b) {
  return a.rank == b.rank && a.ts_ns == b.ts_ns && a.category == b.category && a.bytes == b.bytes;
}

template <typename Row>
void expect_same_rows(const std::vector<Row>& pages, const std::vector<Row>& sql, const std::string& what) {
  ASSERT_EQ(pages.size(), sql.size()) << what;
  for (size_t i = 0; i < pages.size(); ++i) ASSERT_TRUE(same(pages[i], sql[i])) << what << ": row " << i;
}

// Both ways of reading `path`, compared over the whole tables and `ranges` random id ranges.
// Returns the leaf pages the page reader decoded.
uint64_t expect_pages_read_as_sql(const std::string& path, int ranges) {
  Reader pages(path), sql(path);
  sql.set_bulk_scan_path(BulkScanPath::Sql);
  const auto [first, last] = pages.event_id_range();
  expect_same_rows(spans(pages, first, last), spans(sql, first, last), "all events");
  const auto [m_first, m_last] = pages.memory_rowid_range();
  expect_same_rows(samples(pages, m_first, m_last), samples(sql, m_first, m_last), "all memory");
  std::mt19937 random(11);
  for (int i = 0; i < ranges; ++i) {
    const int64_t a = first - 3 + int64_t(random() % uint64_t(last - first + 7));
    const int64_t b = a + int64_t(random() % 3000) - 5;  // sometimes b < a: no rows
    expect_same_rows(spans(pages, a, b), spans(sql, a, b), "events " + std::to_string(a) + ".." + std::to_string(b));
    expect_same_rows(samples(pages, a / 3, b / 3), samples(sql, a / 3, b / 3), "memory");
  }
  EXPECT_EQ(sql.pages_read(), 0u);
  return pages.pages_read();
}

}  // namespace

TEST(PageScan, ReadsTheRowsSqlReads) {
  TempDir dir;
  const std::string path = dir.file("varied.sqlite");
  write_varied_trace(path, 60000);
  EXPECT_GT(expect_pages_read_as_sql(path, 40), 40u);
}

TEST(PageScan, ReadsDeepTreesOfSmallPages) {
  TempDir dir;
  const std::string path = dir.file("small_pages.sqlite");
  write_varied_trace(path, 30000);
  // 512-byte pages: a few rows a leaf, interior pages four levels deep.
  exec_sql(path, "PRAGMA page_size = 512; VACUUM;");
  EXPECT_GT(expect_pages_read_as_sql(path, 40), 3000u);
}

TEST(PageScan, StopsWhenTheBatchSaysSo) {
  TempDir dir;
  const std::string path = dir.file("stop.sqlite");
  write_varied_trace(path, 20000);
  Reader reader(path);
  const auto [first, last] = reader.event_id_range();
  size_t batches = 0, rows = 0;
  reader.scan_event_spans(first, last, [&](const EventSpan*, size_t n) {
    ++batches;
    rows += n;
    return false;
  });
  EXPECT_EQ(batches, 1u);
  EXPECT_EQ(rows, 4096u);
}

TEST(PageScan, AValueThatIsNotAnIntegerIsReadOnThroughSql) {
  TempDir dir;
  const std::string path = dir.file("real.sqlite");
  write_varied_trace(path, 20000);
  exec_sql(path, "UPDATE events SET begin_ns = 1234.75, name = 'text' WHERE id = 9000;"
                 "UPDATE memory SET bytes = x'0102' WHERE rowid = 100;");
  EXPECT_GT(expect_pages_read_as_sql(path, 10), 0u);
}

TEST(PageScan, AnOlderTablesShortRecordsAreReadThroughSql) {
  TempDir dir;
  const std::string path = dir.file("short.sqlite");
  write_varied_trace(path, 3000);
  // Records written before a column was added lack it; SQL fills in its default.
  exec_sql(path, "CREATE TABLE memory_old AS SELECT rank, ts_ns, category FROM memory;"
                 "DROP TABLE memory;"
                 "ALTER TABLE memory_old RENAME TO memory;"
                 "ALTER TABLE memory ADD COLUMN bytes INTEGER NOT NULL DEFAULT 77;");
  expect_pages_read_as_sql(path, 5);
  Reader reader(path);
  const auto [first, last] = reader.memory_rowid_range();
  const std::vector<MemorySample> rows = samples(reader, first, last);
  ASSERT_FALSE(rows.empty());
  for (const MemorySample& s : rows) ASSERT_EQ(s.bytes, 77);
}

TEST(PageScan, AWriteAheadLogInUseIsReadThroughSql) {
  TempDir dir;
  const std::string path = dir.file("wal.sqlite");
  write_varied_trace(path, 5000);
  // A writer that keeps its rows in the log: the file's pages lack them.
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &writer), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(writer,
                         "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;"
                         "INSERT INTO events (rank, lane, kind, begin_ns, end_ns) "
                         "SELECT rank, lane, kind, begin_ns + 1, end_ns + 1 FROM events LIMIT 2000;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(writer);
  EXPECT_EQ(expect_pages_read_as_sql(path, 5), 0u);
  Reader reader(path);
  const auto [first, last] = reader.event_id_range();
  EXPECT_EQ(spans(reader, first, last).size(), 7000u);
  sqlite3_close(writer);
}

TEST(PageScan, ADamagedLeafFailsAsSqlFails) {
  TempDir dir;
  const std::string path = dir.file("damaged.sqlite");
  write_varied_trace(path, 60000);
  {
    // The type byte of a page in the middle of the file (a leaf of one of the tables or indexes).
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = std::filesystem::file_size(path);
    file.seekp(std::streamoff((size / 2) / 65536 * 65536));
    file.put('\x07');
  }
  auto outcome = [&](BulkScanPath how) {
    try {
      Reader reader(path);
      reader.set_bulk_scan_path(how);
      const auto [first, last] = reader.event_id_range();
      const auto [m_first, m_last] = reader.memory_rowid_range();
      return std::to_string(spans(reader, first, last).size()) + " events, " +
             std::to_string(samples(reader, m_first, m_last).size()) + " samples";
    } catch (const TraceError& error) {
      return std::string(error.what());
    }
  };
  EXPECT_EQ(outcome(BulkScanPath::Pages), outcome(BulkScanPath::Sql));
}

// The decoder itself on a table the traces never have: records larger than a page, whose
// columns after a long blob sit on overflow pages.
TEST(PageScan, RecordsOnOverflowPages) {
  TempDir dir;
  const std::string path = dir.file("overflow.sqlite");
  exec_sql(path, "PRAGMA page_size = 1024; CREATE TABLE t (a INTEGER, b BLOB, c INTEGER);"
                 "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) "
                 "INSERT INTO t SELECT i * -3, zeroblob(i * 37 % 5000), i * 1000003 FROM n;");
  int64_t root = 0;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* statement = nullptr;
    sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_schema WHERE name = 't'", -1, &statement, nullptr);
    ASSERT_EQ(sqlite3_step(statement), SQLITE_ROW);
    root = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
  }
  auto file = detail::PageFile::open(path);
  ASSERT_TRUE(file);
  struct Seen {
    std::vector<std::array<int64_t, 3>> rows;
  } seen;
  const detail::PageScanResult result = file->scan(
      uint32_t(root), 10, 290, {2, -1, 0},
      [](void* context, int64_t, const detail::ColumnValue* v) {
        static_cast<Seen*>(context)->rows.push_back({v[0].value, v[1].value, v[2].value});
        return true;
      },
      &seen);
  EXPECT_EQ(result.end, detail::PageScanEnd::Finished);
  ASSERT_EQ(seen.rows.size(), 281u);
  for (size_t k = 0; k < seen.rows.size(); ++k) {
    const int64_t i = int64_t(k) + 10;
    EXPECT_EQ(seen.rows[k][0], i * 1000003);
    EXPECT_EQ(seen.rows[k][1], i);
    EXPECT_EQ(seen.rows[k][2], i * -3);
  }
  // The blob itself is not an integer: the scan stops before that row, saying where to go on.
  const detail::PageScanResult blob = file->scan(
      uint32_t(root), 5, 8, {1}, [](void*, int64_t, const detail::ColumnValue*) { return true; }, nullptr);
  EXPECT_EQ(blob.end, detail::PageScanEnd::Unreadable);
  EXPECT_EQ(blob.next_rowid, 5);
}

// The hang analysis's first question (analysis/hang.cpp), answered alike by the pages and by SQL.
TEST(PageScan, ACollectiveThatNeverCompletedIsFoundEitherWay) {
  TempDir dir;
  const std::string path = dir.file("pending.sqlite");
  write_varied_trace(path, 20000);
  auto answer = [&](BulkScanPath how) {
    Reader reader(path);
    reader.set_bulk_scan_path(how);
    return reader.any_collective_not_completed();
  };
  exec_sql(path, "UPDATE events SET flags = flags & 63;");
  EXPECT_FALSE(answer(BulkScanPath::Pages));
  EXPECT_FALSE(answer(BulkScanPath::Sql));
  // One collective near the end, never completed (flags 64: Note [Collective end state]).
  exec_sql(path, "UPDATE events SET flags = 64 WHERE id = (SELECT max(id) FROM events WHERE kind = 5);");
  EXPECT_TRUE(answer(BulkScanPath::Pages));
  EXPECT_TRUE(answer(BulkScanPath::Sql));
}
