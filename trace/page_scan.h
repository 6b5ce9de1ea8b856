// PageScan: reads a rowid table's rows straight from the b-tree pages of a SQLite file, for the
// bulk scans that load a whole trace (Note [Reading pages]). Internal to trace/: the Reader
// decides when the file's pages may be read this way and falls back to SQL where they may not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dpscope::trace::detail {

// Note [Reading pages]
// A 10 M-event trace loads in about a second only if decoding its rows costs tens of
// nanoseconds; through SQLite's virtual machine a row of the events table costs about 200 ns
// (bench/README.md, "Viewer"). So the bulk scans read the table's b-tree themselves: from the
// root page (sqlite_schema.rootpage) down the interior pages to the leaf holding the first rowid
// wanted, then leaf after leaf, each cell's record decoded as the file format defines it
// (https://www.sqlite.org/fileformat2.html: varints, serial types, overflow pages). That is
// exact only while the file's pages are the database the Reader's snapshot sees, so the Reader
// (reader.cpp, page_scan and ReadSnapshot) holds a read transaction across the scan, which keeps a
// writer (rollback journal) and a checkpoint (WAL) from changing them, and reads the pages only
// when no write-ahead log holds newer ones. Anything this decoder does not expect (a page of
// another type, a pointer out of the file, a record with fewer columns than the table, a value
// that is not an integer or NULL) ends the page scan at a row boundary: the Reader goes on from
// the next rowid through SQL, which reads what SQLite can and reports what it cannot, so a
// damaged file gets SQLite's error, not this decoder's guess. The mapping's pages are released
// (MADV_DONTNEED) as the scan leaves them: a scan of the whole file never holds more than a
// few megabytes of it resident.

struct WantedColumns;  // which record columns a scan hands over, and in which order (page_scan.cpp)

// One column of a decoded row: an integer, or NULL.
struct ColumnValue {
  int64_t value = 0;
  bool null = true;
};

// Where a page scan stopped.
enum class PageScanEnd {
  Finished,    // every row up to `last` was handed over
  Stopped,     // the row callback returned false
  Unreadable,  // a page or record this decoder does not read; go on from `next_rowid` by SQL
};

struct PageScanResult {
  PageScanEnd end = PageScanEnd::Finished;
  int64_t next_rowid = 0;  // the first rowid not handed over (Unreadable: where SQL resumes)
};

// The file mapped read-only. Not thread-safe: one per Reader (each thread has its own).
class PageFile {
 public:
  // Maps `path`; null when it cannot be mapped or its header is not one this decoder reads
  // (a page size it does not know, text not UTF-8). The caller then reads through SQL.
  static std::unique_ptr<PageFile> open(const std::string& path);
  ~PageFile();
  PageFile(const PageFile&) = delete;
  PageFile& operator=(const PageFile&) = delete;

  // Calls row(context, rowid, values) for each row with first <= rowid <= last of the rowid
  // table whose root page is `root`, in rowid order; values[i] is the record's column
  // columns[i] (a position in the table's column list; -1 for the rowid itself).
  using RowFn = bool (*)(void* context, int64_t rowid, const ColumnValue* values);
  PageScanResult scan(uint32_t root, int64_t first, int64_t last, const std::vector<int>& columns,
                      RowFn row, void* context);

  uint64_t pages_read() const { return pages_read_; }  // leaf pages decoded by this file's scans

 private:
  struct Walk;  // where a scan stands in the b-tree (page_scan.cpp)
  // How the cells of one leaf ended.
  enum class LeafEnd { More, PastLast, Stopped, Unreadable };

  PageFile() = default;
  const uint8_t* page(uint32_t number) const;  // null when out of the file
  void release_behind(uint32_t leaf);          // Note [Reading pages]: MADV_DONTNEED behind the scan
  // Down from page `number` to a leaf: towards `first` when seeking, else the leftmost one.
  // False where a page is not one a table b-tree holds.
  bool descend(Walk& walk, uint32_t number, bool seeking, int64_t first) const;
  // The page number of an interior page's child (cell index; `cells` is the rightmost).
  bool child_page(const uint8_t* header, uint32_t cells, uint32_t child, uint32_t& number) const;
  // Hands over the walk's leaf's rows in [first, last]; result.next_rowid follows them.
  LeafEnd read_leaf(const Walk& walk, int64_t first, int64_t last, const WantedColumns& wanted,
                    ColumnValue* values, RowFn row, void* context, PageScanResult& result);

  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint32_t page_size_ = 0;
  uint32_t usable_ = 0;  // page size less the reserved bytes at each page's end
  uint32_t page_count_ = 0;
  uint64_t pages_read_ = 0;
  // The run of consecutive leaf pages touched since the last release.
  uint32_t held_first_ = 0, held_last_ = 0;
  std::vector<uint8_t> overflow_;  // a record spilling onto overflow pages, assembled
};

}  // namespace dpscope::trace::detail
