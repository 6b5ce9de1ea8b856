// Tutorial 20 (FSDP1 against FSDP2) run as its README runs it, on 4 ranks and on 3: what each rank
// holds as printed and drawn, FSDP2's copy-in and copy-out around every all-gather in the trace
// (and none in FSDP1's), a sharded checkpoint written with no collective, the two trainings
// equal, and HSDP's bytes per link (shard groups within a host, replicate groups across hosts) as
// the ring formulas give them, with its lanes named after its groups.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/tutorials/tutorial_checks.h"
#include "trace/vocabulary.h"

using namespace dpscope::testing::tutorial;
using dpscope::testing::TempDir;

namespace {

constexpr const char* kTutorial = "tutorial-20-fsdp1-vs-fsdp2";

// The largest difference the tutorial printed between the two trainings' final parameters.
double printed_difference(const std::string& output) {
  std::smatch match;
  const std::regex line("FSDP1's and FSDP2's final parameters ([0-9.e+-]+)");
  if (!std::regex_search(output, match, line)) return -1;
  return std::stod(match[1].str());
}

// Names of rank 0's phases in `iteration`, and its collectives, in time order: "in", "out",
// "rs-in" for FSDP2's copies, "AG" and "RS" for the collectives.
std::vector<std::string> copies_and_collectives(trace::Reader& reader, int32_t iteration) {
  const std::vector<std::string> names = reader.names();
  std::vector<trace::Event> events;
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Phase, 0)) {
    if (e.iteration == iteration && names.at(e.name).find("_copy_") != std::string::npos) events.push_back(e);
  }
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Collective, 0)) {
    if (e.iteration == iteration) events.push_back(e);
  }
  std::sort(events.begin(), events.end(),
            [](const trace::Event& a, const trace::Event& b) { return a.begin_ns < b.begin_ns; });
  std::vector<std::string> order;
  for (const trace::Event& e : events) {
    if (e.kind == trace::EventKind::Collective) {
      order.push_back(e.op == static_cast<uint8_t>(trace::CollectiveOp::AllGather) ? "AG" : "RS");
    } else {
      const std::string& name = names.at(e.name);
      order.push_back(name == "fsdp2.all_gather_copy_in"    ? "in"
                      : name == "fsdp2.all_gather_copy_out" ? "out"
                                                            : "rs-in");
    }
  }
  return order;
}

TEST(TutorialFsdp1VsFsdp2, FourRanksRowsCopiesCheckpointAndEqualTraining) {
  TempDir dir;
  const TutorialRun run = launch(dir, kTutorial, "", "", 4);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The README's lines: FSDP1's ranges cut rows, FSDP2's chunks are whole rows (3, 3, 3, 1).
  for (const std::string line :
       {"rank 0 [     0,    163): fc0.weight rows 0-1, row 2 cols 0-34",
        "rank 3 [   489,    652): fc0.weight row 7 cols 41-63, rows 8-9; fc0.bias [0, 10); 2 padding",
        "rank 3: fc0.weight rows [9, 10); fc0.bias rows [9, 10)",
        "fc0.weight [10 x 64]   00+11+2+33", "0001112223",
        "FSDP1: 6 elements", "FSDP2: 174 elements",
        "FSDP2 save_sharded_state: 0 collectives",
        "full state dict (every parameter whole, on rank 0): FSDP1 3 all-gathers, FSDP2 3"}) {
    EXPECT_NE(run.output.find(line), std::string::npos) << line << "\n" << run.output;
  }
  const double difference = printed_difference(run.output);
  EXPECT_GE(difference, 0) << run.output;
  EXPECT_LE(difference, 1e-6) << run.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(std::filesystem::exists(run.trace_dir + "/fsdp2-checkpoint/shard-rank" +
                                        std::to_string(rank) + "-of-4.pt"));
  }

  // In FSDP2's trace every all-gather comes after its group's copy-in and before its copy-out,
  // and every reduce-scatter after its copy-in: counted as prefixes, since a prefetched gather's
  // copies interleave with other groups' work.
  trace::Reader fsdp2(run.trace_dir + "/fsdp2/run.sqlite");
  const std::vector<std::string> order = copies_and_collectives(fsdp2, 1);
  int copy_ins = 0, gathers = 0, copy_outs = 0, reduce_copy_ins = 0, reductions = 0;
  for (const std::string& step : order) {
    copy_ins += step == "in";
    reduce_copy_ins += step == "rs-in";
    if (step == "AG") {
      EXPECT_LE(++gathers, copy_ins) << "a gather before its copy-in";
    }
    if (step == "out") {
      EXPECT_LE(++copy_outs, gathers) << "a copy-out before its gather";
    }
    if (step == "RS") {
      EXPECT_LE(++reductions, reduce_copy_ins) << "a reduce-scatter before its copy-in";
    }
  }
  EXPECT_EQ(gathers, 6) << "3 in forward, 3 again in backward";
  EXPECT_EQ(copy_ins, gathers);
  EXPECT_EQ(copy_outs, gathers);
  EXPECT_EQ(reductions, 3);
  EXPECT_EQ(reduce_copy_ins, reductions);
  trace::Reader fsdp1(run.trace_dir + "/fsdp1/run.sqlite");
  for (const std::string& step : copies_and_collectives(fsdp1, 1)) {
    EXPECT_TRUE(step == "AG" || step == "RS") << "FSDP1 has no copies: " << step;
  }
}

