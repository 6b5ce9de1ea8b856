// What both halves of `dpscope whatif` print, the DDP one (cmd_whatif.cpp) and the FSDP one
// (whatif_fsdp_report.cpp), written once: the header line, the JSON of the trace replayed and of
// a cost model, the measured-against-predicted table, a sweep's JSON, and the assumptions.
#pragma once

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/clock_choice.h"
#include "analysis/stats.h"
#include "analysis/stats_report.h"
#include "analysis/whatif.h"

namespace dpscope::cli {

// What a report says first: its header line, and the clock its times are on (both the recorded
// run's, "measured" in the tables, and the prediction's).
struct ReplayHeading {
  std::string text;
  analysis::ClockLabel clock;
};

// "TRACE: rank R of W, STRATEGY, N steady iterations (A..B)", then ", recorded on an emulated
// link ..." when it was, then "; times on the CLOCK" (analysis::clock_text). `Replay` is
// analysis::ReplayTrace or analysis::FsdpReplayTrace (at least one iteration: the loaders refuse a
// trace without); `stats` is compute_stats of it, on the clock the replay was loaded on.
template <typename Replay>
ReplayHeading replay_heading(const std::string& trace, const Replay& replay, const std::string& strategy,
                             const analysis::RunStats& stats) {
  std::string header = trace + ": rank " + std::to_string(replay.rank) + " of " +
                       std::to_string(replay.world_size) + ", " + strategy + ", " +
                       std::to_string(replay.iterations.size()) + " steady iterations (" +
                       std::to_string(replay.iterations.front().iteration) + ".." +
                       std::to_string(replay.iterations.back().iteration) + ")";
  if (const std::string link_line = analysis::link_text(stats); !link_line.empty()) {
    header += ", recorded on an " + link_line;
  }
  header += "; times on the " + analysis::clock_text(stats.clock);
  return {header, stats.clock};
}

// The fields of one prediction's JSON that say what was replayed: the trace as given, the rank
// and the world size.
inline void add_origin_json(nlohmann::json& j, const std::string& trace, const analysis::ReplayOrigin& origin) {
  j["trace"] = trace;
  j["rank"] = origin.rank;
  j["world_size"] = origin.world_size;
}

// A cost model's JSON: its source ("fit" or "link"), its line, and the samples and error of a
// fit or the link given.
inline nlohmann::json model_json(const analysis::AllReduceModel& m) {
  if (m.source == analysis::AllReduceModel::Source::Link) {
    return {{"source", "link"}, {"latency_us", m.latency_us()}, {"gbps", m.gbps()},
            {"link_gbps", m.link_gbps}, {"link_latency_us", m.link_latency_us}};
  }
  return {{"source", "fit"}, {"latency_us", m.latency_us()}, {"gbps", m.gbps()},
          {"fit_error_pct", m.fit_error_pct}, {"samples", m.samples}};
}

// Each steady iteration's measured and predicted figures, the JSON rows both halves of whatif
// print. `Prediction` as for print_measured_and_predicted.
template <typename Prediction>
nlohmann::json iterations_json(const Prediction& p) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& it : p.iterations) {
    rows.push_back({{"iteration", it.iteration},
                    {"measured_step_ms", it.measured_step_ms},
                    {"predicted_step_ms", it.predicted_step_ms},
                    {"measured_exposed_comm_ms", it.measured.exposed_comm_ms},
                    {"predicted_exposed_comm_ms", it.predicted.exposed_comm_ms}});
  }
  return rows;
}

// A sweep's fastest case: the index of the least `predicted_step_ms(case)` (the first of ties).
template <typename Case, typename PredictedStepMs>
size_t fastest_case(const std::vector<Case>& cases, PredictedStepMs predicted_step_ms) {
  size_t best = 0;
  for (size_t i = 1; i < cases.size(); ++i) {
    if (predicted_step_ms(cases[i]) < predicted_step_ms(cases[best])) best = i;
  }
  return best;
}

// A sweep's JSON on stdout: one row per case (`row(case)`) with the clock, the fastest marked
// "best".
template <typename Case, typename Row>
void print_sweep_json(const std::vector<Case>& cases, size_t best, const analysis::ClockLabel& clock, Row row) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < cases.size(); ++i) {
    nlohmann::json j = row(cases[i]);
    j["clock"] = nlohmann::json(analysis::clock_json(clock));
    j["best"] = i == best;
    rows.push_back(j);
  }
  std::cout << rows.dump() << "\n";
  std::cout.flush();
}

// The measured-against-predicted table both halves of whatif print: the medians, then each
// steady iteration (the first and last six of a long run). `Prediction` is analysis::Prediction or
// analysis::FsdpPrediction: medians and iterations with the same fields.
template <typename Prediction>
void print_measured_and_predicted(const Prediction& p) {
  std::printf("%-24s %10s %10s\n", "median over iterations", "measured", "predicted");
  std::printf("%-24s %7.2f ms %7.2f ms\n", "step time", p.measured_step_ms, p.predicted_step_ms);
  std::printf("%-24s %7.2f ms %7.2f ms\n\n", "exposed communication", p.measured_exposed_comm_ms,
              p.predicted_exposed_comm_ms);
  std::printf("iteration  step measured  predicted   exposed measured  predicted\n");
  const size_t n = p.iterations.size();
  for (size_t i = 0; i < n; ++i) {
    if (n > 12 && i == 6) std::printf("  ... (%zu more)\n", n - 12);
    if (n > 12 && i >= 6 && i < n - 6) continue;
    const auto& it = p.iterations[i];
    std::printf("%9d  %10.2f ms %7.2f ms  %13.2f ms %7.2f ms\n", it.iteration, it.measured_step_ms,
                it.predicted_step_ms, it.measured.exposed_comm_ms, it.predicted.exposed_comm_ms);
  }
}

// A sweep report's line on the recorded settings (`recorded`) and the measured medians, which
// every case of the sweep shares (`p`, any of its predictions).
template <typename Prediction>
void print_sweep_recorded(const std::string& recorded, const Prediction& p) {
  std::printf("recorded: %s; measured step %.2f ms, exposed communication %.2f ms (medians)\n\n",
              recorded.c_str(), p.measured_step_ms, p.measured_exposed_comm_ms);
}

// The report's closing list of what the prediction assumes.
inline void print_assumptions(const std::vector<std::string>& assumptions) {
  std::printf("\nassumptions\n");
  for (const std::string& a : assumptions) std::printf("  - %s\n", a.c_str());
}

}  // namespace dpscope::cli
