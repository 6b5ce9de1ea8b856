// The two renderings of RunStats: stats_json, the `dpscope stats --json` contract of
// docs/trace-format.md, and stats_text, the readable report (see stats_report.h).
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "analysis/bandwidth.h"
#include "analysis/stats_report.h"
#include "trace/saturate.h"

namespace dpscope::analysis {

using trace::detail::saturating_sub;
namespace {

using ordered_json = nlohmann::ordered_json;

// The contract's order of the per-iteration collective counts (not CollectiveOp's).
constexpr trace::CollectiveOp kContractOps[] = {trace::CollectiveOp::AllReduce, trace::CollectiveOp::Broadcast,
                                         trace::CollectiveOp::AllGather, trace::CollectiveOp::ReduceScatter,
                                         trace::CollectiveOp::Barrier};
// Ops only imported traces record: every iteration's JSON counts them; the text's table shows
// their columns where a rank has any.
constexpr trace::CollectiveOp kImportedOps[] = {trace::CollectiveOp::AllToAll, trace::CollectiveOp::SendRecv};

bool has_imported_ops(const RankStats& r) {
  for (const IterationStats& it : r.iterations) {
    for (trace::CollectiveOp op : kImportedOps) {
      if (it.collectives[static_cast<size_t>(op)] > 0) return true;
    }
  }
  return false;
}

const char* compute_source_word(RankStats::ComputeSource source) {
  return source == RankStats::ComputeSource::GpuKernels ? "gpu_kernels" : "phases";
}

ordered_json int_or_null(int64_t value, int64_t none) {
  return value == none ? ordered_json(nullptr) : ordered_json(value);
}

// [[begin, end] per rank] (Note [Rows from the trace]).
ordered_json rows_json(const std::vector<RowRange>& rows) {
  ordered_json out = ordered_json::array();
  for (const RowRange& r : rows) out.push_back(ordered_json::array({r.begin, r.end}));
  return out;
}

ordered_json overlap_json(const OverlapStats& o) {
  return ordered_json{{"compute_ms", o.compute_ms},
                      {"comm_ms", o.comm_ms},
                      {"overlap_ms", o.overlap_ms},
                      {"exposed_comm_ms", o.exposed_comm_ms}};
}

// {"total": bytes, "ts_ns": t, "<category>": bytes at that moment, ...}; null when not found.
ordered_json peak_json(const MemoryAtPeak& peak) {
  if (!peak.found()) return nullptr;
  ordered_json memory{{"total", peak.total_bytes}, {"ts_ns", peak.ts_ns}};
  for (const CategoryBytes& c : peak.categories) memory[std::string(to_string(c.category))] = c.bytes;
  return memory;
}

// The GPU breakdown (Note [GPU breakdown]); comm_overlap_pct is null, and comm_note says why, on a
// rank without communication kernels.
ordered_json gpu_json(const GpuBreakdown& g) {
  ordered_json out{{"kernels", g.kernels},
                   {"kernel_span_ms", g.kernel_span_ms},
                   {"idle_pct", g.idle_pct},
                   {"compute_pct", g.compute_pct},
                   {"non_compute_pct", g.non_compute_pct},
                   {"comm_overlap_pct", g.comm_overlap_pct ? ordered_json(*g.comm_overlap_pct) : ordered_json(nullptr)},
                   {"comm_ms", g.comm_ms},
                   {"exposed_comm_ms", g.exposed_comm_ms}};
  if (!g.comm_overlap_pct) out["comm_note"] = "no communication kernels";
  return out;
}

// `origin_ns`: where a collective's begin_ms counts from (RunStats::origin_ns).
ordered_json rank_json(const RankStats& r, int64_t origin_ns) {
  ordered_json iterations = ordered_json::array();
  for (const IterationStats& it : r.iterations) {
    ordered_json collectives = ordered_json::object();
    for (trace::CollectiveOp op : kContractOps) {
      collectives[std::string(to_string(op))] = it.collectives[static_cast<size_t>(op)];
    }
    for (trace::CollectiveOp op : kImportedOps) {
      collectives[std::string(to_string(op))] = it.collectives[static_cast<size_t>(op)];
    }
    iterations.push_back(ordered_json{
        {"iteration", it.iteration},
        {"hooks", it.hooks},
        {"step_ms", it.step_ms},
        {"loss", it.loss ? ordered_json(*it.loss) : ordered_json(nullptr)},
        {"collectives", std::move(collectives)},
        {"overlap", overlap_json(it.overlap)},
        {"wait_ms", it.wait_ms},
        {"transfer_ms", it.transfer_ms}});
  }
  ordered_json collectives = ordered_json::array();
  for (const CollectiveStats& c : r.collectives) {
    collectives.push_back(ordered_json{{"seq", int_or_null(c.seq, trace::kNone64)},
                                       {"kind", std::string(to_string(c.op))},
                                       {"bytes", int_or_null(c.bytes, trace::kNone64)},
                                       {"iteration", int_or_null(c.iteration, trace::kNone)},
                                       {"begin_ms", double(saturating_sub(c.begin_ns, origin_ns)) / 1e6},
                                       {"ms", double(saturating_sub(c.end_ns, c.begin_ns)) / 1e6}});
    ordered_json& entry = collectives.back();
    const std::optional<Bandwidth> bw = bandwidth_of(c.op, c.bytes, c.group_ranks, c.transfer_ns);
    entry["transfer_ms"] = c.transfer_ns == trace::kNone64 ? ordered_json(nullptr)
                                                           : ordered_json(double(c.transfer_ns) / 1e6);
    entry["algbw_gbps"] = bw ? ordered_json(bw->algbw_gbps) : ordered_json(nullptr);
    entry["busbw_gbps"] = bw ? ordered_json(bw->busbw_gbps) : ordered_json(nullptr);
  }
  ordered_json category_max = ordered_json::object();
  for (const CategoryBytes& c : r.category_max) category_max[std::string(to_string(c.category))] = c.bytes;
  ordered_json buckets = ordered_json::array();
  for (const BucketExposure& b : r.buckets) {
    buckets.push_back(ordered_json{{"bucket", b.bucket},
                                   {"bytes", int_or_null(b.bytes, trace::kNone64)},
                                   {"allreduces", b.collectives},
                                   {"comm_ms", b.comm_ms},
                                   {"exposed_comm_ms", b.exposed_comm_ms}});
  }
  ordered_json peak = peak_json(r.memory_peak);
  if (peak.is_null()) peak = ordered_json{{"total", 0}};
  ordered_json out{{"rank", r.rank},
                   {"iterations", std::move(iterations)},
                   {"collectives", std::move(collectives)},
                   {"peak_memory_bytes", std::move(peak)},
                   {"step_peak_memory_bytes", peak_json(r.step_memory_peak)},
                   {"memory_after_steps_bytes", peak_json(r.memory_after_steps)},
                   {"category_max_bytes", std::move(category_max)},
                   {"overlap", overlap_json(r.overlap)},
                   {"overlap_compute", compute_source_word(r.compute_source)},
                   {"clock_offset_ms", double(r.clock_offset_ns) / 1e6},
                   {"clock_uncertainty_ms", double(r.clock_uncertainty_ns) / 1e6},
                   {"wait_ms", r.wait_ms},
                   {"transfer_ms", r.transfer_ms},
                   {"buckets", std::move(buckets)}};
  if (r.gpu) out["gpu"] = gpu_json(*r.gpu);
  return out;
}

// The emulated link ({"gbps", "latency_us"}), or null when the link was real.
ordered_json link_json(const RunStats& stats) {
  if (stats.link_gbps <= 0) return nullptr;
  return ordered_json{{"gbps", stats.link_gbps}, {"latency_us", stats.link_latency_us}};
}

ordered_json matching_json(const RunStats& stats) {
  ordered_json mismatched = ordered_json::array();
  for (const CollectiveMatch& m : stats.matches) {
    if (m.mismatch) {
      mismatched.push_back(ordered_json{{"grp", int_or_null(m.grp, trace::kNone)}, {"seq", m.seq}, {"why", m.why}});
    }
  }
  return ordered_json{{"collectives", stats.matches.size()},
                      {"mismatches", stats.mismatches},
                      {"max_skew_ms", double(stats.max_skew_ns) / 1e6},
                      {"mismatched", std::move(mismatched)},
                      {"straggler_threshold_ms", stats.stragglers.threshold_ms}};
}

// Every process group's traffic (group_traffic.h).
ordered_json groups_json(const RunStats& stats) {
  ordered_json groups = ordered_json::array();
  for (const GroupTraffic& g : stats.groups) {
    groups.push_back(ordered_json{{"grp", int_or_null(g.grp, trace::kNone)},
                                  {"name", g.name},
                                  {"ranks", g.ranks},
                                  {"collectives", g.collectives},
                                  {"payload_bytes", g.payload_bytes},
                                  {"wire_bytes", g.wire_bytes},
                                  {"wire_bytes_per_step", g.wire_bytes_per_step},
                                  {"busbw_gbps_median", g.median_busbw_gbps ? ordered_json(*g.median_busbw_gbps)
                                                                            : ordered_json(nullptr)}});
  }
  return groups;
}

// See Note [Stragglers]: the ranks the others keep waiting for, largest lateness first.
ordered_json stragglers_json(const RunStats& stats) {
  ordered_json list = ordered_json::array();
  for (const Straggler& s : stats.stragglers.stragglers) {
    list.push_back(ordered_json{{"rank", s.rank},
                                {"late_ms", s.late_ms},
                                {"next_late_ms", s.next_late_ms},
                                {"last_in_steps", s.last_in_steps},
                                {"steps", s.steps}});
  }
  return list;
}

// printf into a std::string.
std::string format(const char* pattern, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* pattern, ...) {
  va_list args;
  va_start(args, pattern);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, pattern, copy);
  va_end(copy);
  std::string text(static_cast<size_t>(n > 0 ? n : 0), '\0');
  std::vsnprintf(text.data(), text.size() + 1, pattern, args);
  va_end(args);
  return text;
}

std::string join(const std::vector<int32_t>& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) text += (i ? " " : "") + std::to_string(values[i]);
  return text;
}

