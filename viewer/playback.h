// Step-through and narration: the moments of one rank's data-parallel lifecycle (a gradient
// ready, a bucket full, launched, written back, a collective starting and ending, an FSDP unit
// gathering, full, reducing), the playhead's previous and next among them, and each told in
// words. Window-free, so the tests check it without a display; the keys, the play mode and the
// narration line that use it live in the App (app.cpp) and the timeline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/records.h"
#include "viewer/model.h"

namespace dpscope::view {

// One moment a learner can step to.
struct LifecycleStep {
  enum class What : uint8_t {
    GradientReady,    // a DDP hook: the parameter's gradient is copied into its bucket
    BucketReady,      // every gradient of the bucket is in
    BucketLaunch,     // the bucket's collective is issued
    CollectiveBegin,  // a collective starts on its lane (on an emulated link: on the link)
    CollectiveEnd,
    BucketDone,       // the bucket's result is written back into .grad
    UnitStateBegin,   // an FSDP unit starts gathering, is full, starts reducing
    UnitStateEnd,
  };
  int64_t t_ns = 0;  // trace time
  What what = What::GradientReady;
  trace::Event event;  // the row it comes from
};

// The steps among `events` (one rank's rows, any lanes, any order), in time order; at equal
// times in the order of What (a gradient before the bucket it completes, ready before launch).
// Phases and waits are not steps, but narrate() reads the phases around a step from `events`.
std::vector<LifecycleStep> lifecycle_steps(const std::vector<trace::Event>& events);

// The index of the first step after `t_ns` (strictly), or -1.
int64_t next_step(const std::vector<LifecycleStep>& steps, int64_t t_ns);
// The index of the last step before `t_ns` (strictly), or -1.
int64_t previous_step(const std::vector<LifecycleStep>& steps, int64_t t_ns);
// The index of the last step at or before `t_ns`: the one the playhead stands on, or -1.
int64_t step_at(const std::vector<LifecycleStep>& steps, int64_t t_ns);

// Step `index` in words, for the narration line: "rank 0, iteration 5, backward: fc2.weight's
// gradient is ready -> bucket 1 is 768.0 KiB of 1.0 MiB full (3 of 4 gradients)", "bucket 1 is
// full -> it waits for bucket 0 to be launched first (buckets go in order)", "bucket 1's collective is launched (seq 14)",
// "unit 2 gathered: full parameters 4.0 MiB". `events` are the rows the steps came from (for the
// phase around the step); the bucket plan in force is the initial one in iteration 0 and the
// rebuilt one after (See Note [The first iteration's buckets]).
std::string narrate(const Model& model, const std::vector<trace::Event>& events,
                    const std::vector<LifecycleStep>& steps, size_t index);

}  // namespace dpscope::view
