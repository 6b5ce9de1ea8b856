// Names of the schema's enumerations and the creation of a new trace file's tables.
#include <charconv>
#include <sstream>

#include "trace/records.h"
#include "trace/schema.h"
#include "trace/writer.h"

namespace dpscope::trace {
namespace {

constexpr std::string_view kEventKindNames[kEventKindCount] = {
    "phase", "hook", "bucket_ready", "bucket_launch", "bucket_done",
    "collective", "collective_wait", "unit_state", "mark"};
constexpr std::string_view kCollectiveOpNames[kCollectiveOpCount] = {
    "broadcast", "allreduce", "allgather", "reduce_scatter", "barrier"};
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

template <size_t N>
void fill_lookup(detail::Db& db, const char* table, const std::string_view (&names)[N]) {
  detail::Statement insert(db, std::string("INSERT INTO ") + table + " (id, name) VALUES (?, ?)");
  for (size_t i = 0; i < N; ++i) {
    insert.bind_int(1, static_cast<int64_t>(i));
    insert.bind_text(2, names[i]);
    insert.run();
  }
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

void create_schema(detail::Db& db) {
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
  db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
  db.exec("BEGIN");
  for (const char* ddl : kTables) db.exec(ddl);
  fill_lookup(db, "event_kinds", kEventKindNames);
  fill_lookup(db, "collective_ops", kCollectiveOpNames);
  fill_lookup(db, "unit_states", kUnitStateNames);
  fill_lookup(db, "dtypes", kDTypeNames);
  fill_lookup(db, "memory_categories", kMemoryCategoryNames);
  fill_lookup(db, "lane_kinds", kLaneKindNames);
  db.exec("INSERT INTO meta (key, value) VALUES ('schema_version', '" +
          std::to_string(kSchemaVersion) + "')");
  db.exec("COMMIT");
}

std::string shape_to_json(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::vector<int64_t> shape_from_json(const std::string& text) {
  // A damaged file's shape may hold anything ("[-]", "[99999999999999999999]"): a number that
  // does not parse as an int64_t is left out rather than thrown at the reader's caller.
  std::vector<int64_t> shape;
  std::string digits;
  for (char c : text) {
    if ((c >= '0' && c <= '9') || c == '-') {
      digits += c;
    } else if (!digits.empty()) {
      int64_t value = 0;
      const char* end = digits.data() + digits.size();
      const auto result = std::from_chars(digits.data(), end, value);
      if (result.ec == std::errc() && result.ptr == end) shape.push_back(value);
      digits.clear();
    }
  }
  return shape;
}

}  // namespace dpscope::trace
