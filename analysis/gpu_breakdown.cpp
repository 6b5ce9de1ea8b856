// The GPU breakdown (gpu_breakdown.h, Note [GPU breakdown]): HTA's kernel classes by name, its
// choice of kernels by launch time, and the spans, unions and overlap over them.
#include "analysis/gpu_breakdown.h"

#include <algorithm>
#include <limits>

#include "trace/saturate.h"
#include "trace/schema.h"

namespace dpscope::analysis {

using trace::detail::saturating_add;
using trace::detail::saturating_sub;
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

// HTA's `^nccl.*Kernel`: a name starting with nccl with Kernel somewhere after.
bool nccl_kernel(std::string_view name) {
  return starts_with(name, "nccl") && name.find("Kernel", 4) != std::string_view::npos;
}

// HTA's rounding of nanosecond timestamps to whole microseconds, in nanoseconds: a begin up, an
// end down (hta/common/trace_parser.py, after pytorch/pytorch#122425). Any int64 may come from a
// damaged file (fuzz_kineto found -INT64_MIN here), so nothing is negated or added before the
// division, and a whole microsecond past int64's range stays at the last one inside it.
constexpr int64_t kLastWholeUs = std::numeric_limits<int64_t>::max() / 1000;
int64_t whole_us_in_ns(int64_t us) { return std::clamp(us, -kLastWholeUs, kLastWholeUs) * 1000; }
int64_t ceil_us(int64_t ns) { return whole_us_in_ns(ns / 1000 + (ns % 1000 > 0 ? 1 : 0)); }
int64_t floor_us(int64_t ns) { return whole_us_in_ns(ns / 1000 - (ns % 1000 < 0 ? 1 : 0)); }

double pct(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * double(part) / double(whole) : 0.0; }

}  // namespace

KernelClass classify_kernel(std::string_view name) {
  if (starts_with(name, "nccl") || starts_with(name, "hip") || starts_with(name, "hccl") ||
      contains(name, "ncclKernel")) {
    return KernelClass::Communication;
  }
  if (starts_with(name, "Memcpy") || starts_with(name, "Memset") || starts_with(name, "dma")) {
    return KernelClass::Memory;
  }
  if (nccl_kernel(name) || contains(name, "Memcpy") || starts_with(name, "Memset") || contains(name, "Sync")) {
    return KernelClass::Other;
  }
  return KernelClass::Compute;
}

std::vector<KernelClass> classify_names(const std::vector<std::string>& names) {
  std::vector<KernelClass> classes;
  classes.reserve(names.size());
  for (const std::string& n : names) classes.push_back(classify_kernel(n));
  return classes;
}

TimeRounding rounding_for(const std::string& fractional_us_ranks, int32_t rank) {
  size_t at = 0;
  while (at < fractional_us_ranks.size()) {
    size_t comma = fractional_us_ranks.find(',', at);
    if (comma == std::string::npos) comma = fractional_us_ranks.size();
    const std::string item = fractional_us_ranks.substr(at, comma - at);
    if (item == std::to_string(rank)) return TimeRounding::WholeMicroseconds;
    at = comma + 1;
  }
  return TimeRounding::None;
}

void GpuBreakdownBuilder::add_kernel(const trace::Event& e) {
  kernels_.push_back(Kernel{e.begin_ns, e.end_ns, e.enqueue_ns, e.name});
}

void GpuBreakdownBuilder::add_iteration(const trace::Event& e) {
  ++iterations_;
  if (e.begin_ns > last_iteration_begin_ns_) {
    last_iteration_begin_ns_ = e.begin_ns;
    last_iteration_end_ns_ = e.end_ns;
  }
}

std::optional<GpuBreakdown> GpuBreakdownBuilder::finish(const std::vector<KernelClass>& classes,
                                                        TimeRounding rounding) const {
  if (kernels_.empty()) return std::nullopt;
  const bool whole_us = rounding == TimeRounding::WholeMicroseconds;
  auto up = [&](int64_t ns) { return whole_us && ns != trace::kNone64 ? ceil_us(ns) : ns; };
  auto down = [&](int64_t ns) { return whole_us ? floor_us(ns) : ns; };
  const int64_t last_begin = up(last_iteration_begin_ns_), last_end = down(last_iteration_end_ns_);
  const bool any_launch = std::any_of(kernels_.begin(), kernels_.end(),
                                      [](const Kernel& k) { return k.launch_ns != trace::kNone64; });
  auto counted = [&](const Kernel& k) {
    if (!any_launch) return true;
    if (k.launch_ns == trace::kNone64) return false;
    if (iterations_ >= 2) return up(k.launch_ns) < last_begin;
    if (iterations_ == 1) return up(k.launch_ns) <= last_end;
    return true;
  };
  std::vector<Interval> all, compute, comm;
  for (const Kernel& k : kernels_) {
    if (!counted(k)) continue;
    const Interval span{up(k.begin_ns), down(k.end_ns)};
    all.push_back(span);
    const KernelClass c = k.name >= 0 && size_t(k.name) < classes.size() ? classes[size_t(k.name)]
                                                                          : KernelClass::Other;
    if (c == KernelClass::Compute) compute.push_back(span);
    if (c == KernelClass::Communication) comm.push_back(span);
  }
  GpuBreakdown out;
  out.kernels = static_cast<int64_t>(all.size());
  const IntervalSet all_set = IntervalSet::union_of(std::move(all));
  // Kernels that end before they begin (a damaged trace) leave nothing to measure a span on.
  if (all_set.empty()) return std::nullopt;
  const IntervalSet compute_set = IntervalSet::union_of(std::move(compute));
  const IntervalSet comm_set = IntervalSet::union_of(std::move(comm));
  const int64_t span =
      saturating_sub(all_set.intervals().back().end_ns, all_set.intervals().front().begin_ns);
  const int64_t idle = saturating_sub(span, all_set.length());
  const int64_t busy_compute = compute_set.length();
  out.kernel_span_ms = double(span) / 1e6;
  out.idle_pct = pct(idle, span);
  out.compute_pct = pct(busy_compute, span);
  out.non_compute_pct = pct(saturating_sub(span, saturating_add(busy_compute, idle)), span);
  if (!comm_set.empty()) {
    const int64_t hidden = comm_set.intersection_length(compute_set);
    out.comm_overlap_pct = pct(hidden, comm_set.length());
    out.comm_ms = double(comm_set.length()) / 1e6;
    out.exposed_comm_ms = double(comm_set.length() - hidden) / 1e6;
  }
  return out;
}

}  // namespace dpscope::analysis