double mib(int64_t bytes) { return double(bytes) / double(1 << 20); }

std::string or_unknown(const std::string& text) { return text.empty() ? "?" : text; }

// Runs longer than this show their first and last kIterationsShown / 2 iterations.
constexpr size_t kIterationsShown = 20;

void append_warnings(const RunStats& stats, std::string& out) {
  for (const RankStats& r : stats.ranks) {
    if (r.dropped_events > 0) {
      out += format("WARNING: rank %d dropped %lld events (its recorder's buffers were full); its "
                    "counts and times below are incomplete\n",
                    r.rank, static_cast<long long>(r.dropped_events));
    }
    const trace::RankStatus status = trace::parse_rank_status(r.status);
    if (status == trace::RankStatus::Running) {
      out += format("WARNING: rank %d did not finish: status \"running\", its trace writer stopped "
                    "before closing the file (the process was killed, or the disk filled up); its trace "
                    "ends early\n",
                    r.rank);
    } else if (status != trace::RankStatus::Complete) {
      out += format("WARNING: rank %d did not finish: status \"%s\"; its trace ends early\n",
                    r.rank, r.status.c_str());
    }
  }
}

void append_matching(const RunStats& stats, std::string& out) {
  if (stats.matches.empty()) return;
  if (stats.world_size > 1) out += "stragglers: " + stragglers_text(stats.stragglers) + "\n";
  if (stats.mismatches == 0) {
    out += format("collectives: %zu matched on every rank, largest skew %.3f ms\n",
                  stats.matches.size(), double(stats.max_skew_ns) / 1e6);
    return;
  }
  out += format("WARNING: %lld of %zu collectives do not match across ranks:\n",
                static_cast<long long>(stats.mismatches), stats.matches.size());
  int shown = 0;
  for (const CollectiveMatch& m : stats.matches) {
    if (!m.mismatch) continue;
    if (shown++ == 10) {
      out += "  ... (dpscope stats --json lists every one)\n";
      break;
    }
    out += format("  group %d seq %lld: %s\n", m.grp, static_cast<long long>(m.seq), m.why.c_str());
  }
}

