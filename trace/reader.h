// Reader: typed, read-only queries over a trace file (a rank file or a merged run file) for the
// CLI and the viewer. Opening validates the file first: a missing file, random bytes, a foreign
// SQLite database, a truncated file and a newer schema each get one clear TraceError.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trace/records.h"
#include "trace/schema.h"

namespace dpscope::trace {

namespace detail {
class Db;
struct BulkSink;
class PageFile;
}

// How the bulk scans read rows (Note [Reading pages] in page_scan.h).
enum class BulkScanPath {
  Pages,  // decode the table's b-tree pages where that is exact, SQL for the rest (the default)
  Sql,    // every row through SQLite (what the page decoder is tested against)
};

// Thread-safety: one Reader per thread (a SQLite connection is not shared). Open several
// Readers on the same file to read from several threads; a live file may be written meanwhile.
class Reader {
 public:
  // Opens `path` read-only and validates it. Throws TraceError whose message names the file
  // and says what is wrong with it and what to do.
  explicit Reader(const std::string& path);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const { return schema_version_; }

  // ---- Run-wide tables.
  std::map<std::string, std::string> meta();
  std::string meta_value(const std::string& key, const std::string& fallback = "");
  std::vector<RankInfo> ranks();
  std::vector<LaneInfo> lanes();          // every rank's, ordered by (rank, lane)
  std::vector<std::string> names();       // indexed by NameId; "" where no name has that id
  std::vector<ParamInfo> params();        // ordered by index
  std::vector<BucketInfo> buckets();      // ordered by (generation, index), params in slot order
  std::vector<UnitInfo> units();          // ordered by index
  std::vector<UnitShard> unit_shards();   // ordered by (unit, rank)

  // ---- Events.
  int64_t event_count();
  // Earliest begin and latest end over all events; {0, 0} for a file without events.
  std::pair<int64_t, int64_t> time_range();
  // Events of one lane of one rank that overlap [t0_ns, t1_ns], ordered by begin. The first
  // call per lane scans it for its longest event (what bounds the index range); a caller that
  // knows that bound (no event of the lane lasts longer than `longest_ns`) passes it instead.
  std::vector<Event> events(int32_t rank, LaneId lane, int64_t t0_ns, int64_t t1_ns);
  std::vector<Event> events(int32_t rank, LaneId lane, int64_t t0_ns, int64_t t1_ns,
                            int64_t longest_ns);
  // Every event of `kind` (of one rank, or all when rank is kNone), ordered by (rank, begin).
  std::vector<Event> events_of_kind(EventKind kind, int32_t rank = kNone);
  // Whether some collective never completed (Note [Collective end state]): one pass over two
  // columns of the events that stops at the first, through the pages where the bulk scans read
  // them; what a hang analysis asks before it reads every collective.
  bool any_collective_not_completed();
  // Streams every event ordered by (rank, lane, begin_ns). `visit` returns false to stop.
  // `progress` (optional) is called with the fraction done, about every 1 % of the events.
  void for_each_event(const std::function<bool(const Event&)>& visit,
                      const std::function<void(double)>& progress = {});

  // ---- Bulk loading (the viewer). Rows come in storage order (events.id, memory.rowid), not
  // sorted; split a range among several Readers, each on its own thread, to read in parallel.
  // These scans read the table's pages themselves (Note [Reading pages] in page_scan.h) inside
  // a read transaction; where that is not exact (a write-ahead log in use, an older table, a
  // page the decoder does not read) they go on through SQL: the file mapped into memory
  // (PRAGMA mmap_size), one aggregate query (Note [Bulk scans] in reader.cpp). The rows are the
  // same either way. An exception thrown by `batch` ends the scan and propagates; starting a
  // scan from inside another one's `batch` on the same Reader throws.
  // Both ranges cost two b-tree lookups, not a scan.
  // The smallest and largest events.id; {0, -1} for a file without events.
  std::pair<int64_t, int64_t> event_id_range();
  // The EventSpan of every event with first_id <= id <= last_id, in id order, handed to `batch`
  // a few thousand at a time; `batch` returns false to stop.
  void scan_event_spans(int64_t first_id, int64_t last_id,
                        const std::function<bool(const EventSpan*, size_t)>& batch);
  // The smallest and largest memory.rowid; {0, -1} for a file without memory samples.
  std::pair<int64_t, int64_t> memory_rowid_range();
  // Every memory sample with first <= rowid <= last, in rowid order, in batches as above.
  void scan_memory(int64_t first_rowid, int64_t last_rowid,
                   const std::function<bool(const MemorySample*, size_t)>& batch);
  // Chooses how later bulk scans read (default Pages); Sql is for tests and benchmarks.
  void set_bulk_scan_path(BulkScanPath path) { scan_path_ = path; }
  // Leaf pages the bulk scans of this Reader decoded themselves (0: every row came through SQL).
  uint64_t pages_read() const;

  // ---- Counters.
  // Memory samples ordered by (rank, ts_ns); one rank, or all when rank is kNone.
  std::vector<MemorySample> memory(int32_t rank = kNone);
  // The same samples streamed, one at a time: what a single pass over a rank's samples uses
  // instead of holding them all (a rank of a long run has millions). `visit` returns false to
  // stop.
  void for_each_memory_sample(int32_t rank, const std::function<bool(const MemorySample&)>& visit);
  // Metrics ordered by (rank, iteration, name); one rank, or all when rank is kNone.
  std::vector<Metric> metrics(int32_t rank = kNone);

 private:
  void validate();
  void prepare_bulk_scans();  // once per connection: mmap, the scan function (Note [Bulk scans])
  int64_t max_duration(int32_t rank, LaneId lane);

  std::string path_;
  std::unique_ptr<detail::BulkSink> bulk_;  // the bulk scan in progress; made by the first scan
  std::unique_ptr<detail::Db> db_;           // declared after bulk_: closed before it is freed
  std::unique_ptr<detail::PageFile> pages_;  // the file mapped for page scans; made by the first
  BulkScanPath scan_path_ = BulkScanPath::Pages;
  int schema_version_ = 0;
  std::map<std::pair<int32_t, LaneId>, int64_t> max_duration_;
};

}  // namespace dpscope::trace
