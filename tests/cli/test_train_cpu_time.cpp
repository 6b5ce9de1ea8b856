// What a real `dpscope train` records of its threads' CPU time (Note [Thread CPU time]), on 2
// ranks of DDP with rank 1 told to sleep 40 ms a step (--straggler): the sleep is a span of wall
// time with almost no CPU time, the phases have CPU time that never runs ahead of their wall
// time, the collectives carry the issuing thread's CPU time, waits theirs, hooks none.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/cluster_clock.h"
#include "tests/test_util.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
using namespace dpscope::trace;
namespace analysis = dpscope::analysis;
namespace core = dpscope::core;

namespace {

using nlohmann::json;

// Generous for the few µs between reading the wall clock and the CPU clock at each end.
constexpr int64_t kClockReadSlackNs = 200'000;

int64_t cpu_ns(const Event& e) { return e.cpu_end_ns - e.cpu_begin_ns; }
int64_t wall_ns(const Event& e) { return e.end_ns - e.begin_ns; }

}  // namespace

TEST(TrainCpuTime, ComputeSpansCarryCpuTimeAndASleepHasNone) {
  TempDir dir;
  const std::string trace = dir.file("run.sqlite");
  const auto train = run_command(
      "timeout -k 5 180 " + dpscope_bin() + " launch -n 2 -- " + dpscope_bin() +
      " train --strategy ddp --model mlp --hidden 64 --layers 3 --steps 6 --batch-size 16"
      " --threads 1 --progress-every 0 --bucket-cap-mb 0.01 --straggler 1:40 --trace " + trace);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_EQ(train.output.find("cluster_step_ms"), std::string::npos) << "no link, no cluster clock";
  Reader reader(trace);
  EXPECT_EQ(reader.meta()[std::string(meta_key::kIntraOpThreads)], "1");
  const std::vector<std::string> names = reader.names();
  const auto named = [&](const Event& e, std::string_view name) {
    return e.name >= 0 && size_t(e.name) < names.size() && names[e.name] == name;
  };

  int delays = 0, backwards = 0;
  for (const Event& e : reader.events_of_kind(EventKind::Phase)) {
    ASSERT_NE(e.cpu_begin_ns, kNone64) << names[e.name];
    ASSERT_NE(e.cpu_end_ns, kNone64) << names[e.name];
    EXPECT_GE(cpu_ns(e), 0) << names[e.name];
    EXPECT_LE(cpu_ns(e), wall_ns(e) + kClockReadSlackNs) << names[e.name] << " on rank " << e.rank;
    if (named(e, kPhaseStragglerDelay)) {
      ++delays;
      EXPECT_EQ(e.rank, 1);
      EXPECT_GE(wall_ns(e), 40'000'000);
      EXPECT_LT(cpu_ns(e), 4'000'000) << "a 40 ms sleep counted as compute";
    }
    if (named(e, kPhaseBackward)) {
      ++backwards;
      EXPECT_GT(cpu_ns(e), 0) << "backward computed nothing on rank " << e.rank;
    }
  }
  EXPECT_EQ(delays, 6);
  EXPECT_EQ(backwards, 12);

  // Hooks, once a gradient, read the CPU clock once (a system call on the hot path): at their
  // end, the gradient's ready moment. A thread's CPU clock never runs ahead of its wall clock.
  const std::vector<Event> hooks = reader.events_of_kind(EventKind::Hook);
  ASSERT_FALSE(hooks.empty());
  std::map<int32_t, const Event*> previous_hook;  // by rank
  for (const Event& e : hooks) {
    EXPECT_EQ(e.cpu_begin_ns, kNone64);
    ASSERT_NE(e.cpu_end_ns, kNone64) << "hook of parameter " << e.param << " on rank " << e.rank;
    const Event*& before = previous_hook[e.rank];
    if (before && before->end_ns <= e.end_ns) {
      EXPECT_LE(before->cpu_end_ns, e.cpu_end_ns);
      EXPECT_LE(e.cpu_end_ns - before->cpu_end_ns, e.end_ns - before->end_ns + kClockReadSlackNs);
    }
    before = &e;
  }
  const std::vector<Event> collectives = reader.events_of_kind(EventKind::Collective);
  ASSERT_FALSE(collectives.empty());
  for (const Event& e : collectives) {
    EXPECT_NE(e.cpu_begin_ns, kNone64) << "collective #" << e.seq << " on rank " << e.rank;
    EXPECT_EQ(e.cpu_end_ns, kNone64);
  }
  const std::vector<Event> waits = reader.events_of_kind(EventKind::CollectiveWait);
  ASSERT_FALSE(waits.empty());
  for (const Event& e : waits) {
    ASSERT_NE(e.cpu_begin_ns, kNone64);
    EXPECT_LE(cpu_ns(e), wall_ns(e) + kClockReadSlackNs);
  }
  // Rank 0 waits for the sleeping rank 1 in every step's finalize: most of that time it has the
  // wall clock's, not the CPU clock's.
  int64_t wait_wall = 0, wait_cpu = 0;
  for (const Event& e : waits) {
    if (e.rank != 0 || e.iteration < 1) continue;
    wait_wall += wall_ns(e);
    wait_cpu += cpu_ns(e);
  }
  EXPECT_GT(wait_wall, 5 * 30'000'000) << "rank 0 should wait about 40 ms a step for rank 1";
  EXPECT_LT(wait_cpu, wait_wall / 4);
}

