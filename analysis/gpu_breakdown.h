// The GPU time breakdown of a rank whose trace has GPU kernels (imported PyTorch profiler traces:
// events flagged kFlagGpuKernel): Holistic Trace Analysis's temporal breakdown (idle, compute and
// non-compute time over the kernel span) and its communication/computation overlap, defined as
// HTA defines them so that the numbers agree (Note [GPU breakdown]). LibTorch-free, plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/intervals.h"
#include "trace/records.h"

namespace dpscope::analysis {

// Note [GPU breakdown]
// As HTA (hta/analyzers/breakdown_analysis.py, communication_analysis.py) computes them, on one
// rank's GPU kernels (memcpy and memset included):
// - Times in whole microseconds where the profiler wrote fractional ones (TimeRounding), as HTA's
//   parser rounds such a trace: each begin up, each end down (hta/common/trace_parser.py, for
//   pytorch/pytorch#122425's overlapping events). On nccl_data this moves idle from 77.23 % to
//   HTA's 77.78 %. The run file keeps the nanoseconds; only this figure rounds.
// - Which kernels: those whose launch (enqueue_ns, the CPU launch's time) came before the last
//   ProfilerStep (`iteration` phase) began, when there are two or more; before the only one
//   ended when there is one; all with a launch when there is none. HTA drops the last step (its
//   kernels may be cut off by the end of the recording) and kernels without a CPU launch. A trace
//   where no kernel has a launch keeps every kernel.
// - kernel span: from the first kernel's begin to the last one's end; idle: the span less the
//   union of all kernels; compute: the union of the compute kernels; non-compute: the rest.
// - Communication kernels: names matching ^nccl, ^hip, ^hccl or containing ncclKernel; memory:
//   ^Memcpy, ^Memset, ^dma; compute: any other kernel whose name neither contains Memcpy or Sync
//   nor starts with Memset or nccl...Kernel; what is left is `other`.
// - comm_overlap_pct: the time compute and communication kernels run together, over the union of
//   the communication kernels. A rank without communication kernels has none (not NaN).
enum class KernelClass : uint8_t { Compute, Communication, Memory, Other };
KernelClass classify_kernel(std::string_view name);
// The class of every name of a trace (Reader::names()), by NameId.
std::vector<KernelClass> classify_names(const std::vector<std::string>& names);

// Whether the figures round times to whole microseconds as HTA does (Note [GPU breakdown]): for a
// rank whose profiler trace had fractional-microsecond timestamps (meta `imported_us_rounding`).
enum class TimeRounding { None, WholeMicroseconds };
// The rounding of `rank` from the meta value `imported_fractional_us_ranks` ("0,3": those ranks
// round; "" or anything unreadable: none does).
TimeRounding rounding_for(const std::string& fractional_us_ranks, int32_t rank);

// Percentages of the kernel span (0..100), and the span in milliseconds.
struct GpuBreakdown {
  int64_t kernels = 0;  // the kernels counted
  double kernel_span_ms = 0;
  double idle_pct = 0;
  double compute_pct = 0;
  double non_compute_pct = 0;
  std::optional<double> comm_overlap_pct;  // empty: no communication kernels
  // The union of the communication kernels, and the part of it no compute kernel ran beside: the
  // GPU's own exposed communication (the phases' is the CPU's view: Note [Compute and exposed
  // communication]). Milliseconds; 0 without communication kernels.
  double comm_ms = 0;
  double exposed_comm_ms = 0;
};

// Gathers one rank's kernels and ProfilerSteps as the events stream by (compute_stats' pass), then
// computes its breakdown. Holds 32 bytes per kernel. Not thread-safe: one per rank and thread.
class GpuBreakdownBuilder {
 public:
  // An event flagged kFlagGpuKernel.
  void add_kernel(const trace::Event& e);
  // A Phase named `iteration` (one ProfilerStep of an imported trace).
  void add_iteration(const trace::Event& e);
  // The breakdown; empty when the rank has no GPU kernels.
  std::optional<GpuBreakdown> finish(const std::vector<KernelClass>& classes, TimeRounding rounding) const;

 private:
  struct Kernel {
    int64_t begin_ns, end_ns, launch_ns;
    trace::NameId name;
  };
  std::vector<Kernel> kernels_;
  int64_t iterations_ = 0;
  int64_t last_iteration_begin_ns_ = INT64_MIN;
  int64_t last_iteration_end_ns_ = INT64_MIN;
};

}  // namespace dpscope::analysis