// With more than one process group (HSDP's shard and replicate groups, reshard_after_forward's
// post-forward groups), each one's traffic per rank; one group's is the ranks' own figures.
void append_groups(const RunStats& stats, std::string& out) {
  if (stats.groups.size() < 2) return;
  out += "process groups (per rank; on the wire: the ring model's bytes each rank sends):\n";
  for (const GroupTraffic& g : stats.groups) {
    out += format("  group %-5d %-28s ranks %-12s %6lld collectives, payload %s, on the wire %s (%s a step)\n",
                  g.grp, ("'" + g.name + "'").c_str(), join(g.ranks).c_str(),
                  static_cast<long long>(g.collectives), bytes_text(g.payload_bytes).c_str(),
                  bytes_text(g.wire_bytes).c_str(),
                  bytes_text(static_cast<int64_t>(g.wire_bytes_per_step + 0.5)).c_str());
  }
}

// Each group's median busbw over its collectives of 1 MiB and more (Note [Bus bandwidth]).
void append_bus_bandwidth(const RunStats& stats, std::string& out) {
  for (const GroupTraffic& g : stats.groups) {
    if (!g.median_busbw_gbps) continue;
    const std::string name = g.name.empty() ? "" : " '" + g.name + "'";
    out += format("busbw: group %d%s %.2f Gb/s median over %lld collectives of 1 MiB and more "
                  "(nccl-tests' busbw, in gigabits: its GB/s times 8; docs/communication.md)\n",
                  g.grp, name.c_str(), *g.median_busbw_gbps, static_cast<long long>(g.busbw_collectives));
  }
}

