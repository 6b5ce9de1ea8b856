// The cost of one collective for the what-if replays (whatif.h, whatif_fsdp.h): a line fitted by
// least squares to the collectives of one kind a trace recorded, or the ring model of a link
// (core/link_model.h). Defined in whatif_model.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/link_model.h"
#include "trace/schema.h"

namespace dpscope::analysis {

struct ReplayOrigin;  // whatif.h
struct ReplayTrace;   // whatif.h

// The cost of one collective (an all-reduce in the DDP replay; an all-gather or reduce-scatter in
// the FSDP one): intercept + bytes * ns_per_byte (both the least-squares fit and the ring model
// of docs/communication.md are of this form). Plain value.
struct AllReduceModel {
  enum class Source { Fitted, Link };
  Source source = Source::Fitted;
  double intercept_ns = 0;
  double ns_per_byte = 0;
  // Fitted: the samples and the error on them, sum |predicted - recorded| / sum recorded in %.
  int64_t samples = 0;
  double fit_error_pct = 0;
  // Link: the link given.
  double link_gbps = 0, link_latency_us = 0;

  int64_t duration_ns(int64_t bytes) const;
  double latency_us() const { return intercept_ns / 1e3; }
  double gbps() const { return ns_per_byte > 0 ? 8.0 / ns_per_byte : 0; }  // effective
  // "86.4 µs + bytes at 3.58 Gb/s", or for a flat fit "1.20 ms whatever the bytes".
  std::string line_text() const;
};

// Least squares of duration on bytes over `samples`, (bytes, ns) of recorded collectives of one
// kind, every sample counted (those that waited for a late peer or a busy CPU included: the step
// pays for them too); an intercept below zero is dropped and the line refitted through the
// origin. Samples whose time does not grow with bytes (loopback on a busy laptop) give a flat
// model, their mean whatever the bytes (ns_per_byte 0; line_text says so). `what` names the
// collectives in messages ("bucket all-reduces"). Throws WhatifError naming the origin's path
// when there are no samples, or when they all carry the same bytes (latency and bandwidth cannot
// be told apart); each says to pass --link-gbps and --link-latency-us instead, with the emulated
// link's own numbers when the trace was recorded on one. Pure.
AllReduceModel fit_collective_model(const std::vector<std::pair<int64_t, int64_t>>& samples,
                                    const ReplayOrigin& origin, const std::string& what);
// fit_collective_model over trace.allreduce_samples. Pure.
AllReduceModel fit_allreduce_model(const ReplayTrace& trace);

// The ring model's all-reduce on a link, 2(n-1)(L + S/(nB)) (docs/communication.md), given as
// its two terms: `intercept_ns` = the model at 0 bytes, `ns_per_byte` = its growth per byte.
// Pure.
AllReduceModel link_allreduce_model(double gbps, double latency_us, double intercept_ns,
                                    double ns_per_byte);

// The ring model's cost of `op` on `link` among `ranks` ranks (link_model_ns) as the line the
// replays cost with: its value at 0 bytes and its growth per byte up to 1 GiB. How --link-gbps
// costs the DDP replay's all-reduces and the FSDP replay's all-gathers and reduce-scatters. Pure.
AllReduceModel link_collective_model(trace::CollectiveOp op, const core::LinkSpec& link, int32_t ranks);

}  // namespace dpscope::analysis
