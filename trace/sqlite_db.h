// Thin RAII wrappers over the SQLite C API used by trace/'s writers and reader: a connection
// and a prepared statement whose errors become TraceErrors naming the file. Internal to trace/;
// nothing outside trace/ includes this (docs/design.md: only trace/ writes SQL).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "trace/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace dpscope::trace::detail {

enum class OpenMode {
  CreateFresh,  // delete any file at the path (and its -wal/-shm), then create it
  ReadWrite,    // open an existing file for writing
  ReadOnly,     // open an existing file for reading only
};

// One SQLite connection. Not thread-safe: use it from one thread at a time.
class Db {
 public:
  Db(const std::string& path, OpenMode mode);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  void exec(const std::string& sql);
  // The first column of the first row of `sql` as an integer, or `fallback` if no row.
  int64_t query_int(const std::string& sql, int64_t fallback = 0);
  std::string query_text(const std::string& sql, const std::string& fallback = "");

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  // A TraceError naming the file, the operation and SQLite's message.
  [[noreturn]] void fail(std::string_view what) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// A prepared statement. Bind with 1-based indices; kNone/kNone64 and empty optionals bind NULL.
class Statement {
 public:
  Statement(Db& db, const std::string& sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void bind_int(int index, int64_t value);
  void bind_int_or_null(int index, int64_t value, int64_t null_value);
  void bind_double(int index, double value);
  void bind_text(int index, std::string_view value);
  void bind_null(int index);
  // Steps once; true while rows come back. Throws on error.
  bool step();
  // Runs a statement that returns no rows, then resets it for reuse.
  void run();
  void reset();

  int64_t column_int(int index) const;
  // kNone64 where the column is NULL.
  int64_t column_int_or_none(int index) const;
  double column_double(int index) const;
  std::string column_text(int index) const;
  bool column_is_null(int index) const;

 private:
  Db& db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace dpscope::trace::detail
