// The cost of one collective for the what-if replays (whatif.h, whatif_fsdp.h): a line fitted by
// least squares to the collectives of one kind the trace recorded, or the ring model of a link.
#include "analysis/whatif_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include "analysis/whatif.h"

namespace dpscope::analysis {

int64_t AllReduceModel::duration_ns(int64_t bytes) const {
  const double ns = intercept_ns + ns_per_byte * static_cast<double>(std::max<int64_t>(bytes, 0));
  return ns < 1e17 ? static_cast<int64_t>(std::llround(std::max(0.0, ns))) : int64_t{100000000000000000};
}

std::string AllReduceModel::line_text() const {
  char text[96];
  if (ns_per_byte > 0) {
    std::snprintf(text, sizeof(text), "%.1f \u00b5s + bytes at %.3g Gb/s", latency_us(), gbps());
  } else {
    std::snprintf(text, sizeof(text), "%.1f \u00b5s whatever the bytes (they did not take longer with more)",
                  latency_us());
  }
  return text;
}

AllReduceModel fit_collective_model(const std::vector<std::pair<int64_t, int64_t>>& samples,
                                    const ReplayOrigin& origin, const std::string& what) {
  const std::string& path = origin.path;
  std::string fix = "; pass --link-gbps and --link-latency-us to cost the " + what +
                    " with the ring model of a link instead";
  if (origin.link_gbps > 0) {
    char flags[160];
    std::snprintf(flags, sizeof(flags),
                  "; pass --link-gbps %g --link-latency-us %g (the emulated link it was recorded on) to cost the ",
                  origin.link_gbps, origin.link_latency_us);
    fix = flags + what + " with that link's ring model instead";
  }
  if (samples.empty()) {
    throw WhatifError(path + ": no " + what + " in the steady iterations to fit a cost model to" +
                      fix);
  }
  std::set<int64_t> sizes;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [bytes, ns] : samples) {
    sizes.insert(bytes);
    const double x = double(bytes), y = double(ns);
    n += 1; sx += x; sy += y; sxx += x * x; sxy += x * y;
  }
  if (sizes.size() < 2) {
    throw WhatifError(path + ": the recorded " + what + " all carry " +
                      std::to_string(*sizes.begin()) + " bytes, so latency and bandwidth cannot "
                      "be told apart" + fix);
  }
  AllReduceModel model;
  model.source = AllReduceModel::Source::Fitted;
  model.samples = static_cast<int64_t>(samples.size());
  const double variance = sxx - sx * sx / n;
  model.ns_per_byte = (sxy - sx * sy / n) / variance;
  model.intercept_ns = (sy - model.ns_per_byte * sx) / n;
  if (model.intercept_ns < 0) {  // no negative latency: the line through the origin
    model.intercept_ns = 0;
    model.ns_per_byte = sxy / sxx;
  }
  if (!(model.ns_per_byte > 0)) {  // no bandwidth to fit: what they took, on average
    model.ns_per_byte = 0;
    model.intercept_ns = sy / n;
  }
  double error = 0;
  for (const auto& [bytes, ns] : samples) error += std::fabs(double(model.duration_ns(bytes) - ns));
  model.fit_error_pct = sy > 0 ? 100.0 * error / sy : 0;
  return model;
}

AllReduceModel fit_allreduce_model(const ReplayTrace& trace) {
  return fit_collective_model(trace.allreduce_samples, trace, "bucket all-reduces");
}

AllReduceModel link_allreduce_model(double gbps, double latency_us, double intercept_ns,
                                    double ns_per_byte) {
  AllReduceModel model;
  model.source = AllReduceModel::Source::Link;
  model.intercept_ns = intercept_ns;
  model.ns_per_byte = ns_per_byte;
  model.link_gbps = gbps;
  model.link_latency_us = latency_us;
  return model;
}

AllReduceModel link_collective_model(trace::CollectiveOp op, const core::LinkSpec& link, int32_t ranks) {
  const int64_t probe = int64_t{1} << 30;
  const double at_zero = double(core::link_model_ns(op, 0, ranks, link));
  const double at_probe = double(core::link_model_ns(op, probe, ranks, link));
  return link_allreduce_model(link.gbps, link.latency_us, at_zero, (at_probe - at_zero) / double(probe));
}

}  // namespace dpscope::analysis
