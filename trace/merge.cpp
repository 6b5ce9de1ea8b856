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

// Copies one attached input (schema `src`) into the main database.
void copy_input(detail::Db& db) {
  db.exec("INSERT OR IGNORE INTO names (name) SELECT name FROM src.names ORDER BY id");
  db.exec("DROP TABLE IF EXISTS temp.name_map");
  db.exec("CREATE TEMP TABLE name_map (old INTEGER PRIMARY KEY, new INTEGER NOT NULL)");
  db.exec("INSERT INTO temp.name_map SELECT s.id, m.id FROM src.names s"
          " JOIN main.names m ON m.name = s.name");
  db.exec("INSERT OR IGNORE INTO meta SELECT key, value FROM src.meta");
  // Every "SELECT *" below has an ORDER BY: without one, SQLite's transfer optimisation copies
  // the input's records and index entries as raw bytes, unread, so a damaged input (a broken
  // record, an index out of step with its table) became a damaged merged file reported as a
  // success. Decoded and re-inserted, a broken record fails the copy, naming the input, and the
  // merged file's indexes are built afresh.
  // Named columns: a rank file of schema version 2 has no clock_uncertainty_ns (0 here).
  const std::string rank_columns =
      std::string("rank, host, pid, local_rank, device, clock_offset_ns, start_ns, end_ns, events,"
                  " dropped_events, status") +
      (db.query_int("SELECT COUNT(*) FROM pragma_table_info('ranks', 'src')"
                    " WHERE name = 'clock_uncertainty_ns'") > 0
           ? ", clock_uncertainty_ns"
           : "");
  db.exec("INSERT INTO ranks (" + rank_columns + ") SELECT " + rank_columns + " FROM src.ranks ORDER BY rowid");
  db.exec("INSERT OR REPLACE INTO lanes SELECT * FROM src.lanes ORDER BY rowid");
  // A rank file of schema version 3 or older has no CPU times (NULL here).
  const bool has_cpu_times = db.query_int("SELECT COUNT(*) FROM pragma_table_info('events', 'src')"
                                          " WHERE name = 'cpu_begin_ns'") > 0;
  db.exec(std::string("INSERT INTO events (rank, lane, kind, name, begin_ns, end_ns, iteration,"
                      " param, bucket, unit, op, grp, seq, bytes, dtype, value, enqueue_ns, flags,"
                      " cpu_begin_ns, cpu_end_ns)"
                      " SELECT e.rank, e.lane, e.kind, m.new, e.begin_ns, e.end_ns, e.iteration,"
                      " e.param, e.bucket, e.unit, e.op, e.grp, e.seq, e.bytes, e.dtype, e.value,"
                      " e.enqueue_ns, e.flags, ") +
          (has_cpu_times ? "e.cpu_begin_ns, e.cpu_end_ns" : "NULL, NULL") +
          " FROM src.events e LEFT JOIN temp.name_map m ON m.old = e.name ORDER BY e.id");
  db.exec("INSERT INTO memory SELECT * FROM src.memory ORDER BY rowid");
  db.exec("INSERT INTO metrics (rank, iteration, name, value) SELECT x.rank, x.iteration, m.new,"
          " x.value FROM src.metrics x JOIN temp.name_map m ON m.old = x.name ORDER BY x.rowid");
  // Run-wide plans are identical on every rank; the first (lowest) rank's copy is kept.
  db.exec("INSERT OR IGNORE INTO params SELECT * FROM src.params ORDER BY rowid");
  db.exec("INSERT OR IGNORE INTO buckets SELECT * FROM src.buckets ORDER BY rowid");
  db.exec("INSERT OR IGNORE INTO bucket_params SELECT * FROM src.bucket_params ORDER BY rowid");
  db.exec("INSERT OR IGNORE INTO units SELECT * FROM src.units ORDER BY rowid");
  db.exec("INSERT OR REPLACE INTO unit_shards SELECT * FROM src.unit_shards ORDER BY rowid");
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
    Input input{path, {}};
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
        copy_input(db);
        db.exec("COMMIT");
        db.exec("DETACH DATABASE src");
      } catch (const TraceError& failure) {
        // SQLite's message names the output; the input is what is damaged (a table with
        // other columns, a value a constraint refuses).
        throw TraceError("merge: cannot copy " + files[i].path + ": " + failure.what());
      }
      if (progress) progress(double(i + 1) / double(files.size()));
    }
    db.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('" + std::string(meta_key::kMergedRanks) + "', '" +
            std::to_string(owner.size()) + "')");
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
  detail::Statement update(db, "UPDATE ranks SET status = ?1 WHERE status = 'running'");
  update.bind_text(1, how_it_ended);
  update.step();
  return sqlite3_changes(db.handle()) > 0;
}

}  // namespace dpscope::trace
