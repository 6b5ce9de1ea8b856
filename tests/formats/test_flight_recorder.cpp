// PyTorch's flight-recorder dumps both ways (formats/flight_recorder.h): the export read back by
// an independent reader (/usr/bin/python3's json), the import of the export (JSON) and of the
// same dumps pickled by /usr/bin/python3 (protocols 2 to 5), a dump with a missing rank, and
// truncated, malformed and foreign dumps refused in one line with nothing left behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "analysis/hang.h"
#include "formats/flight_recorder.h"
#include "formats/pickle_reader.h"
#include "tests/test_util.h"
#include "trace/collective_state.h"
#include "trace/reader.h"
#include "trace/writer.h"

using namespace dpscope;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

constexpr int64_t kMs = 1'000'000;

trace::Event collective(int16_t rank, int64_t seq, trace::CollectiveOp op, int64_t bytes, int64_t t,
                        trace::CollectiveEndState state = trace::CollectiveEndState::Completed) {
  trace::Event e;
  e.kind = trace::EventKind::Collective;
  e.rank = rank;
  e.lane = 1;
  e.op = static_cast<uint8_t>(op);
  e.grp = 0;
  e.seq = seq;
  e.bytes = bytes;
  e.dtype = static_cast<uint8_t>(trace::DType::Float32);
  e.iteration = static_cast<int32_t>(seq);
  e.bucket = 0;
  e.enqueue_ns = t;
  e.begin_ns = t + kMs / 10;
  e.end_ns = t + 2 * kMs;
  e.flags = trace::collective_state_flags(state);
  return e;
}

// Two ranks: a broadcast, two all-reduces, an all-gather and a reduce-scatter completed; then
// rank 0 started an all-reduce #5 that never completed while rank 1 issued a barrier #5 it never
// began.
std::string write_hung_run(const TempDir& dir) {
  const std::string path = dir.file("run.sqlite");
  trace::Writer w(path);
  w.begin();
  for (int16_t rank = 0; rank < 2; ++rank) {
    trace::RankInfo info;
    info.rank = rank;
    info.start_ns = 0;
    info.end_ns = 100 * kMs;
    info.status = "failed: allreduce #5 timed out";
    w.put_rank(info);
    w.add_lane(trace::LaneInfo{rank, 0, "main", trace::LaneKind::Host});
    w.add_lane(trace::LaneInfo{rank, 1, "gloo comm (world)", trace::LaneKind::Comm});
    w.add_event(collective(rank, 0, trace::CollectiveOp::Broadcast, 400, 1 * kMs));
    w.add_event(collective(rank, 1, trace::CollectiveOp::AllReduce, 4096, 10 * kMs));
    w.add_event(collective(rank, 2, trace::CollectiveOp::AllReduce, 4096, 20 * kMs));
    w.add_event(collective(rank, 3, trace::CollectiveOp::AllGather, 1024, 30 * kMs));
    w.add_event(collective(rank, 4, trace::CollectiveOp::ReduceScatter, 2048, 40 * kMs));
  }
  trace::Event stuck = collective(0, 5, trace::CollectiveOp::AllReduce, 4096, 50 * kMs, trace::CollectiveEndState::Started);
  stuck.end_ns = 99 * kMs;
  w.add_event(stuck);
  trace::Event never = collective(1, 5, trace::CollectiveOp::Barrier, 0, 51 * kMs, trace::CollectiveEndState::Issued);
  never.dtype = static_cast<uint8_t>(trace::DType::UInt8);
  never.begin_ns = never.enqueue_ns;
  never.end_ns = 99 * kMs;
  w.add_event(never);
  w.set_meta("backend", "gloo");
  w.commit();
  w.finish();
  return path;
}

std::vector<std::string> export_dumps(const TempDir& dir) {
  trace::Reader reader(write_hung_run(dir));
  return formats::export_flight_recorder(reader, dir.file("fr"));
}

// Each entry of a dump as python3's json module reads it: "seq name state in out dtype started completed".
std::string python_summary(const std::string& dump) {
  const std::string script =
      "import json,sys\n"
      "d=json.load(open(sys.argv[1]))\n"
      "print(d['version'], sorted(d['pg_config']), d['pg_config']['0']['ranks'], d['pg_status']['0']['last_completed_collective'])\n"
      "for e in d['entries']:\n"
      "  print(e['collective_seq_id'], e['op_id'], e['record_id'], e['process_group'][1], e['profiling_name'], e['state'],"
      " e['input_sizes'], e['output_sizes'], e['input_dtypes'][0], e['time_discovered_started_ns'] > 0,"
      " e['time_discovered_completed_ns'] > 0, e['retired'], e['is_p2p'], e['frames'], e['p2p_seq_id'])\n";
  TempDir scratch;
  dpscope::testing::write_file(scratch.file("read.py"), script);
  const auto result = run_command("/usr/bin/python3 " + scratch.file("read.py") + " " + dump);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return result.output;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<trace::Event> collectives_of(const std::string& path) {
  trace::Reader reader(path);
  return reader.events_of_kind(trace::EventKind::Collective);
}

}  // namespace

