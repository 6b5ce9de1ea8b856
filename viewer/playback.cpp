// Step-through and narration (playback.h): which events are steps, how to find the previous and
// next one, and what each says, with the bucket or unit it concerns read from the run's tables.
#include "trace/vocabulary.h"
#include "viewer/playback.h"

#include <algorithm>
#include <cstdio>

#include "viewer/lod.h"

namespace dpscope::view {
namespace {

using trace::EventKind;
using What = LifecycleStep::What;

// The plan an iteration's buckets follow: the initial one (generation 0) in iteration 0, the
// rebuilt one (1) after it, and the only one where a run has one (a run imported from a profiler
// trace has the rebuilt plan alone: Note [DDP's buckets from PyTorch's records]).
const trace::BucketInfo* bucket_in_force(const Model& model, int32_t iteration, int32_t bucket) {
  bool rebuilt_exists = false, initial_exists = false;
  for (const auto& b : model.buckets) {
    rebuilt_exists = rebuilt_exists || b.generation == 1;
    initial_exists = initial_exists || b.generation == 0;
  }
  const int generation = (iteration > 0 || !initial_exists) && rebuilt_exists ? 1 : 0;
  for (const auto& b : model.buckets) {
    if (b.generation == generation && b.index == bucket) return &b;
  }
  return nullptr;
}

std::string param_name(const Model& model, int32_t param) {
  if (param >= 0 && size_t(param) < model.params.size()) return model.params[size_t(param)].name;
  return "parameter " + std::to_string(param);
}

// The innermost training phase around t on the step's rank ("backward", "forward", ...).
std::string phase_at(const Model& model, const std::vector<trace::Event>& events, int64_t t) {
  const trace::Event* inner = nullptr;
  for (const trace::Event& e : events) {
    if (e.kind != EventKind::Phase || e.begin_ns > t || e.end_ns < t) continue;
    const std::string& name = model.name(e.name);
    if (name == trace::kPhaseIteration) continue;
    if (!inner || e.end_ns - e.begin_ns < inner->end_ns - inner->begin_ns) inner = &e;
  }
  return inner ? model.name(inner->name) : "";
}

// Bytes per element of FSDP's full parameters (the compute dtype under mixed precision).
int64_t full_element_bytes(const Model& model) {
  const std::string dtype = model.meta_value(trace::meta_key::kFsdpComputeDtype, "Float");
  return dtype == "Half" || dtype == "BFloat16" ? 2 : 4;
}

std::string unit_text(const Model& model, int32_t unit) {
  for (const auto& u : model.units) {
    if (u.index == unit) return "unit " + std::to_string(unit) + " (" + (u.name.empty() ? "root" : u.name) + ")";
  }
  return "unit " + std::to_string(unit);
}

const trace::UnitInfo* unit_info(const Model& model, int32_t unit) {
  for (const auto& u : model.units) {
    if (u.index == unit) return &u;
  }
  return nullptr;
}

std::string collective_text(const trace::Event& e) {
  std::string text = std::string(trace::to_string(static_cast<trace::CollectiveOp>(e.op)));
  if (e.seq != trace::kNone64) text += " seq " + std::to_string(e.seq);
  std::string about;
  if (e.bucket != trace::kNone) about = "bucket " + std::to_string(e.bucket);
  if (e.unit != trace::kNone) about = "unit " + std::to_string(e.unit);
  if (e.bytes != trace::kNone64) about += (about.empty() ? "" : ", ") + format_bytes(e.bytes);
  return about.empty() ? text : text + " (" + about + ")";
}

// "7,875,584": a count read at a glance.
std::string with_thousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  for (int at = int(digits.size()) - 3; at > 0; at -= 3) digits.insert(size_t(at), ",");
  return n < 0 ? "-" + digits : digits;
}

std::string elements_text(const trace::BucketInfo& bucket) {
  const char* noun = bucket.dtype == trace::DType::Float32 || bucket.dtype == trace::DType::Float16 ||
                             bucket.dtype == trace::DType::BFloat16 || bucket.dtype == trace::DType::Float64
                         ? "floats" : "elements";
  return with_thousands(bucket.numel) + " " + noun;
}

// A bucket's all-reduce done, with the plan's place and size: "bucket 1 (2nd of 5): 30.0 MiB
// (7,875,584 floats) all-reduced (seq 14) in 5.2 ms". The place counts from 1, the index from 0
// as everywhere else in dpscope.
std::string bucket_allreduced_text(const Model& model, const trace::Event& e, const trace::BucketInfo& bucket) {
  int32_t of = 0;
  for (const auto& b : model.buckets) of += b.generation == bucket.generation ? 1 : 0;
  const int32_t place = e.bucket + 1;
  const char* suffix = place % 100 >= 11 && place % 100 <= 13 ? "th"
                       : place % 10 == 1                     ? "st"
                       : place % 10 == 2                     ? "nd"
                       : place % 10 == 3                     ? "rd"
                                                             : "th";
  std::string text = "bucket " + std::to_string(e.bucket) + " (" + std::to_string(place) + suffix + " of " +
                     std::to_string(of);
  const int64_t bytes = bucket.numel > 0 ? bucket.bytes : e.bytes;
  if (bytes != trace::kNone64 && bytes > 0) {
    text += "): " + format_bytes(bytes);
    if (bucket.numel > 0) text += " (" + elements_text(bucket) + ")";
  } else {
    text += ", its size not in the trace)";
  }
  text += " all-reduced";
  if (e.seq != trace::kNone64) text += " (seq " + std::to_string(e.seq) + ")";
  return text + " in " + format_duration(double(e.end_ns - e.begin_ns));
}

}  // namespace

