// merge: copies every rank file's rows into one run file through ATTACH, re-numbering interned
// names so that events and metrics of all ranks share one names table (see merge.h).
#include "trace/merge.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <map>
#include <system_error>

#include <sqlite3.h>

#include "trace/error.h"
#include "trace/reader.h"
#include "trace/saturate.h"
#include "trace/sqlite_db.h"
#include "trace/vocabulary.h"
#include "trace/writer.h"

namespace dpscope::trace {
namespace {

struct Input {
  std::string path;
  int version = 0;  // its schema version
  std::vector<int32_t> ranks;
};

// A read-only SQLite URI for `path`: the characters URIs reserve are percent-encoded.
std::string read_only_uri(const std::string& path) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char encoded[4];
      std::snprintf(encoded, sizeof(encoded), "%%%02X", static_cast<unsigned char>(c));
      uri += encoded;
    } else {
      uri += c;
    }
  }
  return uri + "?mode=ro";
}

std::string sql_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    quoted += c;
    if (c == '\'') quoted += '\'';
  }
  return quoted + "'";
}

// INSERT INTO <table> (every column) SELECT `select` FROM `from`.
void copy_rows(detail::Db& db, const Table& table, OnConflict conflict,
               const std::vector<std::string>& select, const std::string& from) {
  db.exec(insert_into(table, conflict) + " SELECT " + comma_separated(select) + " FROM " + from);
}

// Copies `table` of the attached input as it is, column by column as its version has them.
void copy_table(detail::Db& db, const Table& table, OnConflict conflict, int version) {
  copy_rows(db, table, conflict, columns_as_of(table, version),
            "src." + std::string(table.name) + " ORDER BY rowid");
}

// Copies one attached input (schema `src`) of schema version `version` into the main database.
// Every SELECT names the input's columns as columns_as_of reads a file of its version (a column
// it predates is copied as its stand-in), and has an ORDER BY: without one, SQLite's transfer
// optimisation copies the input's records and index entries as raw bytes, unread, so a damaged
// input (a broken record, an index out of step with its table) became a damaged merged file
// reported as a success. Decoded and re-inserted, a broken record fails the copy, naming the
// input, and the merged file's indexes are built afresh.
void copy_input(detail::Db& db, int version) {
  // Names and events get new ids here; names.id NULL and events.id NULL let SQLite number them.
  std::vector<std::string> names = columns_as_of(kNamesTable, version);
  names[column_position(NamesColumn::Id)] = "NULL";
  copy_rows(db, kNamesTable, OnConflict::Ignore, names, "src.names ORDER BY id");
  db.exec("DROP TABLE IF EXISTS temp.name_map");
  db.exec("CREATE TEMP TABLE name_map (old INTEGER PRIMARY KEY, new INTEGER NOT NULL)");
  db.exec("INSERT INTO temp.name_map SELECT s.id, m.id FROM src.names s"
          " JOIN main.names m ON m.name = s.name");
  copy_table(db, kMetaTable, OnConflict::Ignore, version);
  copy_table(db, kRanksTable, OnConflict::Abort, version);
  copy_table(db, kLanesTable, OnConflict::Replace, version);
  std::vector<std::string> events = columns_as_of(kEventsTable, version, "e.");
  events[column_position(EventsColumn::Id)] = "NULL";
  events[column_position(EventsColumn::Name)] = "m.new";
  copy_rows(db, kEventsTable, OnConflict::Abort, events,
            "src.events e LEFT JOIN temp.name_map m ON m.old = e.name ORDER BY e.id");
  copy_table(db, kMemoryTable, OnConflict::Abort, version);
  std::vector<std::string> metrics = columns_as_of(kMetricsTable, version, "x.");
  metrics[column_position(MetricsColumn::Name)] = "m.new";
  copy_rows(db, kMetricsTable, OnConflict::Abort, metrics,
            "src.metrics x JOIN temp.name_map m ON m.old = x.name ORDER BY x.rowid");
  // Run-wide plans are identical on every rank; the first (lowest) rank's copy is kept.
  copy_table(db, kParamsTable, OnConflict::Ignore, version);
  copy_table(db, kBucketsTable, OnConflict::Ignore, version);
  copy_table(db, kBucketParamsTable, OnConflict::Ignore, version);
  copy_table(db, kUnitsTable, OnConflict::Ignore, version);
  copy_table(db, kUnitShardsTable, OnConflict::Replace, version);
}

}  // namespace

