// The names of the schema's enumerations (schema.h): the one spelling of each value, as the
// lookup tables, `stats --json` and the exports write it; and the SQL made from the tables'
// descriptions.
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

std::string create_table_sql(const Table& table) {
  std::string sql = "CREATE TABLE " + std::string(table.name) + " (";
  for (const Column& column : table.columns) {
    if (column.position > 0) sql += ", ";
    sql += std::string(column.name) + " " + std::string(column.type);
  }
  if (!table.primary_key.empty()) sql += ", PRIMARY KEY (" + std::string(table.primary_key) + ")";
  return sql + ")";
}

std::string insert_into(const Table& table, OnConflict conflict) {
  std::string sql = conflict == OnConflict::Ignore    ? "INSERT OR IGNORE INTO "
                    : conflict == OnConflict::Replace ? "INSERT OR REPLACE INTO "
                                                      : "INSERT INTO ";
  std::vector<std::string> names;
  for (const Column& column : table.columns) names.emplace_back(column.name);
  return sql + std::string(table.name) + " (" + comma_separated(names) + ")";
}

std::string_view column_default(const Column& column) {
  constexpr std::string_view kDefault = " DEFAULT ";
  const size_t at = column.type.find(kDefault);
  if (at == std::string_view::npos) return {};
  return column.type.substr(at + kDefault.size());
}

std::string column_as_of(const Column& column, int version, std::string_view qualifier) {
  if (column.since <= version) return std::string(qualifier) + std::string(column.name);
  const std::string_view stand_in = column_default(column);
  return std::string(stand_in.empty() ? "NULL" : stand_in);
}

std::vector<std::string> columns_as_of(const Table& table, int version,
                                       std::string_view qualifier) {
  std::vector<std::string> columns;
  columns.reserve(table.columns.size());
  for (const Column& column : table.columns) {
    columns.push_back(column_as_of(column, version, qualifier));
  }
  return columns;
}

std::string comma_separated(const std::vector<std::string>& items) {
  std::string list;
  for (const std::string& item : items) list += (list.empty() ? "" : ", ") + item;
  return list;
}

}  // namespace dpscope::trace