std::vector<LifecycleStep> lifecycle_steps(const std::vector<trace::Event>& events) {
  std::vector<LifecycleStep> steps;
  for (const trace::Event& e : events) {
    switch (e.kind) {
      case EventKind::Hook: steps.push_back({e.begin_ns, What::GradientReady, e}); break;
      case EventKind::BucketReady: steps.push_back({e.begin_ns, What::BucketReady, e}); break;
      case EventKind::BucketLaunch: steps.push_back({e.begin_ns, What::BucketLaunch, e}); break;
      case EventKind::BucketDone: steps.push_back({e.begin_ns, What::BucketDone, e}); break;
      case EventKind::Collective:
        steps.push_back({e.begin_ns, What::CollectiveBegin, e});
        steps.push_back({e.end_ns, What::CollectiveEnd, e});
        break;
      case EventKind::UnitState:
        steps.push_back({e.begin_ns, What::UnitStateBegin, e});
        // A gathering ends where the unit is full: one step says both.
        if (static_cast<trace::UnitState>(e.op) != trace::UnitState::Gathering) {
          steps.push_back({e.end_ns, What::UnitStateEnd, e});
        }
        break;
      default: break;
    }
  }
  std::stable_sort(steps.begin(), steps.end(), [](const LifecycleStep& a, const LifecycleStep& b) {
    return a.t_ns != b.t_ns ? a.t_ns < b.t_ns : a.what < b.what;
  });
  return steps;
}

int64_t next_step(const std::vector<LifecycleStep>& steps, int64_t t_ns) {
  const auto it = std::upper_bound(steps.begin(), steps.end(), t_ns,
                                   [](int64_t t, const LifecycleStep& s) { return t < s.t_ns; });
  return it == steps.end() ? -1 : int64_t(it - steps.begin());
}

int64_t previous_step(const std::vector<LifecycleStep>& steps, int64_t t_ns) {
  const auto it = std::lower_bound(steps.begin(), steps.end(), t_ns,
                                   [](const LifecycleStep& s, int64_t t) { return s.t_ns < t; });
  return it == steps.begin() ? -1 : int64_t(it - steps.begin()) - 1;
}

int64_t step_at(const std::vector<LifecycleStep>& steps, int64_t t_ns) {
  return next_step(steps, t_ns) == -1 ? int64_t(steps.size()) - 1 : next_step(steps, t_ns) - 1;
}

