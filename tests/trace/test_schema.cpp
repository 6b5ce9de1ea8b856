// The trace format round trip: every table and every event kind written with every field set
// (and with every nullable field NULL) reads back identical; a new file's tables are the ones
// schema.h describes; files of older schema versions read and merge; the lookup tables match
// the enumerations; docs/trace-format.md names every table and column of schema.h.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <sstream>

#include "tests/sqlite_edit.h"
#include "tests/test_util.h"
#include "trace/merge.h"
#include "trace/reader.h"
#include "trace/recorder.h"
#include "trace/vocabulary.h"
#include "trace/writer.h"

using namespace dpscope::trace;
using dpscope::testing::exec_sql;
using dpscope::testing::TempDir;

namespace {

Event full_event(EventKind kind, int64_t t) {
  Event e;
  e.kind = kind;
  e.rank = 2;
  e.lane = 1;
  e.name = 1;
  e.begin_ns = t;
  e.end_ns = t + 500;
  e.enqueue_ns = t - 100;
  e.bytes = 4096;
  e.value = 77;
  e.seq = 12;
  e.iteration = 3;
  e.param = 4;
  e.bucket = 5;
  e.unit = 6;
  e.op = static_cast<uint8_t>(CollectiveOp::ReduceScatter);
  e.dtype = static_cast<uint8_t>(DType::BFloat16);
  e.flags = kFlagPrefetch | kFlagBackward;
  e.grp = 1;
  return e;
}

void expect_same(const Event& a, const Event& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.lane, b.lane);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.begin_ns, b.begin_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.enqueue_ns, b.enqueue_ns);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.value, b.value);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.iteration, b.iteration);
  EXPECT_EQ(a.param, b.param);
  EXPECT_EQ(a.bucket, b.bucket);
  EXPECT_EQ(a.unit, b.unit);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.grp, b.grp);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST(Schema, EveryEventKindRoundTripsWithEveryField) {
  TempDir dir;
  const std::string path = dir.file("all.sqlite");
  std::vector<Event> written;
  {
    Writer writer(path);
    writer.begin();
    writer.add_name(1, "anything");
    for (int k = 0; k < kEventKindCount; ++k) {
      written.push_back(full_event(static_cast<EventKind>(k), 1000 * (k + 1)));
      writer.add_event(written.back());
    }
    writer.commit();
    writer.finish();
  }
  Reader reader(path);
  for (int k = 0; k < kEventKindCount; ++k) {
    auto events = reader.events_of_kind(static_cast<EventKind>(k));
    ASSERT_EQ(events.size(), 1u) << to_string(static_cast<EventKind>(k));
    expect_same(events[0], written[static_cast<size_t>(k)]);
  }
  EXPECT_EQ(reader.names()[1], "anything");
}

TEST(Schema, NullFieldsRoundTripAsNone) {
  TempDir dir;
  const std::string path = dir.file("nulls.sqlite");
  Event sparse;
  sparse.kind = EventKind::Phase;
  sparse.begin_ns = 10;
  sparse.end_ns = 20;
  {
    Writer writer(path);
    writer.add_event(sparse);
    writer.finish();
  }
  Reader reader(path);
  auto events = reader.events(0, 0, 0, 100);
  ASSERT_EQ(events.size(), 1u);
  expect_same(events[0], sparse);
  EXPECT_EQ(events[0].iteration, kNone);
  EXPECT_EQ(events[0].seq, kNone64);
}

