// Step-through and narration (viewer/playback.h) on a synthetic DDP run: which events are steps
// and in what order, the previous / next / current step around a time, and what the narration
// line says about gradients, buckets and collectives.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "formats/synth.h"
#include "tests/test_util.h"
#include "trace/reader.h"
#include "viewer/lod.h"
#include "viewer/playback.h"

using namespace dpscope::view;
using dpscope::testing::TempDir;
using What = LifecycleStep::What;
namespace trace = dpscope::trace;
namespace formats = dpscope::formats;

namespace {

struct SynthIteration {
  std::shared_ptr<const Model> model;
  std::vector<trace::Event> events;  // rank 0's rows of iteration 1, every lane
  std::vector<LifecycleStep> steps;
};

SynthIteration iteration_one_of_rank_zero(const TempDir& dir) {
  formats::SynthOptions options;
  options.events = 6000;
  options.ranks = 2;
  options.layers = 4;
  options.hidden = 512;  // fc1, fc2 weights of 1 MiB: several rebuilt buckets under 1 MiB first
  options.bucket_cap_bytes = 1 << 20;
  options.out = dir.file("synth.sqlite");
  formats::synthesize(options);
  SynthIteration run;
  run.model = load_model(options.out);
  const IterationSpan* span = run.model->ranks.at(0).find_iteration(1);
  EXPECT_NE(span, nullptr);
  trace::Reader reader(options.out);
  for (const Lane& lane : run.model->ranks.at(0).lanes) {
    for (const trace::Event& e : reader.events(0, lane.info.lane, span->begin_ns, span->end_ns)) {
      if (e.begin_ns >= span->begin_ns) run.events.push_back(e);
    }
  }
  run.steps = lifecycle_steps(run.events);
  return run;
}

TEST(ViewerPlayback, StepsAreTheLifecycleInTimeOrder) {
  TempDir dir;
  const SynthIteration run = iteration_one_of_rank_zero(dir);
  ASSERT_FALSE(run.steps.empty());
  std::map<What, int> count;
  for (size_t i = 0; i < run.steps.size(); ++i) {
    ++count[run.steps[i].what];
    if (i > 0) {
      const LifecycleStep& a = run.steps[i - 1];
      const LifecycleStep& b = run.steps[i];
      EXPECT_TRUE(a.t_ns < b.t_ns || (a.t_ns == b.t_ns && a.what <= b.what)) << "step " << i;
    }
  }
  int buckets = 0;
  for (const auto& b : run.model->buckets) buckets += b.generation == 1;
  ASSERT_GT(buckets, 1);
  EXPECT_EQ(count[What::GradientReady], int(run.model->params.size())) << "one hook per parameter";
  EXPECT_EQ(count[What::BucketReady], buckets);
  EXPECT_EQ(count[What::BucketLaunch], buckets);
  EXPECT_EQ(count[What::BucketDone], buckets);
  EXPECT_EQ(count[What::CollectiveBegin], count[What::CollectiveEnd]);
  EXPECT_GE(count[What::CollectiveBegin], buckets);
  // Phases and waits are context, not steps.
  for (const LifecycleStep& s : run.steps) {
    EXPECT_NE(s.event.kind, trace::EventKind::Phase);
    EXPECT_NE(s.event.kind, trace::EventKind::CollectiveWait);
  }
}

TEST(ViewerPlayback, NextPreviousAndCurrentStep) {
  TempDir dir;
  const SynthIteration run = iteration_one_of_rank_zero(dir);
  const auto& steps = run.steps;
  ASSERT_GT(steps.size(), 3u);
  EXPECT_EQ(next_step(steps, steps.front().t_ns - 1), 0);
  EXPECT_EQ(previous_step(steps, steps.front().t_ns), -1);
  EXPECT_EQ(step_at(steps, steps.front().t_ns - 1), -1);
  EXPECT_EQ(next_step(steps, steps.back().t_ns), -1);
  EXPECT_EQ(step_at(steps, steps.back().t_ns + 1000), int64_t(steps.size()) - 1);
  // From any step, next then previous comes back to a step at the same time.
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    const int64_t next = next_step(steps, steps[i].t_ns);
    ASSERT_GE(next, 0);
    EXPECT_GT(steps[size_t(next)].t_ns, steps[i].t_ns);
    const int64_t back = previous_step(steps, steps[size_t(next)].t_ns);
    ASSERT_GE(back, 0);
    EXPECT_EQ(steps[size_t(back)].t_ns, steps[size_t(next) - 1].t_ns);
    EXPECT_GE(step_at(steps, steps[i].t_ns), int64_t(i));
  }
}

