// The dpscope binary end to end: `stats`, `stats --json` and `export --chrome` on a trace the
// test writes, and the one-line error (exit 1, nothing on stdout) for every kind of bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "tests/sqlite_edit.h"
#include "tests/cli/cli_run.h"
#include "tests/test_util.h"
#include "tests/trace_event.h"
#include "trace/writer.h"

namespace dpscope::trace {
namespace {

using testing::exec_sql;
using testing::CliOutcome;
using testing::run_dpscope;
using testing::shell_quoted;
using testing::TempDir;

// A two-rank, one-iteration trace: forward + backward, two hooks into one bucket, its
// all-reduce, a loss metric and a memory sample per rank.
void write_trace(const std::string& path) {
  Writer w(path);
  w.begin();
  w.set_meta("strategy", "ddp");
  w.set_meta("backend", "gloo");
  w.set_meta("model", "toy");
  w.set_meta("world_size", "2");
  w.add_name(1, "forward");
  w.add_name(2, "backward");
  w.add_name(3, "loss");
  ParamInfo p;
  p.name = "net1.weight";
  p.shape = {10, 10};
  p.numel = 100;
  p.bucket = 0;
  w.add_param(p);
  BucketInfo b;
  b.bytes = 400;
  b.numel = 100;
  b.params = {0};
  b.offsets = {0};
  w.add_bucket(b);
  for (int16_t r = 0; r < 2; ++r) {
    RankInfo info;
    info.rank = r;
    info.status = "complete";
    w.put_rank(info);
    w.add_lane(LaneInfo{r, 0, "main", LaneKind::Host});
    w.add_lane(LaneInfo{r, 1, "gloo", LaneKind::Comm});
    const auto add = [&](EventKind kind, NameId name, int64_t begin, int64_t end, LaneId lane) {
      Event e = dpscope::testing::trace_event(r, lane, kind, begin, end, 0);
      e.name = name;
      e.bucket = kind == EventKind::Phase ? kNone : 0;
      e.param = kind == EventKind::Hook ? 0 : kNone;
      if (kind == EventKind::Collective) {
        e.op = static_cast<uint8_t>(CollectiveOp::AllReduce);
        e.grp = 0;
        e.seq = 0;
        e.bytes = 400;
      }
      w.add_event(e);
    };
    add(EventKind::Phase, 1, 0, 2'000'000, 0);
    add(EventKind::Phase, 2, 2'000'000, 5'000'000, 0);
    add(EventKind::Hook, kNone, 2'500'000, 2'600'000, 0);
    add(EventKind::BucketReady, kNone, 2'600'000, 2'600'000, 0);
    add(EventKind::Collective, kNone, 3'000'000, 6'000'000, 1);
    w.add_metric(r, 0, 3, 0.5 + r);
    w.add_memory(MemorySample{r, 1'000'000, MemoryCategory::Parameters, 400});
  }
  w.commit();
  w.finish();
}

TEST(cliStats, Text) {
  TempDir dir;
  const std::string trace = dir.file("run.dpscope");
  write_trace(trace);
  const CliOutcome run = run_dpscope(dir, "stats " + shell_quoted(trace));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_NE(run.out.find("run: strategy ddp, backend gloo, model toy, world size 2, 1 iterations"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("rank 1:"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("WARNING"), std::string::npos) << run.out;
}

TEST(cliStats, Json) {
  TempDir dir;
  const std::string trace = dir.file("run.dpscope");
  write_trace(trace);
  const CliOutcome run = run_dpscope(dir, "stats --json " + shell_quoted(trace));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  ASSERT_FALSE(run.out.empty());
  EXPECT_EQ(run.out.find('\n'), run.out.size() - 1) << "one line: " << run.out;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["run"]["world_size"], 2);
  EXPECT_EQ(j["run"]["iterations"], 1);
  ASSERT_EQ(j["ranks"].size(), 2u);
  const auto& it = j["ranks"][1]["iterations"][0];
  EXPECT_EQ(it["hooks"], 1);
  EXPECT_EQ(it["loss"], 1.5);
  EXPECT_EQ(it["collectives"]["allreduce"], 1);
  // compute [0, 5 ms], comm [3, 6 ms]: exposed 1 ms.
  EXPECT_EQ(j["ranks"][1]["overlap"],
            (nlohmann::json{{"compute_ms", 5.0}, {"comm_ms", 3.0}, {"overlap_ms", 2.0},
                            {"exposed_comm_ms", 1.0}}));
  EXPECT_EQ(j["ranks"][0]["peak_memory_bytes"]["total"], 400);
  EXPECT_EQ(j["ranks"][0]["peak_memory_bytes"]["parameters"], 400);
}

TEST(cliExport, Chrome) {
  TempDir dir;
  const std::string trace = dir.file("run.dpscope");
  const std::string out = dir.file("run.json");
  write_trace(trace);
  const CliOutcome run = run_dpscope(dir, "export --chrome " + shell_quoted(out) + " " + shell_quoted(trace));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");  // small traces print no progress
  EXPECT_EQ(run.out.rfind("dpscope: wrote " + out + ": ", 0), 0u) << run.out;
  EXPECT_NE(run.out.find("from 10 recorded events"), std::string::npos) << run.out;
  ASSERT_TRUE(std::filesystem::exists(out));
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  int slices = 0, flows = 0;
  for (const auto& e : j["traceEvents"]) {
    slices += e["ph"] == "X";
    flows += e["ph"] == "s";
  }
  EXPECT_EQ(slices, 8);  // forward, backward, hook, all-reduce on each rank
  EXPECT_EQ(flows, 4);   // hook -> bucket, bucket -> all-reduce on each rank
}

TEST(cliExport, UnwritableOutput) {
  TempDir dir;
  const std::string trace = dir.file("run.dpscope");
  const std::string out = dir.file("missing-dir/run.json");
  write_trace(trace);
  const CliOutcome run = run_dpscope(dir, "export --chrome " + shell_quoted(out) + " " + shell_quoted(trace));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err.rfind("dpscope: " + out + ": ", 0), 0u) << run.err;
  EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << "one line: " << run.err;
}

// ---- Bad trace files: exit 1, nothing on stdout, one line on stderr naming the file.

void expect_one_line_error(const TempDir& dir, const std::string& path) {
  for (const std::string& command :
       {"stats " + shell_quoted(path), "stats --json " + shell_quoted(path),
        "export --chrome " + shell_quoted(dir.file("out.json")) + " " + shell_quoted(path)}) {
    SCOPED_TRACE(command);
    const CliOutcome run = run_dpscope(dir, command);
    EXPECT_EQ(run.exit_code, 1);
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(run.err.rfind("dpscope: " + path + ": ", 0), 0u) << run.err;
    EXPECT_FALSE(run.err.empty());
    EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << "one line: " << run.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("out.json")));
  }
}

