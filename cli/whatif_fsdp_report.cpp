// `dpscope whatif` on an FSDP trace (whatif_fsdp_report.h): the cost model (fitted, or a given
// link's ring model), one prediction or the sweep, and their report and JSON.
#include "cli/whatif_fsdp_report.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/commands.h"

namespace dpscope::cli {
namespace {

constexpr int32_t kSweepLimits[] = {0, 1, 2};

// The ring model's cost of `op` on `link` among `ranks` ranks, as a line in bytes.
analysis::AllReduceModel link_model(trace::CollectiveOp op, const analysis::LinkSpec& link, int32_t ranks) {
  const int64_t probe = int64_t{1} << 30;
  const double at_zero = double(analysis::link_model_ns(op, 0, ranks, link));
  const double at_probe = double(analysis::link_model_ns(op, probe, ranks, link));
  return analysis::link_allreduce_model(link.gbps, link.latency_us, at_zero,
                                     (at_probe - at_zero) / double(probe));
}

std::string settings_text(const analysis::FsdpSettings& s) {
  return "backward prefetch " + std::string(trace::to_string(s.backward_prefetch)) +
         ", all-gather limit " +
         (s.limit_all_gathers > 0 ? std::to_string(s.limit_all_gathers) : std::string("none"));
}

std::string model_text(const char* op, const analysis::AllReduceModel& m, int32_t world_size) {
  char text[256];
  if (m.source == analysis::AllReduceModel::Source::kLink) {
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
  out.push_back(model_text("all-gather", model.all_gather, replay.world_size) +
                " (bytes: one rank's shard)");
  out.push_back(model_text("reduce-scatter", model.reduce_scatter, replay.world_size) +
                " (bytes: the whole flat gradient)");
  char text[256];
  std::snprintf(text, sizeof(text),
                "a collective starts %.0f \u00b5s after it is issued (median of the recorded ones "
                "that did not queue); one collective at a time on the link, in issue order",
                replay.launch_offset_ns / 1e3);
  out.push_back(text);
  out.push_back("the main thread's work between the recorded points (each unit's forward and "
                "backward compute, the optimizer step) is as recorded; a unit waits for its "
                "all-gather before computing");
  out.push_back("forward prefetch (" + std::string(replay.recorded.forward_prefetch ? "on" : "off") +
                "), the reduce-scatters and their waits (at most " +
                std::to_string(replay.recorded.limit_reduce_scatters) +
                " in flight; 0: no limit) stay as recorded");
  std::snprintf(text, sizeof(text),
                "at most %d all-gather(s) in flight in the predicted schedule (the engine "
                "prefetches one unit ahead): a limit of %d or more does not bind",
                prediction.max_gathers_in_flight, std::max(prediction.max_gathers_in_flight, 1));
  out.push_back(text);
  out.push_back("each rank is replayed on its own (a late peer delays a collective only in the "
                "fitted cost, on average); communication threads competing with compute for "
                "cores are not modelled");
  if (replay.recorded.mixed_precision != "none" || replay.recorded.cpu_offload) {
    out.push_back("recorded with mixed precision " + replay.recorded.mixed_precision +
                  (replay.recorded.cpu_offload ? " and CPU offload" : "") +
                  ": collectives are costed by their recorded bytes, casts and copies are "
                  "part of the recorded compute");
  }
  return out;
}

nlohmann::json model_json(const analysis::AllReduceModel& m) {
  if (m.source == analysis::AllReduceModel::Source::kLink) {
    return {{"source", "link"}, {"latency_us", m.latency_us()}, {"gbps", m.gbps()},
            {"link_gbps", m.link_gbps}, {"link_latency_us", m.link_latency_us}};
  }
  return {{"source", "fit"}, {"latency_us", m.latency_us()}, {"gbps", m.gbps()},
          {"fit_error_pct", m.fit_error_pct}, {"samples", m.samples}};
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
          {"sharding", r.sharding}};
}

void print_case(const analysis::FsdpReplayTrace& replay, const analysis::FsdpCostModel& model,
                const analysis::FsdpPrediction& p) {
  std::printf("recorded: %s\n", settings_text(replay.recorded.settings).c_str());
  std::printf("what if:  %s\n\n", settings_text(p.settings).c_str());
  print_measured_and_predicted(p);
  std::printf("\nassumptions\n");
  for (const std::string& a : assumptions(replay, model, p)) std::printf("  - %s\n", a.c_str());
}

}  // namespace

void run_fsdp_whatif(const FsdpWhatifRequest& request, trace::Reader& reader,
                     const analysis::RunStats& stats) {
  if (request.sweep && (request.backward_prefetch || request.limit_all_gathers)) {
    throw CliFailure("--sweep tries every --backward-prefetch mode with --limit-all-gathers 0, 1 "
                     "and 2; drop those flags, or drop --sweep to predict one setting");
  }
  const analysis::FsdpReplayTrace replay = analysis::load_fsdp_replay_trace(reader, stats, request.rank);
  const analysis::FsdpCostModel model =
      request.link ? analysis::FsdpCostModel{link_model(trace::CollectiveOp::AllGather, *request.link, replay.world_size),
                                          link_model(trace::CollectiveOp::ReduceScatter, *request.link, replay.world_size)}
                   : analysis::fit_fsdp_cost_model(replay);
  std::string header = request.trace + ": rank " + std::to_string(replay.rank) + " of " +
                       std::to_string(replay.world_size) + ", FSDP (sharding " +
                       replay.recorded.sharding + "), " + std::to_string(replay.iterations.size()) +
                       " steady iterations (" + std::to_string(replay.iterations.front().iteration) +
                       ".." + std::to_string(replay.iterations.back().iteration) + ")";
  if (const std::string link_line = analysis::link_text(stats); !link_line.empty()) {
    header += ", recorded on an " + link_line;
  }

  if (!request.sweep) {
    analysis::FsdpSettings settings = replay.recorded.settings;
    if (request.backward_prefetch) settings.backward_prefetch = *request.backward_prefetch;
    if (request.limit_all_gathers) settings.limit_all_gathers = *request.limit_all_gathers;
    const analysis::FsdpPrediction p = analysis::predict_fsdp(replay, settings, model);
    if (request.json) {
      nlohmann::json j = case_json(replay, model, p, true);
      j["trace"] = request.trace;
      j["rank"] = replay.rank;
      j["world_size"] = replay.world_size;
      j["strategy"] = "fsdp";
      j["recorded"] = recorded_json(replay);
      std::cout << j.dump() << "\n";
    } else {
      std::printf("whatif %s\n", header.c_str());
      print_case(replay, model, p);
    }
    std::cout.flush();
    return;
  }
  std::vector<analysis::FsdpPrediction> cases;
  for (const trace::BackwardPrefetch mode : {trace::BackwardPrefetch::Pre,
                                                 trace::BackwardPrefetch::Post,
                                                 trace::BackwardPrefetch::None}) {
    for (const int32_t limit : kSweepLimits) cases.push_back(analysis::predict_fsdp(replay, {mode, limit}, model));
  }
  const size_t best = fastest_case(cases, [](const auto& c) { return c.predicted_step_ms; });
  if (request.json) {
    print_sweep_json(cases, best, [&](const auto& c) { return case_json(replay, model, c, false); });
    return;
  }
  std::printf("whatif --sweep %s\n", header.c_str());
  std::printf("recorded: %s; measured step %.2f ms, exposed communication %.2f ms (medians)\n\n",
              settings_text(replay.recorded.settings).c_str(), cases.front().measured_step_ms,
              cases.front().measured_exposed_comm_ms);
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
  std::printf("\nassumptions\n");
  for (const std::string& a : assumptions(replay, model, cases[best])) std::printf("  - %s\n", a.c_str());
}

}  // namespace dpscope::cli