void append_plans(const RunStats& stats, std::string& out) {
  if (!stats.buckets.empty()) {
    out += "\nbuckets (generation 0: initial plan, 1: rebuilt):\n";
    out += format("  %3s %6s %12s  %s\n", "gen", "bucket", "bytes", "params");
    for (const trace::BucketInfo& b : stats.buckets) {
      const bool size_unknown = b.numel == 0 && b.params.empty();
      out += format("  %3d %6d %12s  %s\n", b.generation, b.index,
                    size_unknown ? "?" : std::to_string(b.bytes).c_str(),
                    b.params.empty() ? "(read from the profiler's all-reduces)" : join(b.params).c_str());
    }
  }
  if (!stats.units.empty()) {
    out += "\nunits:\n";
    out += format("  %4s  %-24s %12s %12s %12s  %s\n", "unit", "name", "numel", "padded", "shard",
                  "params");
    for (const UnitStats& u : stats.units) {
      out += format("  %4d  %-24s %12lld %12lld %12lld  %s\n", u.unit.index, u.unit.name.c_str(),
                    static_cast<long long>(u.unit.numel),
                    static_cast<long long>(u.unit.padded_numel),
                    static_cast<long long>(u.unit.shard_numel), join(u.params).c_str());
    }
  }
}

// FSDP2's rows per rank (Note [Rows from the trace]): "  3  fc0.weight  [0,4) [4,8) [8,10)".
void append_param_rows(const RunStats& stats, std::string& out) {
  bool any = false;
  for (const auto& rows : stats.param_rows) any = any || !rows.empty();
  if (!any) return;
  out += "\nrows (FSDP2: each parameter's dim-0 rows [begin,end) on rank 0, 1, ...):\n";
  for (size_t i = 0; i < stats.params.size() && i < stats.param_rows.size(); ++i) {
    if (stats.param_rows[i].empty()) continue;
    const trace::ParamInfo& p = stats.params[i];
    out += format("  %4d  %-24s", p.index, p.name.c_str());
    for (const RowRange& r : stats.param_rows[i]) {
      out += format(" [%lld,%lld)", static_cast<long long>(r.begin), static_cast<long long>(r.end));
    }
    out += "\n";
  }
}

