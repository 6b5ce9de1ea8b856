// PackedColumn (see packed_column.h, Note [Packed memory series]): appending, sealing a full
// block as offsets or as plain values, and comparing.
#include "viewer/packed_column.h"

#include <algorithm>

namespace dpscope::view {

void PackedColumn::push_back(int64_t value) {
  tail_[tail_size_++] = value;
  if (tail_size_ == kBlock) seal();
}

void PackedColumn::seal() {
  const auto [lo, hi] = std::minmax_element(tail_.begin(), tail_.end());
  // The span as unsigned: exact for any two int64s, lo <= hi.
  const uint64_t span = static_cast<uint64_t>(*hi) - static_cast<uint64_t>(*lo);
  Block block;
  if (span <= UINT32_MAX) {
    block.base = *lo;
    block.slot = static_cast<uint32_t>(narrow_.size() / kBlock);
    for (const int64_t v : tail_) narrow_.push_back(static_cast<uint32_t>(static_cast<uint64_t>(v) - static_cast<uint64_t>(*lo)));
  } else {
    block.wide = true;
    block.slot = static_cast<uint32_t>(wide_.size() / kBlock);
    wide_.insert(wide_.end(), tail_.begin(), tail_.end());
  }
  blocks_.push_back(block);
  tail_size_ = 0;
}

void PackedColumn::reserve(size_t n) {
  blocks_.reserve(n / kBlock);
  narrow_.reserve(n / kBlock * kBlock);
}

size_t PackedColumn::bytes() const {
  return blocks_.capacity() * sizeof(Block) + narrow_.capacity() * sizeof(uint32_t) +
         wide_.capacity() * sizeof(int64_t) + sizeof(*this);
}

bool PackedColumn::operator==(const PackedColumn& other) const {
  if (size() != other.size()) return false;
  for (size_t i = 0; i < size(); ++i) {
    if ((*this)[i] != other[i]) return false;
  }
  return true;
}

}  // namespace dpscope::view