TEST(Schema, EveryTableRoundTripsThroughTheRecorder) {
  TempDir dir;
  const std::string path = dir.file("rank1.sqlite");
  {
    RecorderOptions options;
    options.path = path;
    options.rank = 1;
    options.local_rank = 1;
    options.device = "cuda:1";
    Recorder recorder(options);
    recorder.set_meta("strategy", "fsdp");
    recorder.set_meta("world_size", "2");
    const LaneId comm = recorder.add_lane("gloo comm", LaneKind::Comm);
    const LaneId unit_lane = recorder.add_lane("unit 0", LaneKind::Unit);
    EXPECT_EQ(comm, 1);
    EXPECT_EQ(unit_lane, 2);
    recorder.add_param(ParamInfo{0, "fc0.weight", {10, 64}, 640, DType::Float32, true, false,
                                 1, 0, 0, 0});
    recorder.add_param(ParamInfo{1, "emb.weight", {100, 8}, 800, DType::Float16, true, true,
                                 kNone, kNone, kNone, kNone64});
    recorder.add_bucket(BucketInfo{0, 1, 2560, 640, DType::Float32, {0}, {0}});
    recorder.add_bucket(BucketInfo{1, 0, 5760, 1440, DType::Float32, {1, 0}, {0, 800}});
    recorder.add_unit(UnitInfo{0, "root", kNone, 1440, 1440, 720});
    recorder.add_unit_shard(UnitShard{0, 1, 720, 1440, 720});
    recorder.memory(MemoryCategory::Shards, 2880, 50);
    recorder.memory(MemoryCategory::CudaReserved, 1 << 20, 60);
    recorder.metric(0, recorder.name("loss"), 0.25);
    recorder.phase(0, recorder.name("forward"), 100, 200, 0);
  }
  Reader reader(path);
  auto meta = reader.meta();
  EXPECT_EQ(meta["strategy"], "fsdp");
  EXPECT_EQ(meta["schema_version"], std::to_string(kSchemaVersion));
  EXPECT_EQ(meta["trace_level"], "full");

  auto ranks = reader.ranks();
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].rank, 1);
  EXPECT_EQ(ranks[0].local_rank, 1);
  EXPECT_EQ(ranks[0].device, "cuda:1");
  EXPECT_EQ(ranks[0].status, "complete");
  EXPECT_GT(ranks[0].pid, 0);
  EXPECT_FALSE(ranks[0].host.empty());
  EXPECT_LE(ranks[0].start_ns, ranks[0].end_ns);

  auto lanes = reader.lanes();
  ASSERT_EQ(lanes.size(), 3u);
  EXPECT_EQ(lanes[0].name, "main");
  EXPECT_EQ(lanes[1].name, "gloo comm");
  EXPECT_EQ(lanes[1].kind, LaneKind::Comm);
  EXPECT_EQ(lanes[2].kind, LaneKind::Unit);

  auto params = reader.params();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].name, "fc0.weight");
  EXPECT_EQ(params[0].shape, (std::vector<int64_t>{10, 64}));
  EXPECT_EQ(params[0].bucket, 1);
  EXPECT_EQ(params[0].rebuilt_bucket, 0);
  EXPECT_EQ(params[0].unit_offset, 0);
  EXPECT_TRUE(params[1].sparse);
  EXPECT_EQ(params[1].dtype, DType::Float16);
  EXPECT_EQ(params[1].bucket, kNone);

  auto buckets = reader.buckets();
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].generation, 0);
  EXPECT_EQ(buckets[1].generation, 1);
  EXPECT_EQ(buckets[1].params, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(buckets[1].offsets, (std::vector<int64_t>{0, 800}));

  ASSERT_EQ(reader.units().size(), 1u);
  EXPECT_EQ(reader.units()[0].parent, kNone);
  EXPECT_EQ(reader.units()[0].shard_numel, 720);
  ASSERT_EQ(reader.unit_shards().size(), 1u);
  EXPECT_EQ(reader.unit_shards()[0].shard_begin, 720);

  auto memory = reader.memory(1);
  ASSERT_EQ(memory.size(), 2u);
  EXPECT_EQ(memory[0].category, MemoryCategory::Shards);
  EXPECT_EQ(memory[1].bytes, 1 << 20);
  auto metrics = reader.metrics();
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_EQ(metrics[0].name, "loss");
  EXPECT_EQ(reader.time_range(), std::make_pair(int64_t{100}, int64_t{200}));
}

