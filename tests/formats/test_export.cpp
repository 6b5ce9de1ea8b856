// export_chrome on a small trace written with Writer: parses the JSON back and checks the
// metadata, slices, instants, counters and flows one by one, and the errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "formats/export_chrome.h"
#include "tests/test_util.h"
#include "tests/trace_event.h"
#include "trace/error.h"
#include "trace/reader.h"
#include "trace/writer.h"

namespace dpscope::formats {
namespace {

using namespace dpscope::trace;

using json = nlohmann::ordered_json;  // keeps the file's key order, so tests see it
using testing::TempDir;

// Absolute timestamps start far from zero: the export must make them relative.
constexpr int64_t kBase = 5'000'000'000;

inline constexpr NameId kForward = 1, kBackward = 2, kOdd = 3, kBadUtf8 = 4;

Event event(int16_t rank, LaneId lane, EventKind kind, int64_t begin, int64_t end) {
  return testing::trace_event(rank, lane, kind, kBase + begin, kBase + end, 0);
}

Event hook(int32_t param, int32_t bucket, int64_t begin, int64_t end) {
  Event e = event(0, 2, EventKind::Hook, begin, end);
  e.param = param;
  e.bucket = bucket;
  e.value = 220;
  return e;
}

// rank 0: lanes main (0), gloo (1), autograd (2); rank 1: main only.
// Times in ns after kBase:
//   forward   [0, 1'500'250]           lane 0        -> X ts 0.000 dur 1500.250
//   backward  [2'000'000, 6'000'000]   lane 0
//   hook p3 b0 [2'100'000, 2'200'000]  lane 2        flow s at its middle, 2150.000
//   hook p2 b0 [2'300'000, 2'400'001]  lane 2        flow s at 2350.000 (rounded down)
//   hook p1 b1 [2'500'000, 2'600'000]  lane 2        bucket 1 never gets ready: no flow
//   bucket_ready b0 at 2'400'001       lane 2        flows f here; s to the collective
//   bucket_launch b0 at 2'400'500      lane 2
//   allreduce #1 b0 [2'500'000, 3'500'000] lane 1    flow f at 3000.000
//   mark "odd \"name\"\n" instant at 7'000'000, value 42, no iteration
//   mark with a name of invalid UTF-8 [7'000'000, 7'000'010]
// rank 1: forward [1'000, 2'000] lane 0 and a hook and bucket_ready of its own bucket 0.
// memory rank 0: 0: parameters 1000; 1'000'000: activations 500 and allocator_total 2000;
// 3'000'000: activations 0.
void write_trace(const std::string& path) {
  Writer w(path);
  w.begin();
  for (int32_t r = 0; r < 2; ++r) {
    RankInfo info;
    info.rank = r;
    info.status = "complete";
    w.put_rank(info);
  }
  w.add_lane(LaneInfo{0, 0, "main", LaneKind::Host});
  w.add_lane(LaneInfo{0, 1, "gloo", LaneKind::Comm});
  w.add_lane(LaneInfo{0, 2, "autograd", LaneKind::Host});
  w.add_lane(LaneInfo{1, 0, "main", LaneKind::Host});
  w.add_name(kForward, "forward");
  w.add_name(kBackward, "backward");
  w.add_name(kOdd, "odd \"name\"\n");
  w.add_name(kBadUtf8, "bad \xff byte");

  Event forward = event(0, 0, EventKind::Phase, 0, 1'500'250);
  forward.name = kForward;
  w.add_event(forward);
  Event backward = event(0, 0, EventKind::Phase, 2'000'000, 6'000'000);
  backward.name = kBackward;
  w.add_event(backward);
  w.add_event(hook(3, 0, 2'100'000, 2'200'000));
  w.add_event(hook(2, 0, 2'300'000, 2'400'001));
  w.add_event(hook(1, 1, 2'500'000, 2'600'000));
  Event ready = event(0, 2, EventKind::BucketReady, 2'400'001, 2'400'001);
  ready.bucket = 0;
  w.add_event(ready);
  Event launch = event(0, 2, EventKind::BucketLaunch, 2'400'500, 2'400'500);
  launch.bucket = 0;
  launch.seq = 1;
  w.add_event(launch);
  Event allreduce = event(0, 1, EventKind::Collective, 2'500'000, 3'500'000);
  allreduce.op = static_cast<uint8_t>(CollectiveOp::AllReduce);
  allreduce.grp = 0;
  allreduce.seq = 1;
  allreduce.bytes = 220;
  allreduce.dtype = static_cast<uint8_t>(DType::Float32);
  allreduce.bucket = 0;
  allreduce.enqueue_ns = kBase + 2'400'500;
  w.add_event(allreduce);
  Event mark = event(0, 0, EventKind::Mark, 7'000'000, 7'000'000);
  mark.name = kOdd;
  mark.value = 42;
  mark.iteration = kNone;
  w.add_event(mark);
  Event bad = event(0, 0, EventKind::Mark, 7'000'000, 7'000'010);
  bad.name = kBadUtf8;
  w.add_event(bad);

  Event forward1 = event(1, 0, EventKind::Phase, 1'000, 2'000);
  forward1.name = kForward;
  w.add_event(forward1);
  Event hook1 = event(1, 0, EventKind::Hook, 1'200, 1'400);
  hook1.param = 0;
  hook1.bucket = 0;
  w.add_event(hook1);
  Event ready1 = event(1, 0, EventKind::BucketReady, 1'500, 1'500);
  ready1.bucket = 0;
  w.add_event(ready1);

  w.add_memory(MemorySample{0, kBase, MemoryCategory::Parameters, 1000});
  w.add_memory(MemorySample{0, kBase + 1'000'000, MemoryCategory::Activations, 500});
  w.add_memory(MemorySample{0, kBase + 1'000'000, MemoryCategory::AllocatorTotal, 2000});
  w.add_memory(MemorySample{0, kBase + 3'000'000, MemoryCategory::Activations, 0});
  w.commit();
  w.finish();
}

struct Exported {
  json trace;
  ChromeExportSummary summary;
  std::vector<double> progress;
};

Exported export_known(const TempDir& dir) {
  const std::string path = dir.file("run.dpscope");
  write_trace(path);
  Reader reader(path);
  Exported out;
  out.summary = export_chrome(reader, dir.file("run.json"),
                              [&](double fraction) { out.progress.push_back(fraction); });
  std::ifstream in(dir.file("run.json"));
  out.trace = json::parse(in);
  return out;
}

std::vector<json> with_phase(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == ph) out.push_back(e);
  }
  return out;
}

