// The Reducer's buckets: allocating a plan's flat buffers and the per-parameter views into them,
// rebuilding the plan once from the order gradients arrived (rank 0's order, broadcast), and the
// bucket and parameter tables in the trace.
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <sstream>

#include "engine/comm/dtype.h"
#include "engine/comm/host_values.h"
#include "engine/ddp/reducer.h"
#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"

namespace dpscope::ddp {

void Reducer::initialize_buckets(const std::vector<std::vector<int64_t>>& plan,
                                 int32_t generation) {
  memory::CategoryScope scope(memory::MemoryCategory::Buckets);
  buckets_.clear();
  buckets_.resize(plan.size());
  locators_.assign(params_.size(), Locator{0, 0});
  std::vector<char> placed(params_.size(), 0);
  for (size_t b = 0; b < plan.size(); ++b) {
    Bucket& bucket = buckets_[b];
    bucket.variables = plan[b];
    if (bucket.variables.empty()) throw DdpError("DDP: bucket " + std::to_string(b) + " is empty");
    for (size_t slot = 0; slot < bucket.variables.size(); ++slot) {
      const int64_t index = bucket.variables[slot];
      if (index < 0 || static_cast<size_t>(index) >= params_.size() || placed[index]) {
        throw DdpError("DDP: bucket plan names parameter " + std::to_string(index) +
                       " twice or out of range; every parameter must be in exactly one bucket");
      }
      placed[index] = 1;
      locators_[index] = Locator{b, slot};
    }
    const at::Tensor& first = params_[bucket.variables.front()];
    if (expect_sparse_[bucket.variables.front()]) {
      if (bucket.variables.size() != 1) {
        throw DdpError("DDP: a parameter with sparse gradients must have a bucket of its own");
      }
      bucket.sparse = true;
      bucket.bytes = first.numel() * first.element_size();
      continue;
    }
    int64_t numel = 0;
    for (const int64_t index : bucket.variables) {
      const at::Tensor& param = params_[index];
      if (param.scalar_type() != first.scalar_type() || param.device() != first.device()) {
        std::ostringstream message;
        message << "DDP: bucket " << b << " mixes parameter " << bucket.variables.front() << " ("
                << first.scalar_type() << " on " << first.device() << ") with parameter " << index
                << " (" << param.scalar_type() << " on " << param.device()
                << "); all parameters of a bucket must share dtype and device";
        throw DdpError(message.str());
      }
      bucket.offsets.push_back(numel);
      bucket.lengths.push_back(param.numel());
      numel += param.numel();
    }
    bucket.gradients = at::empty({numel}, first.options().requires_grad(false));
    memory::own(bucket.gradients, memory::MemoryCategory::Buckets);
    bucket.bytes = numel * first.element_size();
    initialize_bucket_views(bucket);
  }
  for (size_t index = 0; index < params_.size(); ++index) {
    if (!placed[index]) {
      throw DdpError("DDP: parameter " + std::to_string(index) + " (" + names_[index] +
                     ") is in no bucket");
    }
  }
  record_plan(generation);
}

void Reducer::initialize_bucket_views(Bucket& bucket) {
  bucket.views_in.clear();
  for (size_t slot = 0; slot < bucket.variables.size(); ++slot) {
    const at::Tensor& param = params_[bucket.variables[slot]];
    const int64_t offset = bucket.offsets[slot];
    const int64_t length = bucket.lengths[slot];
    // A dense parameter's gradient will have the parameter's strides (AccumulateGrad obeys the
    // gradient layout contract), so its view does too; others get a contiguous view.
    if (param.is_non_overlapping_and_dense()) {
      bucket.views_in.push_back(bucket.gradients.as_strided(param.sizes(), param.strides(), offset));
    } else {
      bucket.views_in.push_back(bucket.gradients.narrow(0, offset, length).view(param.sizes()));
    }
    if (options_.gradient_as_bucket_view) {
      // A rebuild moves existing gradients into the new buckets; at construction gradients stay
      // undefined (a globally unused parameter keeps none).
      at::Tensor& grad = grad_of(bucket.variables[slot]);
      at::Tensor& view = bucket.views_in.back();
      if (grad.defined() && !grad.is_alias_of(view)) {
        view.copy_(grad);
        grad = view;
      }
    }
  }
}

void Reducer::reset_bucket_counting() {
  next_bucket_ = 0;
  for (Bucket& bucket : buckets_) {
    bucket.pending = bucket.variables.size();
    bucket.filled_bytes = 0;
  }
  if (static_graph_after_first_iteration()) hooks_pending_this_iteration_ = hooks_per_param_;
}

bool Reducer::rebuild_buckets() {
  ensure_prior_reduction_finished();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!should_rebuild_buckets() || rebuilt_param_indices_.empty()) return false;
  if (rebuilt_param_indices_.size() != params_.size()) {
    throw DdpError("DDP: " + std::to_string(rebuilt_param_indices_.size()) + " of " +
                   std::to_string(params_.size()) +
                   " parameters got gradients in the first iteration, so buckets cannot be "
                   "rebuilt from their order; construct DDP with find_unused_parameters");
  }
  std::vector<TensorSpec> specs;
  for (const int64_t index : rebuilt_param_indices_) {
    const at::Tensor& param = params_[index];
    specs.push_back({param.scalar_type(), param.device(), param.numel() * param.element_size()});
  }
  BucketAssignment assignment = compute_bucket_assignment_by_size(
      specs, {options_.first_bucket_bytes, options_.bucket_cap_bytes}, expect_sparse_,
      rebuilt_param_indices_);
  const auto plan = sync_bucket_indices(std::move(assignment.buckets));
  rebuild_ = BucketRebuild::Done;
  rebuilt_param_indices_.clear();
  initialize_buckets(plan, 1);
  return true;
}

