// The SQLite file format's table b-trees decoded for the bulk scans: the mapping, the descent
// to a rowid, the walk from leaf to leaf and the record decoder (Note [Reading pages]).
#include "trace/page_scan.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace dpscope::trace::detail {
namespace {

constexpr uint8_t kInteriorTable = 5;
constexpr uint8_t kLeafTable = 13;
constexpr size_t kReleaseBytes = size_t{8} << 20;  // released behind the scan in runs of this

uint32_t be16(const uint8_t* p) { return uint32_t(p[0]) << 8 | p[1]; }
uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// A varint at p, not reading at or past end; false when it runs past end.
bool varint(const uint8_t*& p, const uint8_t* end, uint64_t& out) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    if (p >= end) return false;
    const uint8_t byte = *p++;
    v = v << 7 | (byte & 0x7f);
    if (!(byte & 0x80)) {
      out = v;
      return true;
    }
  }
  if (p >= end) return false;
  out = v << 8 | *p++;
  return true;
}

// The bytes a value of serial type t takes in a record's body; -1 for the reserved types.
int64_t serial_size(uint64_t t) {
  static constexpr int8_t kFixed[12] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0, -1, -1};
  if (t < 12) return kFixed[t];
  return int64_t((t - 12) / 2);
}

// The integer of serial type t (1-6, 8, 9) at p; false for NULL-less types it does not read
// (reals, text, blobs). Type 0 (NULL) sets `null`.
bool integer_value(uint64_t t, const uint8_t* p, ColumnValue& out) {
  out.null = false;
  switch (t) {
    case 0: out.null = true; out.value = 0; return true;
    case 1: out.value = int8_t(p[0]); return true;
    case 2: out.value = int16_t(uint16_t(p[0] << 8 | p[1])); return true;
    case 3: out.value = int32_t((uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8)) >> 8; return true;
    case 4: out.value = int32_t(be32(p)); return true;
    case 5: out.value = int64_t(uint64_t(be16(p)) << 48 | uint64_t(be32(p + 2)) << 16) >> 16; return true;
    case 6: out.value = int64_t(uint64_t(be32(p)) << 32 | be32(p + 4)); return true;
    case 8: out.value = 0; return true;
    case 9: out.value = 1; return true;
    default: return false;
  }
}

}  // namespace

// Which output slot each record column goes to (-1: not wanted), and where the rowid goes.
struct WantedColumns {
  std::vector<int> slot_of_column;  // up to the last wanted column
  int rowid_slot = -1;
};

namespace {

// Decodes the wanted columns of one record (a header of serial types, then the body) in one
// pass over its header. False where the record is short of a wanted column, runs out of its
// bytes or holds a value other than an integer or NULL there.
bool decode_record(const uint8_t* record, size_t size, const WantedColumns& wanted, int64_t rowid,
                   ColumnValue* out) {
  const uint8_t* const end = record + size;
  const uint8_t* p = record;
  uint64_t header_size = 0;
  if (p < end && *p < 0x80) {
    header_size = *p++;
  } else if (!varint(p, end, header_size)) {
    return false;
  }
  if (header_size > size || header_size < size_t(p - record)) return false;
  const uint8_t* const header_end = record + header_size;
  const uint8_t* body = header_end;
  if (wanted.rowid_slot >= 0) out[wanted.rowid_slot] = ColumnValue{rowid, false};
  const int* slot = wanted.slot_of_column.data();
  const size_t columns = wanted.slot_of_column.size();
  for (size_t column = 0; column < columns; ++column) {
    if (p >= header_end) return false;
    uint64_t type = *p;
    if (type < 0x80) {
      ++p;
    } else if (!varint(p, header_end, type)) {
      return false;
    }
    const int64_t bytes = serial_size(type);
    if (bytes < 0 || bytes > end - body) return false;
    if (slot[column] >= 0 && !integer_value(type, body, out[slot[column]])) return false;
    body += bytes;
  }
  return true;
}

// The columns a scan wants, slot by record column.
WantedColumns wanted_columns(const std::vector<int>& columns) {
  WantedColumns wanted;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] < 0) {
      wanted.rowid_slot = int(i);
      continue;
    }
    if (size_t(columns[i]) >= wanted.slot_of_column.size()) wanted.slot_of_column.resize(size_t(columns[i]) + 1, -1);
    wanted.slot_of_column[size_t(columns[i])] = int(i);
  }
  return wanted;
}

}  // namespace