// The same kind of run on an emulated link, replayed on the cluster clock (Note [Cluster
// clock]): the launcher prints its step, every rank's program completes without a wait left
// unmatched, every collective lasts the link model's time, and every rank has each iteration.
TEST(TrainCpuTime, ARealRunReplaysOnTheClusterClock) {
  TempDir dir;
  // The launcher merges the rank files in --trace-dir (with --trace, rank 0 would).
  const std::string trace = dir.file("traces/run.sqlite");
  const auto train = run_command(
      "timeout -k 5 180 " + dpscope_bin() + " launch -n 2 --link-gbps 4 --link-latency-us 50" +
      " --trace-dir " + dir.file("traces") + " -- " + dpscope_bin() +
      " train --strategy ddp --model mlp --hidden 64 --layers 3 --steps 6"
      " --batch-size 16 --threads 1 --progress-every 0 --bucket-cap-mb 0.01");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  // The launcher prints the replayed step beside the ranks' measured ones.
  EXPECT_NE(train.output.find("dpscope launch: cluster_step_ms "), std::string::npos) << train.output;
  EXPECT_NE(train.output.find("(rank 0, steady steps; cluster clock (modeled: compute as CPU time, link 4 Gb/s, 50 µs))"),
            std::string::npos) << train.output;
  Reader reader(trace);
  const analysis::ClusterClockRun run = analysis::cluster_clock(reader, trace, std::nullopt);
  EXPECT_TRUE(run.link_from_trace);
  EXPECT_DOUBLE_EQ(run.link.gbps, 4);
  EXPECT_TRUE(run.warnings.empty());
  EXPECT_EQ(run.timeline.unmatched_waits, 0);
  std::map<analysis::CollectiveKey, Event> recorded;
  for (const Event& e : reader.events_of_kind(EventKind::Collective, 0)) recorded[{e.grp, e.seq}] = e;
  ASSERT_FALSE(recorded.empty());
  EXPECT_EQ(run.timeline.collectives.size(), recorded.size());
  for (const auto& [key, span] : run.timeline.collectives) {
    const Event& e = recorded.at(key);
    EXPECT_EQ(span.end_ns - span.begin_ns,
              core::link_model_ns(static_cast<CollectiveOp>(e.op), e.bytes, 2, run.link))
        << "collective #" << key.second;
  }
  for (const int32_t rank : {0, 1}) {
    ASSERT_EQ(run.iterations.at(rank).size(), 6u) << "rank " << rank;
    ASSERT_TRUE(run.steady_step_ms(rank).has_value());
    EXPECT_GT(*run.steady_step_ms(rank), 0);
  }
}

