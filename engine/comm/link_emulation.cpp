// EmulatedLink (link_emulation.h): the queue of collectives on one emulated link, timed by the
// ring model of core/link_model.h. See Note [Link emulation].
#include "engine/comm/link_emulation.h"

#include <algorithm>

#include "trace/recorder.h"
#include "trace/vocabulary.h"

namespace dpscope::comm {

EmulatedLink::Occupancy EmulatedLink::admit(trace::CollectiveOp op, int64_t bytes, int ranks,
                                            int64_t real_begin_ns, int64_t real_end_ns) {
  const int64_t model_ns = core::link_model_ns(op, bytes, ranks, spec_);
  std::lock_guard<std::mutex> lock(mutex_);
  Occupancy occupancy;
  occupancy.begin_ns = std::max(real_begin_ns, free_at_ns_);
  occupancy.end_ns = std::max(real_end_ns, occupancy.begin_ns + model_ns);
  free_at_ns_ = occupancy.end_ns;
  return occupancy;
}

int64_t EmulatedLink::free_at_ns() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_at_ns_;
}

void record_link(trace::Recorder& recorder, const core::LinkSpec& link) {
  recorder.set_meta(trace::meta_key::kLinkGbps, core::link_value_text(link.gbps));
  recorder.set_meta(trace::meta_key::kLinkLatencyUs, core::link_value_text(link.latency_us));
}

}  // namespace dpscope::comm
