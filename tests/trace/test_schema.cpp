// The trace format round trip: every table and every event kind written with every field set
// (and with every nullable field NULL) reads back identical; the lookup tables match the
// enumerations; docs/trace-format.md names every table and column of schema.h.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "tests/test_util.h"
#include "trace/reader.h"
#include "trace/recorder.h"
#include "trace/writer.h"

using namespace dpscope::trace;
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

// docs/trace-format.md is the users' copy of schema.h: every table and every column of
// kTables must appear in it (as `name` in backticks), and the documented version must match.
TEST(Schema, FormatDocumentNamesEveryTableAndColumn) {
  const std::string doc = read_file(std::string(DPSCOPE_SOURCE_DIR) + "/docs/trace-format.md");
  ASSERT_FALSE(doc.empty()) << "docs/trace-format.md is missing";
  EXPECT_NE(doc.find("schema version " + std::to_string(kSchemaVersion)), std::string::npos)
      << "the document must state 'schema version " << kSchemaVersion << "'";
  const std::regex table_re(R"(CREATE (?:TABLE|VIEW) (\w+) )");
  const std::regex column_re(R"([(,]\s*(\w+) (?:INTEGER|TEXT|REAL))");
  for (const char* ddl : kTables) {
    const std::string sql = ddl;
    std::smatch table;
    ASSERT_TRUE(std::regex_search(sql, table, table_re)) << sql;
    EXPECT_NE(doc.find("`" + table[1].str() + "`"), std::string::npos)
        << "table " << table[1] << " is not documented";
    for (std::sregex_iterator it(sql.begin(), sql.end(), column_re), end; it != end; ++it) {
      EXPECT_NE(doc.find("`" + (*it)[1].str() + "`"), std::string::npos)
          << "column " << table[1] << "." << (*it)[1] << " is not documented";
    }
  }
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