void append_iteration(const IterationStats& it, bool imported_ops, std::string& out) {
  const std::string loss = it.loss ? format("%.4f", *it.loss) : "-";
  out += format("  %5d %10.3f %10s %6lld", it.iteration, it.step_ms, loss.c_str(),
                static_cast<long long>(it.hooks));
  for (trace::CollectiveOp op : kContractOps) {
    out += format(" %9lld", static_cast<long long>(it.collectives[static_cast<size_t>(op)]));
  }
  if (imported_ops) {
    for (trace::CollectiveOp op : kImportedOps) {
      out += format(" %9lld", static_cast<long long>(it.collectives[static_cast<size_t>(op)]));
    }
  }
  out += format(" %10.3f %10.3f %10.3f\n", it.overlap.compute_ms, it.overlap.comm_ms,
                it.overlap.exposed_comm_ms);
}

// The step-time summary (Note [Steady steps]): it still describes a long run whose table is cut.
void append_step_summary(const RankStats& r, std::string& out) {
  const core::StepSummary steps = step_summary(r);
  if (steps.count == 0) return;
  out += format("  step_ms over %zu iterations from %d: median %.3f, min %.3f, max %.3f\n",
                steps.count, steps.from_iteration, steps.median_ms, steps.min_ms, steps.max_ms);
}

// "  peak memory 12.50 MiB; at that moment (MiB): parameters 1.00, ..." (Note [Memory at the peak]).
// "  TITLE 12.34 MiB; at that moment (MiB): parameters 1.00, ..." for memory at one moment.
void append_memory(const char* title, const MemoryAtPeak& peak, std::string& out) {
  out += format("  %s %.2f MiB", title, mib(peak.total_bytes));
  if (peak.categories.empty()) {
    out += " (allocator total; no categories sampled)\n";
    return;
  }
  out += "; at that moment (MiB):";
  for (size_t i = 0; i < peak.categories.size(); ++i) {
    const std::string category(to_string(peak.categories[i].category));
    out += format("%s %s %.2f", i ? "," : "", category.c_str(), mib(peak.categories[i].bytes));
  }
  out += "\n";
}

void append_peak(const char* title, const MemoryAtPeak& peak, std::string& out) {
  if (!peak.found()) {
    out += format("  %s: no memory samples\n", title);
    return;
  }
  append_memory(title, peak, out);
}

// The per-iteration table, its long middle cut, and the step summary.
void append_iterations(const RankStats& r, std::string& out) {
  if (r.iterations.empty()) return;
  out += format("  %5s %10s %10s %6s", "iter", "step_ms", "loss", "hooks");
  for (const char* op : {"allreduce", "broadcast", "allgather", "red_scat", "barrier"}) {
    out += format(" %9s", op);
  }
  const bool imported_ops = has_imported_ops(r);
  if (imported_ops) out += format(" %9s %9s", "alltoall", "send_recv");
  out += format(" %10s %10s %10s\n", "compute_ms", "comm_ms", "exposed_ms");
  const size_t n = r.iterations.size();
  for (size_t i = 0; i < n; ++i) {
    if (n > kIterationsShown && i == kIterationsShown / 2) {
      out += format("  ... %zu more iterations (dpscope stats --json lists every one)\n",
                    n - kIterationsShown);
      i = n - kIterationsShown / 2;
    }
    append_iteration(r.iterations[i], imported_ops, out);
  }
  append_step_summary(r, out);
}