TEST(Schema, LookupTablesSpellEveryEnumeration) {
  TempDir dir;
  const std::string path = dir.file("lookup.sqlite");
  Writer(path).finish();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  auto name_of = [&](const std::string& table, int id) {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db, ("SELECT name FROM " + table + " WHERE id = " + std::to_string(id)).c_str(),
                       -1, &s, nullptr);
    std::string name = sqlite3_step(s) == SQLITE_ROW
                           ? reinterpret_cast<const char*>(sqlite3_column_text(s, 0))
                           : "";
    sqlite3_finalize(s);
    return name;
  };
  for (int i = 0; i < kEventKindCount; ++i)
    EXPECT_EQ(name_of("event_kinds", i), to_string(static_cast<EventKind>(i)));
  for (int i = 0; i < kCollectiveOpCount; ++i)
    EXPECT_EQ(name_of("collective_ops", i), to_string(static_cast<CollectiveOp>(i)));
  for (int i = 0; i < kMemoryCategoryCount; ++i)
    EXPECT_EQ(name_of("memory_categories", i), to_string(static_cast<MemoryCategory>(i)));
  for (int i = 0; i < kDTypeCount; ++i)
    EXPECT_EQ(name_of("dtypes", i), to_string(static_cast<DType>(i)));
  for (int i = 0; i < kUnitStateCount; ++i)
    EXPECT_EQ(name_of("unit_states", i), to_string(static_cast<UnitState>(i)));
  for (int i = 0; i < kLaneKindCount; ++i)
    EXPECT_EQ(name_of("lane_kinds", i), to_string(static_cast<LaneKind>(i)));
  sqlite3_close(db);
}

TEST(Schema, TraceLevelsParse) {
  TraceLevel level;
  ASSERT_TRUE(parse_trace_level("summary", &level));
  EXPECT_EQ(level, TraceLevel::Summary);
  EXPECT_FALSE(parse_trace_level("verbose", &level));
  EXPECT_EQ(shape_from_json(shape_to_json({3, 1, 7})), (std::vector<int64_t>{3, 1, 7}));
  EXPECT_TRUE(shape_from_json("[]").empty());
}

// docs/trace-format.md is the users' copy of schema.h: every table and every column of the
// descriptions, and the view, must appear in it (as `name` in backticks), and the documented
// version must match.
TEST(Schema, FormatDocumentNamesEveryTableAndColumn) {
  const std::string doc = read_file(std::string(DPSCOPE_SOURCE_DIR) + "/docs/trace-format.md");
  ASSERT_FALSE(doc.empty()) << "docs/trace-format.md is missing";
  EXPECT_NE(doc.find("schema version " + std::to_string(kSchemaVersion)), std::string::npos)
      << "the document must state 'schema version " << kSchemaVersion << "'";
  std::vector<Table> tables(std::begin(kTables), std::end(kTables));
  for (const LookupTable& lookup : kLookupTables) tables.push_back(lookup.table);
  for (const Table& table : tables) {
    const std::string name(table.name);
    EXPECT_NE(doc.find("`" + name + "`"), std::string::npos)
        << "table " << name << " is not documented";
    for (const Column& column : table.columns) {
      EXPECT_NE(doc.find("`" + std::string(column.name) + "`"), std::string::npos)
          << "column " << name << "." << column.name << " is not documented";
    }
  }
  EXPECT_NE(doc.find("`events_named`"), std::string::npos) << "the view is not documented";
  for (int i = 0; i < kMemoryCategoryCount; ++i) {
    const std::string name(to_string(static_cast<MemoryCategory>(i)));
    EXPECT_NE(doc.find("`" + name + "`"), std::string::npos) << "memory category " << name;
  }
  for (int i = 0; i < kEventKindCount; ++i) {
    const std::string name(to_string(static_cast<EventKind>(i)));
    EXPECT_NE(doc.find("`" + name + "`"), std::string::npos) << "event kind " << name;
  }
}

// The example queries of docs/trace-format.md run against a real trace without an error.
TEST(Schema, FormatDocumentExampleQueriesRun) {
  const std::string doc = read_file(std::string(DPSCOPE_SOURCE_DIR) + "/docs/trace-format.md");
  const auto begin = doc.find("```sql\n");
  ASSERT_NE(begin, std::string::npos);
  const auto end = doc.find("```", begin + 7);
  const std::string block = doc.substr(begin + 7, end - begin - 7);

  TempDir dir;
  const std::string path = dir.file("example.sqlite");
  {
    RecorderOptions options;
    options.path = path;
    Recorder recorder(options);
    recorder.phase(0, recorder.name("forward"), 100, 200, 0);
    recorder.metric(0, recorder.name("loss"), 1.5);
    recorder.memory(MemoryCategory::Parameters, 64, 100);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  int queries = 0;
  const char* tail = block.c_str();
  while (*tail) {
    sqlite3_stmt* statement = nullptr;
    const char* next = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, tail, -1, &statement, &next), SQLITE_OK)
        << sqlite3_errmsg(db) << " in: " << std::string(tail).substr(0, 200);
    if (statement) {
      while (sqlite3_step(statement) == SQLITE_ROW) {
      }
      EXPECT_EQ(sqlite3_finalize(statement), SQLITE_OK) << sqlite3_errmsg(db);
      ++queries;
    }
    tail = next;
  }
  EXPECT_GE(queries, 8);
  sqlite3_close(db);
}

