// FSDP2's units read from its record_function labels (formats/kineto_units.h, Note [FSDP2's
// units from PyTorch's records]), on a hand-made one-step trace of the shape FSDP2 writes on a
// GPU: the root and two layers, each all-gathered under `FSDP::all_gather (module)`; layers.1
// freed in post_forward and gathered again for backward, layers.0 kept unsharded to its
// post_backward; each reduce-scattered under `FSDP::post_backward_reduce (module)`.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/stats.h"
#include "formats/kineto_units.h"
#include "tests/formats/kineto_fixture.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::formats {
namespace {

using kineto_test::x_event;

// A collective issued by a record: the launch inside it (at `launch_us`) and its NCCL kernel on
// stream 20 (from `begin_us`, `dur_us` long).
void issue(std::vector<std::string>& events, int correlation, double launch_us, double begin_us, double dur_us,
           const std::string& op) {
  const std::string corr = "\"correlation\": " + std::to_string(correlation);
  events.push_back(x_event("cuda_runtime", "cudaLaunchKernel", 1, 1, launch_us, 2, corr));
  events.push_back(x_event("kernel", "ncclDevKernel_" + op + "_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 0, 20,
                           begin_us, dur_us,
                           corr + ", \"device\": 0, \"stream\": 20, \"Collective name\": \"" + op +
                               "\", \"In msg nelems\": 1000, \"dtype\": \"Float\", \"Process Group Name\": \"0\""));
}

std::string fsdp2_step() {
  std::vector<std::string> ev;
  ev.push_back(x_event("user_annotation", "ProfilerStep#0", 1, 1, 0, 10'000));
  // Forward: the root, then layers.0 and layers.1, each gathered in its pre_forward.
  ev.push_back(x_event("user_annotation", "FSDP::root_pre_forward", 1, 1, 10, 30));
  ev.push_back(x_event("user_annotation", "FSDP::all_gather", 1, 1, 12, 10));
  issue(ev, 1, 15, 30, 40, "AllGather");
  ev.push_back(x_event("user_annotation", "FSDP::pre_forward (layers.0)", 1, 1, 100, 20));
  ev.push_back(x_event("user_annotation", "FSDP::all_gather (layers.0)", 1, 1, 102, 10));
  issue(ev, 2, 105, 120, 30, "AllGather");
  ev.push_back(x_event("user_annotation", "FSDP::post_forward (layers.0)", 1, 1, 300, 10));
  ev.push_back(x_event("user_annotation", "FSDP::pre_forward (layers.1)", 1, 1, 400, 20));
  ev.push_back(x_event("user_annotation", "FSDP::all_gather (layers.1)", 1, 1, 402, 10));
  issue(ev, 3, 405, 420, 30, "AllGather");
  ev.push_back(x_event("user_annotation", "FSDP::post_forward (layers.1)", 1, 1, 600, 10));
  // Backward: layers.1 gathered again, then reduce-scattered.
  ev.push_back(x_event("user_annotation", "FSDP::pre_backward (layers.1)", 1, 1, 1000, 20));
  ev.push_back(x_event("user_annotation", "FSDP::all_gather (layers.1)", 1, 1, 1002, 10));
  issue(ev, 4, 1005, 1020, 30, "AllGather");
  ev.push_back(x_event("user_annotation", "FSDP::post_backward (layers.1)", 1, 1, 1500, 100));
  ev.push_back(x_event("user_annotation", "FSDP::post_backward_reduce (layers.1)", 1, 1, 1550, 40));
  issue(ev, 5, 1560, 1600, 200, "ReduceScatter");
  // layers.0 kept unsharded after forward (reshard_after_forward=False): no second all-gather,
  // full until its post_backward.
  ev.push_back(x_event("user_annotation", "FSDP::pre_backward (layers.0)", 1, 1, 1900, 20));
  ev.push_back(x_event("user_annotation", "FSDP::post_backward (layers.0)", 1, 1, 2000, 110));
  ev.push_back(x_event("user_annotation", "FSDP::post_backward_reduce (layers.0)", 1, 1, 2050, 40));
  issue(ev, 6, 2060, 2100, 200, "ReduceScatter");
  return kineto_test::object_trace(ev, "\"rank\": 0, \"world_size\": 2, \"backend\": \"nccl\"");
}

TEST(KinetoUnits, RecordNamesGiveTheStepAndTheModule) {
  std::string step, module;
  ASSERT_TRUE(parse_fsdp_record("FSDP::all_gather (layers.0.attn)", step, module));
  EXPECT_EQ(step, "all_gather");
  EXPECT_EQ(module, "layers.0.attn");
  ASSERT_TRUE(parse_fsdp_record("FSDP::all_gather", step, module));
  EXPECT_EQ(step, "all_gather");
  EXPECT_EQ(module, "") << "the root names no module";
  EXPECT_FALSE(parse_fsdp_record("FullyShardedDataParallel.forward", step, module));
  EXPECT_FALSE(parse_fsdp_record("FSDP::", step, module));
}

TEST(KinetoUnits, AnFsdp2TraceGivesItsUnitsTheirStatesAndCollectives) {
  kineto_test::Imported run;
  const std::string file = run.dir.file("rank-0.json");
  testing::write_file(file, fsdp2_step());
  kineto_test::import_into(run, {file});
  trace::Reader reader(run.path);
  EXPECT_EQ(reader.meta_value(std::string(trace::meta_key::kStrategy)), "fsdp2");
  const std::vector<trace::UnitInfo> units = reader.units();
  ASSERT_EQ(units.size(), 3u);
  EXPECT_EQ(units[0].name, "") << "the root, gathered first";
  EXPECT_EQ(units[1].name, "layers.0");
  EXPECT_EQ(units[2].name, "layers.1");
  std::map<std::string, trace::LaneId> lanes;
  for (const trace::LaneInfo& l : reader.lanes()) {
    if (l.kind == trace::LaneKind::Unit) lanes[l.name] = l.lane;
  }
  EXPECT_EQ(lanes.size(), 3u);
  EXPECT_TRUE(lanes.count("unit 0 root") && lanes.count("unit 1 layers.0") && lanes.count("unit 2 layers.1"));
  // Each state in µs from the step's start: (unit, state, begin, end).
  std::vector<std::tuple<int32_t, trace::UnitState, int64_t, int64_t>> states;
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::UnitState)) {
    states.emplace_back(e.unit, static_cast<trace::UnitState>(e.op), e.begin_ns / 1000, e.end_ns / 1000);
    EXPECT_EQ(e.lane, lanes["unit " + std::to_string(e.unit) + (e.unit == 0 ? " root" : e.unit == 1 ? " layers.0" : " layers.1")]);
    EXPECT_EQ(e.iteration, 0);
  }
  using S = trace::UnitState;
  const std::vector<std::tuple<int32_t, trace::UnitState, int64_t, int64_t>> expected = {
      {0, S::Gathering, 12, 70},                           // the root: no record frees it
      {1, S::Gathering, 102, 150}, {1, S::Full, 150, 2110},  // kept to its post_backward
      {2, S::Gathering, 402, 450}, {2, S::Full, 450, 610},
      {2, S::Gathering, 1002, 1050}, {2, S::Full, 1050, 1600},  // full to post_backward's end
      {2, S::Reducing, 1600, 1800},
      {1, S::Reducing, 2100, 2300},
  };
  std::sort(states.begin(), states.end(), [](const auto& a, const auto& b) { return std::get<2>(a) < std::get<2>(b); });
  EXPECT_EQ(states, expected);
  // The collectives carry their unit.
  std::vector<std::pair<int32_t, uint8_t>> collectives;
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Collective)) collectives.emplace_back(e.unit, e.op);
  const uint8_t gather = uint8_t(trace::CollectiveOp::AllGather), reduce = uint8_t(trace::CollectiveOp::ReduceScatter);
  EXPECT_EQ(collectives, (std::vector<std::pair<int32_t, uint8_t>>{
                             {0, gather}, {1, gather}, {2, gather}, {2, gather}, {2, reduce}, {1, reduce}}));
  const analysis::RunStats stats = analysis::compute_stats(reader);
  EXPECT_EQ(stats.units.size(), 3u);
}

// A trace without FSDP2's labels has no units (FSDP1 names no module in its records).
TEST(KinetoUnits, ATraceWithoutFsdp2RecordsHasNoUnits) {
  kineto_test::Imported run;
  import_into(run, {kineto_test::shipped("nccl_data.json.gz")});
  EXPECT_TRUE(trace::Reader(run.path).units().empty());
}

}  // namespace
}  // namespace dpscope::formats