const json* find(const std::vector<json>& events, const std::string& name, int pid = 0) {
  for (const json& e : events) {
    if (e["name"] == name && e["pid"] == pid) return &e;
  }
  return nullptr;
}

TEST(exportChrome, TopLevelAndSummary) {
  TempDir dir;
  const Exported x = export_known(dir);
  EXPECT_EQ(x.trace["displayTimeUnit"], "ns");
  ASSERT_TRUE(x.trace["traceEvents"].is_array());
  EXPECT_EQ(x.summary.trace_events, static_cast<int64_t>(x.trace["traceEvents"].size()));
  EXPECT_EQ(x.summary.bytes,
            static_cast<int64_t>(std::filesystem::file_size(dir.file("run.json"))));
  ASSERT_FALSE(x.progress.empty());
  EXPECT_EQ(x.progress.back(), 1.0);
}

TEST(exportChrome, Metadata) {
  TempDir dir;
  const auto meta = with_phase(export_known(dir).trace, "M");
  std::set<std::tuple<int, int, std::string>> threads;
  std::set<std::pair<int, std::string>> processes;
  for (const json& m : meta) {
    if (m["name"] == "process_name") processes.emplace(m["pid"], m["args"]["name"]);
    if (m["name"] == "thread_name") threads.emplace(m["pid"], m["tid"], m["args"]["name"]);
  }
  EXPECT_EQ(processes, (std::set<std::pair<int, std::string>>{{0, "rank 0"}, {1, "rank 1"}}));
  EXPECT_EQ(threads, (std::set<std::tuple<int, int, std::string>>{
                         {0, 0, "main"}, {0, 1, "gloo"}, {0, 2, "autograd"}, {1, 0, "main"}}));
}

