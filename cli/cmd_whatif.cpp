// `dpscope whatif TRACE [--bucket-cap-mb X] [--first-bucket-mb Y] [--backward-prefetch M]
// [--limit-all-gathers N] [--link-gbps G --link-latency-us L] [--clock measured|cluster] [--sweep]
// [--rank R] [--json]`: the
// step time and exposed communication a recorded DDP run would have had with another bucket plan
// or link (analysis/whatif.h), or an FSDP run with another prefetch mode, all-gather limit or link
// (whatif_fsdp_report.h), beside the recorded figures, on the measured clock or the cluster clock
// (docs/whatif.md, docs/cluster-clock.md); --sweep tries a range.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/clock_choice.h"
#include "analysis/cluster_clock.h"
#include "analysis/stats.h"
#include "analysis/whatif.h"
#include "cli/commands.h"
#include "cli/whatif_fsdp_report.h"
#include "cli/whatif_report.h"
#include "core/link_options.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::cli {
namespace {

// The caps --sweep tries, MiB.
constexpr double kSweepCapsMb[] = {0.25, 0.5, 1, 2, 4, 8, 16, 25, 50, 100};
constexpr double kMaxBucketMb = 1048576;  // as `dpscope train` accepts

struct WhatifOptions {
  std::string trace;
  std::optional<double> bucket_cap_mb, first_bucket_mb;
  core::LinkFlags link;
  std::optional<std::string> backward_prefetch;  // FSDP only
  std::optional<int32_t> limit_all_gathers;      // FSDP only
  std::string clock{analysis::to_string(analysis::Clock::Measured)};
  int32_t rank = 0;
  bool sweep = false;
  bool json = false;
};

void check_mb(const std::optional<double>& mb, const char* flag) {
  if (mb && !(*mb > 0 && *mb <= kMaxBucketMb)) {
    throw CliFailure(std::string(flag) + " " + core::link_value_text(*mb) +
                     " is out of range: a bucket size in MiB, above 0 and at most 1048576 "
                     "(PyTorch's defaults: 25 for the cap, 1 for the first bucket)");
  }
}

// The clock asked for, and the link given (nullopt: the fit on the measured clock, the run's own
// link on the cluster clock).
struct CheckedWhatifOptions {
  analysis::Clock clock = analysis::Clock::Measured;
  std::optional<core::LinkSpec> link;
};

CheckedWhatifOptions check_options(const WhatifOptions& o) {
  const std::optional<analysis::Clock> clock = analysis::parse_clock(o.clock);
  if (!clock) {
    throw CliFailure("whatif: --clock " + o.clock + " is not a clock: measured (the trace as "
                     "recorded on this machine) or cluster (the run replayed as a cluster would "
                     "run it, docs/cluster-clock.md)");
  }
  check_mb(o.bucket_cap_mb, "--bucket-cap-mb");
  check_mb(o.first_bucket_mb, "--first-bucket-mb");
  if (o.sweep && o.bucket_cap_mb) {
    throw CliFailure("--sweep tries its own bucket caps (0.25 to 100 MiB); drop --bucket-cap-mb, "
                     "or drop --sweep to predict one cap");
  }
  if (o.rank < 0) throw CliFailure("--rank must be a rank of the trace (0, 1, ...)");
  if (o.backward_prefetch && !trace::parse_mode(trace::kBackwardPrefetches, *o.backward_prefetch)) {
    throw CliFailure("--backward-prefetch " + *o.backward_prefetch +
                     " is not a mode: pass pre, post or none");
  }
  if (o.limit_all_gathers && *o.limit_all_gathers < 0) {
    throw CliFailure("--limit-all-gathers " + std::to_string(*o.limit_all_gathers) +
                     " is out of range: the most all-gathers in flight, 0 (no limit) or more");
  }
  try {
    return {*clock, o.link.checked()};
  } catch (const std::invalid_argument& error) {
    throw CliFailure(error.what());
  }
}

int64_t to_bytes(double mb) { return static_cast<int64_t>(mb * 1024 * 1024); }
double to_mb(int64_t bytes) { return double(bytes) / (1024 * 1024); }

std::string mb_text(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g MiB", to_mb(bytes));
  return text;
}

// One prediction: the limits it was made for (none: the trace's own plan), its plan and result.
struct Case {
  std::optional<analysis::BucketLimits> limits;
  core::BucketPlan plan;
  analysis::Prediction prediction;
};

Case predict_case(const analysis::ReplayTrace& replay, const std::optional<analysis::BucketLimits>& limits,
                  const analysis::AllReduceModel& model) {
  Case c;
  c.limits = limits;
  c.plan = limits ? analysis::plan_for(replay, *limits) : replay.recorded_plan;
  c.prediction = analysis::predict(replay, c.plan, model);
  return c;
}

std::string model_text(const analysis::AllReduceModel& m, int32_t world_size) {
  char text[256];
  if (m.source == analysis::AllReduceModel::Source::Link) {
    std::snprintf(text, sizeof(text),
                  "ring model of a %g Gb/s, %g \u00b5s link: 2(n-1)(L + S/(nB)), n = %d "
                  "(%.1f \u00b5s + bytes at %.3g Gb/s)",
                  m.link_gbps, m.link_latency_us, world_size, m.latency_us(), m.gbps());
  } else {
    std::snprintf(text, sizeof(text),
                  "all-reduce = %s, fitted to %lld recorded all-reduces (error %.1f %% of their time)",
                  m.line_text().c_str(), static_cast<long long>(m.samples), m.fit_error_pct);
  }
  return text;
}

std::vector<std::string> assumptions(const analysis::ReplayTrace& replay,
                                     const analysis::AllReduceModel& model) {
  std::vector<std::string> out;
  out.push_back("all-reduce cost: " + model_text(model, replay.world_size));
  if (model.source == analysis::AllReduceModel::Source::Fitted) {
    out.push_back("a bucket holding exactly the parameters of a recorded bucket keeps that bucket's "
                  "recorded all-reduce times; the fitted line costs the others");
  }
  char text[256];
  // On the cluster clock the all-reduce goes on the link as the hook issues it, before the hook
  // has returned: the offset is then a little below zero.
  std::snprintf(text, sizeof(text),
                "an all-reduce starts %.0f \u00b5s %s its bucket's last gradient hook ends "
                "(median of the recorded ones that did not queue)",
                std::abs(replay.launch_offset_ns / 1e3), replay.launch_offset_ns < 0 ? "before" : "after");
  out.push_back(text);
  out.push_back("gradient ready times (hook ends), forward, optimizer step and all compute "
                "before backward's tail are as recorded; the tail's own work (writing gradients "
                "back) is shared among the buckets by bytes");
  out.push_back(replay.transfers_wait_for_every_rank()
                    ? "buckets launch in index order and one all-reduce runs at a time; its "
                      "transfer starts when the last rank launched it (its gradients' hook ends "
                      "on every rank, as the cluster clock replays them)"
                    : "buckets launch in index order and one all-reduce runs at a time; each rank "
                      "is replayed on its own (a late peer does not delay a collective)");
  out.push_back("the CPU cost of launching more or fewer all-reduces, and communication "
                "threads competing with backward for cores, are not modelled");
  if (replay.recorded_limits) {
    const core::BucketPlan derived = analysis::plan_for(replay, *replay.recorded_limits);
    out.push_back(derived.buckets == replay.recorded_plan.buckets
                      ? "the plan derived for the recorded settings equals the trace's rebuilt plan"
                      : "WARNING: the plan derived for the recorded settings differs from the "
                        "trace's rebuilt plan");
  }
  return out;
}

nlohmann::json case_json(const analysis::ReplayTrace& replay, const Case& c,
                         const analysis::AllReduceModel& model, bool per_iteration) {
  const analysis::Prediction& p = c.prediction;
  nlohmann::json j;
  const analysis::BucketLimits limits = c.limits ? *c.limits : replay.recorded_limits.value_or(analysis::BucketLimits{});
  j["bucket_cap_mb"] = c.limits || replay.recorded_limits ? nlohmann::json(to_mb(limits.bucket_cap_bytes)) : nlohmann::json();
  j["first_bucket_mb"] = c.limits || replay.recorded_limits ? nlohmann::json(to_mb(limits.first_bucket_bytes)) : nlohmann::json();
  j["predicted_step_ms"] = p.predicted_step_ms;
  j["predicted_exposed_comm_ms"] = p.predicted_exposed_comm_ms;
  j["measured_step_ms"] = p.measured_step_ms;
  j["measured_exposed_comm_ms"] = p.measured_exposed_comm_ms;
  nlohmann::json buckets = nlohmann::json::array();
  for (size_t b = 0; b < c.plan.buckets.size(); ++b) {
    nlohmann::json names = nlohmann::json::array();
    for (const int64_t param : c.plan.buckets[b]) names.push_back(replay.param_names[param]);
    buckets.push_back({{"bytes", p.bucket_bytes[b]}, {"params", c.plan.buckets[b]}, {"names", names}});
  }
  j["buckets"] = buckets;
  j["model"] = model_json(model);
  j["model"]["launch_offset_us"] = replay.launch_offset_ns / 1e3;
  j["assumptions"] = assumptions(replay, model);
  j["buckets_timed_as_recorded"] = p.buckets_timed_as_recorded;
  if (per_iteration) j["iterations"] = iterations_json(p);
  return j;
}

std::string limits_text(const std::optional<analysis::BucketLimits>& limits, size_t buckets) {
  const std::string count = std::to_string(buckets) + (buckets == 1 ? " bucket" : " buckets");
  if (!limits) return "the trace's rebuilt plan: " + count;
  return "bucket cap " + mb_text(limits->bucket_cap_bytes) + ", first bucket " +
         mb_text(limits->first_bucket_bytes) + ": " + count;
}

void print_case(const analysis::ReplayTrace& replay, const Case& c, const analysis::AllReduceModel& model) {
  const analysis::Prediction& p = c.prediction;
  std::printf("recorded: %s\n", limits_text(replay.recorded_limits, replay.recorded_plan.buckets.size()).c_str());
  std::printf("what if:  %s\n\n", limits_text(c.limits, c.plan.buckets.size()).c_str());
  std::printf("bucket plan (launch order)\n  bucket       bytes  params\n");
  for (size_t b = 0; b < c.plan.buckets.size(); ++b) {
    std::string names;
    for (const int64_t param : c.plan.buckets[b]) names += " " + replay.param_names[param];
    std::printf("  %6zu  %8.2f MiB  %zu:%s\n", b, to_mb(p.bucket_bytes[b]),
                c.plan.buckets[b].size(), names.c_str());
  }
  std::printf("\n");
  print_measured_and_predicted(p);
  print_assumptions(assumptions(replay, model));
}

// What FSDP2 cannot be asked (Note [FSDP2 in the FSDP replay]): a post-backward prefetch, an
// all-gather limit.
void check_fsdp2_flags(const WhatifOptions& o) {
  if (o.backward_prefetch && trace::parse_mode(trace::kBackwardPrefetches, *o.backward_prefetch) ==
                                 trace::BackwardPrefetch::Post) {
    throw CliFailure("--backward-prefetch post: " + o.trace + " is an FSDP2 trace, and FSDP2 "
                     "prefetches in a group's pre-backward only (implicitly, or the groups given "
                     "to set_modules_to_backward_prefetch): ask for pre or none");
  }
  if (o.limit_all_gathers && *o.limit_all_gathers != 0) {
    throw CliFailure("--limit-all-gathers " + std::to_string(*o.limit_all_gathers) + ": " + o.trace +
                     " is an FSDP2 trace, and FSDP2 has no all-gather limit (it frees each "
                     "all-gather's buffer at its copy-out): drop the flag, or give 0");
  }
}

// FSDP flags on a DDP trace and DDP flags on an FSDP trace are refused by name, and on an FSDP2
// trace what FSDP2 cannot be asked.
void check_flags_for(const WhatifOptions& o, trace::Strategy strategy) {
  if (strategy == trace::Strategy::Fsdp2) check_fsdp2_flags(o);
  if (trace::is_fsdp_family(strategy)) {
    for (const auto& [given, flag] : {std::pair{o.bucket_cap_mb.has_value(), "--bucket-cap-mb"},
                                      std::pair{o.first_bucket_mb.has_value(), "--first-bucket-mb"}}) {
      if (given) {
        throw CliFailure(std::string(flag) + " sets DDP's buckets, but " + o.trace +
                         " is an FSDP trace: drop it, and ask about FSDP with --backward-prefetch "
                         "pre|post|none or --limit-all-gathers N");
      }
    }
    return;
  }
  for (const auto& [given, flag] : {std::pair{o.backward_prefetch.has_value(), "--backward-prefetch"},
                                    std::pair{o.limit_all_gathers.has_value(), "--limit-all-gathers"}}) {
    if (given) {
      throw CliFailure(std::string(flag) + " is an FSDP setting, but " + o.trace + " is not an "
                       "FSDP trace: drop it, and ask about DDP with --bucket-cap-mb or "
                       "--first-bucket-mb");
    }
  }
}

// The limits a DDP prediction is made for: the settings given (`cap_mb`, --first-bucket-mb),
// the others as recorded, else PyTorch's defaults; none given: the trace's own plan.
std::optional<analysis::BucketLimits> limits_for(const WhatifOptions& o, const analysis::ReplayTrace& replay,
                                                 std::optional<double> cap_mb) {
  if (!cap_mb && !o.first_bucket_mb) return replay.recorded_limits;
  analysis::BucketLimits limits = replay.recorded_limits.value_or(analysis::BucketLimits{});
  if (cap_mb) limits.bucket_cap_bytes = to_bytes(*cap_mb);
  if (o.first_bucket_mb) limits.first_bucket_bytes = to_bytes(*o.first_bucket_mb);
  return limits;
}

// One DDP prediction, for the settings given.
void print_one(const WhatifOptions& o, const analysis::ReplayTrace& replay, const analysis::AllReduceModel& model,
               const ReplayHeading& heading) {
  const Case c = predict_case(replay, limits_for(o, replay, o.bucket_cap_mb), model);
  if (o.json) {
    nlohmann::json j = case_json(replay, c, model, true);
    add_origin_json(j, o.trace, replay);
    j["clock"] = nlohmann::json(analysis::clock_json(heading.clock));
    std::cout << j.dump() << "\n";
  } else {
    std::printf("whatif %s\n", heading.text.c_str());
    print_case(replay, c, model);
  }
  std::cout.flush();
}

// The DDP sweep: each of kSweepCapsMb, and the fastest.
void print_sweep(const WhatifOptions& o, const analysis::ReplayTrace& replay, const analysis::AllReduceModel& model,
                 const ReplayHeading& heading) {
  std::vector<Case> cases;
  for (const double cap : kSweepCapsMb) cases.push_back(predict_case(replay, limits_for(o, replay, cap), model));
  const size_t best =
      fastest_case(cases, [](const auto& c) { return c.prediction.predicted_step_ms; });
  if (o.json) {
    print_sweep_json(cases, best, heading.clock, [&](const auto& c) { return case_json(replay, c, model, false); });
    return;
  }
  std::printf("whatif --sweep %s\n", heading.text.c_str());
  print_sweep_recorded(limits_text(replay.recorded_limits, replay.recorded_plan.buckets.size()),
                       cases.front().prediction);
  std::printf("%10s %12s %8s %15s %16s\n", "cap", "first bucket", "buckets", "predicted step",
              "predicted exposed");
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::printf("%10s %12s %8zu %12.2f ms %13.2f ms%s\n", mb_text(c.limits->bucket_cap_bytes).c_str(),
                mb_text(c.limits->first_bucket_bytes).c_str(), c.plan.buckets.size(),
                c.prediction.predicted_step_ms, c.prediction.predicted_exposed_comm_ms,
                i == best ? "  <- best" : "");
  }
  std::printf("\nbest: --bucket-cap-mb %g (predicted step %.2f ms against %.2f ms measured)\n",
              kSweepCapsMb[best], cases[best].prediction.predicted_step_ms,
              cases[best].prediction.measured_step_ms);
  print_assumptions(assumptions(replay, model));
}

