// The skeleton the DDP and the FSDP what-if loaders share (whatif.cpp, whatif_fsdp_load.cpp): the
// refusals every replay makes, the one pass over a trace's events, the steady iterations kept with
// their measured figures, and the readings of a trace both replays make. Internal to analysis/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/cluster_clock.h"
#include "analysis/stats.h"
#include "analysis/whatif.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::analysis {

// The first refusal of both replays: a run imported from PyTorch profiler traces records neither
// gradient hooks nor unit states, so no advice about trace levels would help. Throws WhatifError
// naming `path`. Pure.
inline void refuse_imported_run(const std::string& path, const RunStats& stats) {
  if (stats.imported_from.empty()) return;
  throw WhatifError(path + ": imported (" + stats.imported_from + "), and a profiler trace records "
                    "neither DDP's gradient hooks nor FSDP's unit states; whatif replays the runs "
                    "dpscope records (dpscope train, the tutorials, dpscope synth)");
}

// The statistics of `rank`, after the refusals the DDP and the FSDP replay share: `rank` is not
// in the file, or the run has no steady iterations (Note [Steady steps]: at least 3). Throws
// WhatifError naming `path` and the fix. Pure.
inline const RankStats& replayable_rank(const std::string& path, const RunStats& stats, int32_t rank) {
  const auto found = std::find_if(stats.ranks.begin(), stats.ranks.end(),
                                  [&](const RankStats& r) { return r.rank == rank; });
  if (found == stats.ranks.end()) {
    throw WhatifError(path + ": has no rank " + std::to_string(rank) + " (it holds " +
                      std::to_string(stats.ranks.size()) + " ranks); pass --rank with one of them");
  }
  if (core::steady_from(size_t(std::max(stats.iterations, 0))) == 0) {
    throw WhatifError(path + ": no steady iterations (it has " + std::to_string(stats.iterations) +
                      "; whatif replays iteration 2 on, Note [Steady steps]): record at least "
                      "3 steps");
  }
  return *found;
}

// The events of one steady iteration of the replayed rank, by kind, as streamed. Each replay
// reads the kinds its strategy records (DDP: hooks and bucket completions, FSDP: unit states).
struct IterationEvents {
  std::vector<trace::Event> hooks, phases, collectives, waits, unit_states;
  std::vector<int64_t> bucket_done_ns;  // the begin of each BucketDone event
};

// What a replay adds to the skeleton (load_steady_iterations). `Iteration` is ReplayIteration or
// FsdpIteration: anything with measured_step_ms and measured (OverlapStats) to fill.
template <typename Iteration>
struct ReplaySteps {
  // Each event of an iteration before the steady ones, on any rank; may be empty.
  std::function<void(const trace::Event&)> warmup;
  // Each event of a steady iteration, on any rank: where the cost models' samples come from.
  std::function<void(const trace::Event&)> steady;
  // The replay's refusals on what the pass read (the replayed rank's steady events, by
  // iteration), before any iteration is built.
  std::function<void(const std::map<int32_t, IterationEvents>&)> check;
  // One steady iteration's replay from its events and the trace's names (its Phase events'
  // name ids index them); nullopt when it has nothing to replay.
  std::function<std::optional<Iteration>(int32_t iteration, IterationEvents&,
                                         const std::vector<std::string>& names)>
      build;
  // The refusal when no iteration is kept: what a kept one has ("phases and all-gathers"), and
  // how to record a trace that has them.
  std::string kept, record;
};

// Streams every event of `reader` once: those of iterations 0..steady-1 go to `warmup` (when
// given), those of steady iterations to `steady`, and the steady ones of `rank` are returned,
// grouped by iteration and kind. Events outside iterations are skipped. With `cluster`, every
// event's times are on the cluster clock (ClusterClockRun::to_cluster): a what-if on the
// cluster clock replays the run as the cluster ran it (Note [What-if replay]).
inline std::map<int32_t, IterationEvents> read_steady_events(
    trace::Reader& reader, int32_t steady, int32_t rank,
    const std::function<void(const trace::Event&)>& warmup,
    const std::function<void(const trace::Event&)>& on_steady, const ClusterClockRun* cluster) {
  std::map<int32_t, IterationEvents> events;
  reader.for_each_event([&](const trace::Event& recorded) {
    const trace::Event e = cluster ? cluster->to_cluster(recorded) : recorded;
    if (e.iteration < 0) return true;
    if (e.iteration < steady) {
      if (warmup) warmup(e);
      return true;
    }
    on_steady(e);
    if (e.rank != rank) return true;
    IterationEvents& it = events[e.iteration];
    switch (e.kind) {
      case trace::EventKind::Hook: it.hooks.push_back(e); break;
      case trace::EventKind::Phase: it.phases.push_back(e); break;
      case trace::EventKind::Collective: it.collectives.push_back(e); break;
      case trace::EventKind::CollectiveWait: it.waits.push_back(e); break;
      case trace::EventKind::UnitState: it.unit_states.push_back(e); break;
      case trace::EventKind::BucketDone: it.bucket_done_ns.push_back(e.begin_ns); break;
      default: break;
    }
    return true;
  });
  return events;
}