std::unique_ptr<PageFile> PageFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat info;
  void* mapped = MAP_FAILED;
  if (::fstat(fd, &info) == 0 && info.st_size >= 512) {
    mapped = ::mmap(nullptr, size_t(info.st_size), PROT_READ, MAP_SHARED, fd, 0);
  }
  ::close(fd);
  if (mapped == MAP_FAILED) return nullptr;
  std::unique_ptr<PageFile> file(new PageFile());
  file->base_ = static_cast<const uint8_t*>(mapped);
  file->size_ = size_t(info.st_size);
  const uint8_t* header = file->base_;
  const uint32_t page_size = be16(header + 16) == 1 ? 65536 : be16(header + 16);
  const bool power_of_two = page_size >= 512 && page_size <= 65536 && (page_size & (page_size - 1)) == 0;
  if (std::memcmp(header, "SQLite format 3", 16) != 0 || !power_of_two || be32(header + 56) > 1 ||
      page_size <= header[20] || page_size - header[20] < 480) {
    return nullptr;  // text other than UTF-8 (56), a page size or reserve SQLite does not write
  }
  file->page_size_ = page_size;
  file->usable_ = page_size - header[20];
  file->page_count_ = uint32_t(std::min<uint64_t>(file->size_ / page_size, UINT32_MAX));
  return file;
}

PageFile::~PageFile() {
  if (base_) ::munmap(const_cast<uint8_t*>(base_), size_);
}

const uint8_t* PageFile::page(uint32_t number) const {
  if (number == 0 || number > page_count_) return nullptr;
  return base_ + size_t(number - 1) * page_size_;
}

void PageFile::release_behind(uint32_t leaf) {
  const bool adjacent = held_first_ != 0 && leaf == held_last_ + 1;
  if (adjacent && size_t(leaf - held_first_) * page_size_ < kReleaseBytes) {
    held_last_ = leaf;
    return;
  }
  if (held_first_ != 0) {
    static const size_t kOsPage = size_t(::sysconf(_SC_PAGESIZE));
    const uintptr_t from = uintptr_t(page(held_first_)) & ~(kOsPage - 1);
    const uintptr_t to = uintptr_t(page(held_last_)) + page_size_;
    ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
  }
  held_first_ = held_last_ = leaf;
}

// Where a scan stands in the b-tree: the interior pages above its leaf, each with the child
// being visited (a cell index; `cells` is the rightmost pointer), and the leaf.
struct PageFile::Walk {
  struct Level {
    const uint8_t* header = nullptr;
    uint32_t cells = 0;
    uint32_t child = 0;
  };
  static constexpr int kMaxDepth = 40;  // SQLite's own b-trees stay below 20 levels
  Level path[kMaxDepth];
  int depth = 0;
  uint64_t pages_visited = 0;  // bounds a walk through a damaged file's cycles
  uint32_t leaf_number = 0;
  const uint8_t* leaf = nullptr;  // the leaf's b-tree header
};

bool PageFile::descend(Walk& walk, uint32_t number, bool seeking, int64_t first) const {
  for (;;) {
    const uint8_t* start = page(number);
    if (!start || ++walk.pages_visited > page_count_ || walk.depth >= Walk::kMaxDepth) return false;
    const uint8_t* header = start + (number == 1 ? 100 : 0);
    if (header[0] == kLeafTable) {
      walk.leaf_number = number;
      walk.leaf = header;
      return true;
    }
    if (header[0] != kInteriorTable) return false;
    const uint32_t cells = be16(header + 3);
    if (uint32_t(header - start) + 12 + 2 * cells > usable_) return false;
    uint32_t child = 0;
    if (seeking) {
      // The first cell whose key (the largest rowid of its left child) is >= first.
      uint32_t lo = 0, hi = cells;
      while (lo < hi) {
        const uint32_t mid = (lo + hi) / 2;
        const uint32_t offset = be16(header + 12 + 2 * mid);
        if (offset + 5 > usable_) return false;
        const uint8_t* p = start + offset + 4;
        uint64_t key = 0;
        if (!varint(p, start + usable_, key)) return false;
        if (int64_t(key) < first) lo = mid + 1; else hi = mid;
      }
      child = lo;
    }
    walk.path[walk.depth++] = Walk::Level{header, cells, child};
    if (!child_page(header, cells, child, number)) return false;
  }
}

