// Tutorial 21 as its README runs it (tutorials/21_hangs/run.sh): four trainings that hang on
// purpose. Each stops within the timeout + 10 s, every rank's trace opens, the hang section names
// the culprit rank, the group, the sequence number, the kind and the bucket or unit, and the
// flight-recorder dumps are written beside the trace.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "tests/test_util.h"
#include "trace/reader.h"

using dpscope::testing::CommandResult;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

constexpr int kTimeoutSeconds = 3;

struct Scenario {
  const char* name;
  int ranks;
  int culprit;
  const char* kind;  // the others' collective at the first disagreement
  const char* tag;   // "bucket" or "unit", or "" where the others' collective has neither
  const char* verdict;
};

void check(const Scenario& s, const std::string& out, const std::string& dir) {
  SCOPED_TRACE(std::string("scenario ") + s.name);
  // "   stopped after 5.1 s, exit status 1; ..."
  std::smatch stopped;
  ASSERT_TRUE(std::regex_search(out, stopped, std::regex(R"(stopped after ([0-9.]+) s, exit status 1)"))) << out;
  EXPECT_LT(std::stod(stopped[1]), kTimeoutSeconds + 10 + 5) << "the run, its start-up included";
  EXPECT_NE(out.find("culprit: rank " + std::to_string(s.culprit)), std::string::npos) << out;
  for (int r = 0; r < s.ranks; ++r) {
    const std::string rank_file = dir + "/rank" + std::to_string(r) + ".sqlite";
    dpscope::trace::Reader reader(rank_file);  // opens, or the test fails with the Reader's message
    EXPECT_EQ(reader.ranks().size(), 1u) << rank_file;
    EXPECT_TRUE(std::filesystem::exists(dir + "/fr/rank_" + std::to_string(r))) << "the dump of rank " << r;
  }
  const CommandResult stats = run_command(std::string(DPSCOPE_BIN_DIR) + "/dpscope stats --json " + dir + "/run.sqlite");
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  const nlohmann::json hang = nlohmann::json::parse(stats.output)["hang"];
  ASSERT_TRUE(hang.is_object()) << stats.output;
  EXPECT_EQ(hang["culprit"], s.culprit);
  EXPECT_EQ(hang["verdict"], s.verdict);
  const nlohmann::json& first = hang["first_disagreement"];
  ASSERT_TRUE(first.is_object());
  EXPECT_EQ(first["group_name"], "world");
  const std::string seq = "#" + std::to_string(first["seq"].get<int64_t>());
  EXPECT_NE(hang["sentence"].get<std::string>().find(std::string(s.kind) + " " + seq), std::string::npos)
      << hang["sentence"];
  bool others = false;
  for (const nlohmann::json& c : first["collectives"]) {
    if (c["rank"] == s.culprit) continue;
    others = true;
    EXPECT_EQ(c["kind"], s.kind) << c.dump();
    if (*s.tag) {
      EXPECT_TRUE(c[s.tag].is_number_integer()) << c.dump();
    }
  }
  EXPECT_TRUE(others) << first.dump();
}

}  // namespace

TEST(TutorialHangs, EachScenarioStopsInTimeAndNamesItsCulprit) {
  TempDir dir;
  const CommandResult run = run_command(std::string(DPSCOPE_SOURCE_DIR) + "/tutorials/21_hangs/run.sh --bin " +
                                        DPSCOPE_BIN_DIR + " --out " + dir.file("t21") + " --timeout " +
                                        std::to_string(kTimeoutSeconds));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string& out = run.output;
  const Scenario scenarios[] = {
      {"a", 2, 1, "allreduce", "bucket", "NOT_ALL_RANKS_JOINING"},
      {"b", 3, 0, "broadcast", "", "COLLECTIVE_TYPE_MISMATCH"},
      {"c", 2, 1, "allgather", "unit", "SIZE_OR_SYNTAX_MISMATCH"},
      {"d", 2, 1, "allreduce", "bucket", "NOT_ALL_RANKS_JOINING"},
  };
  for (const Scenario& s : scenarios) {
    const size_t from = out.find(std::string("\n(") + s.name + ")");
    ASSERT_NE(from, std::string::npos) << out;
    const size_t to = out.find("\n(", from + 1);
    check(s, out.substr(from, to == std::string::npos ? std::string::npos : to - from), dir.file(std::string("t21/") + s.name));
  }
  // (a): rank 0 waited 3 s in all-reduce #4; after a second its heartbeat marked it stuck (Note [A
  // stuck collective]), which `dpscope-view --live` counts up from while the run hangs.
  {
    dpscope::trace::Reader reader(dir.file("t21/a/run.sqlite"));
    const std::vector<std::string> names = reader.names();
    bool marked = false;
    for (const auto& e : reader.events_of_kind(dpscope::trace::EventKind::Mark)) {
      if (e.name >= 0 && size_t(e.name) < names.size() && names[size_t(e.name)] == "stuck: allreduce #4") {
        marked = e.rank == 0 && e.end_ns - e.begin_ns >= 1'000'000'000;
      }
    }
    EXPECT_TRUE(marked) << "no one-second 'stuck: allreduce #4' mark on rank 0";
  }
  // (d): the check mode stops at once, naming the rank that left, before the timeout.
  EXPECT_NE(dpscope::testing::read_text(dir.file("t21/d.log")).find("left the group without issuing it"), std::string::npos);
}