TEST(exportChrome, Slices) {
  TempDir dir;
  const json trace = export_known(dir).trace;
  const auto slices = with_phase(trace, "X");
  EXPECT_EQ(slices.size(), 9u);  // 2 phases, 3 hooks, 1 collective, 1 mark on rank 0; 2 on rank 1

  const json* forward = find(slices, "forward");
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(forward->dump(),
            R"({"ph":"X","pid":0,"tid":0,"ts":0.0,"dur":1500.25,"name":"forward","cat":"phase",)"
            R"("args":{"iteration":0}})");

  const json* hook = find(slices, "hook p3");
  ASSERT_NE(hook, nullptr);
  EXPECT_EQ((*hook)["tid"], 2);
  EXPECT_EQ((*hook)["ts"], 2100.0);
  EXPECT_EQ((*hook)["dur"], 100.0);
  EXPECT_EQ((*hook)["cat"], "hook");
  EXPECT_EQ((*hook)["args"],
            (json{{"iteration", 0}, {"param", 3}, {"bucket", 0}, {"value", 220}}));

  const json* allreduce = find(slices, "allreduce #1");
  ASSERT_NE(allreduce, nullptr);
  EXPECT_EQ((*allreduce)["tid"], 1);
  EXPECT_EQ((*allreduce)["ts"], 2500.0);
  EXPECT_EQ((*allreduce)["dur"], 1000.0);
  EXPECT_EQ((*allreduce)["cat"], "collective");
  EXPECT_EQ((*allreduce)["args"],
            (json{{"iteration", 0}, {"bucket", 0}, {"op", "allreduce"}, {"seq", 1},
                  {"bytes", 220}, {"dtype", "float32"}, {"grp", 0}, {"enqueue_ns", 2'400'500}}));

  // Invalid UTF-8 in a name arrives as U+FFFD, so strict parsers (this one) accept the file.
  EXPECT_NE(find(slices, "bad \xEF\xBF\xBD byte"), nullptr);
  const json* other_rank = find(slices, "forward", 1);
  ASSERT_NE(other_rank, nullptr);
  EXPECT_EQ((*other_rank)["ts"], 1.0);
}

TEST(exportChrome, Instants) {
  TempDir dir;
  const auto instants = with_phase(export_known(dir).trace, "i");
  EXPECT_EQ(instants.size(), 4u);
  const json* ready = find(instants, "bucket_ready b0");
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(ready->dump(),
            R"({"ph":"i","s":"t","pid":0,"tid":2,"ts":2400.001,"name":"bucket_ready b0",)"
            R"("cat":"bucket_ready","args":{"iteration":0,"bucket":0}})");
  const json* launch = find(instants, "bucket_launch b0");
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ((*launch)["args"], (json{{"iteration", 0}, {"bucket", 0}, {"seq", 1}}));
  const json* mark = find(instants, "odd \"name\"\n");  // escaped and read back
  ASSERT_NE(mark, nullptr);
  EXPECT_EQ((*mark)["ts"], 7000.0);
  EXPECT_EQ((*mark)["args"], (json{{"value", 42}}));
  EXPECT_NE(find(instants, "bucket_ready b0", 1), nullptr);
}