// A lane's events overlapping a range, with the longest event's duration found by the reader or
// given by a caller that knows it (the viewer, from its loaded lanes): the same events.
TEST(Schema, RangeQueriesWithAGivenLongestEventFindTheSameEvents) {
  TempDir dir;
  const std::string path = dir.file("ranges.sqlite");
  {
    Writer writer(path);
    for (int i = 0; i < 200; ++i) {
      Event e;
      e.kind = EventKind::Phase;
      e.begin_ns = i * 100;
      e.end_ns = i * 100 + (i % 7 == 0 ? 950 : 40);  // some long ones reach into later ranges
      writer.add_event(e);
    }
    writer.finish();
  }
  Reader reader(path);
  for (const auto& [t0, t1] : {std::pair<int64_t, int64_t>{0, 50}, {1000, 1200}, {5030, 5060}, {19990, 30000}}) {
    const auto found = reader.events(0, 0, t0, t1);
    const auto given = reader.events(0, 0, t0, t1, 950);
    ASSERT_EQ(found.size(), given.size()) << t0 << ".." << t1;
    for (size_t i = 0; i < found.size(); ++i) EXPECT_EQ(found[i].begin_ns, given[i].begin_ns);
    EXPECT_FALSE(found.empty()) << t0 << ".." << t1;
  }
}