TEST(ViewerPlayback, TheNarrationSaysWhatHappensToGradientsBucketsAndCollectives) {
  TempDir dir;
  const SynthIteration run = iteration_one_of_rank_zero(dir);
  const Model& model = *run.model;
  std::map<int32_t, const trace::BucketInfo*> rebuilt;
  for (const auto& b : model.buckets) {
    if (b.generation == 1) rebuilt[b.index] = &b;
  }
  std::map<int32_t, int> hooks_in;  // bucket -> gradients in so far
  bool saw_launch = false, saw_done = false, saw_collective_end = false;
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const LifecycleStep& s = run.steps[i];
    const std::string text = narrate(model, run.events, run.steps, i);
    EXPECT_EQ(text.rfind("rank 0, ", 0), 0u) << text;
    switch (s.what) {
      case What::GradientReady: {
        const trace::BucketInfo& b = *rebuilt.at(s.event.bucket);
        const int in = ++hooks_in[s.event.bucket];
        const std::string name = model.params.at(size_t(s.event.param)).name;
        EXPECT_EQ(text.rfind("rank 0, iteration " + std::to_string(s.event.iteration) + ", backward: ", 0), 0u)
            << text;
        EXPECT_NE(text.find("backward: " + name + "'s gradient is ready -> bucket " +
                            std::to_string(b.index) + " is " + format_bytes(s.event.value) + " of " +
                            format_bytes(b.bytes) + " full (" + std::to_string(in) + " of " +
                            std::to_string(b.params.size()) + " gradients)"),
                  std::string::npos)
            << text;
        if (in == int(b.params.size())) {
          EXPECT_EQ(s.event.value, b.bytes) << "the last gradient fills the bucket: " << text;
        }
        break;
      }
      case What::BucketReady:
        EXPECT_NE(text.find("bucket " + std::to_string(s.event.bucket) + " is full"), std::string::npos) << text;
        break;
      case What::BucketLaunch:
        saw_launch = true;
        EXPECT_NE(text.find("bucket " + std::to_string(s.event.bucket) + "'s collective is launched (seq " +
                            std::to_string(s.event.seq) + ")"),
                  std::string::npos)
            << text;
        break;
      case What::CollectiveEnd:
        saw_collective_end = true;
        if (s.event.bucket != trace::kNone && s.event.op == uint8_t(trace::CollectiveOp::AllReduce)) {
          // A bucket's all-reduce names its place in the plan and its size.
          EXPECT_NE(text.find("bucket " + std::to_string(s.event.bucket) + " (" + std::to_string(s.event.bucket + 1)),
                    std::string::npos) << text;
          EXPECT_NE(text.find(" floats) all-reduced (seq " + std::to_string(s.event.seq) + ") in "), std::string::npos)
              << text;
        } else {
          EXPECT_NE(text.find(std::string(trace::to_string(static_cast<trace::CollectiveOp>(s.event.op))) +
                              " seq " + std::to_string(s.event.seq)),
                    std::string::npos)
              << text;
          EXPECT_NE(text.find("is done after"), std::string::npos) << text;
        }
        break;
      case What::BucketDone:
        saw_done = true;
        EXPECT_NE(text.find("written back to .grad"), std::string::npos) << text;
        break;
      default: break;
    }
  }
  EXPECT_TRUE(saw_launch && saw_done && saw_collective_end);
  EXPECT_EQ(narrate(model, run.events, run.steps, run.steps.size()), "");
}

// A bucket that fills before the one ahead of it was launched waits (PyTorch <= 1.11's guess in
// tutorial 05 does this); once bucket 0 goes, bucket 1 follows.
TEST(ViewerPlayback, AFullBucketWaitsForTheBucketsBeforeIt) {
  Model model;
  model.names = {"", "backward"};
  for (int32_t b = 0; b < 2; ++b) {
    trace::BucketInfo info;
    info.generation = 0;
    info.index = b;
    info.params = {b};
    info.bytes = 1024;
    model.buckets.push_back(info);
    trace::ParamInfo param;
    param.index = b;
    param.name = "p" + std::to_string(b);
    model.params.push_back(param);
  }
  auto event = [](trace::EventKind kind, int64_t t, int32_t bucket) {
    trace::Event e;
    e.kind = kind;
    e.begin_ns = e.end_ns = t;
    e.iteration = 0;
    e.bucket = bucket;
    return e;
  };
  trace::Event backward = event(trace::EventKind::Phase, 0, trace::kNone);
  backward.end_ns = 100;
  backward.name = 1;
  const std::vector<trace::Event> events = {
      backward,
      event(trace::EventKind::BucketReady, 10, 1),   // bucket 1 full first
      event(trace::EventKind::BucketReady, 20, 0),
      event(trace::EventKind::BucketLaunch, 21, 0),
      event(trace::EventKind::BucketLaunch, 22, 1),
  };
  const auto steps = lifecycle_steps(events);
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(narrate(model, events, steps, 0),
            "rank 0, iteration 0, backward: bucket 1 is full (1.0 KiB) -> it waits for bucket 0 to be "
            "launched first (buckets go in order)");
  EXPECT_EQ(narrate(model, events, steps, 1),
            "rank 0, iteration 0, backward: bucket 0 is full (1.0 KiB) -> it is launched now");
}

}  // namespace
