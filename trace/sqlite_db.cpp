// RAII wrappers over the SQLite C API for trace/ (see sqlite_db.h).
#include "trace/sqlite_db.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dpscope::trace::detail {

Db::Db(const std::string& path, OpenMode mode) : path_(path) {
  // URI names let merge ATTACH its inputs read-only (file:PATH?mode=ro).
  int flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
  switch (mode) {
    case OpenMode::CreateFresh:
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        std::string file = path + suffix;
        if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
          throw TraceError("cannot replace trace file " + file + ": " + std::strerror(errno) +
                           " (check the directory's permissions)");
        }
      }
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      break;
    case OpenMode::ReadWrite:
      flags |= SQLITE_OPEN_READWRITE;
      break;
    case OpenMode::ReadOnly:
      flags |= SQLITE_OPEN_READONLY;
      break;
  }
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw TraceError("cannot open trace file " + path + ": " + message);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, 5000);
}

Db::~Db() { sqlite3_close_v2(db_); }

void Db::fail(std::string_view what) const {
  const int code = sqlite3_errcode(db_) & 0xff;
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) {
    throw TraceError(path_ + ": damaged trace file (" + sqlite3_errmsg(db_) +
                     "); its contents were overwritten or cut: restore a copy or re-run");
  }
  if (code == SQLITE_FULL) {
    throw TraceError(path_ + ": the disk is full (" + std::string(what) +
                     "); free space or write the trace elsewhere with --trace PATH");
  }
  throw TraceError("trace file " + path_ + ": " + std::string(what) + ": " + sqlite3_errmsg(db_));
}

void Db::exec(const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    const int code = sqlite3_errcode(db_) & 0xff;
    if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB || code == SQLITE_FULL) {
      sqlite3_free(message);
      fail("cannot run '" + sql.substr(0, 60) + "'");
    }
    std::string text = message ? message : sqlite3_errmsg(db_);
    sqlite3_free(message);
    throw TraceError("trace file " + path_ + ": " + text + " (in: " + sql.substr(0, 80) + ")");
  }
}

int64_t Db::query_int(const std::string& sql, int64_t fallback) {
  Statement statement(*this, sql);
  return statement.step() && !statement.column_is_null(0) ? statement.column_int(0) : fallback;
}

std::string Db::query_text(const std::string& sql, const std::string& fallback) {
  Statement statement(*this, sql);
  return statement.step() && !statement.column_is_null(0) ? statement.column_text(0) : fallback;
}

Statement::Statement(Db& db, const std::string& sql) : db_(db) {
  if (sqlite3_prepare_v3(db.handle(), sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt_,
                         nullptr) != SQLITE_OK) {
    db.fail("cannot prepare '" + sql.substr(0, 60) + "'");
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::bind_int(int index, int64_t value) { sqlite3_bind_int64(stmt_, index, value); }

void Statement::bind_int_or_null(int index, int64_t value, int64_t null_value) {
  if (value == null_value) {
    sqlite3_bind_null(stmt_, index);
  } else {
    sqlite3_bind_int64(stmt_, index, value);
  }
}

void Statement::bind_double(int index, double value) { sqlite3_bind_double(stmt_, index, value); }

void Statement::bind_text(int index, std::string_view value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
}

void Statement::bind_null(int index) { sqlite3_bind_null(stmt_, index); }

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  std::string sql = sqlite3_sql(stmt_) ? sqlite3_sql(stmt_) : "";
  sqlite3_reset(stmt_);
  db_.fail("cannot run '" + sql.substr(0, 60) + "'");
}

void Statement::run() {
  while (step()) {
  }
  sqlite3_reset(stmt_);  // every caller binds every column again, so bindings need no clearing
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::column_int(int index) const { return sqlite3_column_int64(stmt_, index); }

int64_t Statement::column_int_or_none(int index) const {
  return column_is_null(index) ? -1 : sqlite3_column_int64(stmt_, index);
}

double Statement::column_double(int index) const { return sqlite3_column_double(stmt_, index); }

std::string Statement::column_text(int index) const {
  const unsigned char* text = sqlite3_column_text(stmt_, index);
  return text ? std::string(reinterpret_cast<const char*>(text),
                            static_cast<size_t>(sqlite3_column_bytes(stmt_, index)))
              : std::string();
}

bool Statement::column_is_null(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

}  // namespace dpscope::trace::detail
