// `dpscope stats` on an FSDP2 trace: each parameter's dim-0 rows per rank (`params[].rows` of
// --json, the text report's rows table) on a 3-rank run whose chunks are uneven and one empty,
// held to the engine's own chunking (Note [Rows from the trace], Note [Dim-0 chunks]).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/fsdp2/dim0_chunks.h"
#include "tests/test_util.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

// mlp with --hidden 4 on 3 ranks: fc0.weight [4, 64] and fc0.bias [4], fc1's [4, 4] and [4] in
// chunks of 2 rows, the last empty; fc2's [10, 4] and [10] in chunks of 4, the last 2 rows.
TEST(Fsdp2Stats, RowsOfEachParameterPerRankThreeRanks) {
  TempDir dir;
  const int world = 3;
  const auto run = run_command(
      "timeout 120 " + dpscope_bin() + " launch -n 3 --trace-dir " + dir.file("traces") + " -- " +
      dpscope_bin() + " train --threads 1 --progress-every 0 --steps 2 --batch-size 12 --samples 96 "
      "--model mlp --hidden 4 --strategy fsdp2 --wrap-min-params 10");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string trace = dir.file("traces/run.sqlite");
  const auto stats = run_command(dpscope_bin() + " stats --json " + trace);
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  const nlohmann::json j = nlohmann::json::parse(stats.output, nullptr, false);
  ASSERT_TRUE(j.is_object()) << stats.output;
  const std::vector<std::pair<std::string, std::vector<std::vector<int64_t>>>> expected = {
      {"fc0.weight", {{0, 2}, {2, 4}, {4, 4}}}, {"fc0.bias", {{0, 2}, {2, 4}, {4, 4}}},
      {"fc1.weight", {{0, 2}, {2, 4}, {4, 4}}}, {"fc1.bias", {{0, 2}, {2, 4}, {4, 4}}},
      {"fc2.weight", {{0, 4}, {4, 8}, {8, 10}}}, {"fc2.bias", {{0, 4}, {4, 8}, {8, 10}}}};
  ASSERT_EQ(j["params"].size(), expected.size()) << j["params"].dump();
  for (size_t i = 0; i < expected.size(); ++i) {
    const nlohmann::json& p = j["params"][i];
    SCOPED_TRACE(p.dump());
    EXPECT_EQ(p["name"], expected[i].first);
    ASSERT_TRUE(p.contains("rows"));
    EXPECT_EQ(p["rows"].get<std::vector<std::vector<int64_t>>>(), expected[i].second);
    // The engine's chunking of the recorded dim-0 size gives the same ranges.
    const dpscope::fsdp2::Dim0Chunks chunks(p["shape"][0].get<int64_t>(), world);
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(p["rows"][r][0].get<int64_t>(), chunks.first_row(r)) << "rank " << r;
      EXPECT_EQ(p["rows"][r][1].get<int64_t>(), chunks.first_row(r) + chunks.rows_of(r)) << "rank " << r;
    }
  }
  const auto text = run_command(dpscope_bin() + " stats " + trace);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("rows (FSDP2: each parameter's dim-0 rows"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("fc1.weight               [0,2) [2,4) [4,4)"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("fc2.bias                 [0,4) [4,8) [8,10)"), std::string::npos) << text.output;
}

// A DDP trace's parameters have no rows: the key is FSDP2's.
TEST(Fsdp2Stats, NoRowsForDdp) {
  TempDir dir;
  const auto run = run_command(
      "timeout 120 " + dpscope_bin() + " launch -n 2 --trace-dir " + dir.file("traces") + " -- " +
      dpscope_bin() + " train --threads 1 --progress-every 0 --steps 2 --batch-size 12 --samples 96 "
      "--model mlp --hidden 4 --strategy ddp");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto stats = run_command(dpscope_bin() + " stats --json " + dir.file("traces/run.sqlite"));
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  const nlohmann::json j = nlohmann::json::parse(stats.output, nullptr, false);
  ASSERT_TRUE(j.is_object()) << stats.output;
  ASSERT_FALSE(j["params"].empty());
  for (const auto& p : j["params"]) EXPECT_FALSE(p.contains("rows")) << p.dump();
  const auto text = run_command(dpscope_bin() + " stats " + dir.file("traces/run.sqlite"));
  EXPECT_EQ(text.output.find("rows (FSDP2"), std::string::npos) << text.output;
}

}  // namespace
