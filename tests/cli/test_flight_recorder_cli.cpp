// `dpscope export --format flight-recorder|chrome` and `dpscope import` of flight-recorder dumps,
// end to end on a small hung trace: the dumps written, imported back, read by `stats --json`'s
// hang section; --format chrome equal to --chrome; bad and mixed inputs refused in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_run.h"
#include "tests/test_util.h"
#include "trace/collective_state.h"
#include "trace/writer.h"

using namespace dpscope;
using dpscope::testing::CliOutcome;
using dpscope::testing::file_text;
using dpscope::testing::run_dpscope;
using dpscope::testing::shell_quoted;
using dpscope::testing::TempDir;

namespace {

// Two ranks: all-reduce #0 completed on both; #1 started on rank 0 and never issued on rank 1.
std::string write_trace(const TempDir& dir) {
  const std::string path = dir.file("hung.sqlite");
  trace::Writer w(path);
  w.begin();
  for (int16_t rank = 0; rank < 2; ++rank) {
    trace::RankInfo info;
    info.rank = rank;
    info.end_ns = 10'000'000'000;
    w.put_rank(info);
    w.add_lane(trace::LaneInfo{rank, 0, "main", trace::LaneKind::Host});
    w.add_lane(trace::LaneInfo{rank, 1, "gloo comm (world)", trace::LaneKind::Comm});
    trace::Event e;
    e.kind = trace::EventKind::Collective;
    e.rank = rank;
    e.lane = 1;
    e.op = static_cast<uint8_t>(trace::CollectiveOp::AllReduce);
    e.grp = 0;
    e.seq = 0;
    e.bytes = 1 << 20;
    e.dtype = 0;
    e.bucket = 0;
    e.iteration = 0;
    e.enqueue_ns = 1'000'000;
    e.begin_ns = 1'100'000;
    e.end_ns = 2'000'000;
    w.add_event(e);
    if (rank == 0) {
      e.seq = 1;
      e.iteration = 1;
      e.enqueue_ns = 3'000'000;
      e.begin_ns = 3'100'000;
      e.end_ns = 5'003'000'000;
      e.flags = trace::collective_state_flags(trace::CollectiveEndState::Started);
      w.add_event(e);
    }
  }
  w.commit();
  w.finish();
  return path;
}

}  // namespace

TEST(FlightRecorderCli, ExportImportAndStatsNameTheRankThatNeverIssuedIt) {
  TempDir dir;
  const std::string trace = write_trace(dir);
  const CliOutcome exported =
      run_dpscope(dir, "export --format flight-recorder " + shell_quoted(dir.file("fr")) + " " + shell_quoted(trace));
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(exported.out.find("wrote 2 flight-recorder dumps (version 2.10, JSON)"), std::string::npos) << exported.out;

  const CliOutcome imported = run_dpscope(dir, "import " + shell_quoted(dir.file("fr/rank_0")) + " " +
                                                   shell_quoted(dir.file("fr/rank_1")) + " -o " +
                                                   shell_quoted(dir.file("back.sqlite")));
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(imported.out.find("import: 2 flight-recorder dumps, 3 collectives"), std::string::npos) << imported.out;

  for (const std::string& file : {trace, dir.file("back.sqlite")}) {
    const CliOutcome stats = run_dpscope(dir, "stats --json " + shell_quoted(file));
    ASSERT_EQ(stats.exit_code, 0) << stats.err;
    const nlohmann::json hang = nlohmann::json::parse(stats.out)["hang"];
    ASSERT_TRUE(hang.is_object()) << stats.out;
    EXPECT_EQ(hang["culprit"], 1) << file;
    EXPECT_EQ(hang["missing_ranks"], nlohmann::json::array({1})) << file;
    EXPECT_EQ(hang["verdict"], "NOT_ALL_RANKS_JOINING") << file;
    EXPECT_EQ(hang["first_disagreement"]["seq"], 1) << file;
    EXPECT_NE(hang["sentence"].get<std::string>().find("rank 1 never issued allreduce #1"), std::string::npos)
        << hang["sentence"];
    // A dump has no time of its own: an entry never completed ends at the last time its rank's
    // dump holds, here its own start, so only the trace says how long rank 0 waited.
    const std::string waited = file == trace ? "rank 0 waited up to 5.0 s" : "rank 0 was in allreduce #1";
    EXPECT_NE(hang["sentence"].get<std::string>().find(waited), std::string::npos) << hang["sentence"];
  }
}

TEST(FlightRecorderCli, FormatChromeIsTheChromeExport) {
  TempDir dir;
  const std::string trace = write_trace(dir);
  ASSERT_EQ(run_dpscope(dir, "export --chrome " + shell_quoted(dir.file("a.json")) + " " + shell_quoted(trace)).exit_code, 0);
  ASSERT_EQ(run_dpscope(dir, "export --format chrome " + shell_quoted(dir.file("b.json")) + " " + shell_quoted(trace)).exit_code, 0);
  EXPECT_EQ(file_text(dir.file("a.json")), file_text(dir.file("b.json")));
}

TEST(FlightRecorderCli, BadAndMixedInputsAreRefusedInOneLine) {
  TempDir dir;
  const std::string trace = write_trace(dir);
  ASSERT_EQ(run_dpscope(dir, "export --format flight-recorder " + shell_quoted(dir.file("fr")) + " " + shell_quoted(trace)).exit_code, 0);
  const std::string dump = file_text(dir.file("fr/rank_0"));
  std::filesystem::create_directories(dir.file("cut"));
  dpscope::testing::write_file(dir.file("cut/rank_0"), dump.substr(0, dump.size() / 3));
  dpscope::testing::write_file(dir.file("profile.json"), "{\"traceEvents\": []}");
  for (const std::string& args :
       {"import " + shell_quoted(dir.file("cut/rank_0")) + " -o " + shell_quoted(dir.file("out.sqlite")),
        "import " + shell_quoted(dir.file("fr/rank_0")) + " " + shell_quoted(dir.file("profile.json")) + " -o " +
            shell_quoted(dir.file("out.sqlite"))}) {
    const CliOutcome run = run_dpscope(dir, args);
    EXPECT_EQ(run.exit_code, 1) << args;
    EXPECT_EQ(run.out, "") << args;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("out.sqlite"))) << args;
  }
}
