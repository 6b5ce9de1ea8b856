// `dpscope stats --critical-path` on dpscope's own DDP runs (the cluster clock's path: as long as
// the step there, the whole all-reduce on it with one bucket, less communication with 1 MiB
// buckets on a link fast enough to hide them) and on bad input (one line naming the file and the
// fix, exit 1). Trains, so it needs the engine.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analysis/cluster_clock.h"
#include "tests/cli/cli_run.h"
#include "tests/test_util.h"
#include "trace/reader.h"

namespace dpscope::testing {
namespace {

using nlohmann::json;

constexpr int32_t kIteration = 4;

// A 2-rank DDP run of mlp 1024x3, batch 32, on a 25 Gb/s, 50 µs link, with `buckets` options;
// returns its run file.
std::string train(const TempDir& dir, const std::string& name, const std::string& buckets) {
  const std::string traces = dir.file(name);
  const auto run = run_command("timeout -k 5 240 " + dpscope_bin() + " launch -n 2 --link-gbps 25 --link-latency-us 50" +
                               " --trace-dir " + traces + " -- " + dpscope_bin() +
                               " train --strategy ddp --model mlp --hidden 1024 --layers 3 --batch-size 32"
                               " --steps 8 --threads 1 --progress-every 0 " + buckets);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return traces + "/run.sqlite";
}

json critical_path(const TempDir& dir, const std::string& trace) {
  const CliOutcome out = run_dpscope(dir, "stats --critical-path --iteration " + std::to_string(kIteration) +
                                              " --json " + shell_quoted(trace));
  EXPECT_EQ(out.exit_code, 0) << out.err;
  return json::parse(out.out)["critical_path"];
}

// The longest all-reduce of the iteration on the link, in ms on the cluster clock.
double longest_allreduce_ms(const std::string& trace) {
  trace::Reader reader(trace);
  const analysis::ClusterClockRun run = analysis::cluster_clock(reader, trace, std::nullopt);
  int64_t longest = 0;
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Collective, 0)) {
    if (e.iteration != kIteration || e.op != uint8_t(trace::CollectiveOp::AllReduce)) continue;
    const analysis::ClusterSpan span = run.timeline.collectives.at({e.grp, e.seq});
    longest = std::max(longest, span.end_ns - span.begin_ns);
  }
  return double(longest) / 1e6;
}

double step_ms(const std::string& trace, int32_t rank) {
  trace::Reader reader(trace);
  const analysis::ClusterClockRun run = analysis::cluster_clock(reader, trace, std::nullopt);
  const analysis::ClusterSpan step = run.iterations.at(rank).at(kIteration);
  return double(step.end_ns - step.begin_ns) / 1e6;
}

double bound_ms(const json& path, const std::string& key) {
  return path["bound_by_ms"].contains(key) ? path["bound_by_ms"][key].get<double>() : 0.0;
}

TEST(CriticalPathCli, OneBucketHoldsTheWholeAllReduceAndSmallBucketsHideSome) {
  TempDir dir;
  const std::string one = train(dir, "one", "--bucket-cap-mb 100 --first-bucket-mb 100");
  const std::string small = train(dir, "small", "--bucket-cap-mb 1 --first-bucket-mb 1");
  const json a = critical_path(dir, one);
  const json b = critical_path(dir, small);
  for (const json* p : {&a, &b}) {
    EXPECT_EQ((*p)["region"], "iteration " + std::to_string(kIteration));
    EXPECT_EQ((*p)["clock"], "cluster");
    // The path's length is its rank's step on the cluster clock.
    const double step = step_ms(p == &a ? one : small, (*p)["rank"].get<int32_t>());
    EXPECT_NEAR((*p)["length_ms"].get<double>(), step, 0.005 * step) << p->dump();
    EXPECT_NEAR(bound_ms(*p, "cpu_bound") + bound_ms(*p, "comm_bound"), (*p)["length_ms"].get<double>(), 1e-6);
    EXPECT_NEAR((*p)["bound_by_pct"]["cpu_bound"].get<double>(),
                100 * bound_ms(*p, "cpu_bound") / (*p)["length_ms"].get<double>(), 1e-6);
    ASSERT_FALSE((*p)["longest"].empty());
    for (const char* key : {"name", "rank", "lane", "begin_ms", "ms"}) EXPECT_TRUE((*p)["longest"][0].contains(key)) << key;
  }
  // One bucket: its all-reduce starts when backward ends and nothing computes meanwhile.
  const double whole = longest_allreduce_ms(one);
  EXPECT_GT(whole, 0);
  EXPECT_NEAR(bound_ms(a, "comm_bound"), whole, 0.01 * whole) << a.dump();
  // 1 MiB buckets: the all-reduces run while backward computes; the path holds less of them.
  EXPECT_LT(bound_ms(b, "comm_bound"), bound_ms(a, "comm_bound")) << b.dump();

  // The text report ends with the path.
  const CliOutcome text = run_dpscope(dir, "stats --critical-path " + shell_quoted(one));
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("critical path of iteration 2 (rank "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("comm_bound"), std::string::npos);

  // Bad input: one line naming the file and the fix, exit 1, nothing on stdout.
  auto refused = [&](const std::string& args, const std::string& says) {
    const CliOutcome out = run_dpscope(dir, args);
    EXPECT_EQ(out.exit_code, 1) << args;
    EXPECT_TRUE(out.out.empty()) << out.out;
    EXPECT_EQ(std::count(out.err.begin(), out.err.end(), '\n'), 1) << out.err;
    EXPECT_NE(out.err.find(says), std::string::npos) << out.err;
  };
  refused("stats --critical-path --iteration 99 " + shell_quoted(one),
          one + ": has no iteration 99 (its iterations are 0..7): give --iteration N within them");
  refused("stats --critical-path --annotation nosuch " + shell_quoted(one),
          one + ": no event's name begins with \"nosuch\"");
  refused("stats --critical-path --annotation backward --instance 8 " + shell_quoted(one),
          "so there is no instance 8: give --instance K from 0 to 7");
  refused("stats --critical-path --instance 1 " + shell_quoted(one), "--instance counts an annotation's instances: add --annotation NAME");
  refused("stats --iteration 1 " + shell_quoted(one), "add --critical-path");
  const std::string simple_add = std::string(DPSCOPE_SOURCE_DIR) + "/tests/data/kineto/critical_path_simple_add.json.gz";
  refused("stats --critical-path " + shell_quoted(simple_add), simple_add + ": has no iterations");
}

}  // namespace
}  // namespace dpscope::testing
