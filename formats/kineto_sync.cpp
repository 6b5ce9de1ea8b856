// kineto_sync.h: a CUDA event sync record's cudaEventRecord time and recording stream's lane.
#include "formats/kineto_sync.h"

#include <string>

namespace dpscope::formats {

void keep_event_sync(const KinetoEvent& e, const KinetoSurvey& survey, int64_t base_ns,
                     const std::function<std::optional<trace::LaneId>(const KinetoLaneKey&)>& lane_of,
                     trace::Event& ev) {
  const KinetoArgs& a = e.args;
  if (e.cat != "cuda_sync" || a.wait_on_event_record_correlation == kAbsent || a.wait_on_stream == kAbsent) return;
  const auto record = survey.launches.find(a.wait_on_event_record_correlation);
  if (record == survey.launches.end()) return;
  ev.enqueue_ns = base_ns + record->second.begin_ns;
  const std::string device = a.device != kAbsent ? std::to_string(a.device) : e.pid;
  const std::optional<trace::LaneId> lane = lane_of(KinetoLaneKey{true, device, std::to_string(a.wait_on_stream)});
  if (lane) ev.grp = *lane;
}

}  // namespace dpscope::formats