TEST(cliBadInput, MissingFile) {
  TempDir dir;
  expect_one_line_error(dir, dir.file("nowhere.dpscope"));
}

TEST(cliBadInput, RandomBytes) {
  TempDir dir;
  const std::string path = dir.file("random.dpscope");
  std::mt19937 random(7);
  std::string bytes(8192, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  std::ofstream(path, std::ios::binary) << bytes;
  expect_one_line_error(dir, path);
}

TEST(cliBadInput, ForeignSqliteDatabase) {
  TempDir dir;
  const std::string path = dir.file("foreign.db");
  exec_sql(path, "CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('soup');");
  expect_one_line_error(dir, path);
}

TEST(cliBadInput, NewerSchemaVersion) {
  TempDir dir;
  const std::string path = dir.file("newer.dpscope");
  write_trace(path);
  exec_sql(path, "PRAGMA user_version = 999");
  expect_one_line_error(dir, path);
}

TEST(cliBadInput, Truncated) {
  TempDir dir;
  const std::string path = dir.file("cut.dpscope");
  write_trace(path);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  expect_one_line_error(dir, path);
}

// A bad emulated link (core/link_model.h) is refused before anything runs: one line naming
// the flag and the accepted range, exit 1, no trace written.
TEST(cliBadInput, TrainLinkOutOfRange) {
  TempDir dir;
  const CliOutcome run = run_dpscope(dir, "train --link-gbps 0 --link-latency-us 50 --trace " +
                                       shell_quoted(dir.file("train.sqlite")));
  if (run.err.find("without the engine") != std::string::npos) GTEST_SKIP() << run.err;
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "dpscope: --link-gbps 0 is out of range: the link's bandwidth is in gigabits per "
            "second, from 0.001 to 100000 (4 is a 4 Gb/s link)\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("train.sqlite")));
}

}  // namespace
}  // namespace dpscope::trace