// `dpscope train --trace FILE` on an emulated link: rank 0 merges the run and prints its step on
// the cluster clock under its measured one; `dpscope stats --clock` gives both clocks in one
// JSON shape, where on the cluster clock the last rank to arrive at each all-reduce sees
// exactly the link model's time, and the report's steady step is the one train printed.
TEST(TrainCpuTime, TrainAndStatsShowBothClocksEachLabelled) {
  TempDir dir;
  const std::string trace = dir.file("run.sqlite");
  const auto train = run_command(
      "timeout -k 5 180 " + dpscope_bin() + " launch -n 2 --link-gbps 4 --link-latency-us 50 -- " +
      dpscope_bin() + " train --strategy ddp --model mlp --hidden 64 --layers 3 --steps 6"
      " --batch-size 16 --threads 1 --progress-every 0 --bucket-cap-mb 0.01 --trace " + trace);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_NE(train.output.find("[0] step_ms "), std::string::npos) << train.output;
  EXPECT_NE(train.output.find(" (measured on this machine)"), std::string::npos) << train.output;
  const size_t line = train.output.find("[0] cluster_step_ms ");
  ASSERT_NE(line, std::string::npos) << train.output;
  EXPECT_EQ(train.output.find("[1] cluster_step_ms"), std::string::npos) << "rank 0 merged, rank 0 prints";
  const double printed = std::stod(train.output.substr(line + std::string("[0] cluster_step_ms ").size()));

  const auto cluster = run_command(dpscope_bin() + " stats --clock cluster --json " + trace);
  ASSERT_EQ(cluster.exit_code, 0) << cluster.output;
  const json c = json::parse(cluster.output);
  EXPECT_EQ(c["clock"], json({{"name", "cluster"}, {"link_gbps", 4.0}, {"link_latency_us", 50.0}, {"compute", "steady"}}));
  const auto measured = run_command(dpscope_bin() + " stats --clock measured --json " + trace);
  ASSERT_EQ(measured.exit_code, 0) << measured.output;
  const json m = json::parse(measured.output);
  EXPECT_EQ(m["clock"]["name"], "measured");
  EXPECT_TRUE(m["clock"]["link_gbps"].is_null());
  // The same shape on both clocks: the same keys everywhere, the same collectives.
  ASSERT_EQ(c["ranks"].size(), 2u);
  ASSERT_EQ(c["ranks"][0]["collectives"].size(), m["ranks"][0]["collectives"].size());
  for (const auto& [key, value] : m["ranks"][0].items()) EXPECT_TRUE(c["ranks"][0].contains(key)) << key;

  // Each all-reduce: the rank that arrived last on the cluster clock transfers for exactly the
  // link model's time, and no rank's span is shorter.
  std::map<int64_t, std::vector<double>> allreduce_ms;
  std::map<int64_t, int64_t> allreduce_bytes;
  for (const json& rank : c["ranks"]) {
    for (const json& collective : rank["collectives"]) {
      ASSERT_TRUE(collective.contains("begin_ms") && collective.contains("ms")) << collective.dump();
      EXPECT_GE(collective["begin_ms"].get<double>(), 0) << collective.dump();
      if (collective["kind"] != "allreduce" || collective["iteration"].is_null()) continue;
      allreduce_ms[collective["seq"]].push_back(collective["ms"]);
      allreduce_bytes[collective["seq"]] = collective["bytes"];
    }
  }
  ASSERT_GE(allreduce_ms.size(), 6u);
  for (const auto& [seq, ms] : allreduce_ms) {
    ASSERT_EQ(ms.size(), 2u) << "all-reduce #" << seq;
    const double model_ms = double(core::link_model_ns(CollectiveOp::AllReduce, allreduce_bytes[seq], 2,
                                                           core::LinkSpec{4, 50})) / 1e6;
    EXPECT_NEAR(*std::min_element(ms.begin(), ms.end()), model_ms, 0.01 * model_ms) << "all-reduce #" << seq;
  }
  // The steady step of the report (rank 0, iterations 2..5) is the one train printed.
  std::vector<double> steps;
  for (const json& it : c["ranks"][0]["iterations"]) {
    if (it["iteration"].get<int>() >= 2) steps.push_back(it["step_ms"]);
  }
  ASSERT_EQ(steps.size(), 4u);
  std::sort(steps.begin(), steps.end());
  EXPECT_NEAR((steps[1] + steps[2]) / 2, printed, 0.0015);
  const auto text = run_command(dpscope_bin() + " stats --clock cluster " + trace);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("clock: cluster clock (modeled: compute as CPU time, link 4 Gb/s, 50 µs)"),
            std::string::npos) << text.output;
  const auto other_link = run_command(dpscope_bin() + " stats --clock cluster --link-gbps 1 --link-latency-us 50 --json " + trace);
  ASSERT_EQ(other_link.exit_code, 0) << other_link.output;
  EXPECT_EQ(json::parse(other_link.output)["clock"]["link_gbps"], 1.0);
  // Each step's own CPU time (Note [Steady compute]): labelled so, the same shape.
  const auto recorded = run_command(dpscope_bin() + " stats --clock cluster --compute-time recorded --json " + trace);
  ASSERT_EQ(recorded.exit_code, 0) << recorded.output;
  const json r = json::parse(recorded.output);
  EXPECT_EQ(r["clock"]["compute"], "recorded");
  EXPECT_EQ(r["ranks"][0]["iterations"].size(), c["ranks"][0]["iterations"].size());
  const auto recorded_text = run_command(dpscope_bin() + " stats --clock cluster --compute-time recorded " + trace);
  EXPECT_NE(recorded_text.output.find("cluster clock (modeled: compute as each step's CPU time, link 4 Gb/s"),
            std::string::npos) << recorded_text.output;
}

