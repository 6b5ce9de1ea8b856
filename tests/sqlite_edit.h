// Raw SQL on a trace file, for the tests that damage, downgrade or extend one (dpscope itself
// writes SQL only in trace/; a test may, to make the files it cannot otherwise make).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

namespace dpscope::testing {

// Runs `sql` (one statement or several) on the SQLite file at `path`; a failure fails the test,
// naming SQLite's message and the statement.
inline void exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db) << " in " << sql;
  sqlite3_close(db);
}

}  // namespace dpscope::testing
