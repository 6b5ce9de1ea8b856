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

// A prepared insert of every column of one table, in the table's order (insert_into), bound by
// column: the table's column enum `C` names each parameter, whose number is position + 1.
template <typename C>
class TableInsert {
 public:
  TableInsert(detail::Db& db, OnConflict conflict, const Table& table = table_of(C{}))
      : statement_(db, values_sql(table, conflict)) {}

  void bind_int(C column, int64_t value) { statement_.bind_int(parameter(column), value); }
  void bind_int_or_null(C column, int64_t value, int64_t null_value) {
    statement_.bind_int_or_null(parameter(column), value, null_value);
  }
  void bind_double(C column, double value) { statement_.bind_double(parameter(column), value); }
  void bind_text(C column, std::string_view value) {
    statement_.bind_text(parameter(column), value);
  }
  void run() { statement_.run(); }

 private:
  static int parameter(C column) { return column_position(column) + 1; }
  static std::string values_sql(const Table& table, OnConflict conflict) {
    std::string sql = insert_into(table, conflict) + " VALUES (";
    for (size_t i = 0; i < table.columns.size(); ++i) sql += i == 0 ? "?" : ", ?";
    return sql + ")";
  }

  detail::Statement statement_;
};

// Writes the schema, the lookup tables and the file's identity into an empty database.
void create_schema(detail::Db& db) {
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
  db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
  db.exec("BEGIN");
  for (const Table& table : kTables) db.exec(create_table_sql(table));
  for (const LookupTable& lookup : kLookupTables) db.exec(create_table_sql(lookup.table));
  db.exec(kEventsNamedView);
  for (const LookupTable& lookup : kLookupTables) {
    TableInsert<LookupColumn> insert(db, OnConflict::Abort, lookup.table);
    for (int value = 0; value < lookup.count; ++value) {
      insert.bind_int(LookupColumn::Id, value);
      insert.bind_text(LookupColumn::Name, lookup.spelling(value));
      insert.run();
    }
  }
  TableInsert<MetaColumn> meta(db, OnConflict::Abort);
  meta.bind_text(MetaColumn::Key, meta_key::kSchemaVersion);
  meta.bind_text(MetaColumn::Value, std::to_string(kSchemaVersion));
  meta.run();
  db.exec("COMMIT");
}

}  // namespace

// Every insert lists every column of its table. events.id is never bound, so it stays NULL and
// SQLite numbers the events in the order they are inserted.
struct Writer::Statements {
  explicit Statements(detail::Db& db)
      : meta(db, OnConflict::Replace),
        rank(db, OnConflict::Replace),
        lane(db, OnConflict::Replace),
        name(db, OnConflict::Ignore),
        event(db, OnConflict::Abort),
        memory(db, OnConflict::Abort),
        metric(db, OnConflict::Abort),
        param(db, OnConflict::Replace),
        bucket(db, OnConflict::Replace),
        bucket_param(db, OnConflict::Replace),
        unit(db, OnConflict::Replace),
        unit_shard(db, OnConflict::Replace) {}

  TableInsert<MetaColumn> meta;
  TableInsert<RanksColumn> rank;
  TableInsert<LanesColumn> lane;
  TableInsert<NamesColumn> name;
  TableInsert<EventsColumn> event;
  TableInsert<MemoryColumn> memory;
  TableInsert<MetricsColumn> metric;
  TableInsert<ParamsColumn> param;
  TableInsert<BucketsColumn> bucket;
  TableInsert<BucketParamsColumn> bucket_param;
  TableInsert<UnitsColumn> unit;
  TableInsert<UnitShardsColumn> unit_shard;
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
  using C = MetaColumn;
  auto& s = statements_->meta;
  s.bind_text(C::Key, key);
  s.bind_text(C::Value, value);
  s.run();
}

void Writer::put_rank(const RankInfo& r) {
  using C = RanksColumn;
  auto& s = statements_->rank;
  s.bind_int(C::Rank, r.rank);
  s.bind_text(C::Host, r.host);
  s.bind_int(C::Pid, r.pid);
  s.bind_int(C::LocalRank, r.local_rank);
  s.bind_text(C::Device, r.device);
  s.bind_int(C::ClockOffsetNs, r.clock_offset_ns);
  s.bind_int(C::StartNs, r.start_ns);
  s.bind_int(C::EndNs, r.end_ns);
  s.bind_int(C::Events, r.events);
  s.bind_int(C::DroppedEvents, r.dropped_events);
  s.bind_text(C::Status, r.status);
  s.bind_int(C::ClockUncertaintyNs, r.clock_uncertainty_ns);
  s.run();
}

void Writer::add_lane(const LaneInfo& l) {
  using C = LanesColumn;
  auto& s = statements_->lane;
  s.bind_int(C::Rank, l.rank);
  s.bind_int(C::Lane, l.lane);
  s.bind_text(C::Name, l.name);
  s.bind_int(C::Kind, static_cast<int>(l.kind));
  s.run();
}

void Writer::add_name(NameId id, std::string_view name) {
  using C = NamesColumn;
  auto& s = statements_->name;
  s.bind_int(C::Id, id);
  s.bind_text(C::Name, name);
  s.run();
}