namespace {

// A gradient ready, and its bucket's fill: bytes first (a bucket fills by bytes, its cap), the
// gradients beside, counted among the steps up to `index`.
std::string gradient_ready_text(const Model& model, const std::vector<LifecycleStep>& steps, size_t index,
                                const trace::BucketInfo* bucket) {
  const trace::Event& e = steps[index].event;
  std::string text = param_name(model, e.param) + "'s gradient is ready";
  if (!bucket) return text;
  int64_t in = 0;
  for (size_t i = 0; i <= index; ++i) {
    const LifecycleStep& s = steps[i];
    in += s.what == What::GradientReady && s.event.iteration == e.iteration && s.event.bucket == e.bucket;
  }
  const std::string gradients = std::to_string(in) + " of " + std::to_string(bucket->params.size()) + " gradients";
  return text + " -> bucket " + std::to_string(e.bucket) +
         (e.value != trace::kNone64
              ? " is " + format_bytes(e.value) + " of " + format_bytes(bucket->bytes) + " full (" + gradients + ")"
              : " has " + gradients);
}

// An FSDP unit's state beginning or ending, with the unit's own full parameters' bytes.
std::string unit_state_text(const Model& model, const LifecycleStep& step) {
  const trace::Event& e = step.event;
  const auto state = static_cast<trace::UnitState>(e.op);
  const trace::UnitInfo* info = unit_info(model, e.unit);
  const std::string unit = unit_text(model, e.unit);
  const std::string full = info ? format_bytes(info->padded_numel * full_element_bytes(model)) : std::string("?");
  const bool begin = step.what == What::UnitStateBegin;
  if (state == trace::UnitState::Gathering) return unit + " starts gathering its full parameters (all-gather)";
  if (state == trace::UnitState::Full) {
    return begin ? unit + " gathered: full parameters " + full : unit + " frees its full parameters (" + full + ")";
  }
  return begin ? unit + " starts reducing its gradients (reduce-scatter)" : unit + "'s gradient shard is reduced";
}

}  // namespace

std::string narrate(const Model& model, const std::vector<trace::Event>& events,
                    const std::vector<LifecycleStep>& steps, size_t index) {
  if (index >= steps.size()) return "";
  const LifecycleStep& step = steps[index];
  const trace::Event& e = step.event;
  // Where the class is, first: the rank, the iteration and the phase.
  std::string text = "rank " + std::to_string(e.rank);
  if (e.iteration != trace::kNone) text += ", iteration " + std::to_string(e.iteration);
  const std::string phase = phase_at(model, events, step.t_ns);
  if (!phase.empty()) text += ", " + phase;
  text += ": ";
  const trace::BucketInfo* bucket = e.bucket == trace::kNone ? nullptr : bucket_in_force(model, e.iteration, e.bucket);
  const std::string bucket_name = "bucket " + std::to_string(e.bucket);
  switch (step.what) {
    case What::GradientReady:
      text += gradient_ready_text(model, steps, index, bucket);
      break;
    case What::BucketReady: {
      // Buckets launch strictly in index order (Note [Bucket order]): a full bucket waits for
      // the first one before it that has not been launched yet.
      std::vector<bool> launched(size_t(std::max(0, e.bucket)), false);
      for (size_t i = 0; i < index; ++i) {
        const trace::Event& before = steps[i].event;
        if (steps[i].what == What::BucketLaunch && before.iteration == e.iteration &&
            before.bucket >= 0 && before.bucket < e.bucket) {
          launched[size_t(before.bucket)] = true;
        }
      }
      const auto waiting_for = std::find(launched.begin(), launched.end(), false);
      text += bucket_name + " is full" + (bucket ? " (" + format_bytes(bucket->bytes) + ")" : "");
      text += waiting_for == launched.end()
                  ? " -> it is launched now"
                  : " -> it waits for bucket " + std::to_string(waiting_for - launched.begin()) +
                        " to be launched first (buckets go in order)";
      break;
    }
    case What::BucketLaunch:
      text += bucket_name + "'s collective is launched";
      if (e.seq != trace::kNone64) text += " (seq " + std::to_string(e.seq) + ")";
      break;
    case What::CollectiveBegin:
      text += collective_text(e) + " starts";
      break;
    case What::CollectiveEnd:
      if (bucket && e.op == static_cast<uint8_t>(trace::CollectiveOp::AllReduce)) {
        text += bucket_allreduced_text(model, e, *bucket);
      } else {
        text += collective_text(e) + " is done after " + format_duration(double(e.end_ns - e.begin_ns));
      }
      break;
    case What::BucketDone:
      text += bucket_name + "'s averaged gradients are written back to .grad";
      break;
    case What::UnitStateBegin:
    case What::UnitStateEnd:
      text += unit_state_text(model, step);
      break;
  }
  return text;
}

}  // namespace dpscope::view
