// The FSDP half of `dpscope whatif` (cmd_whatif.cpp): predicting an FSDP trace with another
// backward prefetch mode, all-gather limit or link (analysis/whatif_fsdp.h), and printing the report
// or the JSON of docs/whatif.md, "FSDP".
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "analysis/link_model.h"
#include "analysis/stats.h"
#include "analysis/whatif_fsdp.h"
#include "trace/reader.h"

namespace dpscope::cli {

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

// A sweep's JSON on stdout: one row per case (`row(case)`), the fastest marked "best".
template <typename Case, typename Row>
void print_sweep_json(const std::vector<Case>& cases, size_t best, Row row) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < cases.size(); ++i) {
    nlohmann::json j = row(cases[i]);
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

// What the user asked of an FSDP trace; settings not given stay as recorded.
struct FsdpWhatifRequest {
  std::string trace;
  int32_t rank = 0;
  std::optional<trace::BackwardPrefetch> backward_prefetch;
  std::optional<int32_t> limit_all_gathers;
  std::optional<analysis::LinkSpec> link;  // cost collectives on this link instead of the fit
  bool sweep = false;                  // every prefetch mode x all-gather limits 0, 1, 2
  bool json = false;
};

// Reads the FSDP trace `reader` holds (`stats` = compute_stats of it), predicts and prints to
// stdout. Throws analysis::WhatifError (refusals) and CliFailure (--sweep with a setting).
void run_fsdp_whatif(const FsdpWhatifRequest& request, trace::Reader& reader,
                     const analysis::RunStats& stats);

}  // namespace dpscope::cli
