// Fuzz target: the trace reader on SQL-level mutations of valid traces. The input picks one of
// the small traces of seed_traces.h and a few UPDATE/DELETE/INSERT/DROP/ALTER/PRAGMA statements
// with odd values (NULLs, negative and huge ids, wrong types, dangling references, out-of-range
// enumerations), applies them with SQLite, optionally flips a few bytes of the file, and reads
// the result as fuzz_trace_bytes does: it works or throws a TraceError naming the file.
#include <fuzzer/FuzzedDataProvider.h>
#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/fuzz/seed_traces.h"
#include "tests/fuzz/trace_exercise.h"

namespace {

using dpscope::fuzz::scratch_dir;

struct Table {
  std::string name;
  std::vector<std::string> columns;
  std::string integer_key;  // the INTEGER PRIMARY KEY column (a rowid alias), or ""
};

struct Schema {
  std::vector<Table> tables;
  std::vector<std::string> indexes;
  std::vector<std::string> views;
};

struct Base {
  std::string name;   // seed_trace_names()
  std::string bytes;  // the file's contents
};

std::vector<Base>& bases() {
  static std::vector<Base> all;
  return all;
}

Schema& schema() {
  static Schema s;
  return s;
}

void read_schema(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT type, name FROM sqlite_master ORDER BY name", -1, &st, nullptr);
  std::vector<std::pair<std::string, std::string>> objects;
  while (sqlite3_step(st) == SQLITE_ROW) {
    objects.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                         reinterpret_cast<const char*>(sqlite3_column_text(st, 1)));
  }
  sqlite3_finalize(st);
  for (const auto& [type, name] : objects) {
    if (name.rfind("sqlite_", 0) == 0) continue;
    if (type == "index") schema().indexes.push_back(name);
    if (type == "view") schema().views.push_back(name);
    if (type != "table") continue;
    Table table{name, {}, ""};
    sqlite3_prepare_v2(db, ("PRAGMA table_info(" + name + ")").c_str(), -1, &st, nullptr);
    int keys = 0;
    std::string key;
    while (sqlite3_step(st) == SQLITE_ROW) {
      const std::string column = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
      const std::string type_name = reinterpret_cast<const char*>(sqlite3_column_text(st, 2));
      table.columns.push_back(column);
      if (sqlite3_column_int(st, 5) > 0) {
        ++keys;
        if (type_name == "INTEGER") key = column;
      }
    }
    sqlite3_finalize(st);
    if (keys == 1) table.integer_key = key;
    schema().tables.push_back(table);
  }
  sqlite3_close(db);
}

const std::string& dir() {
  static const std::string d = scratch_dir("fuzz_trace_sql");
  return d;
}

template <size_t N>
std::string pick(FuzzedDataProvider& f, const char* const (&choices)[N]) {
  return choices[f.ConsumeIntegralInRange<size_t>(0, N - 1)];
}

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\0') continue;
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

// An odd value for `column` (an SQL expression).
std::string value(FuzzedDataProvider& f, const std::string& column) {
  static const char* const kSmall[] = {"1", "2", "3", "4", "5", "7", "8", "9", "10", "12", "13",
                                       "254", "255", "256", "32767", "32768", "-32768", "-32769",
                                       "65535", "65536", "-2", "-255", "-256"};
  static const char* const kInt32[] = {"2147483647", "2147483648", "-2147483648", "-2147483649",
                                       "4294967295", "4294967296", "1073741824", "100000000"};
  static const char* const kInt64[] = {"9223372036854775807", "-9223372036854775808",
                                       "-9223372036854775807", "4611686018427387904",
                                       "-4611686018427387904", "9223372036854775806",
                                       "1000000000000000000"};
  static const char* const kReal[] = {"0.5", "-1.5", "1e300", "-1e300", "9.3e18", "-9.3e18",
                                      "1e-300", "9e999", "-9e999", "2147483647.5", "1e19"};
  static const char* const kText[] = {"''", "'abc'", "'[2,3]'", "'[-'", "'[99999999999999999999]'",
                                      "'[1,-'", "'-'", "'--5'", "'complete'", "'running'",
                                      "'forward'", "'backward'", "'iteration'", "'step_ms'",
                                      "'loss'", "'x'", "'12abc'", "' 7'", "'7 '", "'0x10'",
                                      "'-1'", "'1e3'", "'[[1],[2]]'", "'[]'", "'ddp'", "'fsdp'",
                                      "'world_size'", "'%s%n'", "'\\'", "'\"'"};
  static const char* const kBlob[] = {"X''", "X'00'", "X'00FF'", "zeroblob(9)",
                                      "CAST(X'C3FF61' AS TEXT)", "CAST(X'EDA080' AS TEXT)",
                                      "CAST(X'F4908080' AS TEXT)", "CAST(X'610062' AS TEXT)",
                                      "printf('%.*c', 3000, 'x')"};
  switch (f.ConsumeIntegralInRange<int>(0, 12)) {
    case 0: return "NULL";
    case 1: return "0";
    case 2: return "-1";
    case 3: return pick(f, kSmall);
    case 4: return pick(f, kInt32);
    case 5: return pick(f, kInt64);
    case 6: return std::to_string(f.ConsumeIntegral<int64_t>());
    case 7: return std::to_string(f.ConsumeIntegralInRange<int>(-20, 100));
    case 8: return pick(f, kReal);
    case 9: return quoted(f.ConsumeRandomLengthString(40));
    case 10: return pick(f, kText);
    case 11: return pick(f, kBlob);
    default: {
      static const char* const kOps[] = {"+", "-", "*", "/", "%"};
      return "(" + column + " " + pick(f, kOps) + " " + pick(f, kSmall) + ")";
    }
  }
}

