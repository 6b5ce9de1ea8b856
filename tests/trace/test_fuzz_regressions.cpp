// Regressions for what fuzzing trace/ found (tests/fuzz/README.md, "Findings"): small valid
// traces with one odd value put in by SQL, as fuzz_trace_sql makes them. Each must read, give
// statistics and export, or fail with one TraceError naming the file: never crash, overflow,
// allocate without bound or throw anything else.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "analysis/group_traffic.h"
#include "analysis/stats.h"
#include "analysis/stats_report.h"
#include "formats/export_chrome.h"
#include "tests/fuzz/seed_traces.h"
#include "tests/sqlite_edit.h"
#include "tests/test_util.h"
#include "trace/error.h"
#include "trace/merge.h"
#include "trace/reader.h"

namespace dpscope::trace {
namespace {

using namespace dpscope::analysis;
using namespace dpscope::formats;

using testing::exec_sql;
using testing::TempDir;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// The two-rank DDP seed trace of the fuzzers with `sql` applied.
std::string mutated_trace(const TempDir& dir, const std::string& sql) {
  const std::string path = dir.file("trace.sqlite");
  fuzz::write_seed_trace("ddp_run.sqlite", path);
  exec_sql(path, sql);
  return path;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Opens `path` and runs stats (both renderings), the Chrome export (whose JSON must parse) and
// a merge. Returns "" when all of it works, else the TraceError's message (which must name the
// file); any other exception fails the test.
std::string read_everything(const TempDir& dir, const std::string& path) {
  try {
    Reader reader(path);
    const RunStats stats = compute_stats(reader);
    EXPECT_NO_THROW(nlohmann::json::parse(stats_json(stats)));
    stats_text(stats);
    const std::string json = dir.file("out.json");
    export_chrome(reader, json);
    EXPECT_NO_THROW(nlohmann::json::parse(read_text(json))) << "the export is not JSON";
    merge_traces({path}, dir.file("merged.sqlite"));
    return "";
  } catch (const TraceError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    return message;
  }
}

// Found by fuzz_trace_sql: memory samples near INT64_MAX bytes made the sum of the stacked
// categories overflow (UBSan: signed integer overflow in read_memory). Sums now saturate.
TEST(FuzzRegressions, HugeMemorySamplesSaturateTheStackedPeak) {
  TempDir dir;
  const std::string path = mutated_trace(
      dir, "UPDATE memory SET bytes = 9223372036854775807 - rowid, ts_ns = 5 WHERE category < 10;"
           "DELETE FROM memory WHERE category = 10");
  EXPECT_EQ(read_everything(dir, path), "");
  Reader reader(path);
  const RunStats stats = compute_stats(reader);
  ASSERT_EQ(stats.ranks.size(), 2u);
  EXPECT_EQ(stats.ranks[0].memory_peak.total_bytes, kMax);
  ASSERT_TRUE(stats.ranks[0].memory_after_steps.found());
  EXPECT_EQ(stats.ranks[0].memory_after_steps.total_bytes, kMax);
}

// Times at both ends of int64_t: slice lengths, overlap, the Chrome export's relative times and
// durations (micros() negated INT64_MIN) and Reader::events' window overflowed.
TEST(FuzzRegressions, ExtremeTimesReadAndExport) {
  TempDir dir;
  const std::string path = mutated_trace(
      dir, "UPDATE events SET begin_ns = -9223372036854775808 WHERE rowid % 3 = 0;"
           "UPDATE events SET end_ns = 9223372036854775807 WHERE rowid % 2 = 0;"
           "UPDATE events SET enqueue_ns = 9223372036854775807 WHERE kind = 5;"
           "UPDATE memory SET ts_ns = 9223372036854775807 WHERE rowid % 2 = 0");
  EXPECT_EQ(read_everything(dir, path), "");
  Reader reader(path);
  EXPECT_FALSE(reader.events(0, 0, kMin, kMax).empty());
  EXPECT_FALSE(reader.events(0, 0, kMin + 1, kMin + 2).empty());  // the slices from kMin
  const RunStats stats = compute_stats(reader);
  for (const RankStats& rank : stats.ranks) {  // lengths saturate; wrapped, they went negative
    for (const OverlapStats& o : {rank.overlap, rank.iterations.at(0).overlap}) {
      EXPECT_GE(o.compute_ms, 0);
      EXPECT_GE(o.comm_ms, 0);
      EXPECT_GE(o.exposed_comm_ms, 0);
    }
  }
  const std::string json = dir.file("extreme.json");
  export_chrome(reader, json);
  const auto events = nlohmann::json::parse(read_text(json))["traceEvents"];
  bool longest = false;
  for (const auto& e : events) {
    if (e.contains("dur") && e["dur"].get<double>() > 9.2e15) longest = true;
  }
  EXPECT_TRUE(longest) << "a slice from INT64_MIN to INT64_MAX lasts (saturated) INT64_MAX ns";
}

// Found by fuzz_trace_sql (CI's scripts/test, 20 s, after 2026-11-28): one event beginning
// near INT64_MIN became the run's origin, and stats_json's begin_ms of every collective (its
// begin less the origin) overflowed; so did the length of a collective ending at INT64_MIN.
// Both saturate.
TEST(FuzzRegressions, CollectiveTimesInTheJsonSaturate) {
  TempDir dir;
  const std::string path = mutated_trace(
      dir, "UPDATE events SET begin_ns = -9223372036854775807 WHERE rowid = "
           "(SELECT min(rowid) FROM events WHERE kind = 0);"
           "UPDATE events SET end_ns = -9223372036854775808 WHERE rowid = "
           "(SELECT max(rowid) FROM events WHERE kind = 5)");
  EXPECT_EQ(read_everything(dir, path), "");
  Reader reader(path);
  const auto json = nlohmann::json::parse(stats_json(compute_stats(reader)));
  int collectives = 0, backwards = 0;
  for (const auto& rank : json["ranks"]) {
    for (const auto& c : rank["collectives"]) {
      ++collectives;
      EXPECT_DOUBLE_EQ(c["begin_ms"].get<double>(), double(kMax) / 1e6) << c.dump();
      if (c["ms"].get<double>() < 0) ++backwards;
    }
  }
  EXPECT_GT(collectives, 0);
  EXPECT_EQ(backwards, 1) << "the collective ending at INT64_MIN lasts (saturated) INT64_MIN ns";
}

// Found by fuzz_trace_sql (by hand, 2026-11-29): collectives of 1e300 bytes (read as INT64_MAX)
// made the per-group traffic overflow: the ring model's 2(n-1)S/n and the sums over a rank's
// collectives. Both saturate at INT64_MAX bytes.
TEST(FuzzRegressions, HugeCollectivesSaturateTheGroupTraffic) {
  EXPECT_EQ(ring_wire_bytes(CollectiveOp::AllReduce, kMax, 4), kMax);
  EXPECT_EQ(ring_wire_bytes(CollectiveOp::AllGather, kMax / 2 + 1, 3), kMax);
  EXPECT_EQ(ring_wire_bytes(CollectiveOp::ReduceScatter, kMax, 2), kMax / 2);
  TempDir dir;
  const std::string path = mutated_trace(dir, "UPDATE events SET bytes = 1e300 WHERE kind = 5");
  EXPECT_EQ(read_everything(dir, path), "");
  Reader reader(path);
  const RunStats stats = compute_stats(reader);
  ASSERT_FALSE(stats.groups.empty());
  for (const GroupTraffic& g : stats.groups) {
    EXPECT_EQ(g.payload_bytes, kMax) << g.name;
    EXPECT_EQ(g.wire_bytes, kMax) << g.name;
    EXPECT_GT(g.wire_bytes_per_step, 0) << g.name;
  }
}

// A names.id of 10^15 made Reader::names() resize its table to 10^15 entries (std::length_error
// or std::bad_alloc out of stats and the export). Such ids are left out now, like negative ones.
TEST(FuzzRegressions, HugeNameIdIsLeftOut) {
  TempDir dir;
  const std::string path = mutated_trace(
      dir, "UPDATE names SET id = 1000000000000000 WHERE name = 'forward';"
           "INSERT INTO names (id, name) VALUES (9223372036854775807, 'far')");
  EXPECT_EQ(read_everything(dir, path), "");
  Reader reader(path);
  EXPECT_LT(reader.names().size(), 100u);
}

// params.shape is parsed with std::stoll: "[-]" threw std::invalid_argument and a number past
// int64_t std::out_of_range out of Reader::params(), past every caller's TraceError handler.
TEST(FuzzRegressions, MalformedShapesAreLeftOut) {
  TempDir dir;
  const std::string path = mutated_trace(
      dir, "UPDATE params SET shape = '[-]' WHERE param = 0;"
           "UPDATE params SET shape = '[99999999999999999999,3]' WHERE param = 1;"
           "UPDATE params SET shape = '[--5,2-]' WHERE param = 2");
  EXPECT_EQ(read_everything(dir, path), "");
  Reader reader(path);
  const auto params = reader.params();
  ASSERT_EQ(params.size(), 4u);
  EXPECT_TRUE(params[0].shape.empty());
  EXPECT_EQ(params[1].shape, (std::vector<int64_t>{3}));
  EXPECT_TRUE(params[2].shape.empty());
  EXPECT_EQ(shape_from_json("[2,3]"), (std::vector<int64_t>{2, 3}));
}

// An event or metric at iteration 2,000,000,000 made compute_stats size its per-iteration
// tables to it for every rank (std::bad_alloc), and INT32_MAX overflowed `iterations`. Such a
// file is damaged: a TraceError naming it (Note [Iteration bound] in stats.cpp).
TEST(FuzzRegressions, IterationFarBeyondTheFileIsDamage) {
  for (const char* sql :
       {"UPDATE events SET iteration = 2000000000 WHERE rowid = 5",
        "UPDATE events SET iteration = 2147483647 WHERE rowid = 5",
        "UPDATE metrics SET iteration = 1000000000 WHERE rowid = 1",
        // Found by fuzz_trace_sql as an out-of-memory: 65,536 iterations on two ranks from a
        // file of 90 rows (the first bound's margin was a million cells: gigabytes of JSON).
        "UPDATE metrics SET iteration = 65535 WHERE rowid = 1"}) {
    TempDir dir;
    const std::string path = mutated_trace(dir, sql);
    const std::string message = read_everything(dir, path);
    EXPECT_NE(message.find("damaged trace file"), std::string::npos) << sql << ": " << message;
    EXPECT_NE(message.find("iteration"), std::string::npos) << message;
  }
  // Gaps in the iterations are not damage while they stay within the margin: 1,002 iterations
  // on two ranks, of which only the last two recorded anything.
  TempDir dir;
  const std::string path = mutated_trace(
      dir, "UPDATE events SET iteration = iteration + 1000; UPDATE metrics SET iteration = "
           "iteration + 1000");
  EXPECT_EQ(read_everything(dir, path), "");
}

// Found by fuzz_trace_bytes: a damaged schema whose object name holds a newline made the
// TraceError two lines (SQLite's "malformed database schema (NAME)" quotes the file's bytes);
// the CLI promises one. TraceError now writes control characters as escapes.
TEST(FuzzRegressions, DamagedSchemaMessageIsOneLine) {
  TempDir dir;
  const std::string path = mutated_trace(
      dir, "PRAGMA writable_schema = ON; INSERT INTO sqlite_master VALUES ('table', "
           "'bad' || char(10) || 'name' || char(1), 'bad', 0, 'not sql')");
  const std::string message = read_everything(dir, path);
  EXPECT_NE(message.find("damaged"), std::string::npos) << message;
  EXPECT_NE(message.find("bad\\nname\\x01"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(std::string(TraceError("a\tb\r\x7f").what()), "a\\tb\\r\\x7f");
}

// Found by fuzz_trace_sql: dropped_events near INT64_MIN on both ranks made the merge's
// "SELECT sum(dropped_events)" fail with SQLite's "integer overflow", an error naming only the
// merge's output. The merge sums them itself now, saturating.
TEST(FuzzRegressions, MergeSumsHugeDroppedCounts) {
  for (const char* value : {"-9223372036850552221", "9223372036854775807"}) {
    TempDir dir;
    const std::string path =
        mutated_trace(dir, std::string("UPDATE ranks SET dropped_events = ") + value);
    EXPECT_EQ(read_everything(dir, path), "") << value;
    const MergeResult result = merge_traces({path}, dir.file("again.sqlite"));
    EXPECT_EQ(result.dropped_events, value[0] == '-' ? kMin : kMax);
  }
}

// Found by fuzz_trace_bytes (the fuzzers check that a merge that succeeds wrote a sound file):
// merge_traces copied the small tables with "INSERT ... SELECT *", which SQLite transfers as raw
// records and index entries, unread. A rank file with a broken record in `params` became a
// merged file SQLite calls malformed, reported as a success; one whose unique indexes were out
// of step with their tables did too. The copies are ordered now, so rows are decoded and
// re-inserted: a broken record fails the merge naming the input, and indexes are built afresh.
std::string corpus_copy(const TempDir& dir, const std::string& name) {
  const std::string path = dir.file("rank.sqlite");
  std::filesystem::copy_file(
      std::string(DPSCOPE_SOURCE_DIR) + "/tests/fuzz/corpus/trace_bytes/" + name, path);
  return path;
}

TEST(FuzzRegressions, MergeRefusesABrokenRecord) {
  TempDir dir;
  const std::string path = corpus_copy(dir, "crash-merge-copies-damage.sqlite");
  EXPECT_NO_THROW(Reader{path});  // it opens
  const std::string merged = dir.file("merged.sqlite");
  try {
    merge_traces({path}, merged);
    FAIL() << "expected a TraceError";
  } catch (const TraceError& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.rfind("merge: cannot copy " + path + ": ", 0), 0u) << message;
    EXPECT_NE(message.find("damaged trace file"), std::string::npos) << message;
  }
  EXPECT_FALSE(std::filesystem::exists(merged));
}

TEST(FuzzRegressions, MergeRebuildsDamagedIndexes) {
  TempDir dir;
  const std::string path = corpus_copy(dir, "crash-merge-index-damage.sqlite");
  const std::string merged = dir.file("merged.sqlite");
  merge_traces({path}, merged);
  Reader reader(merged);
  EXPECT_NO_THROW(compute_stats(reader));
  EXPECT_NO_THROW(reader.names());
  EXPECT_NO_THROW(reader.buckets());
}

// A file whose lanes table had an extra column read fine, but merging it failed inside SQLite
// ("table lanes has 4 columns but 5 values were supplied"), and that message named only the
// merge's output. It names the input now (the fuzzers require it). Merge now copies every table
// by its named columns (schema.h's descriptions), so an extra column is left behind and the
// merge succeeds; a missing one still fails inside SQLite, and the message names the input.
TEST(FuzzRegressions, MergeFailureNamesTheInput) {
  TempDir dir;
  const std::string extra =
      mutated_trace(dir, "ALTER TABLE lanes ADD COLUMN extra INTEGER DEFAULT 0");
  EXPECT_NO_THROW(merge_traces({extra}, dir.file("extra.sqlite")));
  const std::string path = mutated_trace(dir, "ALTER TABLE lanes DROP COLUMN kind");
  const std::string merged = dir.file("merged.sqlite");
  try {
    merge_traces({path}, merged);
    FAIL() << "expected a TraceError";
  } catch (const TraceError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("merge: cannot copy " + path), std::string::npos) << message;
  }
  EXPECT_FALSE(std::filesystem::exists(merged));
}

}  // namespace
}  // namespace dpscope::trace