// Bad --clock and link values, and a run without a link, are refused with the fix.
TEST(TrainCpuTime, StatsRefusesABadClockOrLinkNamingTheFix) {
  TempDir dir;
  const std::string trace = dir.file("run.sqlite");
  const auto train = run_command("timeout -k 5 120 " + dpscope_bin() +
                                 " train --model mlp --hidden 32 --layers 2 --steps 3 --batch-size 8"
                                 " --threads 1 --progress-every 0 --trace " + trace);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_EQ(train.output.find("cluster_step_ms"), std::string::npos) << "no link, no cluster clock";
  const auto refused = [&](const std::string& args, const std::vector<std::string>& says) {
    const auto run = run_command(dpscope_bin() + " stats " + args + " " + trace);
    EXPECT_NE(run.exit_code, 0) << args;
    for (const std::string& text : says) EXPECT_NE(run.output.find(text), std::string::npos) << args << ": " << run.output;
  };
  refused("--clock wall", {"--clock wall is not a clock", "measured", "cluster"});
  refused("--clock cluster", {trace, "--link-gbps 4 --link-latency-us 50"});
  refused("--clock cluster --link-gbps 4", {"--link-gbps needs --link-latency-us"});
  refused("--clock cluster --link-gbps 0 --link-latency-us 50", {"--link-gbps", "out of range"});
  refused("--link-gbps 4 --link-latency-us 50", {"add --clock cluster"});
  refused("--clock cluster --link-gbps 4 --link-latency-us 50 --compute-time least",
          {"--compute-time least is not a way to take compute", "steady", "recorded"});
  refused("--compute-time recorded", {"--compute-time says how the cluster clock takes compute", "add --clock cluster"});
  const auto given = run_command(dpscope_bin() + " stats --clock cluster --link-gbps 4 --link-latency-us 50 --json " + trace);
  ASSERT_EQ(given.exit_code, 0) << given.output;
  EXPECT_EQ(json::parse(given.output)["clock"]["name"], "cluster");
}