const Table& any_table(FuzzedDataProvider& f) {
  // Most mutations go to the tables the reader interprets most.
  static const char* const kHot[] = {"events", "events", "events", "ranks", "lanes", "names",
                                     "memory", "metrics", "params", "meta", "buckets",
                                     "bucket_params", "units", "unit_shards"};
  const auto& tables = schema().tables;
  if (f.ConsumeBool()) {
    const std::string name = pick(f, kHot);
    for (const Table& t : tables) {
      if (t.name == name) return t;
    }
  }
  return tables[f.ConsumeIntegralInRange<size_t>(0, tables.size() - 1)];
}

const std::string& any_column(FuzzedDataProvider& f, const Table& t) {
  return t.columns[f.ConsumeIntegralInRange<size_t>(0, t.columns.size() - 1)];
}

std::string row_filter(FuzzedDataProvider& f, const Table& t) {
  switch (f.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return "";
    case 1:
      return " WHERE rowid = (SELECT rowid FROM " + t.name + " ORDER BY rowid LIMIT 1 OFFSET " +
             std::to_string(f.ConsumeIntegralInRange<int>(0, 60)) + ")";
    case 2: {
      const int m = f.ConsumeIntegralInRange<int>(2, 7);
      return " WHERE rowid % " + std::to_string(m) + " = " +
             std::to_string(f.ConsumeIntegralInRange<int>(0, m - 1));
    }
    default:
      return " WHERE " + any_column(f, t) + " = " + std::to_string(f.ConsumeIntegralInRange<int>(-1, 9));
  }
}

// The columns of `t` as a SELECT list, with `column` replaced by `replacement` (or, for a row
// copy, the rowid alias by NULL so the copy gets a new id).
std::string select_list(const Table& t, const std::string& column, const std::string& replacement,
                        bool new_key) {
  std::string list;
  for (const std::string& c : t.columns) {
    if (!list.empty()) list += ", ";
    if (c == column) list += replacement;
    else if (new_key && c == t.integer_key) list += "NULL";
    else list += c;
  }
  return list;
}

std::string column_list(const Table& t) {
  std::string list;
  for (const std::string& c : t.columns) list += (list.empty() ? "" : ", ") + c;
  return list;
}

