// What the critical path (analysis/critical_path_kineto.cpp) needs of a CUDA event sync record
// beyond its mark: which recorded event it waits for. The run file keeps no correlation ids, so
// the import writes the cudaEventRecord call's time and the recording stream's lane instead.
#pragma once

#include <functional>
#include <optional>

#include "formats/kineto_reader.h"
#include "formats/kineto_survey.h"
#include "trace/records.h"

namespace dpscope::formats {

// For a Kineto cuda_sync record that waits for a CUDA event (Stream Wait Event, Event Sync, with
// `wait_on_cuda_event_record_corr_id`, PyTorch 2.1 and later): sets `ev.enqueue_ns` to the begin
// of the cudaEventRecord call that recorded the event (`base_ns` + the survey's time of that
// correlation) and `ev.grp` to the lane of the stream it was recorded on (`lane_of` that stream's
// key; left kNone when the stream has no lane: no kernel ran there). Leaves every other event as
// it is. Pure.
void keep_event_sync(const KinetoEvent& e, const KinetoSurvey& survey, int64_t base_ns,
                     const std::function<std::optional<trace::LaneId>(const KinetoLaneKey&)>& lane_of,
                     trace::Event& ev);

}  // namespace dpscope::formats