TEST(FlightRecorder, ExportReadBackByPythonsJsonMatchesTheTrace) {
  TempDir dir;
  const std::vector<std::string> files = export_dumps(dir);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(std::filesystem::path(files[0]).filename(), "rank_0");
  EXPECT_EQ(python_summary(files[0]),
            "2.10 ['0'] [0, 1] 5\n"
            "1 1 0 world nccl:broadcast completed [[100]] [[100]] Float True True True False [] 0\n"
            "2 2 1 world nccl:all_reduce completed [[1024]] [[1024]] Float True True True False [] 0\n"
            "3 3 2 world nccl:all_reduce completed [[1024]] [[1024]] Float True True True False [] 0\n"
            "4 4 3 world nccl:_all_gather_base completed [[256]] [[512]] Float True True True False [] 0\n"
            "5 5 4 world nccl:_reduce_scatter_base completed [[512]] [[256]] Float True True True False [] 0\n"
            "6 6 5 world nccl:all_reduce started [[1024]] [[1024]] Float True False False False [] 0\n");
  EXPECT_NE(python_summary(files[1]).find("6 6 5 world nccl:all_reduce_barrier scheduled [[0]] [[0]] Byte False False False"),
            std::string::npos)
      << python_summary(files[1]);
}

TEST(FlightRecorder, ImportOfTheExportKeepsEveryCollectiveAndItsState) {
  TempDir dir;
  const std::vector<std::string> files = export_dumps(dir);
  const auto result = formats::import_flight_recorder(files, dir.file("back.sqlite"), "test");
  EXPECT_EQ(result.ranks, 2);
  EXPECT_EQ(result.missing_ranks, 0);
  EXPECT_EQ(result.entries, 12);
  const auto original = collectives_of(dir.file("run.sqlite"));
  const auto back = collectives_of(dir.file("back.sqlite"));
  ASSERT_EQ(back.size(), original.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].rank, original[i].rank) << i;
    EXPECT_EQ(back[i].seq, original[i].seq) << i;
    EXPECT_EQ(back[i].op, original[i].op) << i;
    EXPECT_EQ(back[i].bytes, original[i].bytes) << i;
    EXPECT_EQ(back[i].dtype, original[i].dtype) << i;
    EXPECT_EQ(back[i].flags, original[i].flags) << i;
    EXPECT_EQ(back[i].enqueue_ns, original[i].enqueue_ns) << i;
    // The engine's tags are dpscope's own: a dump has none.
    EXPECT_EQ(back[i].bucket, trace::kNone) << i;
  }
  trace::Reader reader(dir.file("back.sqlite"));
  const auto hang = analysis::analyze_hang(reader);
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->verdict, "COLLECTIVE_TYPE_MISMATCH");
  EXPECT_EQ(hang->verdict_seq, 5);
  EXPECT_EQ(hang->first_disagreement->seq, 5);
}

TEST(FlightRecorder, PicklesOfEveryProtocolImportAsTheJson) {
  TempDir dir;
  const std::vector<std::string> files = export_dumps(dir);
  formats::import_flight_recorder(files, dir.file("json.sqlite"), "");
  const auto from_json = collectives_of(dir.file("json.sqlite"));
  for (int protocol = 2; protocol <= 5; ++protocol) {
    const std::string pickled = dir.file("p" + std::to_string(protocol));
    std::filesystem::create_directories(pickled);
    for (const std::string& file : files) {
      // As the recorder pickles it: process_group a tuple, the rest plain.
      const auto result = run_command(
          "/usr/bin/python3 -c \"import json,pickle,sys; d=json.load(open(sys.argv[1])); "
          "[e.__setitem__('process_group', tuple(e['process_group'])) for e in d['entries']]; "
          "open(sys.argv[2],'wb').write(pickle.dumps(d, protocol=" + std::to_string(protocol) + "))\" " +
          file + " " + pickled + "/" + std::filesystem::path(file).filename().string());
      ASSERT_EQ(result.exit_code, 0) << result.output;
    }
    ASSERT_TRUE(formats::is_flight_recorder_dump(pickled + "/rank_0"));
    formats::import_flight_recorder({pickled + "/rank_0", pickled + "/rank_1"}, dir.file("p.sqlite"), "");
    const auto from_pickle = collectives_of(dir.file("p.sqlite"));
    ASSERT_EQ(from_pickle.size(), from_json.size()) << "protocol " << protocol;
    for (size_t i = 0; i < from_pickle.size(); ++i) {
      EXPECT_EQ(from_pickle[i].seq, from_json[i].seq);
      EXPECT_EQ(from_pickle[i].bytes, from_json[i].bytes);
      EXPECT_EQ(from_pickle[i].flags, from_json[i].flags);
      EXPECT_EQ(from_pickle[i].end_ns, from_json[i].end_ns);
    }
  }
}

