// The labels beside a rank's memory graph (memory_labels.h): whose memory the categories count is
// the run's memory accounting on a GPU (Note [Ownership accounting] in engine/memory).
#include "viewer/memory_labels.h"

#include "trace/vocabulary.h"
#include "viewer/lod.h"

namespace dpscope::view {

MemoryGraphLabels memory_graph_labels(const Model& model, const RankData& rank,
                                      const analysis::RankStats* stats, bool steps_peak_elsewhere) {
  MemoryGraphLabels labels;
  if (!model.memory_ready()) return labels;  // See Note [Memory after the first frame]
  const bool gpu = rank.gpu_memory_peak_bytes >= 0;
  const bool gpu_categories =
      gpu && trace::parse_mode(trace::kMemoryAccountings, model.meta_value(trace::meta_key::kMemoryAccounting)) ==
                 trace::MemoryAccounting::Ownership;
  if (rank.memory_peak_bytes > 0 || gpu) {
    labels.peak = (gpu_categories ? "GPU " : gpu ? "host " : "peak ") + format_bytes(rank.memory_peak_bytes);
  }
  if (gpu_categories) {
    if (stats && stats->largest(trace::MemoryCategory::AllocatorTotal) > 0) {
      labels.second = "host " + format_bytes(stats->largest(trace::MemoryCategory::AllocatorTotal));
    }
  } else if (gpu) {
    labels.second = "GPU " + format_bytes(rank.gpu_memory_peak_bytes);
  } else if (steps_peak_elsewhere && stats && stats->step_memory_peak.found()) {
    labels.second = "steps " + format_bytes(stats->step_memory_peak.total_bytes);
  }
  return labels;
}

}  // namespace dpscope::view