TEST(exportChrome, MemoryCountersCarryTheFullState) {
  TempDir dir;
  const auto counters = with_phase(export_known(dir).trace, "C");
  std::vector<std::tuple<std::string, double, json>> got;
  for (const json& c : counters) {
    EXPECT_EQ(c["pid"], 0);
    got.emplace_back(c["name"], c["ts"], c["args"]);
  }
  const std::vector<std::tuple<std::string, double, json>> expected = {
      {"memory", 0.0, json{{"parameters", 1000}}},
      {"memory", 1000.0, json{{"parameters", 1000}, {"activations", 500}}},
      {"memory (allocator)", 1000.0, json{{"allocator_total", 2000}}},
      {"memory", 3000.0, json{{"parameters", 1000}, {"activations", 0}}}};
  EXPECT_EQ(got, expected);
}

TEST(exportChrome, FlowsHookToBucketToCollective) {
  TempDir dir;
  const json trace = export_known(dir).trace;
  const auto starts = with_phase(trace, "s");
  const auto finishes = with_phase(trace, "f");
  ASSERT_EQ(starts.size(), 4u);  // rank 0: 2 hooks -> ready, ready -> allreduce; rank 1: 1 hook
  ASSERT_EQ(finishes.size(), 4u);

  // (name, pid, from tid, from ts, to tid, to ts), paired by id.
  using Flow = std::tuple<std::string, int, int, double, int, double>;
  std::set<Flow> flows;
  std::set<int64_t> ids;
  for (const json& s : starts) {
    const int64_t id = s["id"];
    EXPECT_TRUE(ids.insert(id).second) << "flow id " << id << " used twice";
    const json* f = nullptr;
    for (const json& candidate : finishes) {
      if (candidate["id"] == id) f = &candidate;
    }
    ASSERT_NE(f, nullptr) << "no finish for flow id " << id;
    EXPECT_EQ((*f)["bp"], "e");
    EXPECT_EQ((*f)["name"], s["name"]);
    EXPECT_EQ((*f)["cat"], s["cat"]);
    EXPECT_EQ((*f)["pid"], s["pid"]);
    flows.emplace(s["name"], s["pid"], s["tid"], s["ts"], (*f)["tid"], (*f)["ts"]);
  }
  EXPECT_EQ(flows, (std::set<Flow>{{"hook to bucket", 0, 2, 2150.0, 2, 2400.001},
                                   {"hook to bucket", 0, 2, 2350.0, 2, 2400.001},
                                   {"bucket to collective", 0, 2, 2400.001, 1, 3000.0},
                                   {"hook to bucket", 1, 0, 1.3, 0, 1.5}}));
}

// Time zero is the earliest memory sample when one precedes every event.
TEST(exportChrome, TimeZeroIncludesMemory) {
  TempDir dir;
  const std::string path = dir.file("early.dpscope");
  {
    Writer w(path);
    w.begin();
    w.add_lane(LaneInfo{0, 0, "main", LaneKind::Host});
    w.add_event(event(0, 0, EventKind::Mark, 10'000, 10'000));
    w.add_memory(MemorySample{0, kBase + 4'000, MemoryCategory::Other, 7});
    w.commit();
    w.finish();
  }
  Reader reader(path);
  export_chrome(reader, dir.file("early.json"));
  std::ifstream in(dir.file("early.json"));
  const json trace = json::parse(in);
  EXPECT_EQ(with_phase(trace, "i").at(0)["ts"], 6.0);
  EXPECT_EQ(with_phase(trace, "C").at(0)["ts"], 0.0);
}

TEST(exportChrome, UnwritableOutputNamesThePath) {
  TempDir dir;
  const std::string path = dir.file("run.dpscope");
  write_trace(path);
  Reader reader(path);
  const std::string out = dir.file("no-such-directory/run.json");
  try {
    export_chrome(reader, out);
    FAIL() << "export to " << out << " did not throw";
  } catch (const TraceError& error) {
    EXPECT_NE(std::string(error.what()).find(out), std::string::npos) << error.what();
  }
  EXPECT_THROW(export_chrome(reader, path), TraceError);  // never over the trace itself
  EXPECT_TRUE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace dpscope::formats