bool PageFile::child_page(const uint8_t* header, uint32_t cells, uint32_t child, uint32_t& number) const {
  if (child == cells) {
    number = be32(header + 8);
    return true;
  }
  const uint8_t* start = header - (header == base_ + 100 ? 100 : 0);
  const uint32_t offset = be16(header + 12 + 2 * child);
  if (offset + 4 > usable_) return false;
  number = be32(start + offset);
  return true;
}

PageFile::LeafEnd PageFile::read_leaf(const Walk& walk, int64_t first, int64_t last, const WantedColumns& wanted,
                                      ColumnValue* values, RowFn row, void* context,
                                      PageScanResult& result) {
  // The payload a table leaf cell keeps on its page (the rest is on overflow pages).
  const uint32_t max_local = usable_ - 35;
  const uint32_t min_local = (usable_ - 12) * 32 / 255 - 23;
  const uint8_t* leaf = walk.leaf;
  const uint8_t* start = page(walk.leaf_number);
  const uint8_t* const page_end = start + usable_;
  const uint32_t cells = be16(leaf + 3);
  if (uint32_t(leaf - start) + 8 + 2 * cells > usable_) return LeafEnd::Unreadable;
  ++pages_read_;
  release_behind(walk.leaf_number);
  for (uint32_t c = 0; c < cells; ++c) {
    const uint32_t offset = be16(leaf + 8 + 2 * c);
    if (offset >= usable_) return LeafEnd::Unreadable;
    const uint8_t* p = start + offset;
    uint64_t payload = 0, key = 0;
    if (!varint(p, page_end, payload) || !varint(p, page_end, key)) return LeafEnd::Unreadable;
    const int64_t rowid = int64_t(key);
    if (rowid < first) continue;
    if (rowid > last) return LeafEnd::PastLast;
    const uint8_t* record = p;
    if (payload > max_local) {
      // Spills onto overflow pages: the local part, then a chain of pages, each a 4-byte link
      // and usable - 4 bytes of the record.
      const uint32_t surplus = min_local + uint32_t((payload - min_local) % (usable_ - 4));
      const uint32_t local = surplus <= max_local ? surplus : min_local;
      if (p + local + 4 > page_end || payload > (uint64_t{1} << 30)) return LeafEnd::Unreadable;
      overflow_.assign(p, p + local);
      uint32_t next = be32(p + local);
      uint64_t chain = 0;
      while (overflow_.size() < payload) {
        const uint8_t* spill = page(next);
        if (!spill || ++chain > page_count_) return LeafEnd::Unreadable;
        const size_t take = std::min<size_t>(usable_ - 4, payload - overflow_.size());
        overflow_.insert(overflow_.end(), spill + 4, spill + 4 + take);
        next = be32(spill);
      }
      record = overflow_.data();
    } else if (p + payload > page_end) {
      return LeafEnd::Unreadable;
    }
    if (!decode_record(record, size_t(payload), wanted, rowid, values)) return LeafEnd::Unreadable;
    result.next_rowid = rowid + 1;
    if (!row(context, rowid, values)) return LeafEnd::Stopped;
  }
  return LeafEnd::More;
}

PageScanResult PageFile::scan(uint32_t root, int64_t first, int64_t last,
                              const std::vector<int>& columns, RowFn row, void* context) {
  PageScanResult result{PageScanEnd::Finished, first};
  if (first > last) return result;
  const WantedColumns wanted = wanted_columns(columns);
  std::vector<ColumnValue> values(columns.size());
  Walk walk;
  if (!descend(walk, root, true, first)) return {PageScanEnd::Unreadable, result.next_rowid};
  for (;;) {
    switch (read_leaf(walk, first, last, wanted, values.data(), row, context, result)) {
      case LeafEnd::More: break;
      case LeafEnd::PastLast: return result;
      case LeafEnd::Stopped: return {PageScanEnd::Stopped, result.next_rowid};
      case LeafEnd::Unreadable: return {PageScanEnd::Unreadable, result.next_rowid};
    }
    // The next leaf: up to the nearest level with a child left, then down its leftmost side.
    while (walk.depth > 0 && walk.path[walk.depth - 1].child >= walk.path[walk.depth - 1].cells) --walk.depth;
    if (walk.depth == 0) return result;
    Walk::Level& up = walk.path[walk.depth - 1];
    uint32_t number = 0;
    if (!child_page(up.header, up.cells, ++up.child, number) || !descend(walk, number, false, first)) {
      return {PageScanEnd::Unreadable, result.next_rowid};
    }
  }
}

}  // namespace dpscope::trace::detail
