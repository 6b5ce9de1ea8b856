// The critical path (analysis/critical_path.h): HTA's own numbers on its simple_add trace and on a
// hand-made trace of CUDA event syncs (tests/data/kineto), the cluster clock's path on a
// synthetic run equal to its step, and the refusals that name the file and the fix.
#include <gtest/gtest.h>

#include <map>

#include "analysis/critical_path.h"
#include "analysis/critical_path_report.h"
#include "formats/kineto_import.h"
#include "formats/synth.h"
#include "trace/vocabulary.h"
#include "tests/sqlite_edit.h"
#include "tests/test_util.h"

#include <nlohmann/json.hpp>

namespace dpscope::analysis {
namespace {

using testing::TempDir;

const char* const kAlexNetForward = "[param|pytorch.model.alex_net|0|0|0|measure|forward]";

// simple_add imported into `dir`.
std::string import_simple_add(const TempDir& dir) {
  formats::KinetoImportOptions options;
  options.inputs = {std::string(DPSCOPE_SOURCE_DIR) + "/tests/data/kineto/critical_path_simple_add.json.gz"};
  options.out = dir.file("simple_add.sqlite");
  formats::import_kineto(options, [](const std::string&) {});
  return options.out;
}

// The path's segments (what the viewer draws) in time order, each on a lane, adding up to its
// length and to each key's time. They may cross ranks: on the cluster clock the path follows a
// collective back to the rank that issued it last.
void expect_segments_make_the_path(const CriticalPath& p) {
  ASSERT_FALSE(p.segments.empty());
  int64_t sum = 0;
  std::map<BoundBy, int64_t> by_key;
  for (size_t i = 0; i < p.segments.size(); ++i) {
    const PathSegment& s = p.segments[i];
    EXPECT_LT(s.begin_ns, s.end_ns);
    if (i > 0) {
      EXPECT_LE(p.segments[i - 1].begin_ns, s.begin_ns);
    }
    sum += s.end_ns - s.begin_ns;
    by_key[s.bound] += s.end_ns - s.begin_ns;
  }
  EXPECT_EQ(sum, p.length_ns);
  EXPECT_EQ(by_key, p.bound_ns);
}

double share(const CriticalPath& p, BoundBy key) {
  const auto found = p.bound_ns.find(key);
  return found == p.bound_ns.end() ? 0.0 : 100.0 * double(found->second) / double(p.length_ns);
}

// HTA's critical_path_analysis(rank=0, annotation=kAlexNetForward, instance_id=1) with its
// zero-weight launch edges, summed from get_critical_path_breakdown() (tests/data/kineto/README.md):
// 241724 µs, cpu_bound 99.779 %, gpu_compute_bound 0.210, kernel-kernel 0.004, launch 0.007.
TEST(CriticalPathKineto, SimpleAddEqualsHta) {
  TempDir dir;
  trace::Reader reader(import_simple_add(dir));
  RegionRequest request;
  request.kind = RegionKind::Annotation;
  request.annotation = kAlexNetForward;
  request.instance = 1;
  const CriticalPath p = critical_path(reader, "simple_add.sqlite", request);
  EXPECT_EQ(p.clock, "measured");
  EXPECT_NEAR(double(p.length_ns) / 1e3, 241724, 241724 * 0.01);
  EXPECT_NEAR(share(p, BoundBy::CpuBound), 99.779, 0.5);
  EXPECT_NEAR(share(p, BoundBy::GpuComputeBound), 0.210, 0.5);
  EXPECT_NEAR(share(p, BoundBy::GpuKernelKernelOverhead), 0.004, 0.5);
  EXPECT_NEAR(share(p, BoundBy::GpuKernelLaunchOverhead), 0.007, 0.5);
  // To the microsecond: the graph is HTA's edge for edge on this trace.
  EXPECT_EQ(p.length_ns, 241'724'000);
  EXPECT_EQ(p.bound_ns.at(BoundBy::CpuBound), 241'190'000);
  EXPECT_EQ(p.bound_ns.at(BoundBy::GpuComputeBound), 508'000);
  EXPECT_EQ(p.bound_ns.at(BoundBy::GpuKernelKernelOverhead), 9'000);
  EXPECT_EQ(p.bound_ns.at(BoundBy::GpuKernelLaunchOverhead), 17'000);
  EXPECT_EQ(p.bound_ns.count(BoundBy::GpuCommBound), 0u);
  expect_segments_make_the_path(p);
  // The longest piece is the 179 ms cudaMalloc of the max_pool2d HTA's path runs through.
  ASSERT_FALSE(p.events.empty());
  EXPECT_EQ(p.events.front().name, "cudaMalloc");
  EXPECT_EQ(p.events.front().on_path_ns, 179'324'000);
  // Its Stream Wait Events predate PyTorch 2.1's cudaEventRecord correlation: said, as HTA warns.
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_NE(p.notes[0].find("without the cudaEventRecord they wait for"), std::string::npos);

  const nlohmann::ordered_json j = critical_path_json(p);
  EXPECT_EQ(j["region"], std::string(kAlexNetForward) + " instance 1");
  EXPECT_NEAR(j["length_ms"].get<double>(), 241.724, 0.001);
  EXPECT_NEAR(j["bound_by_ms"]["cpu_bound"].get<double>(), 241.190, 0.001);
  EXPECT_NEAR(j["bound_by_pct"]["cpu_bound"].get<double>(), 99.779, 0.001);
  EXPECT_FALSE(j["bound_by_ms"].contains("comm_bound"));
  EXPECT_EQ(j["longest"].size(), kCriticalPathEventsShown);
  EXPECT_EQ(j["longest"][0]["name"], "cudaMalloc");
}

// tests/data/kineto/event_syncs.json: an Event Sync, then a Stream Wait Event and a Context Sync,
// each putting a kernel on the path; HTA's numbers on it in its README.
TEST(CriticalPathKineto, EventSyncsAsHta) {
  TempDir dir;
  formats::KinetoImportOptions options;
  options.inputs = {std::string(DPSCOPE_SOURCE_DIR) + "/tests/data/kineto/event_syncs.json"};
  options.out = dir.file("event_syncs.sqlite");
  formats::import_kineto(options, [](const std::string&) {});
  trace::Reader reader(options.out);
  struct Expected {
    int64_t length_us, cpu_us, gpu_compute_us, launch_us;
  };
  // Instances 0 and 1 of "step", then "" (the whole trace, HTA's annotation "").
  const Expected hta[] = {{969, 51, 900, 18}, {878, 30, 839, 9}, {1847, 81, 1739, 27}};
  for (int64_t instance = 0; instance < 3; ++instance) {
    RegionRequest request;
    request.kind = RegionKind::Annotation;
    request.annotation = instance < 2 ? "step" : "";
    request.instance = instance < 2 ? instance : 0;
    const CriticalPath p = critical_path(reader, "event_syncs.sqlite", request);
    const Expected& e = hta[instance];
    EXPECT_EQ(p.length_ns, e.length_us * 1000) << "instance " << instance;
    EXPECT_EQ(p.bound_ns.at(BoundBy::CpuBound), e.cpu_us * 1000) << "instance " << instance;
    EXPECT_EQ(p.bound_ns.at(BoundBy::GpuComputeBound), e.gpu_compute_us * 1000) << "instance " << instance;
    EXPECT_EQ(p.bound_ns.at(BoundBy::GpuKernelLaunchOverhead), e.launch_us * 1000) << "instance " << instance;
    EXPECT_TRUE(p.notes.empty());
  }
}

TEST(CriticalPathKineto, BadRegionsSayWhyAndTheFix) {
  TempDir dir;
  trace::Reader reader(import_simple_add(dir));
  auto message = [&](const RegionRequest& request) {
    try {
      critical_path(reader, "simple_add.sqlite", request);
    } catch (const CriticalPathError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  RegionRequest iteration;  // simple_add has no ProfilerSteps
  EXPECT_EQ(message(iteration).rfind("simple_add.sqlite: has no iterations", 0), 0u) << message(iteration);
  EXPECT_NE(message(iteration).find("--annotation NAME --instance K"), std::string::npos);
  RegionRequest missing;
  missing.kind = RegionKind::Annotation;
  missing.annotation = "ProfilerStep";
  EXPECT_EQ(message(missing).rfind("simple_add.sqlite: no event's name begins with \"ProfilerStep\"", 0), 0u)
      << message(missing);
  RegionRequest beyond = missing;
  beyond.annotation = kAlexNetForward;
  beyond.instance = 2;
  EXPECT_NE(message(beyond).find("has 2 instances on a rank, so there is no instance 2: give --instance K from 0 to 1"),
            std::string::npos)
      << message(beyond);
}

// A synthetic DDP run replays on the cluster clock (formats/synth.h); its path through an
// iteration is as long as the iteration there, and holds compute and communication.
TEST(CriticalPathCluster, PathLengthIsTheStepOnTheClusterClock) {
  TempDir dir;
  formats::SynthOptions options;
  options.events = 3000;
  options.ranks = 2;
  options.layers = 4;
  options.hidden = 512;
  options.out = dir.file("synth.sqlite");
  formats::synthesize(options);
  trace::Reader reader(options.out);
  const ClusterClockRun run = cluster_clock(reader, options.out, std::nullopt);
  for (const int32_t iteration : {2, 3}) {
    RegionRequest request;
    request.iteration = iteration;
    const CriticalPath p = cluster_critical_path(reader, options.out, run, request);
    EXPECT_EQ(p.clock, "cluster");
    EXPECT_EQ(p.region, "iteration " + std::to_string(iteration));
    const ClusterSpan step = run.iterations.at(p.rank).at(iteration);
    EXPECT_NEAR(double(p.length_ns), double(step.end_ns - step.begin_ns), 0.005 * double(step.end_ns - step.begin_ns));
    EXPECT_GT(p.bound_ns.at(BoundBy::CpuBound), 0);
    int64_t sum = 0;
    for (const auto& [key, ns] : p.bound_ns) sum += ns;
    EXPECT_EQ(sum, p.length_ns);
    expect_segments_make_the_path(p);
    // On the cluster clock, within the step: where the viewer's cluster model draws it.
    EXPECT_GE(p.segments.front().begin_ns, step.begin_ns);
    EXPECT_LE(p.segments.back().end_ns, step.end_ns);
  }
  RegionRequest beyond;
  beyond.iteration = 100000;
  EXPECT_THROW(cluster_critical_path(reader, options.out, run, beyond), CriticalPathError);
}

// A run the cluster clock cannot replay (here: no emulated link recorded) has no path; the
// refusal gives the replay's reason and says why it matters.
TEST(CriticalPathCluster, ARunWithoutALinkIsRefusedWithTheReason) {
  TempDir dir;
  formats::SynthOptions options;
  options.events = 2000;
  options.ranks = 2;
  options.out = dir.file("synth.sqlite");
  formats::synthesize(options);
  testing::exec_sql(options.out, "DELETE FROM meta WHERE key IN ('" + std::string(trace::meta_key::kLinkGbps) + "', '" +
                                     std::string(trace::meta_key::kLinkLatencyUs) + "')");
  trace::Reader reader(options.out);
  try {
    critical_path(reader, options.out, RegionRequest{});
    ADD_FAILURE() << "no error";
  } catch (const CriticalPathError& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.rfind(options.out + ": recorded without an emulated link", 0), 0u) << message;
    EXPECT_NE(message.find("(the critical path of a dpscope run is taken on the cluster clock)"), std::string::npos);
  }
}

}  // namespace
}  // namespace dpscope::analysis