TEST(FlightRecorder, ADumpWithAMissingRankNamesIt) {
  TempDir dir;
  const std::vector<std::string> files = export_dumps(dir);
  const auto result = formats::import_flight_recorder({files[0]}, dir.file("one.sqlite"), "");
  EXPECT_EQ(result.ranks, 1);
  EXPECT_EQ(result.missing_ranks, 1);
  trace::Reader reader(dir.file("one.sqlite"));
  ASSERT_EQ(reader.ranks().size(), 2u);
  EXPECT_EQ(reader.ranks()[1].status, "no flight-recorder dump");
  const auto hang = analysis::analyze_hang(reader);
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->missing_ranks, std::vector<int32_t>{1});
  EXPECT_EQ(hang->culprit, 1);
  // PyTorch's analyzer cannot decide without the rank's dump.
  EXPECT_EQ(hang->verdict, "UNDECIDED");
  EXPECT_NE(hang->sentence.find("rank 1 left no record"), std::string::npos) << hang->sentence;
}

TEST(FlightRecorder, BadDumpsAreRefusedInOneLineAndLeaveNothing) {
  TempDir dir;
  const std::vector<std::string> files = export_dumps(dir);
  const std::string whole = read_bytes(files[0]);
  const std::string bad = dir.file("bad");
  std::filesystem::create_directories(bad);
  // An entry whose state holds a line break (JSON's \n): the message quotes it escaped, on one
  // line (found by fuzz_flight_recorder in a pickle).
  std::string odd_state = whole;
  const size_t completed = odd_state.find("\"completed\"");
  ASSERT_NE(completed, std::string::npos) << whole.substr(0, 400);
  odd_state.replace(completed, 11, "\"done\\nlater\"");
  struct Case {
    std::string name;
    std::string bytes;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"rank_0", whole.substr(0, whole.size() / 2), "bad JSON"},
      {"rank_0", "{\"version\": \"1.4\", \"pg_config\": {}, \"entries\": []}", "version \"2.x\""},
      {"rank_0", "{\"version\": \"2.10\", \"pg_config\": {\"0\": {}}, \"entries\": [{\"collective_seq_id\": 1}]}",
       "entry 0 has no profiling_name"},
      {"rank_0", "[1, 2]", "its top level is not a dict"},
      {"rank_0", odd_state, "has state 'done\\x0alater' (scheduled, started or completed)"},
      {"dump", whole, "name ends with its rank"},
      // A pickle cut short, and one that calls a function (GLOBAL builtins.set).
      {"rank_0", std::string("\x80\x02}q\x00(X\x07\x00\x00\x00version", 17), "truncated"},
      {"rank_0", std::string("\x80\x02" "cbuiltins\nset\n" ").", 18), "opcode 0x63 ('c')"},
  };
  for (const Case& c : cases) {
    const std::string input = bad + "/" + c.name;
    dpscope::testing::write_file(input, c.bytes);
    const std::string out = dir.file("out.sqlite");
    try {
      formats::import_flight_recorder({input}, out, "");
      ADD_FAILURE() << "accepted: " << c.says;
    } catch (const formats::FlightRecorderError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(c.says), std::string::npos) << message;
      EXPECT_NE(message.find(input), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
    EXPECT_FALSE(std::filesystem::exists(out)) << c.says;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
      EXPECT_EQ(entry.path().filename().string().find(".importing-"), std::string::npos) << entry.path();
    }
  }
}

TEST(FlightRecorder, ThePickleReaderReadsPythonsPlainValues) {
  TempDir dir;
  const auto result = run_command(
      "/usr/bin/python3 -c \"import pickle; open('" + dir.file("v") +
      "','wb').write(pickle.dumps({'a': [1, -2, 300, 70000, -2**40, 2**62, 1.5, True, False, None, ('x', 'y')], 'b': {}, "
      "'c': 'caf\\u00e9'}, protocol=2))\"");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json value = formats::read_pickle(read_bytes(dir.file("v")), "v");
  EXPECT_EQ(value.dump(), R"({"a":[1,-2,300,70000,-1099511627776,4611686018427387904,1.5,true,false,null,["x","y"]],"b":{},"c":"café"})");
}
