// The Reducer's built-in bucket reductions: dense sum all-reduce and sparse all-reduce by
// all-gathering indices and values. See reductions.h.
#include "engine/ddp/reductions.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sparse_coo_tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "engine/comm/host_values.h"

namespace dpscope::ddp {

namespace {

class SumReduction final : public PendingReduction {
 public:
  explicit SumReduction(comm::WorkHandle work) : work_(std::move(work)) {}
  void wait() override { work_->wait(); }

 private:
  comm::WorkHandle work_;
};

class SparseReduction final : public PendingReduction {
 public:
  SparseReduction(comm::ProcessGroup& group, at::Tensor gradient, at::Tensor indices,
                  at::Tensor values, double divide_by, const comm::CollectiveTag& tag)
      : group_(group),
        gradient_(std::move(gradient)),
        indices_(std::move(indices)),
        values_(std::move(values)),
        divide_by_(divide_by),
        tag_(tag) {
    at::Tensor nnz = at::empty({1}, at::kLong);
    nnz.fill_(indices_.size(1));
    counts_.emplace(comm::HostValues::all_gather(group_, nnz, tag_));
  }

  void wait() override {
    const at::Tensor counts_on_host = counts_->wait();
    const int world = group_.size();
    const int64_t* counts = counts_on_host.data_ptr<int64_t>();
    const int64_t max_nnz = *std::max_element(counts, counts + world);
    const int64_t sparse_dim = indices_.size(0);
    const int64_t row_numel = dense_row_numel();

    at::Tensor indices = at::zeros({sparse_dim, max_nnz}, indices_.options());
    indices.narrow(1, 0, indices_.size(1)).copy_(indices_);
    at::Tensor values = at::zeros({max_nnz * row_numel}, values_.options());
    values.narrow(0, 0, values_.numel()).copy_(values_.reshape({-1}));
    at::Tensor all_indices = at::empty({world * sparse_dim * max_nnz}, indices_.options());
    at::Tensor all_values = at::empty({world * max_nnz * row_numel}, values_.options());
    // A collective's tensors live until its wait (Note [Who frees a collective's tensors]).
    const at::Tensor flat_indices = indices.reshape({-1});
    comm::WorkHandle indices_work = group_.all_gather(all_indices, flat_indices, tag_);
    comm::WorkHandle values_work = group_.all_gather(all_values, values, tag_);
    indices_work->wait();
    values_work->wait();

    std::vector<at::Tensor> index_parts;
    std::vector<at::Tensor> value_parts;
    std::vector<int64_t> value_shape(values_.sizes().begin(), values_.sizes().end());
    for (int r = 0; r < world; ++r) {
      index_parts.push_back(
          all_indices.narrow(0, r * sparse_dim * max_nnz, sparse_dim * max_nnz)
              .view({sparse_dim, max_nnz})
              .narrow(1, 0, counts[r]));
      value_shape[0] = counts[r];
      value_parts.push_back(
          all_values.narrow(0, r * max_nnz * row_numel, counts[r] * row_numel).view(value_shape));
    }
    at::Tensor sum = at::sparse_coo_tensor(at::cat(index_parts, 1), at::cat(value_parts, 0),
                                           gradient_.sizes(), gradient_.options())
                         .coalesce();
    if (divide_by_ != 1.0) sum.div_(divide_by_);
    gradient_.copy_(sum);
  }

 private:
  int64_t dense_row_numel() const {
    int64_t numel = 1;
    for (int64_t d = indices_.size(0); d < gradient_.dim(); ++d) numel *= gradient_.size(d);
    return numel;
  }

  comm::ProcessGroup& group_;
  at::Tensor gradient_;
  at::Tensor indices_;
  at::Tensor values_;
  double divide_by_;
  comm::CollectiveTag tag_;
  std::optional<comm::HostValues> counts_;  // every rank's number of nonzeros, in flight
};

}  // namespace

std::unique_ptr<PendingReduction> launch_sum_all_reduce(comm::ProcessGroup& group,
                                                        at::Tensor tensor,
                                                        const comm::CollectiveTag& tag) {
  return std::make_unique<SumReduction>(group.all_reduce(std::move(tensor), comm::ReduceOp::Sum, tag));
}

std::unique_ptr<PendingReduction> launch_sparse_all_reduce(comm::ProcessGroup& group,
                                                           at::Tensor gradient, double divide_by,
                                                           const comm::CollectiveTag& tag) {
  at::Tensor coalesced = gradient.coalesce();
  return std::make_unique<SparseReduction>(group, std::move(gradient),
                                           coalesced.indices().contiguous(),
                                           coalesced.values().contiguous(), divide_by, tag);
}

std::unique_ptr<PendingReduction> launch_sparse_all_reduce_zeros(comm::ProcessGroup& group,
                                                                 const at::Tensor& param,
                                                                 const comm::CollectiveTag& tag) {
  // An empty sparse tensor with the parameter's layout: no indices, no values.
  std::vector<int64_t> value_shape{0};
  for (int64_t d = 1; d < param.dim(); ++d) value_shape.push_back(param.size(d));
  at::Tensor empty = at::sparse_coo_tensor(at::empty({1, 0}, param.options().dtype(at::kLong)),
                                           at::empty(value_shape, param.options()), param.sizes());
  return launch_sparse_all_reduce(group, std::move(empty), 1.0, tag);
}

}  // namespace dpscope::ddp