// HTA's breakdown of a rank with GPU kernels (Note [GPU breakdown]).
void append_gpu(const GpuBreakdown& g, std::string& out) {
  out += format("  GPU (HTA's breakdown, %lld kernels): kernel span %.3f ms: idle %.2f%%, compute %.2f%%, "
                "non-compute %.2f%%; ",
                static_cast<long long>(g.kernels), g.kernel_span_ms, g.idle_pct, g.compute_pct,
                g.non_compute_pct);
  out += g.comm_overlap_pct
             ? format("communication overlapped by compute %.2f%% (of %.3f ms; exposed on the GPU %.3f ms)\n",
                      *g.comm_overlap_pct, g.comm_ms, g.exposed_comm_ms)
             : std::string("no communication kernels, so no comm/compute overlap\n");
}

void append_rank(const RunStats& stats, const RankStats& r, std::string& out) {
  out += format("\nrank %d%s:\n", r.rank, r.complete() ? "" : " (incomplete, see WARNING above)");
  append_iterations(r, out);
  if (r.compute_phases == 0 && r.compute_source == RankStats::ComputeSource::Phases) {
    out += "  no forward, backward or optimizer_step phases recorded: compute, overlap and exposed "
           "comm below are unknown, not zero\n";
  }
  if (r.collectives.empty()) out += "  no collectives recorded\n";
  if (r.gpu) append_gpu(*r.gpu, out);
  const OverlapStats& o = r.overlap;
  const bool on_gpu = r.compute_source == RankStats::ComputeSource::GpuKernels;
  out += format("  overlap%s: compute %.3f ms, comm %.3f ms, hidden %.3f ms, exposed comm %.3f ms",
                on_gpu ? " on the GPU (its compute and communication kernels, every step)" : "",
                o.compute_ms, o.comm_ms, o.overlap_ms, o.exposed_comm_ms);
  if (o.comm_ms > 0) out += format(" (%.1f%% of comm)", 100.0 * o.exposed_comm_ms / o.comm_ms);
  out += format("; %zu collectives\n", r.collectives.size());
  if (r.wait_ms + r.transfer_ms > 0) {
    out += format("  in its collectives: waiting for the last rank to arrive %.3f ms, transferring %.3f ms",
                  r.wait_ms, r.transfer_ms);
    // An imported run may hold a few of its job's ranks: the last of those, not of the job.
    if (stats.world_size > int32_t(stats.ranks.size())) {
      out += format(" (the last of the %zu of %d ranks in this file)", stats.ranks.size(), stats.world_size);
    }
    if (r.clock_uncertainty_ns > 0) {
      out += format(" (clock aligned to rank 0 within %.3f ms)", double(r.clock_uncertainty_ns) / 1e6);
    }
    out += "\n";
  }
  if (!r.buckets.empty()) {
    out += "  per bucket:";
    for (const BucketExposure& b : r.buckets) {
      out += format(" b%d %lld x %.3f ms, exposed %.3f ms;", b.bucket,
                    static_cast<long long>(b.collectives),
                    b.collectives ? b.comm_ms / double(b.collectives) : 0.0, b.exposed_comm_ms);
    }
    out.back() = '\n';
  }
  if (r.ddp) {
    const DdpTimings& d = *r.ddp;
    out += format("  ddp logging (avg over %d iterations): forward compute %.3f ms, backward "
                  "compute %.3f ms, backward comm %.3f ms, compute/comm overlap %.3f ms\n",
                  d.iterations, d.forward_compute_ms, d.backward_compute_ms, d.backward_comm_ms,
                  d.backward_compute_comm_overlap_ms);
  }
  append_peak("peak memory", r.memory_peak, out);
  if (r.step_memory_peak.found() && r.step_memory_peak.ts_ns != r.memory_peak.ts_ns) {
    append_peak("peak in the steps", r.step_memory_peak, out);
  }
  if (r.memory_after_steps.found()) append_memory("memory after the steps", r.memory_after_steps, out);
  if (r.sampled_gpu_memory()) {
    // Ownership splits cuda_allocated itself; tracking counts the host's memory (docs/gpu.md).
    const bool gpu_categories = stats.memory_accounting == trace::MemoryAccounting::Ownership;
    out += format("  GPU memory (CUDA caching allocator): largest cuda_allocated %.2f MiB, "
                  "cuda_reserved %.2f MiB; %s (docs/gpu.md)\n",
                  mib(r.largest(trace::MemoryCategory::CudaAllocated)),
                  mib(r.largest(trace::MemoryCategory::CudaReserved)),
                  gpu_categories ? "the memory above is the GPU's, by ownership"
                                 : "the memory above is the host's only");
  }
}

}  // namespace

