// Writer: a new trace file and the prepared inserts into each of its tables (see writer.h).
#include "trace/writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "trace/schema.h"
#include "trace/vocabulary.h"

namespace dpscope::trace {
namespace {

// One lookup table (event_kinds, collective_ops, ...): every value of `Enum` and its name.
template <typename Enum>
void fill_lookup(detail::Db& db, const char* table, int count) {
  detail::Statement insert(db, std::string("INSERT INTO ") + table + " (id, name) VALUES (?, ?)");
  for (int i = 0; i < count; ++i) {
    insert.bind_int(1, i);
    insert.bind_text(2, to_string(static_cast<Enum>(i)));
    insert.run();
  }
}

// Writes the schema, the lookup tables and the file's identity into an empty database.
void create_schema(detail::Db& db) {
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
  db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
  db.exec("BEGIN");
  for (const char* ddl : kTables) db.exec(ddl);
  fill_lookup<EventKind>(db, "event_kinds", kEventKindCount);
  fill_lookup<CollectiveOp>(db, "collective_ops", kCollectiveOpCount);
  fill_lookup<UnitState>(db, "unit_states", kUnitStateCount);
  fill_lookup<DType>(db, "dtypes", kDTypeCount);
  fill_lookup<MemoryCategory>(db, "memory_categories", kMemoryCategoryCount);
  fill_lookup<LaneKind>(db, "lane_kinds", kLaneKindCount);
  db.exec("INSERT INTO meta (key, value) VALUES ('" + std::string(meta_key::kSchemaVersion) + "', '" +
          std::to_string(kSchemaVersion) + "')");
  db.exec("COMMIT");
}

}  // namespace

struct Writer::Statements {
  explicit Statements(detail::Db& db)
      : meta(db, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)"),
        rank(db,
             "INSERT OR REPLACE INTO ranks (rank, host, pid, local_rank, device, clock_offset_ns,"
             " start_ns, end_ns, events, dropped_events, status, clock_uncertainty_ns)"
             " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        lane(db, "INSERT OR REPLACE INTO lanes (rank, lane, name, kind) VALUES (?, ?, ?, ?)"),
        name(db, "INSERT OR IGNORE INTO names (id, name) VALUES (?, ?)"),
        event(db,
              "INSERT INTO events (rank, lane, kind, name, begin_ns, end_ns, iteration, param,"
              " bucket, unit, op, grp, seq, bytes, dtype, value, enqueue_ns, flags, cpu_begin_ns,"
              " cpu_end_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        memory(db, "INSERT INTO memory (rank, ts_ns, category, bytes) VALUES (?, ?, ?, ?)"),
        metric(db, "INSERT INTO metrics (rank, iteration, name, value) VALUES (?, ?, ?, ?)"),
        param(db,
              "INSERT OR REPLACE INTO params (param, name, shape, numel, dtype, requires_grad,"
              " sparse, bucket, rebuilt_bucket, unit, unit_offset)"
              " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        bucket(db,
               "INSERT OR REPLACE INTO buckets (generation, bucket, bytes, numel, dtype)"
               " VALUES (?, ?, ?, ?, ?)"),
        bucket_param(db,
                     "INSERT OR REPLACE INTO bucket_params (generation, bucket, position, param,"
                     " offset) VALUES (?, ?, ?, ?, ?)"),
        unit(db,
             "INSERT OR REPLACE INTO units (unit, name, parent, numel, padded_numel, shard_numel)"
             " VALUES (?, ?, ?, ?, ?, ?)"),
        unit_shard(db,
                   "INSERT OR REPLACE INTO unit_shards (unit, rank, shard_begin, shard_end,"
                   " real_numel) VALUES (?, ?, ?, ?, ?)") {}

  detail::Statement meta, rank, lane, name, event, memory, metric, param, bucket, bucket_param,
      unit, unit_shard;
};

// Note [Trace file creation]
// A trace file appears at its path only with its whole schema and already in WAL mode: both
// are written into `<path>.partial`, whose last connection's close folds its WAL back in, and
// the file is renamed into place. Switching the journal mode later would go through a rollback
// journal, and a process killed in that moment (Ctrl-C as a rank starts) left a hot journal
// that read-only readers cannot roll back. Killed while creating, a rank leaves at most the
// .partial files, which the launcher removes and nothing reads.
Writer::Writer(const std::string& path) : path_(path) {
  const std::string partial = path + ".partial";
  try {
    detail::Db fresh(partial, detail::OpenMode::CreateFresh);
    // Large pages make bulk inserts cheap; the page size must be set before the first table.
    fresh.exec("PRAGMA page_size = 65536");
    fresh.exec("PRAGMA journal_mode = WAL");
    create_schema(fresh);
  } catch (const TraceError&) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      ::unlink((partial + suffix).c_str());
    }
    throw;
  }
  // A previous file's WAL must not outlive it: SQLite would replay it into the new file.
  for (const char* suffix : {"-wal", "-shm", "-journal"}) ::unlink((path + suffix).c_str());
  if (::rename(partial.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(partial.c_str());
    throw TraceError("cannot create trace file " + path + ": " + reason +
                     " (check the directory's permissions)");
  }
  db_ = std::make_unique<detail::Db>(path, detail::OpenMode::ReadWrite);
  // WAL with synchronous=NORMAL commits without fsync per transaction yet survives the writing
  // process being killed. The cache stays small (512 KiB): the writer only appends, so a page
  // once committed is not read again, and a larger cache only made the process's resident
  // size grow with the file (docs/reliability.md, Load).
  db_->exec("PRAGMA synchronous = NORMAL");
  db_->exec("PRAGMA cache_size = -512");
  statements_ = std::make_unique<Statements>(*db_);
}

Writer::~Writer() = default;

void Writer::begin() { db_->exec("BEGIN"); }
void Writer::commit() { db_->exec("COMMIT"); }

void Writer::set_meta(std::string_view key, std::string_view value) {
  auto& s = statements_->meta;
  s.bind_text(1, key);
  s.bind_text(2, value);
  s.run();
}

void Writer::put_rank(const RankInfo& r) {
  auto& s = statements_->rank;
  s.bind_int(1, r.rank);
  s.bind_text(2, r.host);
  s.bind_int(3, r.pid);
  s.bind_int(4, r.local_rank);
  s.bind_text(5, r.device);
  s.bind_int(6, r.clock_offset_ns);
  s.bind_int(7, r.start_ns);
  s.bind_int(8, r.end_ns);
  s.bind_int(9, r.events);
  s.bind_int(10, r.dropped_events);
  s.bind_text(11, r.status);
  s.bind_int(12, r.clock_uncertainty_ns);
  s.run();
}

void Writer::add_lane(const LaneInfo& l) {
  auto& s = statements_->lane;
  s.bind_int(1, l.rank);
  s.bind_int(2, l.lane);
  s.bind_text(3, l.name);
  s.bind_int(4, static_cast<int>(l.kind));
  s.run();
}

void Writer::add_name(NameId id, std::string_view name) {
  auto& s = statements_->name;
  s.bind_int(1, id);
  s.bind_text(2, name);
  s.run();
}

void Writer::add_event(const Event& e) {
  auto& s = statements_->event;
  s.bind_int(1, e.rank);
  s.bind_int(2, e.lane);
  s.bind_int(3, static_cast<int>(e.kind));
  s.bind_int_or_null(4, e.name, kNone);
  s.bind_int(5, e.begin_ns);
  s.bind_int(6, e.end_ns);
  s.bind_int_or_null(7, e.iteration, kNone);
  s.bind_int_or_null(8, e.param, kNone);
  s.bind_int_or_null(9, e.bucket, kNone);
  s.bind_int_or_null(10, e.unit, kNone);
  s.bind_int_or_null(11, e.op, 0xff);
  s.bind_int_or_null(12, e.grp, kNone);
  s.bind_int_or_null(13, e.seq, kNone64);
  s.bind_int_or_null(14, e.bytes, kNone64);
  s.bind_int_or_null(15, e.dtype, 0xff);
  s.bind_int_or_null(16, e.value, kNone64);
  s.bind_int_or_null(17, e.enqueue_ns, kNone64);
  s.bind_int(18, e.flags);
  s.bind_int_or_null(19, e.cpu_begin_ns, kNone64);
  s.bind_int_or_null(20, e.cpu_end_ns, kNone64);
  s.run();
}

void Writer::add_memory(const MemorySample& m) {
  auto& s = statements_->memory;
  s.bind_int(1, m.rank);
  s.bind_int(2, m.ts_ns);
  s.bind_int(3, static_cast<int>(m.category));
  s.bind_int(4, m.bytes);
  s.run();
}

void Writer::add_metric(int32_t rank, int32_t iteration, NameId name, double value) {
  auto& s = statements_->metric;
  s.bind_int(1, rank);
  s.bind_int(2, iteration);
  s.bind_int(3, name);
  s.bind_double(4, value);
  s.run();
}

void Writer::add_param(const ParamInfo& p) {
  auto& s = statements_->param;
  s.bind_int(1, p.index);
  s.bind_text(2, p.name);
  s.bind_text(3, shape_to_json(p.shape));
  s.bind_int(4, p.numel);
  s.bind_int(5, static_cast<int>(p.dtype));
  s.bind_int(6, p.requires_grad ? 1 : 0);
  s.bind_int(7, p.sparse ? 1 : 0);
  s.bind_int_or_null(8, p.bucket, kNone);
  s.bind_int_or_null(9, p.rebuilt_bucket, kNone);
  s.bind_int_or_null(10, p.unit, kNone);
  s.bind_int_or_null(11, p.unit_offset, kNone64);
  s.run();
}

void Writer::add_bucket(const BucketInfo& b) {
  auto& s = statements_->bucket;
  s.bind_int(1, b.generation);
  s.bind_int(2, b.index);
  s.bind_int(3, b.bytes);
  s.bind_int(4, b.numel);
  s.bind_int(5, static_cast<int>(b.dtype));
  s.run();
  auto& p = statements_->bucket_param;
  for (size_t i = 0; i < b.params.size(); ++i) {
    p.bind_int(1, b.generation);
    p.bind_int(2, b.index);
    p.bind_int(3, static_cast<int64_t>(i));
    p.bind_int(4, b.params[i]);
    p.bind_int(5, i < b.offsets.size() ? b.offsets[i] : 0);
    p.run();
  }
}

void Writer::add_unit(const UnitInfo& u) {
  auto& s = statements_->unit;
  s.bind_int(1, u.index);
  s.bind_text(2, u.name);
  s.bind_int_or_null(3, u.parent, kNone);
  s.bind_int(4, u.numel);
  s.bind_int(5, u.padded_numel);
  s.bind_int(6, u.shard_numel);
  s.run();
}

void Writer::add_unit_shard(const UnitShard& u) {
  auto& s = statements_->unit_shard;
  s.bind_int(1, u.unit);
  s.bind_int(2, u.rank);
  s.bind_int(3, u.shard_begin);
  s.bind_int(4, u.shard_end);
  s.bind_int(5, u.real_numel);
  s.run();
}

void Writer::finish() {
  statements_.reset();
  for (const char* ddl : kIndexes) db_->exec(ddl);
  db_->exec("PRAGMA journal_mode = DELETE");
  db_.reset();
}

}  // namespace dpscope::trace