// `cluster`: the trace's replay on the cluster clock, which the prediction is made on (its link
// costs the all-reduces); null on the measured clock, where `link` (else the fit) costs them.
void run_ddp_whatif(const WhatifOptions& o, std::optional<core::LinkSpec> link, trace::Reader& reader,
                    const analysis::RunStats& stats, const analysis::ClusterClockRun* cluster) {
  const analysis::ReplayTrace replay = analysis::load_replay_trace(reader, stats, o.rank, cluster);
  if (cluster) link = cluster->link;
  const analysis::AllReduceModel model =
      link ? analysis::link_collective_model(trace::CollectiveOp::AllReduce, *link, replay.world_size)
           : analysis::fit_allreduce_model(replay);
  const ReplayHeading heading = replay_heading(o.trace, replay, "DDP", stats);
  if (o.sweep) {
    print_sweep(o, replay, model, heading);
  } else {
    print_one(o, replay, model, heading);
  }
}

FsdpWhatifRequest fsdp_request(const WhatifOptions& o, const std::optional<core::LinkSpec>& link,
                               const analysis::ClusterClockRun* cluster) {
  FsdpWhatifRequest request;
  request.cluster = cluster;
  request.trace = o.trace;
  request.rank = o.rank;
  if (o.backward_prefetch) request.backward_prefetch = trace::parse_mode(trace::kBackwardPrefetches, *o.backward_prefetch);
  request.limit_all_gathers = o.limit_all_gathers;
  request.link = link;
  request.sweep = o.sweep;
  request.json = o.json;
  return request;
}