nlohmann::ordered_json clock_json(const ClockLabel& clock) {
  using ordered_json = nlohmann::ordered_json;
  const bool cluster = clock.clock == Clock::Cluster;
  return ordered_json{{"name", std::string(to_string(clock.clock))},
                      {"link_gbps", cluster ? ordered_json(clock.link_gbps) : ordered_json(nullptr)},
                      {"link_latency_us", cluster ? ordered_json(clock.link_latency_us) : ordered_json(nullptr)},
                      {"compute", cluster ? ordered_json(std::string(to_string(clock.compute))) : ordered_json(nullptr)}};
}

std::string stats_json(const RunStats& stats) {
  ordered_json params = ordered_json::array();
  for (size_t i = 0; i < stats.params.size(); ++i) {
    const trace::ParamInfo& p = stats.params[i];
    params.push_back(ordered_json{{"index", p.index},
                                  {"name", p.name},
                                  {"shape", p.shape},
                                  {"numel", p.numel},
                                  {"dtype", std::string(to_string(p.dtype))},
                                  {"bucket", int_or_null(p.bucket, trace::kNone)},
                                  {"rebuilt_bucket", int_or_null(p.rebuilt_bucket, trace::kNone)},
                                  {"unit", int_or_null(p.unit, trace::kNone)}});
    if (i < stats.param_rows.size() && !stats.param_rows[i].empty()) params.back()["rows"] = rows_json(stats.param_rows[i]);
  }
  ordered_json buckets = ordered_json::array();
  for (const trace::BucketInfo& b : stats.buckets) {
    // A bucket read from a profiler trace without sizes has none (Note [DDP's buckets from
    // PyTorch's records]): its bytes are unknown, not 0.
    const bool size_unknown = b.numel == 0 && b.params.empty();
    buckets.push_back(ordered_json{{"generation", b.generation},
                                   {"index", b.index},
                                   {"bytes", size_unknown ? ordered_json(nullptr) : ordered_json(b.bytes)},
                                   {"params", b.params}});
  }
  ordered_json units = ordered_json::array();
  for (const UnitStats& u : stats.units) {
    units.push_back(ordered_json{{"index", u.unit.index},
                                 {"name", u.unit.name},
                                 {"numel", u.unit.numel},
                                 {"padded_numel", u.unit.padded_numel},
                                 {"shard_numel", u.unit.shard_numel},
                                 {"params", u.params}});
  }
  const ordered_json root{{"schema_version", stats.schema_version},
                          {"clock", clock_json(stats.clock)},
                          {"run",
                           ordered_json{{"strategy", stats.strategy_recorded},
                                        {"backend", stats.backend},
                                        {"world_size", stats.world_size},
                                        {"iterations", stats.iterations},
                                        {"model", stats.model},
                                        {"link", link_json(stats)},
                                        {"alignment", trace::to_string(stats.alignment)},
                                        {"memory_accounting", trace::to_string(stats.memory_accounting)}}},
                          {"params", std::move(params)},
                          {"buckets", std::move(buckets)},
                          {"units", std::move(units)},
                          {"collective_matching", matching_json(stats)},
                          {"groups", groups_json(stats)},
                          {"stragglers", stragglers_json(stats)},
                          {"ranks", ordered_json::array()}};
  // Ranks are dumped one at a time into the root's empty "ranks" array: the whole tree of a
  // long run would take several times the memory of its text. Names come from the traced
  // program; a stray invalid UTF-8 byte must not abort the output.
  const auto dump = [](const ordered_json& j) {
    return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  };
  std::string text = dump(root);
  text.resize(text.size() - 2);  // "]}" of the empty ranks array and of the root
  for (size_t i = 0; i < stats.ranks.size(); ++i) {
    if (i) text += ',';
    text += dump(rank_json(stats.ranks[i], stats.origin_ns));
  }
  text += "]}";
  return text;
}