namespace {

// One row of `PRAGMA table_info`: what SQLite made of a table's column.
struct ColumnInfo {
  std::string name, type, default_value;  // default_value: "NULL" where there is none
  bool not_null = false;
  int primary_key = 0;  // its place in the primary key (1, 2, ...), 0 when not in it
};

std::vector<ColumnInfo> table_info(sqlite3* db, std::string_view table) {
  sqlite3_stmt* s = nullptr;
  const std::string sql = "SELECT name, type, \"notnull\", dflt_value, pk FROM"
                          " pragma_table_info('" + std::string(table) + "') ORDER BY cid";
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  const auto text = [&](int i) {
    const unsigned char* value = sqlite3_column_text(s, i);
    return value ? std::string(reinterpret_cast<const char*>(value)) : std::string("NULL");
  };
  std::vector<ColumnInfo> columns;
  while (sqlite3_step(s) == SQLITE_ROW) {
    columns.push_back(ColumnInfo{text(0), text(1), text(3), sqlite3_column_int(s, 2) != 0,
                                 sqlite3_column_int(s, 4)});
  }
  sqlite3_finalize(s);
  return columns;
}

// What the description of `column` in `table` says SQLite should make of it.
ColumnInfo described(const Table& table, const Column& column) {
  const std::string type(column.type);
  ColumnInfo info;
  info.name = column.name;
  info.type = type.substr(0, type.find(' '));
  info.not_null = type.find("NOT NULL") != std::string::npos;
  const std::string_view default_value = column_default(column);
  info.default_value = default_value.empty() ? "NULL" : std::string(default_value);
  if (type.find("PRIMARY KEY") != std::string::npos) info.primary_key = 1;
  std::stringstream key{std::string(table.primary_key)};
  std::string part;
  for (int place = 1; std::getline(key, part, ','); ++place) {
    if (part.substr(part.find_first_not_of(' ')) == info.name) info.primary_key = place;
  }
  return info;
}

// A rank file written by this build, then made a file of schema version `version` the way an
// older dpscope wrote it: the columns added after `version` (as the descriptions say) dropped.
void write_rank_of_version(const std::string& path, int32_t rank, int version) {
  {
    Writer writer(path);
    writer.begin();
    RankInfo info;
    info.rank = rank;
    info.clock_offset_ns = 40;
    info.clock_uncertainty_ns = 7;
    info.events = 2;
    info.status = std::string(to_string(RankStatus::Complete));
    writer.put_rank(info);
    writer.add_lane(LaneInfo{rank, 0, "main", LaneKind::Host});
    writer.add_name(1, "forward");
    writer.add_name(2, "loss");
    Event phase;
    phase.rank = static_cast<int16_t>(rank);
    phase.kind = EventKind::Phase;
    phase.name = 1;
    phase.begin_ns = 100;
    phase.end_ns = 300;
    phase.iteration = 0;
    phase.cpu_begin_ns = 1100;
    phase.cpu_end_ns = 1250;
    writer.add_event(phase);
    Event collective = full_event(EventKind::Collective, 400);
    collective.rank = static_cast<int16_t>(rank);
    collective.name = 1;
    collective.cpu_begin_ns = 1300;
    writer.add_event(collective);
    writer.add_memory(MemorySample{rank, 100, MemoryCategory::Parameters, 4096});
    writer.add_metric(rank, 0, 2, 0.5);
    writer.commit();
    writer.finish();
  }
  std::string sql = "DROP VIEW events_named;";
  for (const Table& table : kTables) {
    for (const Column& column : table.columns) {
      if (column.since > version) {
        sql += "ALTER TABLE " + std::string(table.name) + " DROP COLUMN " +
               std::string(column.name) + ";";
      }
    }
  }
  sql += "UPDATE meta SET value = '" + std::to_string(version) + "' WHERE key = '" +
         std::string(meta_key::kSchemaVersion) + "';";
  exec_sql(path, sql + "PRAGMA user_version = " + std::to_string(version));
}

// What `reader` gives of a rank written by write_rank_of_version(`version`).
void expect_rank_of_version(Reader& reader, int32_t rank, int version) {
  SCOPED_TRACE(reader.path() + ", rank " + std::to_string(rank) + " of version " +
               std::to_string(version));
  bool found = false;
  for (const RankInfo& info : reader.ranks()) {
    if (info.rank != rank) continue;
    found = true;
    EXPECT_EQ(info.clock_offset_ns, 40);
    EXPECT_EQ(info.clock_uncertainty_ns, version >= 3 ? 7 : 0);  // read as its DEFAULT before 3
    EXPECT_EQ(parse_rank_status(info.status), RankStatus::Complete);
  }
  EXPECT_TRUE(found);
  const std::vector<Event> phases = reader.events_of_kind(EventKind::Phase, rank);
  ASSERT_EQ(phases.size(), 1u);
  EXPECT_EQ(reader.names()[static_cast<size_t>(phases[0].name)], "forward");
  EXPECT_EQ(phases[0].begin_ns, 100);
  EXPECT_EQ(phases[0].cpu_begin_ns, version >= 4 ? 1100 : kNone64);  // NULL before 4
  EXPECT_EQ(phases[0].cpu_end_ns, version >= 4 ? 1250 : kNone64);
  const std::vector<Event> collectives = reader.events_of_kind(EventKind::Collective, rank);
  ASSERT_EQ(collectives.size(), 1u);
  Event expected = full_event(EventKind::Collective, 400);
  expected.rank = static_cast<int16_t>(rank);
  expected.name = collectives[0].name;
  expect_same(collectives[0], expected);
  EXPECT_EQ(collectives[0].cpu_begin_ns, version >= 4 ? 1300 : kNone64);
  int64_t rank_events = 0;
  reader.for_each_event([&](const Event& e) { return rank_events += e.rank == rank, true; });
  EXPECT_EQ(rank_events, 2);
  const auto [first, last] = reader.event_id_range();
  int64_t spans = 0;
  reader.scan_event_spans(first, last, [&](const EventSpan* span, size_t n) {
    for (size_t i = 0; i < n; ++i) spans += span[i].rank == rank && span[i].begin_ns >= 100;
    return true;
  });
  EXPECT_EQ(spans, 2);
  const auto [first_sample, last_sample] = reader.memory_rowid_range();
  int64_t samples = 0;
  reader.scan_memory(first_sample, last_sample, [&](const MemorySample* sample, size_t n) {
    for (size_t i = 0; i < n; ++i) samples += sample[i].rank == rank && sample[i].bytes == 4096;
    return true;
  });
  EXPECT_EQ(samples, 1);
  const std::vector<Metric> metrics = reader.metrics(rank);
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_EQ(metrics[0].name, "loss");
}

}  // namespace

