// Link emulation: gives a rank the network link of a cluster (say 4 Gb/s, 50 us) on a machine
// whose ranks talk over loopback. The layer sits between every backend and the Works it finishes
// (Work::finish), so it holds Gloo's collectives now and NCCL's alike, and DDP and FSDP never
// know: see Note [Link emulation].
#pragma once

#include <cstdint>
#include <mutex>

#include "core/link_model.h"
#include "trace/schema.h"

namespace dpscope::trace {
class Recorder;
}

namespace dpscope::comm {

// Note [Link emulation]
// On two cores the ranks' own Gloo threads take the CPU from backward, so overlapping
// communication with compute gains nothing there; on a cluster the link, not the CPU, is what a
// collective waits for. With a link given (`--link-gbps G --link-latency-us L`, or
// DPSCOPE_LINK_GBPS / DPSCOPE_LINK_LATENCY_US read by comm::init_world), every collective of the
// groups that share an EmulatedLink (ProcessGroupOptions::link; init_world gives its world one)
// is run for real, moving the real bytes into the real results, and only its completion is held:
//  1. When the backend has run a collective, from real begin to real end, it calls Work::finish
//     as always. finish() admits it to the link (EmulatedLink::admit), in the order the backends
//     finish collectives, which is issue order (Note [Collective order]); collectives of every
//     group sharing the link queue behind each other, as on one NIC:
//        start_on_link = max(real begin, the previous collective's emulated end)
//        emulated end  = max(real end, start_on_link + link_model_ns(op, bytes, n, link))
//     so a collective never completes before its real one, and a queue of them takes their
//     model times one after the other even where Gloo ran two at once (Note [Gloo overlap]).
//  2. The Work is marked done with its emulated end as release time: is_completed() is false,
//     and wait() sleeps (sleep_until, no spinning: the CPU is free for compute, as it is while a
//     NIC moves the bytes), until then. Emulated ends never decrease in admission order, so
//     Works still complete in issue order.
//  3. The trace tells it as the link saw it: the collective event spans start_on_link to the
//     emulated end, and the caller's collective_wait slice ends when its wait() returned; the
//     run's meta table has link_gbps and link_latency_us (written by init_world). duration_ns()
//     is that emulated span, what a user of the layer sees; real_duration_ns() keeps the
//     backend's own begin to end.
//  4. NCCL: wait_on_stream() waits on the host for a collective on an emulated link, since a
//     stream waiting for the kernel's end event would not see the hold.
// Failed collectives are not held: the error is reported at once. Each rank times its own
// collectives; a peer that starts late delays this rank only through the real collective's end.
// What is not emulated (contention with compute for memory bandwidth, several NICs, NCCL's tree
// algorithms, congestion) is listed in docs/communication.md.

// One emulated link: the NIC every group of a rank that shares it sends through.
// Thread-safety: admit() and free_at_ns() may be called from any thread.
class EmulatedLink {
 public:
  explicit EmulatedLink(core::LinkSpec spec) : spec_(spec) {}
  EmulatedLink(const EmulatedLink&) = delete;
  EmulatedLink& operator=(const EmulatedLink&) = delete;

  const core::LinkSpec& spec() const { return spec_; }

  // When a collective occupies the link, on the trace clock (trace::now_ns).
  struct Occupancy {
    int64_t begin_ns = 0;  // start_on_link
    int64_t end_ns = 0;    // emulated end: the Work completes then
  };

  // Puts a collective that its backend ran from real_begin_ns to real_end_ns on the link, after
  // every collective admitted before it (Note [Link emulation], step 1). `bytes` is
  // Work::bytes() and `ranks` its group's size (link_model_ns).
  Occupancy admit(trace::CollectiveOp op, int64_t bytes, int ranks, int64_t real_begin_ns,
                  int64_t real_end_ns);

  // The emulated end of the last collective admitted (0 before the first).
  int64_t free_at_ns() const;

 private:
  const core::LinkSpec spec_;
  mutable std::mutex mutex_;
  int64_t free_at_ns_ = 0;
};

// Writes the link into a run's meta table as link_gbps and link_latency_us (link_value_text), so
// that the trace says its collectives' times are the link's (Note [Link emulation], step 3).
// Every recorder whose run's collectives queue on the link gets it: the world's, and a run's of
// its own on further groups.
void record_link(trace::Recorder& recorder, const core::LinkSpec& link);

}  // namespace dpscope::comm
