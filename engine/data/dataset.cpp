// Dataset: the rows-of-(x, y) container every data set is returned as, and the row selection a
// training loop uses to turn a batch of sampler indices into tensors.
#include "engine/data/dataset.h"

#include <ATen/ops/from_blob.h>
#include <ATen/ops/index_select.h>

#include <stdexcept>
#include <string>

#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"

namespace dpscope::data {

Dataset Dataset::to(c10::Device device) const {
  memory::CategoryScope data(memory::MemoryCategory::Data);
  Dataset out{x.to(device), y.to(device)};
  return out.owned_as_data();
}

Dataset& Dataset::owned_as_data() {
  memory::own(x, memory::MemoryCategory::Data);
  memory::own(y, memory::MemoryCategory::Data);
  return *this;
}

Dataset Dataset::rows(const std::vector<int64_t>& indices) const {
  const int64_t n = size();
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= n) {
      throw std::out_of_range("Dataset::rows: index " + std::to_string(indices[i]) + " (at " +
                              std::to_string(i) + ") is outside the data set's " +
                              std::to_string(n) + " rows");
    }
  }
  // from_blob does not copy; index_select makes the new contiguous tensors: the batch, counted
  // as data (Note [Memory categories]).
  memory::CategoryScope data(memory::MemoryCategory::Data);
  at::Tensor index = at::from_blob(const_cast<int64_t*>(indices.data()),
                                   {static_cast<int64_t>(indices.size())}, at::kLong);
  Dataset out;
  out.x = at::index_select(x, 0, index);
  if (y.defined()) out.y = at::index_select(y, 0, index);
  return out.owned_as_data();
}

Dataset Dataset::slice(int64_t begin, int64_t end) const {
  const int64_t n = size();
  if (begin < 0 || end < begin || end > n) {
    throw std::out_of_range("Dataset::slice: [" + std::to_string(begin) + ", " +
                            std::to_string(end) + ") is not a range of the data set's " +
                            std::to_string(n) + " rows");
  }
  Dataset out;
  out.x = x.slice(0, begin, end);
  if (y.defined()) out.y = y.slice(0, begin, end);
  return out;
}

}  // namespace dpscope::data
