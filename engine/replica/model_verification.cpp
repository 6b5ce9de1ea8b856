// Model verification across ranks (model_verification.h): the shapes and strides of rank 0's
// parameters against each rank's own.
#include "engine/replica/model_verification.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/util/irange.h>

#include <sstream>

#include "engine/comm/host_values.h"


namespace dpscope::replica {

namespace {

// [count, then per parameter: dim, sizes..., strides...]
std::vector<int64_t> describe(const std::vector<at::Tensor>& params) {
  std::vector<int64_t> meta{static_cast<int64_t>(params.size())};
  for (const at::Tensor& param : params) {
    meta.push_back(param.dim());
    for (const int64_t size : param.sizes()) meta.push_back(size);
    for (const int64_t stride : param.strides()) meta.push_back(stride);
  }
  return meta;
}

std::string format(const std::vector<int64_t>& values) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
  return out.str();
}

// One parameter's sizes and strides in a description, starting at `at`; false when the
// description ends before it.
bool read_entry(const std::vector<int64_t>& meta, size_t& at, std::vector<int64_t>& sizes,
                std::vector<int64_t>& strides) {
  if (at >= meta.size()) return false;
  const int64_t dim = meta[at];
  if (dim < 0 || at + 1 + 2 * static_cast<size_t>(dim) > meta.size()) return false;
  sizes.assign(meta.begin() + at + 1, meta.begin() + at + 1 + dim);
  strides.assign(meta.begin() + at + 1 + dim, meta.begin() + at + 1 + 2 * dim);
  at += 1 + 2 * dim;
  return true;
}

// The first difference between this rank's description and rank 0's, or "" if none: the first
// parameter whose shape or strides differ, or else the first parameter only one of them has.
std::string first_difference(const std::vector<int64_t>& mine, const std::vector<int64_t>& root,
                             const std::vector<at::Tensor>& params,
                             const std::vector<std::string>& names, int rank) {
  const int64_t root_count = root.empty() ? -1 : root[0];
  const std::string counts = "rank " + std::to_string(rank) + " has " + std::to_string(mine[0]) +
                             " parameters that require grad, rank 0 has " +
                             (root_count < 0 ? "?" : std::to_string(root_count));
  size_t a = 1;
  size_t b = 1;
  for (size_t index = 0; index < params.size(); ++index) {
    std::vector<int64_t> sizes;
    std::vector<int64_t> strides;
    read_entry(mine, a, sizes, strides);
    std::vector<int64_t> root_sizes;
    std::vector<int64_t> root_strides;
    const bool root_has = static_cast<int64_t>(index) < root_count &&
                          read_entry(root, b, root_sizes, root_strides);
    if (!root_has) {
      return "parameter " + std::to_string(index) + " (" + names[index] + ") with shape " +
             format(sizes) + " and strides " + format(strides) + " on rank " +
             std::to_string(rank) + " has no counterpart on rank 0 (" + counts + ")";
    }
    if (sizes != root_sizes || strides != root_strides) {
      return "parameter " + std::to_string(index) + " (" + names[index] + ") has shape " +
             format(sizes) + " and strides " + format(strides) + " on rank " +
             std::to_string(rank) + " but shape " + format(root_sizes) + " and strides " +
             format(root_strides) + " on rank 0";
    }
  }
  if (root_count != mine[0]) {
    // Rank 0 has more: name its first parameter this rank lacks.
    std::vector<int64_t> root_sizes;
    std::vector<int64_t> root_strides;
    if (read_entry(root, b, root_sizes, root_strides)) {
      return "rank 0 has parameter " + std::to_string(params.size()) + " with shape " +
             format(root_sizes) + " and strides " + format(root_strides) +
             ", which rank " + std::to_string(rank) + " lacks (" + counts + ")";
    }
    return counts;
  }
  return "";
}

}  // namespace

void verify_params_across_ranks(comm::ProcessGroup& group, const std::vector<at::Tensor>& params,
                                const std::vector<std::string>& names, std::string_view wrapper) {
  const std::vector<int64_t> mine = describe(params);
  // The shapes travel on the group's device and back (Note [Collective tensors on the group's
  // device]), as PyTorch's _verify_param_shape_across_processes does.
  at::Tensor length = at::empty({1}, at::kLong);
  length.fill_(static_cast<int64_t>(mine.size()));
  length = comm::HostValues::broadcast(group, length, 0).wait();
  at::Tensor root = at::zeros({length.item<int64_t>()}, at::kLong);
  if (group.rank() == 0) {
    std::copy(mine.begin(), mine.end(), root.data_ptr<int64_t>());
  }
  root = comm::HostValues::broadcast(group, root, 0).wait();
  const std::vector<int64_t> root_meta(root.data_ptr<int64_t>(),
                                       root.data_ptr<int64_t>() + root.numel());
  const std::string difference = first_difference(mine, root_meta, params, names, group.rank());

  // Everyone learns who differs, so every rank fails together instead of some hanging in the
  // next collective.
  at::Tensor differs = at::zeros({group.size()}, at::kLong);
  if (!difference.empty()) differs.data_ptr<int64_t>()[group.rank()] = 1;
  differs = comm::HostValues::all_reduce(group, differs, comm::ReduceOp::Max).wait();
  std::string bad_ranks;
  for (int r = 0; r < group.size(); ++r) {
    if (differs.data_ptr<int64_t>()[r]) bad_ranks += (bad_ranks.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!difference.empty()) {
    throw ModelMismatchError(std::string(wrapper) + " model verification failed: " + difference +
                             ". Every rank must build the same model (same layers, sizes, order "
                             "and memory layout) before constructing " + std::string(wrapper));
  }
  if (!bad_ranks.empty()) {
    throw ModelMismatchError(std::string(wrapper) + " model verification failed on rank " +
                             std::to_string(group.rank()) + ": rank(s) " + bad_ranks +
                             " built a model that differs from rank 0's (their own error names "
                             "the parameter). Every rank must build the same model");
  }
}

}  // namespace dpscope::replica
