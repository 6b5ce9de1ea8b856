// synth: writes a realistic synthetic DDP trace (what `dpscope train --strategy ddp` records on
// R ranks, merged into one run file) of about N events, for viewer tests and benchmarks without
// running a training. Behind `dpscope synth --events N --ranks R --out PATH`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace dpscope::formats {

struct SynthOptions {
  int64_t events = 0;  // the `events` rows wanted; met to within about one iteration of all ranks
  int ranks = 0;       // world size, 1..1024
  std::string out;     // the run file; replaced if it exists
  uint64_t seed = 1;   // same options and seed: the same rows
  // The model: `layers` Linear layers (64 inputs -> hidden ... -> 10 classes), so 2 * layers
  // parameters fc0.weight, fc0.bias, ... in float32, bucketed like DDP with these limits.
  int layers = 12;
  int64_t hidden = 2048;
  int64_t first_bucket_bytes = int64_t{1} << 20;
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  // The emulated link the collectives run on: each lasts the ring model's time for it
  // (core::link_model_ns), give or take the jitter of every duration. Written to the meta
  // table (link_gbps, link_latency_us), as `dpscope launch --link-gbps G --link-latency-us L`
  // records it, so that the cluster clock can replay the trace.
  double link_gbps = 4;
  double link_latency_us = 50;
};

struct SynthResult {
  int64_t events = 0;  // rows in `events`
  int64_t memory_samples = 0;
  int64_t metrics = 0;
  int32_t iterations = 0;  // per rank
  int32_t params = 0;
  int32_t buckets_initial = 0;  // generation 0
  int32_t buckets_rebuilt = 0;  // generation 1
};

// Writes the trace to options.out through Writer, in batched transactions, and finishes it
// (indexes, WAL folded in). Every rank runs construction (verify_model and broadcast_state, with
// their broadcasts, iteration NULL) and then the same number of iterations: forward, backward
// with one hook per parameter in reverse order, bucket ready/launch/done and one all-reduce per
// bucket on the "gloo comm" lane overlapping the rest of backward, the waits at the end of
// backward, optimizer_step; iteration 0 uses the initial bucket plan (one bucket, as DDP builds
// it by default), later ones the plan rebuilt from the order gradients arrived (broadcast at the
// start of iteration 1), as DDP does. Memory
// samples and the loss/step_ms metrics go with every iteration. Ranks differ by a fixed skew of
// a few microseconds plus seeded jitter; collectives end together on all ranks. The main lane
// records thread CPU times as one computing thread at full speed would (Note [Synthetic CPU
// time] in synth.cpp: phases and waits both, a collective its issue's), and the meta table the
// link and intra_op_threads 1, so `analysis::cluster_clock` replays a synthetic trace as it does
// a recorded one. The iteration
// count is chosen so the event count is as close to options.events as whole iterations allow.
// `progress` (optional) gets the fraction of the work done (rows written, then indexes built)
// about every 1 %, and 1.0 at the end. Throws TraceError, saying what to change, for events < 1,
// ranks outside 1..1024, a model with no parameters, a link check_link refuses, or a path that
// cannot be written.
SynthResult synthesize(const SynthOptions& options,
                       const std::function<void(double)>& progress = {});

// The checks synthesize makes before it writes anything (the ranges above, and an --out whose
// directory exists and that is not a directory itself): throws the same TraceError.
void check_synth_options(const SynthOptions& options);

}  // namespace dpscope::formats
