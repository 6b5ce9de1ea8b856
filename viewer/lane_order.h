// The order a rank's lanes are drawn in and the names they are drawn under: dpscope's own runs'
// as recorded, a PyTorch profiler trace's GPU streams first, by role, then its CPU threads (Note
// [GPU first]). Window-free; computed once per load into RankData::drawn_lanes (model.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dpscope::view {

struct Model;
struct RankData;

// Note [GPU first]
// An imported profiler trace (formats/kineto_import.cpp, assign_lanes) puts the thread that runs
// the ProfilerSteps on lane 0, the other CPU threads after it and the GPU streams last, each a
// lane of kind Stream named "GPU d stream s". Drawn in that order, the CPU threads' deep stacks
// of ops pushed the GPU streams, the point of such a trace, under the bottom of a 1280x800
// window. A rank whose Stream lanes are all so named is drawn GPU first (arrange_lanes):
// - Each stream gets a role from what fills its busy time (the union of its spans, so that a
//   gpu_user_annotation around kernels counts once): NCCL when its collectives (NCCL kernels) fill
//   at least half of it; memcpy when memory kernels do (HTA's class by name: Memcpy, Memset, dma;
//   analysis/gpu_breakdown.h); compute otherwise. A stream with NCCL and compute kernels both is
//   what most of its time does, and its collectives are drawn and matched there all the same.
// - Per device: the busiest compute stream, then the NCCL streams (busiest first), beside it
//   because the overlap of the two is what a learner reads; then the other compute streams and
//   the memcpy streams, busiest first (ties: the import's order).
// - Each is drawn under its role: "GPU 3 compute (stream 7)", "GPU 3 NCCL (stream 20)",
//   "GPU 3 memcpy (stream 25)".
// - Then the CPU threads: lane 0 first, the others secondary, folded at first (U unfolds them:
//   App::lanes_folded). From x1.5, where a projector's text leaves room for few lanes, lane 0
//   folds with them (LanePriority::Supporting, App::folded): its dozen rows of ops would
//   otherwise keep the second rank's GPU lanes out of view even at the smallest lanes' text
//   (x1.25).
// - Such a rank is in view (the layout's ranks_visible, Note [The timeline's text size]) when its
//   GPU lanes are.
// dpscope's own runs have no stream so named (an NCCL run's comm lane is "nccl stream") and keep
// their lanes' order and names. tests/viewer/test_gpu_first.cpp reads the order on the three
// shipped GPU traces.

// What a lane shows, which decides where it is drawn and under which name.
enum class LaneRole : uint8_t {
  Recorded,          // a lane of dpscope's own run: drawn in lane order, under its own name
  GpuCompute,        // a GPU stream whose busy time is mostly compute kernels
  GpuCommunication,  // ... mostly NCCL collectives
  GpuMemory,         // ... mostly memory copies and sets
  MainThread,        // a profiler trace's lane 0: the CPU thread that runs the ProfilerSteps
  OtherThread,       // the trace's other CPU threads
};
bool is_gpu_role(LaneRole role);

// Whether and when U folds the lane (App::folded).
enum class LanePriority : uint8_t {
  Primary,     // never folded
  Supporting,  // a GPU-first rank's main thread: folded with the secondary lanes from x1.5 on
  Secondary,   // own runs: FSDP's unit lanes, every comm lane but a rank's busiest, folded from x1.5;
               // a GPU-first rank's other CPU threads, folded at any size (both: and by U)
};

// How a rank's lanes are arranged (Note [GPU first]).
enum class LaneArrangement : uint8_t { AsRecorded, GpuFirst };

// One of a rank's lanes, in drawing order.
struct DrawnLane {
  uint32_t lane = 0;  // index into RankData::lanes
  LaneRole role = LaneRole::Recorded;
  LanePriority priority = LanePriority::Primary;
  std::string label;  // what the timeline, Details, Find and the layout report call it
};

// Sets every rank's `arrangement` and `drawn_lanes` (each lane with spans, in drawing order) from
// its lanes, which must be built (build_rows), and the model's names. Called by load_model,
// update_model and derive_from_rows (load.cpp). Reads each GPU stream's spans once; O(lanes) for
// dpscope's own runs.
void arrange_lanes(Model& model);

// The name rank's lane `lane` is drawn under (its label, or its recorded name for a lane without
// spans, which is not drawn).
const std::string& lane_label(const RankData& rank, size_t lane);

}  // namespace dpscope::view