// How an imported run's ranks were put on one clock (nothing for dpscope's own runs, whose ranks
// meet at rendezvous): each rank's offset and uncertainty, or why they kept their own clocks.
void append_alignment(const RunStats& stats, std::string& out) {
  if (stats.alignment == trace::ClockAlignment::Rendezvous) return;
  if (stats.alignment == trace::ClockAlignment::None) {
    out += "ranks' clocks: as each profiler recorded them (alignment none)";
    out += stats.alignment_note.empty() ? "\n" : ": " + stats.alignment_note + "\n";
    return;
  }
  out += "ranks' clocks: aligned by collective ends (docs/kineto.md):";
  for (const RankStats& r : stats.ranks) {
    out += format(" rank %d %+.3f ms \u00b1%.3f;", r.rank, double(r.clock_offset_ns) / 1e6,
                  double(r.clock_uncertainty_ns) / 1e6);
  }
  out.back() = '\n';
}

std::string stats_text(const RunStats& stats) {
  std::string out = format("%s\n", stats.path.c_str());
  out += format("run: strategy %s, backend %s, model %s, world size %d, %d iterations, %zu "
                "params, trace schema %d\n",
                or_unknown(stats.strategy_recorded).c_str(), or_unknown(stats.backend).c_str(),
                or_unknown(stats.model).c_str(), stats.world_size, stats.iterations,
                stats.params.size(), stats.schema_version);
  out += "clock: " + clock_text(stats.clock) + "\n";
  append_alignment(stats, out);
  const std::string link = link_text(stats);
  if (!link.empty()) {
    out += "link: " + link + " (collectives held to a ring model's time; not a measurement of this machine)\n";
  }
  if (stats.memory_accounting == trace::MemoryAccounting::Ownership) {
    out += "memory: by ownership (the storages the engine owns on the run's device, the rest activations; "
           "docs/gpu.md)\n";
  }
  const bool any_on_gpu = std::any_of(stats.ranks.begin(), stats.ranks.end(), [](const RankStats& r) {
    return r.compute_source == RankStats::ComputeSource::GpuKernels;
  });
  out += any_on_gpu
             ? "compute: the GPU's compute kernels; exposed comm: communication kernels during which no compute\n"
               "kernel runs (the CPU's phases enclose the kernels they launch; docs/trace-format.md, \"Figures\")\n"
             : "compute: forward, backward and optimizer phases less the time waiting for collectives; exposed comm:\n"
               "communication during which the rank computes nothing (docs/trace-format.md, \"Figures\")\n";
  append_warnings(stats, out);
  append_matching(stats, out);
  append_groups(stats, out);
  append_bus_bandwidth(stats, out);
  append_plans(stats, out);
  append_param_rows(stats, out);
  for (const RankStats& r : stats.ranks) append_rank(stats, r, out);
  return out;
}

}  // namespace dpscope::analysis