// The HSDP part on 4 ranks: 2 "hosts" of 2. mlp 64-10-10-10 has P = 870 floats = 3,480 B, no padding
// on 2 ranks: the shard groups send 3(N-1)/N P = 5,220 B a step per rank, the replicate groups
// 2(R-1)/(RN) P = 1,740 B.
TEST(TutorialFsdp1VsFsdp2, HsdpBytesPerLinkAsTheFormulasSay) {
  TempDir dir;
  const TutorialRun run = launch(dir, kTutorial, "--steps 2", "", 4);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const std::string line :
       {"within a host (shard group):          5220 B   formula 3(N-1)/N x P =     5220 B",
        "across hosts (replicate group):       1740 B   formula 2(R-1)/(R N) x P =     1740 B"}) {
    EXPECT_NE(run.output.find(line), std::string::npos) << line << "\n" << run.output;
  }
  std::smatch match;
  ASSERT_TRUE(std::regex_search(run.output, match, std::regex("HSDP against FSDP2 over the world: largest "
                                                              "difference of the final parameters ([0-9.e+-]+)")))
      << run.output;
  EXPECT_LE(std::stod(match[1].str()), 1e-6);
  // Each rank's lanes name its shard and replicate groups, and the meta says hybrid.
  trace::Reader hsdp(run.trace_dir + "/hsdp/run.sqlite");
  std::string lanes;
  for (const trace::LaneInfo& lane : hsdp.lanes()) {
    if (lane.rank == 3) lanes += lane.name + "\n";
  }
  EXPECT_NE(lanes.find("shard #1: ranks 2-3"), std::string::npos) << lanes;
  EXPECT_NE(lanes.find("replicate #1: ranks 1,3"), std::string::npos) << lanes;
}

TEST(TutorialFsdp1VsFsdp2, ThreeRanksUnevenRowsTrainTheSame) {
  TempDir dir;
  const TutorialRun run = launch(dir, kTutorial, "--steps 2", "", 3);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("rank 2: fc0.weight rows [8, 10)"), std::string::npos) << run.output;
  const double difference = printed_difference(run.output);
  EXPECT_GE(difference, 0) << run.output;
  EXPECT_LE(difference, 1e-6) << run.output;
  EXPECT_NE(run.output.find("HSDP needs an even number of ranks, 4 or more"), std::string::npos) << run.output;
}

}  // namespace