void check_merge_arguments(const std::vector<std::string>& inputs, const std::string& out) {
  if (inputs.empty()) throw TraceError("merge: no input files given (pass the rank files)");
  for (const std::string& path : inputs) {
    if (path == out) {
      throw TraceError("merge: the output " + out + " is also an input; choose another name");
    }
  }
}

MergeResult merge_traces(const std::vector<std::string>& inputs, const std::string& out,
                         const std::function<void(double)>& progress) {
  check_merge_arguments(inputs, out);
  std::vector<Input> files;
  std::map<int32_t, std::string> owner;
  for (const std::string& path : inputs) {
    Reader reader(path);
    Input input{path, reader.schema_version(), {}};
    for (const RankInfo& rank : reader.ranks()) {
      auto [it, inserted] = owner.emplace(rank.rank, path);
      if (!inserted) {
        throw TraceError("merge: rank " + std::to_string(rank.rank) + " is in both " +
                         it->second + " and " + path + "; pass each rank's file once");
      }
      input.ranks.push_back(rank.rank);
    }
    files.push_back(std::move(input));
  }
  std::sort(files.begin(), files.end(), [](const Input& a, const Input& b) {
    int32_t ra = a.ranks.empty() ? INT32_MAX : a.ranks.front();
    int32_t rb = b.ranks.empty() ? INT32_MAX : b.ranks.front();
    return ra < rb;
  });

  // Written under another name and renamed when finished, so `out` is never half a merge
  // (a second Ctrl-C, a full disk): it is the old file, no file, or the whole merge.
  const std::string partial = out + ".partial";
  MergeResult result;
  try {
    Writer writer(partial);
    detail::Db& db = writer.db();
    for (size_t i = 0; i < files.size(); ++i) {
      try {
        db.exec("ATTACH DATABASE " + sql_quote(read_only_uri(files[i].path)) + " AS src");
        db.exec("BEGIN");
        copy_input(db, files[i].version);
        db.exec("COMMIT");
        db.exec("DETACH DATABASE src");
      } catch (const TraceError& failure) {
        // SQLite's message names the output; the input is what is damaged (a table with
        // other columns, a value a constraint refuses).
        throw TraceError("merge: cannot copy " + files[i].path + ": " + failure.what());
      }
      if (progress) progress(double(i + 1) / double(files.size()));
    }
    writer.set_meta(meta_key::kMergedRanks, std::to_string(owner.size()));
    result.ranks = static_cast<int>(owner.size());
    result.events = db.query_int("SELECT count(*) FROM events");
    // Summed here, saturating: SQLite's sum() fails with "integer overflow" on a damaged
    // input's counts.
    detail::Statement dropped(db, "SELECT dropped_events FROM ranks");
    while (dropped.step()) {
      result.dropped_events = detail::saturating_add(result.dropped_events, dropped.column_int(0));
    }
    writer.finish();
  } catch (const std::exception&) {
    std::error_code ignored;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::filesystem::remove(partial + suffix, ignored);
    }
    throw;
  }
  std::error_code error;
  std::filesystem::rename(partial, out, error);
  if (error) {
    throw TraceError("merge: cannot rename " + partial + " to " + out + ": " + error.message());
  }
  return result;
}

bool mark_unfinished_rank(const std::string& rank_file, std::string_view how_it_ended) {
  {
    Reader check(rank_file);  // a file that is not a readable trace fails here, naming it
  }
  detail::Db db(rank_file, detail::OpenMode::ReadWrite);
  detail::Statement update(db, "UPDATE ranks SET status = ?1 WHERE status = ?2");
  update.bind_text(1, how_it_ended);
  update.bind_text(2, to_string(RankStatus::Running));
  update.step();
  return sqlite3_changes(db.handle()) > 0;
}

}  // namespace dpscope::trace