void run_whatif(const WhatifOptions& o, const CheckedWhatifOptions& checked) {
  trace::Reader reader(o.trace);
  // On the cluster clock the what-if is that clock with other settings: the recorded run
  // replayed there (with the link given, else its own), and the new plan costed by the same link.
  std::optional<analysis::ClusterClockRun> cluster;
  if (checked.clock == analysis::Clock::Cluster) {
    try {
      cluster = analysis::cluster_clock(reader, o.trace, checked.link);
    } catch (const analysis::ClusterClockError& error) {
      throw CliFailure(std::string("whatif --clock cluster: ") + error.what());
    }
    for (const std::string& warning : cluster->warnings) std::cerr << "dpscope whatif: " << warning << "\n";
  }
  const analysis::RunStats stats = cluster ? analysis::compute_stats(reader, *cluster) : analysis::compute_stats(reader);
  const analysis::ClusterClockRun* on_cluster = cluster ? &*cluster : nullptr;
  check_flags_for(o, stats.strategy);
  if (trace::is_fsdp_family(stats.strategy)) {
    run_fsdp_whatif(fsdp_request(o, checked.link, on_cluster), reader, stats);
  } else {
    run_ddp_whatif(o, checked.link, reader, stats, on_cluster);
  }
}

}  // namespace

