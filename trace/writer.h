// Writer: creates a trace file with the schema of schema.h and inserts rows into it through
// prepared statements. The single SQL writer behind the Recorder's writer thread, merge and
// synth. Not thread-safe: one thread owns a Writer.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "trace/records.h"
#include "trace/sqlite_db.h"

namespace dpscope::trace {

class Writer {
 public:
  // Creates `path` afresh (a file already there is replaced) with every table, the lookup
  // tables, application_id, user_version and meta.schema_version; the file appears only with
  // all of them (Note [Trace file creation] in writer.cpp). WAL journal, so a process killed
  // mid-run leaves every committed transaction readable.
  explicit Writer(const std::string& path);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // ---- Transactions: batch many rows into one (inserts outside a transaction are slow).
  void begin();
  void commit();

  // ---- Rows. Every column is bound; kNone fields become NULL.
  void set_meta(std::string_view key, std::string_view value);
  void put_rank(const RankInfo& rank);  // insert or replace
  void add_lane(const LaneInfo& lane);
  void add_name(NameId id, std::string_view name);
  void add_event(const Event& event);
  void add_memory(const MemorySample& sample);
  void add_metric(int32_t rank, int32_t iteration, NameId name, double value);
  void add_param(const ParamInfo& param);  // insert or replace: the latest plan wins
  void add_bucket(const BucketInfo& bucket);
  void add_unit(const UnitInfo& unit);
  void add_unit_shard(const UnitShard& shard);

  // Moves every rank's events (begin, end, enqueue) and memory samples by its ranks row's
  // clock_offset_ns: for a writer that learns the offsets only after writing the rows (`dpscope
  // import`'s alignment). One pass over each table; ranks of offset 0 are left alone.
  void apply_clock_offsets();

  // Finishes the file: creates the indexes and folds the WAL back into the main file, so a
  // finished trace is one self-contained file. The Writer is unusable afterwards.
  void finish();

  const std::string& path() const { return path_; }
  detail::Db& db() { return *db_; }

 private:
  std::string path_;
  std::unique_ptr<detail::Db> db_;
  struct Statements;
  std::unique_ptr<Statements> statements_;
};

}  // namespace dpscope::trace
