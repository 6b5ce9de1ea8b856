// The viewer's figures held to numbers worked out by hand, not to the analysis it calls: the
// known two-rank DDP trace of tests/analysis/stats_fixture.h, opened in dpscope-view headless,
// and its --screenshot JSON line (what the Stats panel and the memory lanes draw) compared with
// the fixture's own arithmetic.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

#include "tests/analysis/stats_fixture.h"
#include "tests/test_util.h"
#include "tests/viewer/screenshot_json.h"

using dpscope::testing::run_command;
using dpscope::testing::TempDir;
using dpscope::testing::screenshot_json;

namespace {

// The known trace, written as the analysis tests write it.
std::string known_trace(const TempDir& dir) {
  const std::string path = dir.file("known.sqlite");
  dpscope::trace::Writer writer(path);
  writer.begin();
  dpscope::analysis::stats_fixture::fill_known_trace(writer);
  writer.commit();
  writer.finish();
  return path;
}

TEST(ViewerKnownTrace, TheStatsPanelDrawsTheHandWorkedFigures) {
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`";
  TempDir dir;
  const auto shown = run_command(std::string(DPSCOPE_BIN_DIR) + "/dpscope-view " + known_trace(dir) +
                                 " --screenshot " + dir.file("known.png") + " --frames 3");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  const nlohmann::json j = screenshot_json(shown.output);
  ASSERT_TRUE(j.is_object()) << shown.output;
  ASSERT_EQ(j["overlap"].size(), 2u) << j.dump();
  ASSERT_EQ(j["memory"].size(), 2u) << j.dump();
  const nlohmann::json& rank0 = j["overlap"][0];
  const nlohmann::json& rank1 = j["overlap"][1];

  // Rank 0: compute [1,7] + [8,10] + [11,16] + [18,20] ms = 15; communication 0.6 (the
  // construction's broadcast) + 3.5 + 3.5 = 7.6; exposed 0.6 + 0.5 ([7, 7.5]) + 2.0 ([16, 17.5] and
  // the barrier's [20.5, 21]) = 3.1.
  EXPECT_EQ(rank0["rank"], 0);
  EXPECT_NEAR(rank0["compute_ms"].get<double>(), 15.0, 1e-6);
  EXPECT_NEAR(rank0["comm_ms"].get<double>(), 7.6, 1e-6);
  EXPECT_NEAR(rank0["exposed_comm_ms"].get<double>(), 3.1, 1e-6);
  ASSERT_EQ(rank0["iterations_exposed_comm_ms"].size(), 2u) << rank0.dump();
  EXPECT_NEAR(rank0["iterations_exposed_comm_ms"][0].get<double>(), 0.5, 1e-6);
  EXPECT_NEAR(rank0["iterations_exposed_comm_ms"][1].get<double>(), 2.0, 1e-6);
  // Bucket 0's all-reduces ([4.2, 6.2], [14, 15]) lie under backward; bucket 1's stick out by
  // 0.5 ([6.5, 7.5] past backward's end at 7) and 1.5 ([15.5, 17.5] past 16).
  ASSERT_EQ(rank0["buckets"].size(), 2u) << rank0.dump();
  EXPECT_EQ(rank0["buckets"][0]["bucket"], 0);
  EXPECT_NEAR(rank0["buckets"][0]["exposed_comm_ms"].get<double>(), 0.0, 1e-6);
  EXPECT_EQ(rank0["buckets"][1]["bucket"], 1);
  EXPECT_NEAR(rank0["buckets"][1]["exposed_comm_ms"].get<double>(), 2.0, 1e-6);

  // Rank 1 (interrupted in iteration 1): compute [1,9] + [10,11] + [12,14] = 11; communication
  // 0.6 + 3 + 2 + 0.5 = 6.1; exposed 0.6 + 1.0 ([9, 10], bucket 1) + 0 = 1.6.
  EXPECT_EQ(rank1["rank"], 1);
  EXPECT_NEAR(rank1["compute_ms"].get<double>(), 11.0, 1e-6);
  EXPECT_NEAR(rank1["comm_ms"].get<double>(), 6.1, 1e-6);
  EXPECT_NEAR(rank1["exposed_comm_ms"].get<double>(), 1.6, 1e-6);
  ASSERT_EQ(rank1["iterations_exposed_comm_ms"].size(), 2u) << rank1.dump();
  EXPECT_NEAR(rank1["iterations_exposed_comm_ms"][0].get<double>(), 1.0, 1e-6);
  EXPECT_NEAR(rank1["iterations_exposed_comm_ms"][1].get<double>(), 0.0, 1e-6);
  ASSERT_EQ(rank1["buckets"].size(), 2u) << rank1.dump();
  EXPECT_NEAR(rank1["buckets"][0]["exposed_comm_ms"].get<double>(), 0.0, 1e-6);
  EXPECT_NEAR(rank1["buckets"][1]["exposed_comm_ms"].get<double>(), 1.0, 1e-6);

  // Memory peaks: rank 0's stacked categories reach 1000 + 2000 + 3000 + 1000 = 7000 bytes at
  // 8 ms; rank 1's 1000 + 3000 + 1500 = 5500 at 5 ms (CUDA's own counter is not stacked).
  EXPECT_EQ(j["memory"][0]["peak_bytes"], 7000);
  EXPECT_EQ(j["memory"][1]["peak_bytes"], 5500);

  // Two iterations are too few to name a straggler (Note [Stragglers] asks for 3 steady steps).
  EXPECT_EQ(j["stragglers"].get<std::string>().rfind("none", 0), 0u) << j["stragglers"];
  // The run spans 0 to 21 ms (rank 0's barrier ends it).
  ASSERT_EQ(j["run_ms"].size(), 1u);
  EXPECT_NEAR(j["run_ms"][0].get<double>(), 21.0, 1e-3);
}

}  // namespace
