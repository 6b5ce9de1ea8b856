// A column of int64 values kept in about half their size: what the viewer's memory series hold
// (Note [Packed memory series]). Values are appended and read by index; nothing else.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

namespace dpscope::view {

// Note [Packed memory series]
// A 10 M-event trace holds some 8 M memory samples, a time and a byte count each: 124 MB as
// plain int64 columns, the viewer's largest structure after the spans. Neighbouring values are
// close: 32 consecutive samples of a series lie within a few seconds (4.29 s in nanoseconds fits
// 32 bits) and within 4 GiB of each other. So a column is cut into blocks of 32 values; a block
// whose values span less than 2^32 is kept as its smallest value plus 32 unsigned 32-bit
// offsets, any other as 32 int64s. On that trace a sample takes 9 bytes instead of 16 (the
// 16-byte block header included), and any value is still exact. The last, unfilled block is kept
// as plain values until it fills, so appending (a --live update) never re-encodes.
class PackedColumn {
 public:
  static constexpr size_t kBlock = 32;

  size_t size() const { return blocks_.size() * kBlock + tail_size_; }
  bool empty() const { return size() == 0; }
  int64_t operator[](size_t i) const {
    const size_t b = i / kBlock;
    if (b >= blocks_.size()) return tail_[i % kBlock];
    const Block& block = blocks_[b];
    return block.wide ? wide_[block.slot * kBlock + i % kBlock]
                      : static_cast<int64_t>(static_cast<uint64_t>(block.base) +
                                             narrow_[block.slot * kBlock + i % kBlock]);
  }
  int64_t front() const { return (*this)[0]; }
  int64_t back() const { return (*this)[size() - 1]; }

  void push_back(int64_t value);
  // Room for `n` values in all, assuming they pack (the common case).
  void reserve(size_t n);
  void clear() { *this = PackedColumn(); }
  // Bytes held, capacity included (bench/ and the tests).
  size_t bytes() const;

  // Read-only iteration in index order (range-for, std::is_sorted).
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = int64_t;
    using difference_type = std::ptrdiff_t;
    using pointer = const int64_t*;
    using reference = int64_t;
    const_iterator(const PackedColumn* column, size_t index) : column_(column), index_(index) {}
    int64_t operator*() const { return (*column_)[index_]; }
    const_iterator& operator++() {
      ++index_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++index_;
      return before;
    }
    bool operator==(const const_iterator& other) const { return index_ == other.index_; }
    bool operator!=(const const_iterator& other) const { return index_ != other.index_; }

   private:
    const PackedColumn* column_;
    size_t index_;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

  bool operator==(const PackedColumn& other) const;
  bool operator!=(const PackedColumn& other) const { return !(*this == other); }

 private:
  struct Block {
    int64_t base = 0;   // a narrow block's smallest value
    uint32_t slot = 0;  // its place in narrow_ or wide_, in blocks
    bool wide = false;
  };
  void seal();  // the full tail becomes a block

  std::vector<Block> blocks_;
  std::vector<uint32_t> narrow_;  // kBlock offsets per narrow block
  std::vector<int64_t> wide_;     // kBlock values per wide block
  std::array<int64_t, kBlock> tail_{};
  size_t tail_size_ = 0;
};

}  // namespace dpscope::view