// Every table and lookup table of a new file is as its description in schema.h says, column by
// column: name, type, NOT NULL, DEFAULT and place in the primary key, as SQLite reads them.
TEST(Schema, ANewFileHasTheDescribedTables) {
  TempDir dir;
  const std::string path = dir.file("new.sqlite");
  Writer(path).finish();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  std::vector<Table> tables(std::begin(kTables), std::end(kTables));
  for (const LookupTable& lookup : kLookupTables) tables.push_back(lookup.table);
  for (const Table& table : tables) {
    SCOPED_TRACE(std::string(table.name));
    const std::vector<ColumnInfo> actual = table_info(db, table.name);
    ASSERT_EQ(actual.size(), table.columns.size());
    for (size_t i = 0; i < actual.size(); ++i) {
      const ColumnInfo expected = described(table, table.columns[i]);
      EXPECT_EQ(actual[i].name, expected.name);
      EXPECT_EQ(actual[i].type, expected.type) << expected.name;
      EXPECT_EQ(actual[i].not_null, expected.not_null) << expected.name;
      EXPECT_EQ(actual[i].default_value, expected.default_value) << expected.name;
      EXPECT_EQ(actual[i].primary_key, expected.primary_key) << expected.name;
    }
  }
  // Nothing more than described: the tables, their automatic indexes, the view.
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'", -1,
                               &s, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_EQ(static_cast<size_t>(sqlite3_column_int(s, 0)), tables.size());
  sqlite3_finalize(s);
  sqlite3_close(db);
}

// ranks.status starts as the vocabulary's word for a rank still written, which schema.h cannot
// spell through trace/vocabulary.h (which includes it).
TEST(Schema, TheRankStatusDefaultIsRunning) {
  TempDir dir;
  const std::string path = dir.file("default.sqlite");
  Writer(path).finish();
  exec_sql(path, "INSERT INTO ranks (rank) VALUES (3)");
  Reader reader(path);
  ASSERT_EQ(reader.ranks().size(), 1u);
  EXPECT_EQ(reader.ranks()[0].status, to_string(RankStatus::Running));
  EXPECT_EQ(parse_rank_status(reader.ranks()[0].status), RankStatus::Running);
  EXPECT_EQ(RankInfo().status, to_string(RankStatus::Running));
}

// The stand-ins an older file reads as: its DEFAULT, else NULL.
TEST(Schema, ColumnsAddedLaterReadAsTheirDefault) {
  const std::vector<std::string> ranks = columns_as_of(kRanksTable, 2, "r.");
  EXPECT_EQ(ranks[column_position(RanksColumn::Rank)], "r.rank");
  EXPECT_EQ(ranks[column_position(RanksColumn::ClockUncertaintyNs)], "0");
  EXPECT_EQ(columns_as_of(kRanksTable, 3)[column_position(RanksColumn::ClockUncertaintyNs)],
            "clock_uncertainty_ns");
  const std::vector<std::string> events = columns_as_of(kEventsTable, 3);
  EXPECT_EQ(events[column_position(EventsColumn::CpuBeginNs)], "NULL");
  EXPECT_EQ(events[column_position(EventsColumn::CpuEndNs)], "NULL");
  EXPECT_EQ(comma_separated(columns_as_of(kEventsTable, kSchemaVersion)),
            "id, rank, lane, kind, name, begin_ns, end_ns, iteration, param, bucket, unit, op, grp,"
            " seq, bytes, dtype, value, enqueue_ns, flags, cpu_begin_ns, cpu_end_ns");
}

// Files of schema versions 2 (no ranks.clock_uncertainty_ns), 3 (no CPU times) and 4 read
// through the Reader, queries and bulk scans alike, and merge into a file of this version with
// the missing columns as their stand-ins.
TEST(Schema, FilesOfOlderVersionsReadAndMerge) {
  for (int version : {2, 3, 4}) {
    TempDir dir;
    const std::string rank0 = dir.file("rank0.sqlite"), rank1 = dir.file("rank1.sqlite");
    write_rank_of_version(rank0, 0, version);
    write_rank_of_version(rank1, 1, version);
    {
      Reader reader(rank0);
      EXPECT_EQ(reader.schema_version(), version);
      expect_rank_of_version(reader, 0, version);
    }
    const std::string run = dir.file("run.sqlite");
    const MergeResult merged = merge_traces({rank1, rank0}, run);
    EXPECT_EQ(merged.ranks, 2);
    EXPECT_EQ(merged.events, 4);
    Reader reader(run);
    EXPECT_EQ(reader.schema_version(), kSchemaVersion);
    expect_rank_of_version(reader, 0, version);
    expect_rank_of_version(reader, 1, version);
  }
}
