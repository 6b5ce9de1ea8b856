// Every kind of bad file the Reader can be handed gets one clear TraceError naming the file and
// saying what is wrong — never a crash: missing, a directory, empty, random bytes, truncated,
// a foreign SQLite database, a newer schema, a damaged dpscope file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "tests/sqlite_edit.h"
#include "tests/test_util.h"
#include "trace/error.h"
#include "trace/reader.h"
#include "trace/writer.h"

using namespace dpscope::trace;
using dpscope::testing::exec_sql;
using dpscope::testing::TempDir;

namespace {

// Expects Reader(path), and then reading every table, to fail with a TraceError whose message
// names the file and contains `phrase`.
void expect_open_error(const std::string& path, const std::string& phrase) {
  try {
    Reader reader(path);
    reader.ranks();
    reader.event_count();
    reader.for_each_event([](const Event&) { return true; });
    reader.memory();
    FAIL() << "expected a TraceError for " << path;
  } catch (const TraceError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(phrase), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  }
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A finished trace with enough events to span many pages.
void write_trace(const std::string& path, int events = 20000) {
  Writer writer(path);
  writer.begin();
  writer.put_rank(RankInfo{});
  for (int i = 0; i < events; ++i) {
    Event e;
    e.kind = EventKind::Mark;
    e.begin_ns = e.end_ns = i;
    e.value = i;
    writer.add_event(e);
  }
  writer.commit();
  writer.finish();
}

}  // namespace

TEST(ReaderErrors, MissingFile) {
  TempDir dir;
  expect_open_error(dir.file("nope.sqlite"), "no such trace file");
}

TEST(ReaderErrors, Directory) {
  TempDir dir;
  expect_open_error(dir.path().string(), "is a directory");
}

TEST(ReaderErrors, EmptyFile) {
  TempDir dir;
  write_bytes(dir.file("empty.sqlite"), "");
  expect_open_error(dir.file("empty.sqlite"), "not an SQLite database");
}

TEST(ReaderErrors, RandomBytes) {
  TempDir dir;
  std::mt19937 random(7);
  std::string bytes(100000, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  write_bytes(dir.file("random.sqlite"), bytes);
  expect_open_error(dir.file("random.sqlite"), "not an SQLite database");
}

TEST(ReaderErrors, TruncatedFile) {
  TempDir dir;
  const std::string path = dir.file("cut.sqlite");
  write_trace(path);
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  expect_open_error(path, "truncated");
}

TEST(ReaderErrors, TruncatedToTheHeaderOnly) {
  TempDir dir;
  const std::string path = dir.file("cut.sqlite");
  write_trace(path);
  std::filesystem::resize_file(path, 100);
  expect_open_error(path, "truncated");
}

TEST(ReaderErrors, ForeignSqliteDatabase) {
  TempDir dir;
  const std::string path = dir.file("foreign.db");
  exec_sql(path, "CREATE TABLE t (x); INSERT INTO t VALUES (1);");
  expect_open_error(path, "not a dpscope trace");
}

TEST(ReaderErrors, NewerSchemaVersion) {
  TempDir dir;
  const std::string path = dir.file("future.sqlite");
  write_trace(path, 10);
  exec_sql(path, "PRAGMA user_version = " + std::to_string(kSchemaVersion + 1));
  expect_open_error(path, "newer dpscope (trace schema version " +
                              std::to_string(kSchemaVersion + 1));
}

TEST(ReaderErrors, MissingTable) {
  TempDir dir;
  const std::string path = dir.file("damaged.sqlite");
  write_trace(path, 10);
  exec_sql(path, "DROP VIEW events_named; DROP TABLE memory;");
  expect_open_error(path, "table 'memory' is missing");
}

TEST(ReaderErrors, OverwrittenPagesFailCleanly) {
  TempDir dir;
  const std::string path = dir.file("scribbled.sqlite");
  write_trace(path, 50000);
  {
    // Scribble over the middle of the file, past the schema page.
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = std::filesystem::file_size(path);
    file.seekp(static_cast<std::streamoff>(size / 2));
    std::string junk(70000, '\x5a');
    file.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  expect_open_error(path, "damaged trace file");
}

TEST(ReaderErrors, AValidFileOpens) {
  TempDir dir;
  const std::string path = dir.file("good.sqlite");
  write_trace(path, 10);
  Reader reader(path);
  EXPECT_EQ(reader.event_count(), 10);
  EXPECT_EQ(reader.schema_version(), kSchemaVersion);
}