// The skeleton of both loaders, once their own refusals of the recorded run passed:
//   1. replayable_rank's refusals, and `origin` (the replay's ReplayOrigin) set;
//   2. one pass over the events (read_steady_events), `steps.warmup` and `steps.steady` seeing
//      what the replay needs of every rank;
//   3. `steps.check`: the replay's refusals on what the pass read;
//   4. each steady iteration built by `steps.build`, and given compute_stats' step time and
//      overlap figures (iterations compute_stats does not know are skipped);
//   5. the refusal when none is kept.
// `stats` and `cluster` say the clock: both on the measured one (cluster null), or `stats`
// computed on `cluster` (compute_stats(reader, *cluster)) for the cluster clock.
// Returns the kept iterations, in order. Throws WhatifError naming the file and the fix.
// Thread-safety: uses `reader`, so the calling thread must own it.
template <typename Iteration>
std::vector<Iteration> load_steady_iterations(trace::Reader& reader, const RunStats& stats,
                                              int32_t rank, ReplayOrigin& origin,
                                              const ReplaySteps<Iteration>& steps,
                                              const ClusterClockRun* cluster) {
  const std::string path = reader.path();
  if ((stats.clock.clock == Clock::Cluster) != (cluster != nullptr)) {
    throw WhatifError(path + ": the statistics and the events of a what-if must be on one clock: "
                      "give the cluster clock's run with statistics computed on it, or neither");
  }
  const RankStats& rank_stats = replayable_rank(path, stats, rank);
  origin = replay_origin(path, stats, rank);
  const std::vector<std::string> names = reader.names();
  std::map<int32_t, IterationEvents> events = read_steady_events(
      reader, core::steady_from(size_t(stats.iterations)), rank, steps.warmup, steps.steady, cluster);
  steps.check(events);
  std::vector<Iteration> kept;
  for (auto& [iteration, ev] : events) {
    if (static_cast<size_t>(iteration) >= rank_stats.iterations.size()) continue;
    std::optional<Iteration> it = steps.build(iteration, ev, names);
    if (!it) continue;
    const IterationStats& measured = rank_stats.iterations[static_cast<size_t>(iteration)];
    it->measured_step_ms = measured.step_ms;
    it->measured = measured.overlap;
    kept.push_back(std::move(*it));
  }
  if (kept.empty()) {
    throw WhatifError(path + ": rank " + std::to_string(rank) + " has no steady iteration with " +
                      steps.kept + " (the steady ones: iteration 2 on); " + steps.record);
  }
  return kept;
}

// The run's settings as `dpscope train` or `dpscope synth` wrote them (meta config): a JSON
// object whose fields each replay reads by name (their names are the JSON's own, not meta keys).
// Anything but an object reads as no fields.
class RecordedConfigJson {
 public:
  explicit RecordedConfigJson(trace::Reader& reader)
      : json_(nlohmann::json::parse(reader.meta_value(std::string(trace::meta_key::kConfig)),
                                    nullptr, false)) {}

  // The field `key` when it holds a number (converted as nlohmann::json converts it to T).
  template <typename T>
  std::optional<T> number(const char* key) const {
    const nlohmann::json* field = find(key);
    if (!field || !field->is_number()) return std::nullopt;
    return field->get<T>();
  }
  std::optional<std::string> text(const char* key) const {
    const nlohmann::json* field = find(key);
    if (!field || !field->is_string()) return std::nullopt;
    return field->get<std::string>();
  }
  std::optional<bool> flag(const char* key) const {
    const nlohmann::json* field = find(key);
    if (!field || !field->is_boolean()) return std::nullopt;
    return field->get<bool>();
  }

 private:
  const nlohmann::json* find(const char* key) const {
    if (!json_.is_object()) return nullptr;
    const auto it = json_.find(key);
    return it == json_.end() ? nullptr : &*it;
  }

  nlohmann::json json_;
};

// The name of a Phase event (its name id into the trace's `names`), "" for an unknown id.
inline std::string phase_name(const trace::Event& e, const std::vector<std::string>& names) {
  return e.name >= 0 && static_cast<size_t>(e.name) < names.size() ? names[static_cast<size_t>(e.name)]
                                                                   : std::string();
}

// A phase that counts as compute (Note [Compute and exposed communication]).
inline bool is_compute_phase(const std::string& name) {
  return name == trace::kPhaseForward || name == trace::kPhaseBackward ||
         name == trace::kPhaseOptimizerStep;
}

// Whether a recorded collective that began at `begin_ns` queued behind the previous one on the
// link, which ended at `previous_end_ns`: it began within 1 µs of that end, so its start says
// when the link was free, not how long a launch takes. The launch offsets are taken over the
// collectives that did not.
inline bool queued_behind(int64_t begin_ns, int64_t previous_end_ns) {
  return begin_ns <= previous_end_ns + 1000;
}

// The launch offset: the median of the offsets of the collectives that did not queue, in ns.
inline int64_t launch_offset_of(std::vector<double> offsets_ns) {
  return static_cast<int64_t>(std::llround(median_of(std::move(offsets_ns))));
}

}  // namespace dpscope::analysis