std::vector<std::vector<int64_t>> Reducer::sync_bucket_indices(
    std::vector<std::vector<int64_t>> plan) {
  // One int64 tensor of a length every rank knows (each bucket holds at least one parameter):
  // [number of buckets, size of each bucket..., parameter indices..., padding].
  const int64_t count = static_cast<int64_t>(params_.size());
  at::Tensor packed = at::zeros({1 + 2 * count}, at::kLong);
  int64_t* data = packed.data_ptr<int64_t>();
  data[0] = static_cast<int64_t>(plan.size());
  int64_t position = 1 + count;
  for (size_t b = 0; b < plan.size(); ++b) {
    data[1 + b] = static_cast<int64_t>(plan[b].size());
    for (const int64_t index : plan[b]) data[position++] = index;
  }
  packed = comm::HostValues::broadcast(group_, packed, 0, collective_tag(iteration_)).wait();
  data = packed.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> synced(static_cast<size_t>(data[0]));
  position = 1 + count;
  for (size_t b = 0; b < synced.size(); ++b) {
    for (int64_t i = 0; i < data[1 + b]; ++i) synced[b].push_back(data[position++]);
  }
  return synced;
}

void Reducer::record_plan(int32_t generation) {
  if (!recorder_) return;
  std::vector<int32_t> bucket_of(params_.size(), trace::kNone);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    trace::BucketInfo info;
    info.generation = generation;
    info.index = static_cast<int32_t>(b);
    info.bytes = bucket.bytes;
    const at::Tensor& first = params_[bucket.variables.front()];
    info.numel = bucket.sparse ? first.numel() : bucket.gradients.numel();
    info.dtype = comm::to_trace_dtype(first.scalar_type());
    for (size_t slot = 0; slot < bucket.variables.size(); ++slot) {
      info.params.push_back(static_cast<int32_t>(bucket.variables[slot]));
      info.offsets.push_back(bucket.sparse ? 0 : bucket.offsets[slot]);
      bucket_of[bucket.variables[slot]] = static_cast<int32_t>(b);
    }
    recorder_->add_bucket(info);
  }
  if (generation == 0) initial_bucket_of_ = bucket_of;
  for (size_t index = 0; index < params_.size(); ++index) {
    const at::Tensor& param = params_[index];
    trace::ParamInfo info;
    info.index = static_cast<int32_t>(index);
    info.name = names_[index];
    info.shape.assign(param.sizes().begin(), param.sizes().end());
    info.numel = param.numel();
    info.dtype = comm::to_trace_dtype(param.scalar_type());
    info.requires_grad = true;
    info.sparse = expect_sparse_[index];
    info.bucket = initial_bucket_of_[index];
    info.rebuilt_bucket = generation == 1 ? bucket_of[index] : trace::kNone;
    recorder_->add_param(info);
  }
}

std::vector<Reducer::BucketView> Reducer::buckets() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<BucketView> views;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    BucketView view{static_cast<int32_t>(b), {}, bucket.offsets, 0, bucket.bytes, bucket.sparse};
    for (const int64_t index : bucket.variables) view.params.push_back(static_cast<int32_t>(index));
    view.numel = bucket.sparse ? params_[bucket.variables.front()].numel() : bucket.gradients.numel();
    views.push_back(std::move(view));
  }
  return views;
}

int64_t Reducer::bucket_bytes_total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t total = 0;
  for (const Bucket& bucket : buckets_) total += bucket.sparse ? 0 : bucket.bytes;
  return total;
}

}  // namespace dpscope::ddp
