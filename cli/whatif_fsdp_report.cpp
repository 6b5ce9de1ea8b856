// `dpscope whatif` on an FSDP trace (whatif_fsdp_report.h): the cost model (fitted, or a given
// link's ring model), one prediction or the sweep, and their report and JSON.
#include "cli/whatif_fsdp_report.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/commands.h"
#include "cli/whatif_report.h"
#include "trace/vocabulary.h"

namespace dpscope::cli {
namespace {

constexpr int32_t kSweepLimits[] = {0, 1, 2};

std::string settings_text(const analysis::FsdpSettings& s) {
  return "backward prefetch " + std::string(trace::to_string(s.backward_prefetch)) +
         ", all-gather limit " +
         (s.limit_all_gathers > 0 ? std::to_string(s.limit_all_gathers) : std::string("none"));
}

std::string model_text(const char* op, const analysis::AllReduceModel& m, int32_t world_size) {
  char text[256];
  if (m.source == analysis::AllReduceModel::Source::Link) {
    std::snprintf(text, sizeof(text),
                  "%s cost: ring model of a %g Gb/s, %g \u00b5s link: (n-1)(L + S/(nB)), n = %d "
                  "(%.1f \u00b5s + bytes at %.3g Gb/s)",
                  op, m.link_gbps, m.link_latency_us, world_size, m.latency_us(), m.gbps());
  } else {
    std::snprintf(text, sizeof(text), "%s cost: %s, fitted to %lld recorded ones (error %.1f %% of their time)",
                  op, m.line_text().c_str(), static_cast<long long>(m.samples), m.fit_error_pct);
  }
  return text;
}

std::vector<std::string> assumptions(const analysis::FsdpReplayTrace& replay,
                                     const analysis::FsdpCostModel& model,
                                     const analysis::FsdpPrediction& prediction) {
  std::vector<std::string> out;
  out.push_back(model_text("all-gather", model.all_gather, replay.gather_ranks) +
                " (bytes: one rank's shard)");
  const bool fsdp2 = replay.recorded.strategy == trace::Strategy::Fsdp2;
  out.push_back(model_text("reduce-scatter", model.reduce_scatter, replay.gather_ranks) +
                (fsdp2 ? " (bytes: the group's padded gradients)" : " (bytes: the whole flat gradient)"));
  char text[256];
  std::snprintf(text, sizeof(text),
                "a collective starts %.0f \u00b5s after it is issued (median of the recorded ones "
                "that did not queue); one collective at a time on the link, in issue order",
                replay.launch_offset_ns / 1e3);
  out.push_back(text);
  out.push_back("the main thread's work between the recorded points (each unit's forward and "
                "backward compute, the optimizer step) is as recorded; a unit waits for its "
                "all-gather before computing");
  if (fsdp2) {
    out.push_back("FSDP2: each parameter group is a unit; its implicit backward prefetch is "
                  "BACKWARD_PRE, none an empty backward prefetch list; explicit forward "
                  "prefetches, the reduce-scatters (one in flight) and their waits stay as "
                  "recorded; the copy-in and copy-out are main-thread work as recorded");
  } else {
    out.push_back("forward prefetch (" + std::string(replay.recorded.forward_prefetch ? "on" : "off") +
                  "), the reduce-scatters and their waits (at most " +
                  std::to_string(replay.recorded.limit_reduce_scatters) +
                  " in flight; 0: no limit) stay as recorded");
  }
  std::snprintf(text, sizeof(text),
                "at most %d all-gather(s) in flight in the predicted schedule (the engine "
                "prefetches one unit ahead): a limit of %d or more does not bind",
                prediction.max_gathers_in_flight, std::max(prediction.max_gathers_in_flight, 1));
  out.push_back(text);
  out.push_back("each rank is replayed on its own (a late peer delays a collective only in the "
                "fitted cost, on average); communication threads competing with compute for "
                "cores are not modelled");
  const bool mixed_precision = trace::parse_mode(trace::kComputePrecisions, replay.recorded.mixed_precision) !=
                               trace::ComputePrecision::Fp32;
  if (mixed_precision || replay.recorded.cpu_offload) {
    out.push_back("recorded with mixed precision " + replay.recorded.mixed_precision +
                  (replay.recorded.cpu_offload ? " and CPU offload" : "") +
                  ": collectives are costed by their recorded bytes, casts and copies are "
                  "part of the recorded compute");
  }
  return out;
}

nlohmann::json case_json(const analysis::FsdpReplayTrace& replay, const analysis::FsdpCostModel& model,
                         const analysis::FsdpPrediction& p, bool per_iteration) {
  nlohmann::json j;
  j["backward_prefetch"] = std::string(trace::to_string(p.settings.backward_prefetch));
  j["limit_all_gathers"] = p.settings.limit_all_gathers;
  j["predicted_step_ms"] = p.predicted_step_ms;
  j["predicted_exposed_comm_ms"] = p.predicted_exposed_comm_ms;
  j["measured_step_ms"] = p.measured_step_ms;
  j["measured_exposed_comm_ms"] = p.measured_exposed_comm_ms;
  j["max_gathers_in_flight"] = p.max_gathers_in_flight;
  j["model"] = {{"all_gather", model_json(model.all_gather)},
                {"reduce_scatter", model_json(model.reduce_scatter)},
                {"launch_offset_us", replay.launch_offset_ns / 1e3}};
  j["assumptions"] = assumptions(replay, model, p);
  if (per_iteration) j["iterations"] = iterations_json(p);
  return j;
}

nlohmann::json recorded_json(const analysis::FsdpReplayTrace& replay) {
  const analysis::FsdpRecordedConfig& r = replay.recorded;
  return {{"backward_prefetch", std::string(trace::to_string(r.settings.backward_prefetch))},
          {"limit_all_gathers", r.settings.limit_all_gathers},
          {"forward_prefetch", r.forward_prefetch},
          {"limit_reduce_scatters", r.limit_reduce_scatters},
          {"sharding", std::string(trace::to_string(r.sharding))},
          {"reshard_after_forward", r.reshard_after_forward.empty() ? nlohmann::json(nullptr)
                                                                    : nlohmann::json(r.reshard_after_forward)},
          {"explicit_prefetch", r.strategy == trace::Strategy::Fsdp2 ? nlohmann::json(r.explicit_prefetch)
                                                                     : nlohmann::json(nullptr)}};
}

// The sweep's backward prefetch modes and all-gather limits: FSDP2 has pre and none, no limit
// (Note [FSDP2 in the FSDP replay]).
std::vector<analysis::FsdpSettings> sweep_settings(const analysis::FsdpReplayTrace& replay) {
  std::vector<analysis::FsdpSettings> settings;
  for (const trace::BackwardPrefetch mode : trace::kBackwardPrefetches) {
    if (replay.recorded.strategy == trace::Strategy::Fsdp2) {
      if (mode != trace::BackwardPrefetch::Post) settings.push_back({mode, 0});
      continue;
    }
    for (const int32_t limit : kSweepLimits) settings.push_back({mode, limit});
  }
  return settings;
}

void print_case(const analysis::FsdpReplayTrace& replay, const analysis::FsdpCostModel& model,
                const analysis::FsdpPrediction& p) {
  std::printf("recorded: %s\n", settings_text(replay.recorded.settings).c_str());
  std::printf("what if:  %s\n\n", settings_text(p.settings).c_str());
  print_measured_and_predicted(p);
  print_assumptions(assumptions(replay, model, p));
}

// One prediction, for the recorded settings with those given changed.
void print_one(const FsdpWhatifRequest& request, const analysis::FsdpReplayTrace& replay,
               const analysis::FsdpCostModel& model, const ReplayHeading& heading) {
  analysis::FsdpSettings settings = replay.recorded.settings;
  if (request.backward_prefetch) settings.backward_prefetch = *request.backward_prefetch;
  if (request.limit_all_gathers) settings.limit_all_gathers = *request.limit_all_gathers;
  const analysis::FsdpPrediction p = analysis::predict_fsdp(replay, settings, model);
  if (request.json) {
    nlohmann::json j = case_json(replay, model, p, true);
    add_origin_json(j, request.trace, replay);
    j["clock"] = nlohmann::json(analysis::clock_json(heading.clock));
    j["strategy"] = std::string(trace::to_string(replay.recorded.strategy));
    j["recorded"] = recorded_json(replay);
    std::cout << j.dump() << "\n";
  } else {
    std::printf("whatif %s\n", heading.text.c_str());
    print_case(replay, model, p);
  }
  std::cout.flush();
}

// Every backward prefetch mode with each of kSweepLimits (sweep_settings), and the fastest.
void print_sweep(const FsdpWhatifRequest& request, const analysis::FsdpReplayTrace& replay,
                 const analysis::FsdpCostModel& model, const ReplayHeading& heading) {
  std::vector<analysis::FsdpPrediction> cases;
  for (const analysis::FsdpSettings& s : sweep_settings(replay)) cases.push_back(analysis::predict_fsdp(replay, s, model));
  const size_t best = fastest_case(cases, [](const auto& c) { return c.predicted_step_ms; });
  if (request.json) {
    print_sweep_json(cases, best, heading.clock, [&](const auto& c) { return case_json(replay, model, c, false); });
    return;
  }
  std::printf("whatif --sweep %s\n", heading.text.c_str());
  print_sweep_recorded(settings_text(replay.recorded.settings), cases.front());
  std::printf("%17s %17s %15s %18s\n", "backward prefetch", "all-gather limit", "predicted step",
              "predicted exposed");
  for (size_t i = 0; i < cases.size(); ++i) {
    const analysis::FsdpPrediction& c = cases[i];
    std::printf("%17s %17s %12.2f ms %15.2f ms%s\n",
                std::string(trace::to_string(c.settings.backward_prefetch)).c_str(),
                c.settings.limit_all_gathers > 0 ? std::to_string(c.settings.limit_all_gathers).c_str() : "none",
                c.predicted_step_ms, c.predicted_exposed_comm_ms, i == best ? "  <- best" : "");
  }
  std::printf("\nbest: --backward-prefetch %s --limit-all-gathers %d (predicted step %.2f ms "
              "against %.2f ms measured)\n",
              std::string(trace::to_string(cases[best].settings.backward_prefetch)).c_str(),
              cases[best].settings.limit_all_gathers, cases[best].predicted_step_ms,
              cases[best].measured_step_ms);
  print_assumptions(assumptions(replay, model, cases[best]));
}

}  // namespace

void run_fsdp_whatif(const FsdpWhatifRequest& request, trace::Reader& reader,
                     const analysis::RunStats& stats) {
  if (request.sweep && (request.backward_prefetch || request.limit_all_gathers)) {
    throw CliFailure("--sweep tries every --backward-prefetch mode with --limit-all-gathers 0, 1 "
                     "and 2; drop those flags, or drop --sweep to predict one setting");
  }
  const analysis::FsdpReplayTrace replay =
      analysis::load_fsdp_replay_trace(reader, stats, request.rank, request.cluster);
  const std::optional<core::LinkSpec> link = request.cluster ? request.cluster->link : request.link;
  const auto link_model = [&](trace::CollectiveOp op) {
    return analysis::link_collective_model(op, *link, replay.gather_ranks);
  };
  const analysis::FsdpCostModel model =
      link ? analysis::FsdpCostModel{link_model(trace::CollectiveOp::AllGather),
                                             link_model(trace::CollectiveOp::ReduceScatter)}
                   : analysis::fit_fsdp_cost_model(replay);
  const std::string strategy =
      replay.recorded.strategy == trace::Strategy::Fsdp2
          ? "FSDP2 (reshard_after_forward " + replay.recorded.reshard_after_forward + ")"
          : "FSDP (sharding " + std::string(trace::to_string(replay.recorded.sharding)) + ")";
  const ReplayHeading heading = replay_heading(request.trace, replay, strategy, stats);
  if (request.sweep) {
    print_sweep(request, replay, model, heading);
  } else {
    print_one(request, replay, model, heading);
  }
}

}  // namespace dpscope::cli
