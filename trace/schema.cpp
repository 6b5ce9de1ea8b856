// The names of the schema's enumerations (schema.h): the one spelling of each value, as the
// lookup tables, `stats --json` and the exports write it.
#include "trace/schema.h"

namespace dpscope::trace {
namespace {

constexpr std::string_view kEventKindNames[kEventKindCount] = {
    "phase", "hook", "bucket_ready", "bucket_launch", "bucket_done",
    "collective", "collective_wait", "unit_state", "mark"};
constexpr std::string_view kCollectiveOpNames[kCollectiveOpCount] = {
    "broadcast", "allreduce", "allgather", "reduce_scatter", "barrier", "alltoall", "send_recv"};
constexpr std::string_view kUnitStateNames[kUnitStateCount] = {"gathering", "full", "reducing"};
constexpr std::string_view kDTypeNames[kDTypeCount] = {
    "float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool"};
constexpr std::string_view kMemoryCategoryNames[kMemoryCategoryCount] = {
    "parameters", "gradients", "buckets", "full_parameters", "shards", "gradient_shards",
    "full_gradients", "optimizer_state", "activations", "other", "allocator_total",
    "cuda_allocated", "cuda_reserved", "data"};
constexpr std::string_view kLaneKindNames[kLaneKindCount] = {"host", "comm", "stream", "unit"};
constexpr std::string_view kTraceLevelNames[3] = {"off", "summary", "full"};

template <size_t N>
std::string_view name_of(const std::string_view (&names)[N], unsigned index) {
  return index < N ? names[index] : std::string_view("unknown");
}

}  // namespace

std::string_view to_string(EventKind v) { return name_of(kEventKindNames, unsigned(v)); }
std::string_view to_string(CollectiveOp v) { return name_of(kCollectiveOpNames, unsigned(v)); }
std::string_view to_string(UnitState v) { return name_of(kUnitStateNames, unsigned(v)); }
std::string_view to_string(DType v) { return name_of(kDTypeNames, unsigned(v)); }
std::string_view to_string(MemoryCategory v) { return name_of(kMemoryCategoryNames, unsigned(v)); }
std::string_view to_string(LaneKind v) { return name_of(kLaneKindNames, unsigned(v)); }
std::string_view to_string(TraceLevel v) { return name_of(kTraceLevelNames, unsigned(v)); }

bool parse_trace_level(std::string_view text, TraceLevel* out) {
  for (unsigned i = 0; i < 3; ++i) {
    if (text == kTraceLevelNames[i]) {
      *out = static_cast<TraceLevel>(i);
      return true;
    }
  }
  return false;
}

}  // namespace dpscope::trace