void add_whatif_command(CLI::App& app, CommandMode mode) {
  auto options = std::make_shared<WhatifOptions>();
  CLI::App* cmd = app.add_subcommand(
      "whatif", "Predict a DDP trace's step time and exposed communication with another bucket "
                "cap or link, or an FSDP trace's with another backward prefetch or all-gather "
                "limit (FSDP2: backward prefetch pre or none), from the trace itself (docs/whatif.md)");
  cmd->add_option("TRACE", options->trace, "A merged run file (dpscope train --strategy ddp, "
                                           "fsdp or fsdp2, or dpscope synth)")
      ->required();
  cmd->add_option("--bucket-cap-mb", options->bucket_cap_mb,
                  "The bucket cap to predict for, MiB (default: the recorded one)");
  cmd->add_option("--first-bucket-mb", options->first_bucket_mb,
                  "The first bucket's limit, MiB (default: the recorded one, else PyTorch's 1)");
  cmd->add_option("--backward-prefetch", options->backward_prefetch,
                  "FSDP: when backward gathers the next unit, pre, post or none; FSDP2: pre "
                  "(implicit prefetch) or none (default: the recorded mode)");
  cmd->add_option("--limit-all-gathers", options->limit_all_gathers,
                  "FSDP: at most N all-gathers in flight, 0 for no limit (default: the recorded "
                  "limit; FSDP2 has none)");
  core::add_link_options(*cmd, options->link, core::LinkUse::Whatif);
  cmd->add_option("--clock", options->clock,
                  "measured (default: the trace as recorded on this machine) or cluster: the run "
                  "replayed as a cluster would run it (compute as CPU time, the network as the "
                  "link model: the run's emulated link, or --link-gbps), the prediction made on "
                  "that clock with the same link (docs/cluster-clock.md)");
  cmd->add_flag("--sweep", options->sweep,
                "DDP: try bucket caps 0.25, 0.5, 1, 2, 4, 8, 16, 25, 50 and 100 MiB; FSDP: every "
                "backward prefetch mode with all-gather limits 0, 1 and 2 (FSDP2: pre and none); "
                "and name the best");
  cmd->add_option("--rank", options->rank, "The rank to replay (default 0)");
  cmd->add_flag("--json", options->json,
                "One JSON object (with --sweep an array) instead of the report (docs/whatif.md)");
  cmd->callback([options, mode] {
    const CheckedWhatifOptions checked = check_options(*options);
    if (mode == CommandMode::Validate) return;
    try {
      run_whatif(*options, checked);
    } catch (const analysis::WhatifError& error) {
      throw CliFailure(error.what());
    }
  });
}

}  // namespace dpscope::cli