void Writer::add_event(const Event& e) {
  using C = EventsColumn;
  auto& s = statements_->event;
  s.bind_int(C::Rank, e.rank);
  s.bind_int(C::Lane, e.lane);
  s.bind_int(C::Kind, static_cast<int>(e.kind));
  s.bind_int_or_null(C::Name, e.name, kNone);
  s.bind_int(C::BeginNs, e.begin_ns);
  s.bind_int(C::EndNs, e.end_ns);
  s.bind_int_or_null(C::Iteration, e.iteration, kNone);
  s.bind_int_or_null(C::Param, e.param, kNone);
  s.bind_int_or_null(C::Bucket, e.bucket, kNone);
  s.bind_int_or_null(C::Unit, e.unit, kNone);
  s.bind_int_or_null(C::Op, e.op, 0xff);
  s.bind_int_or_null(C::Grp, e.grp, kNone);
  s.bind_int_or_null(C::Seq, e.seq, kNone64);
  s.bind_int_or_null(C::Bytes, e.bytes, kNone64);
  s.bind_int_or_null(C::Dtype, e.dtype, 0xff);
  s.bind_int_or_null(C::Value, e.value, kNone64);
  s.bind_int_or_null(C::EnqueueNs, e.enqueue_ns, kNone64);
  s.bind_int(C::Flags, e.flags);
  s.bind_int_or_null(C::CpuBeginNs, e.cpu_begin_ns, kNone64);
  s.bind_int_or_null(C::CpuEndNs, e.cpu_end_ns, kNone64);
  s.run();
}

void Writer::add_memory(const MemorySample& m) {
  using C = MemoryColumn;
  auto& s = statements_->memory;
  s.bind_int(C::Rank, m.rank);
  s.bind_int(C::TsNs, m.ts_ns);
  s.bind_int(C::Category, static_cast<int>(m.category));
  s.bind_int(C::Bytes, m.bytes);
  s.run();
}

void Writer::add_metric(int32_t rank, int32_t iteration, NameId name, double value) {
  using C = MetricsColumn;
  auto& s = statements_->metric;
  s.bind_int(C::Rank, rank);
  s.bind_int(C::Iteration, iteration);
  s.bind_int(C::Name, name);
  s.bind_double(C::Value, value);
  s.run();
}

void Writer::add_param(const ParamInfo& p) {
  using C = ParamsColumn;
  auto& s = statements_->param;
  s.bind_int(C::Param, p.index);
  s.bind_text(C::Name, p.name);
  s.bind_text(C::Shape, shape_to_json(p.shape));
  s.bind_int(C::Numel, p.numel);
  s.bind_int(C::Dtype, static_cast<int>(p.dtype));
  s.bind_int(C::RequiresGrad, p.requires_grad ? 1 : 0);
  s.bind_int(C::Sparse, p.sparse ? 1 : 0);
  s.bind_int_or_null(C::Bucket, p.bucket, kNone);
  s.bind_int_or_null(C::RebuiltBucket, p.rebuilt_bucket, kNone);
  s.bind_int_or_null(C::Unit, p.unit, kNone);
  s.bind_int_or_null(C::UnitOffset, p.unit_offset, kNone64);
  s.run();
}

void Writer::add_bucket(const BucketInfo& b) {
  {
    using C = BucketsColumn;
    auto& s = statements_->bucket;
    s.bind_int(C::Generation, b.generation);
    s.bind_int(C::Bucket, b.index);
    s.bind_int(C::Bytes, b.bytes);
    s.bind_int(C::Numel, b.numel);
    s.bind_int(C::Dtype, static_cast<int>(b.dtype));
    s.run();
  }
  using C = BucketParamsColumn;
  auto& p = statements_->bucket_param;
  for (size_t i = 0; i < b.params.size(); ++i) {
    p.bind_int(C::Generation, b.generation);
    p.bind_int(C::Bucket, b.index);
    p.bind_int(C::Position, static_cast<int64_t>(i));
    p.bind_int(C::Param, b.params[i]);
    p.bind_int(C::Offset, i < b.offsets.size() ? b.offsets[i] : 0);
    p.run();
  }
}

void Writer::add_unit(const UnitInfo& u) {
  using C = UnitsColumn;
  auto& s = statements_->unit;
  s.bind_int(C::Unit, u.index);
  s.bind_text(C::Name, u.name);
  s.bind_int_or_null(C::Parent, u.parent, kNone);
  s.bind_int(C::Numel, u.numel);
  s.bind_int(C::PaddedNumel, u.padded_numel);
  s.bind_int(C::ShardNumel, u.shard_numel);
  s.run();
}

void Writer::add_unit_shard(const UnitShard& u) {
  using C = UnitShardsColumn;
  auto& s = statements_->unit_shard;
  s.bind_int(C::Unit, u.unit);
  s.bind_int(C::Rank, u.rank);
  s.bind_int(C::ShardBegin, u.shard_begin);
  s.bind_int(C::ShardEnd, u.shard_end);
  s.bind_int(C::RealNumel, u.real_numel);
  s.run();
}

void Writer::apply_clock_offsets() {
  // rank is the ranks table's INTEGER PRIMARY KEY: each row's offset is one rowid lookup.
  const std::string offset = "(SELECT clock_offset_ns FROM ranks WHERE ranks.rank = %s.rank)";
  const auto of = [&](const char* table) {
    std::string text = offset;
    text.replace(text.find("%s"), 2, table);
    return text;
  };
  const std::string shifted = " WHERE rank IN (SELECT rank FROM ranks WHERE clock_offset_ns != 0)";
  db_->exec("BEGIN");
  db_->exec("UPDATE events SET begin_ns = begin_ns + " + of("events") + ", end_ns = end_ns + " +
            of("events") + ", enqueue_ns = enqueue_ns + " + of("events") + shifted);
  db_->exec("UPDATE memory SET ts_ns = ts_ns + " + of("memory") + shifted);
  db_->exec("COMMIT");
}

void Writer::finish() {
  statements_.reset();
  for (const char* ddl : kIndexes) db_->exec(ddl);
  db_->exec("PRAGMA journal_mode = DELETE");
  db_.reset();
}

}  // namespace dpscope::trace
