// Chrome trace event JSON export of a trace (`dpscope export --chrome`), the format Perfetto
// (ui.perfetto.dev) and chrome://tracing open: one process per rank, one thread per lane.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "trace/reader.h"

namespace dpscope::formats {

struct ChromeExportSummary {
  int64_t trace_events = 0;  // JSON events written: metadata, slices, instants, counters, flows
  int64_t bytes = 0;         // size of the written file
};

// Writes every event of `reader` to `out_path` as {"traceEvents": [...], "displayTimeUnit": "ns"},
// streamed through a buffer so memory stays small whatever the trace's size:
// - "M" metadata: process_name "rank N" per rank, thread_name per lane (Reader::lanes()), and
//   sort indices so ranks and lanes keep their order.
// - "X" slices and "i" instants (scope "t", for events with end == begin), pid = rank,
//   tid = lane, ts and dur in microseconds with nanosecond decimals, relative to the earliest
//   event or memory sample. name: the interned name, else a descriptive one ("allreduce #7",
//   "hook p3", "bucket_ready b1", "gathering u2"); cat: the event kind; args: every non-null
//   field (op and dtype by name, enqueue_ns relative like ts, flags when set, and cpu_ns: the
//   recording thread's CPU time over the span, where both CPU times were recorded).
// - "C" counters per rank: "memory" with the current bytes of every stacked category seen so far
//   (the full state at each sample time, so viewers stack them), and "memory (allocator)" with
//   the allocator's categories, which are totals and would double the stack.
// - Flows ("s" -> "f", "bp": "e", unique ids) per (rank, iteration, bucket): each hook to the
//   bucket's BucketReady, and the BucketReady to the Collective of that bucket.
// `progress` (optional) gets the fraction of events done, about every 1 %.
// Throws TraceError naming out_path if it cannot be written (the partial file is removed), or if
// out_path is the trace itself. Thread-safety: uses `reader`, which the calling thread must own.
ChromeExportSummary export_chrome(trace::Reader& reader, const std::string& out_path,
                                  const std::function<void(double)>& progress = {});

}  // namespace dpscope::formats