// One mutation as SQL.
std::string statement(FuzzedDataProvider& f, int& copies) {
  const Table& t = any_table(f);
  const std::string& column = any_column(f, t);
  switch (f.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
    case 1:
    case 2:
      return "UPDATE " + t.name + " SET " + column + " = " + value(f, column) + row_filter(f, t);
    case 3:
      return "DELETE FROM " + t.name + row_filter(f, t);
    case 4:
    case 5: {
      // A copy of one row with one column changed: dangling references, duplicates, odd ids.
      return "INSERT OR REPLACE INTO " + t.name + " (" + column_list(t) + ") SELECT " +
             select_list(t, column, value(f, column), true) + " FROM " + t.name +
             " WHERE rowid = (SELECT rowid FROM " + t.name + " ORDER BY rowid LIMIT 1 OFFSET " +
             std::to_string(f.ConsumeIntegralInRange<int>(0, 60)) + ")";
    }
    case 6: {
      // Doubles a table (a few times per input at most, so files stay small).
      if (++copies > 3) return "SELECT 1";
      return "INSERT OR IGNORE INTO " + t.name + " (" + column_list(t) + ") SELECT " +
             select_list(t, "", "", true) + " FROM " + t.name + " LIMIT 4000";
    }
    case 7: {
      std::string values;
      for (const std::string& c : t.columns) values += (values.empty() ? "" : ", ") + value(f, c);
      return "INSERT OR REPLACE INTO " + t.name + " (" + column_list(t) + ") VALUES (" + values + ")";
    }
    case 8: {
      const auto& indexes = schema().indexes;
      if (indexes.empty()) return "SELECT 1";
      return "DROP INDEX " + indexes[f.ConsumeIntegralInRange<size_t>(0, indexes.size() - 1)];
    }
    case 9:
      return "DROP TABLE " + t.name;
    case 10:
      // The table with a column gone or renamed.
      if (f.ConsumeBool()) return "ALTER TABLE " + t.name + " DROP COLUMN " + column;
      return "ALTER TABLE " + t.name + " RENAME COLUMN " + column + " TO " + column + "_x";
    case 11:
      // The table replaced by a view or by a table of other columns and types.
      if (f.ConsumeBool()) {
        return "ALTER TABLE " + t.name + " RENAME TO old_" + t.name + "; CREATE VIEW " + t.name +
               " AS SELECT * FROM old_" + t.name;
      }
      return "ALTER TABLE " + t.name + " RENAME TO old_" + t.name + "; CREATE TABLE " + t.name +
             " AS SELECT " + select_list(t, column, "CAST(" + column + " AS TEXT) || 'x' AS " + column, false) +
             " FROM old_" + t.name;
    case 12:
      return "ALTER TABLE " + t.name + " ADD COLUMN extra INTEGER DEFAULT " + value(f, "0");
    case 13: {
      static const char* const kPragmas[] = {"user_version", "application_id"};
      static const char* const kValues[] = {"0", "1", "2", "-1", "1146114883", "2147483647",
                                            "-2147483648"};
      return std::string("PRAGMA ") + pick(f, kPragmas) + " = " + pick(f, kValues);
    }
    case 14: {
      static const char* const kKeys[] = {"world_size", "strategy", "backend", "model",
                                          "schema_version", "trace_level", "merged_ranks",
                                          "config"};
      return "INSERT OR REPLACE INTO meta (key, value) VALUES ('" + pick(f, kKeys) + "', " +
             value(f, "value") + ")";
    }
    default: {
      // Rows sharing one value: many events at one time, rank or iteration.
      return "UPDATE " + t.name + " SET " + column + " = (SELECT " + column + " FROM " + t.name +
             " LIMIT 1)" + row_filter(f, t);
    }
  }
}

void setup() {
  if (!bases().empty()) return;
  for (const std::string& name : dpscope::fuzz::seed_trace_names()) {
    const std::string path = dir() + "/base-" + name;
    dpscope::fuzz::write_seed_trace(name, path);
    bases().push_back(Base{name, dpscope::fuzz::read_file_bytes(path)});
    if (schema().tables.empty()) read_schema(path);
    dpscope::fuzz::remove_trace_files(path);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  setup();
  FuzzedDataProvider f(data, size);
  const Base& base = bases()[f.ConsumeIntegralInRange<size_t>(0, bases().size() - 1)];
  const bool merge = f.ConsumeBool();
  const std::string path = dir() + "/input.sqlite";
  dpscope::fuzz::remove_trace_files(path);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(base.bytes.data(), static_cast<std::streamsize>(base.bytes.size()));
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    int copies = 0;
    // DPSCOPE_FUZZ_VERBOSE=1 prints what an input does (to read a finding).
    static const bool verbose = std::getenv("DPSCOPE_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "base trace %s\n", base.name.c_str());
    for (int i = 0; i < 8 && f.remaining_bytes() > 0; ++i) {
      const std::string sql = statement(f, copies);
      const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);  // failing is fine
      if (verbose) std::fprintf(stderr, "%s;  -- %s\n", sql.c_str(), sqlite3_errstr(rc));
    }
  }
  sqlite3_close(db);
  // A few damaged bytes after the SQL: past the header, where SQLite itself must notice.
  const int flips = f.ConsumeIntegralInRange<int>(0, 3);
  if (flips > 0) {
    static const bool verbose = std::getenv("DPSCOPE_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "then %d damaged bytes\n", flips);
    std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
    file.seekg(0, std::ios::end);
    const auto length = static_cast<uint64_t>(file.tellg());
    for (int i = 0; i < flips && length > 100; ++i) {
      file.seekp(static_cast<std::streamoff>(f.ConsumeIntegralInRange<uint64_t>(100, length - 1)));
      file.put(static_cast<char>(f.ConsumeIntegral<uint8_t>()));
    }
  }
  dpscope::fuzz::exercise_trace(path, dir(), merge);
  dpscope::fuzz::remove_trace_files(path);
  return 0;
}
