// The Reducer's backward: the post-hook on each gradient accumulator, copying a ready gradient
// into its bucket, launching buckets in order, and finalizing — waiting for every reduction and
// writing the averaged gradients back. PyTorch's reducer.cpp, step for step.
#include "engine/ddp/reducer.h"

#include <ATen/ops/mul.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <sstream>

#include "engine/ddp/reductions.h"
#include "engine/fault/fault_injection.h"
#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"
#include "trace/vocabulary.h"

namespace dpscope::ddp {

Reducer::Reducer(std::vector<at::Tensor> params, std::vector<std::string> names,
                 std::vector<bool> expect_sparse, const BucketAssignment& assignment,
                 comm::ProcessGroup& group, ReducerOptions options, trace::Recorder* recorder)
    : params_(std::move(params)),
      names_(std::move(names)),
      expect_sparse_(std::move(expect_sparse)),
      group_(group),
      options_(options),
      recorder_(recorder),
      rebuild_(dynamic_graph_find_unused() ? BucketRebuild::Never : BucketRebuild::Pending) {
  if (names_.size() != params_.size() || expect_sparse_.size() != params_.size()) {
    throw DdpError("Reducer: " + std::to_string(params_.size()) + " parameters but " +
                   std::to_string(names_.size()) + " names and " +
                   std::to_string(expect_sparse_.size()) + " sparse flags");
  }
  div_factor_ = group_.size();
  ready_this_iteration_.assign(params_.size(), 0);
  local_used_map_ = at::zeros({static_cast<int64_t>(params_.size())}, at::kInt);
  hooks_per_param_.assign(params_.size(), 0);
  if (recorder_) finalize_name_ = recorder_->name(trace::kPhaseFinalizeBackward);
  initialize_buckets(assignment.buckets, 0);
  install_hooks();
}

Reducer::~Reducer() {
  for (size_t i = 0; i < grad_accumulators_.size(); ++i) {
    grad_accumulators_[i]->del_post_hook(hook_keys_[i]);
  }
}

void Reducer::install_hooks() {
  for (size_t index = 0; index < params_.size(); ++index) {
    // The Reducer keeps the accumulator alive: a variable holds it only weakly, and a new one
    // (without our hook) would be made for the next backward otherwise.
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(params_[index]);
    const uintptr_t key = accumulator->add_post_hook(
        std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, index](const torch::autograd::variable_list& outputs,
                          const torch::autograd::variable_list& /*inputs*/) {
              autograd_hook(index);
              return outputs;
            }));
    grad_accumulators_.push_back(std::move(accumulator));
    hook_keys_.push_back(key);
  }
}

at::Tensor& Reducer::grad_of(size_t index) { return params_[index].mutable_grad(); }

void Reducer::register_comm_hook(std::unique_ptr<CommHook> hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (num_backward_ > 0) {
    throw DdpError("register_comm_hook: a communication hook can only be registered before the "
                   "first backward; register it right after constructing DistributedDataParallel");
  }
  if (comm_hook_) {
    throw DdpError("register_comm_hook: a communication hook (" +
                   std::string(comm_hook_->name()) + ") is already registered; register one only");
  }
  comm_hook_ = std::move(hook);
}

void Reducer::set_iteration(int32_t iteration) {
  std::lock_guard<std::mutex> lock(mutex_);
  iteration_ = iteration;
}

void Reducer::prepare_for_backward(const std::vector<at::Tensor>& outputs) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++num_backward_;
  enter(BackwardPhase::Prepared);
  ready_order_.clear();
  reset_bucket_counting();
  std::fill(ready_this_iteration_.begin(), ready_this_iteration_.end(), 0);
  div_factor_ = group_.size();
  if (dynamic_graph_find_unused()) {
    unused_parameters_.clear();
    search_unused_parameters(outputs);
  }
}

void Reducer::autograd_hook(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!expects_hooks()) return;  // backward without a synced forward (no_sync)
  fault::reached("backward");  // See Note [Fault points]
  const int64_t begin_ns = trace::now_ns();
  ready_order_.push_back(static_cast<int64_t>(index));
  if (reduces_used_map() && grad_of(index).defined()) {
    local_used_map_.data_ptr<int32_t>()[index] = 1;
  }
  if (static_graph_first_iteration()) {
    // The first iteration of a static graph only counts hooks; everything is reduced at once
    // after backward (delay_all_reduce), and the counts say when a parameter is ready later.
    ++hooks_per_param_[index];
    if (phase_ == BackwardPhase::Prepared) {
      enter(BackwardPhase::CountingHooks);
      torch::autograd::Engine::get_default_engine().queue_callback([this] { delay_all_reduce(); });
    }
    return;
  }
  if (phase_ == BackwardPhase::Prepared) {
    for (const int64_t unused : unused_parameters_) mark_variable_ready(unused);
  }
  if (static_graph_after_first_iteration()) {
    if (hooks_pending_this_iteration_[index] <= 0) {
      throw DdpError("static_graph: parameter " + std::to_string(index) + " (" + names_[index] +
                     ") got more gradient hooks than in the first iteration; the graph is not "
                     "static — construct DDP without static_graph");
    }
    if (--hooks_pending_this_iteration_[index] > 0) return;
  }
  if (should_rebuild_buckets()) rebuilt_param_indices_.push_back(static_cast<int64_t>(index));
  mark_variable_ready(index);
  const Locator& where = locators_[index];
  if (recorder_ && recorder_->enabled(trace::TraceLevel::Full)) {
    recorder_->hook(0, begin_ns, trace::stamp_now(), iteration_, static_cast<int32_t>(index),
                    static_cast<int32_t>(where.bucket), buckets_[where.bucket].filled_bytes);
  }
}

void Reducer::mark_variable_ready(size_t index) {
  put_gradient_in_bucket(index);
  const Locator& where = locators_[index];
  Bucket& bucket = buckets_[where.bucket];
  if (!bucket.sparse) {
    bucket.filled_bytes += bucket.lengths[where.slot] * bucket.gradients.element_size();
  }
  if (--bucket.pending == 0) mark_bucket_ready(where.bucket);
  if (next_bucket_ == buckets_.size()) queue_finalize();
}

void Reducer::put_gradient_in_bucket(size_t index) {
  if (ready_this_iteration_[index]) {
    throw DdpError(
        "Expected to mark a variable ready only once. Parameter " + std::to_string(index) + " (" +
        names_[index] + ") was marked ready twice in one backward: it is used more than once in "
        "a reentrant backward (e.g. activation checkpointing) or shared between modules. Construct "
        "DDP with static_graph=true if the set of used parameters does not change between "
        "iterations, or stop sharing it");
  }
  ready_this_iteration_[index] = 1;
  if (phase_ == BackwardPhase::Prepared || phase_ == BackwardPhase::CountingHooks) {
    enter(BackwardPhase::Reducing);
  }
  if (expect_sparse_[index]) {
    mark_variable_ready_sparse(index);
  } else {
    mark_variable_ready_dense(index);
  }
}

void Reducer::mark_variable_ready_dense(size_t index) {
  const Locator& where = locators_[index];
  Bucket& bucket = buckets_[where.bucket];
  at::Tensor& view = bucket.views_in[where.slot];
  at::Tensor& grad = grad_of(index);
  if (!grad.defined()) {
    // No gradient this iteration (an unused parameter): it contributes zeros, and its .grad is
    // left alone unless some other rank used it (finalize_bucket_dense).
    view.zero_();
    return;
  }
  if (grad.sizes() != view.sizes()) {
    std::ostringstream message;
    message << "DDP: parameter " << index << " (" << names_[index] << ") got a gradient of shape "
            << grad.sizes() << " but the parameter has shape " << view.sizes()
            << "; the gradient must have the parameter's shape";
    throw DdpError(message.str());
  }
  if (!grad.is_alias_of(view)) {
    if (!comm_hook_) {
      // Divide while copying: one pass over the gradient (PyTorch's mul_out by 1/div_factor).
      at::mul_out(view, grad.detach(), at::scalar_tensor(1.0 / div_factor_, grad.options()));
    } else {
      view.copy_(grad);
    }
    if (options_.gradient_as_bucket_view) grad = view;
  } else if (!comm_hook_) {
    view.div_(div_factor_);
  }
}

void Reducer::mark_variable_ready_sparse(size_t index) {
  Bucket& bucket = buckets_[locators_[index].bucket];
  at::Tensor& grad = grad_of(index);
  if (!grad.defined() || !grad.is_sparse()) {
    throw DdpError("DDP: parameter " + std::to_string(index) + " (" + names_[index] +
                   ") expects a sparse gradient but got " +
                   (grad.defined() ? "a dense one" : "none") +
                   "; build its embedding with sparse gradients on every rank, or without on all");
  }
  bucket.sparse_gradient = grad;
  if (!comm_hook_) bucket.sparse_gradient.div_(div_factor_);
}

void Reducer::mark_bucket_ready(size_t bucket_index) {
  if (recorder_) {
    recorder_->bucket_event(trace::EventKind::BucketReady, 0, trace::now_ns(), iteration_,
                            static_cast<int32_t>(bucket_index));
  }
  // See Note [Bucket order]: launch only when every earlier bucket was launched.
  if (bucket_index > next_bucket_) return;
  for (; next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0; ++next_bucket_) {
    all_reduce_bucket(next_bucket_);
  }
}

void Reducer::all_reduce_bucket(size_t bucket_index) {
  Bucket& bucket = buckets_[bucket_index];
  const comm::CollectiveTag tag = collective_tag(iteration_, static_cast<int32_t>(bucket_index));
  if (recorder_) {
    recorder_->bucket_event(trace::EventKind::BucketLaunch, 0, trace::now_ns(), iteration_,
                            static_cast<int32_t>(bucket_index), group_.next_seq());
  }
  if (bucket.sparse) {
    // A hook would divide; the sparse path always runs the built-in reduction (PyTorch hands
    // sparse buckets to hooks, which then all-reduce them the same way).
    bucket.reduction = launch_sparse_all_reduce(group_, bucket.sparse_gradient,
                                                comm_hook_ ? group_.size() : 1.0, tag);
    return;
  }
  if (!comm_hook_) {
    bucket.reduction = launch_sum_all_reduce(group_, bucket.gradients, tag);
    return;
  }
  bucket.hook_bucket = hook_bucket(bucket_index, bucket.gradients, bucket.views_in);
  bucket.reduction = comm_hook_->launch(group_, bucket.hook_bucket);
}

GradBucket Reducer::hook_bucket(size_t bucket_index, at::Tensor buffer,
                                std::vector<at::Tensor> gradients) const {
  const Bucket& bucket = buckets_[bucket_index];
  GradBucket hook_bucket;
  hook_bucket.index = static_cast<int32_t>(bucket_index);
  hook_bucket.buffer = std::move(buffer);
  hook_bucket.gradients = std::move(gradients);
  hook_bucket.params.assign(bucket.variables.begin(), bucket.variables.end());
  hook_bucket.is_last = bucket_index + 1 == buckets_.size();
  hook_bucket.iteration = iteration_;
  hook_bucket.tag = collective_tag(iteration_, static_cast<int32_t>(bucket_index));
  return hook_bucket;
}

void Reducer::queue_finalize() {
  if (phase_ == BackwardPhase::FinalizeQueued) return;
  enter(BackwardPhase::FinalizeQueued);
  if (dynamic_graph_find_unused()) all_reduce_local_used_map();
  torch::autograd::Engine::get_default_engine().queue_callback([this] {
    std::lock_guard<std::mutex> lock(mutex_);
    if (static_graph_after_first_iteration() && should_rebuild_buckets()) {
      for (const int64_t unused : unused_parameters_) rebuilt_param_indices_.push_back(unused);
    }
    finalize_backward();
  });
}

void Reducer::delay_all_reduce() {
  std::lock_guard<std::mutex> lock(mutex_);
  all_reduce_local_used_map();
  unused_parameters_.clear();
  for (size_t index = 0; index < params_.size(); ++index) {
    if (hooks_per_param_[index] == 0) unused_parameters_.push_back(static_cast<int64_t>(index));
    put_gradient_in_bucket(index);
  }
  for (next_bucket_ = 0; next_bucket_ < buckets_.size(); ++next_bucket_) {
    buckets_[next_bucket_].pending = 0;
    all_reduce_bucket(next_bucket_);
  }
  finalize_backward();
}

void Reducer::finalize_backward() {
  const trace::Stamp begin = trace::stamp_for(recorder_, trace::TraceLevel::Summary);
  enter(BackwardPhase::Idle);
  for (size_t index = 0; index < buckets_.size(); ++index) {
    Bucket& bucket = buckets_[index];
    bucket.reduction->wait();
    bucket.reduction.reset();
    if (!bucket.sparse) {
      finalize_bucket_dense(bucket);
      if (!options_.gradient_as_bucket_view) {
        for (const int64_t variable : bucket.variables) {
          memory::count_as(grad_of(variable), memory::MemoryCategory::Gradients);
        }
      }
    }
    bucket.sparse_gradient = at::Tensor();
    if (recorder_) {
      recorder_->bucket_event(trace::EventKind::BucketDone, 0, trace::now_ns(), iteration_,
                              static_cast<int32_t>(index));
    }
  }
  if (reduces_used_map()) {
    if (local_used_sum_) local_used_sum_->work()->wait();
    local_used_sum_.reset();
    // As PyTorch: the map starts again only where it is reduced again; a static graph keeps its
    // first iteration's for good (zeroed, every parameter would read as unused from then on).
    if (dynamic_graph_find_unused()) local_used_map_.zero_();
  }
  if (recorder_) {
    recorder_->phase(0, finalize_name_, begin,
                     trace::stamp_for(recorder_, trace::TraceLevel::Summary), iteration_);
  }
}

void Reducer::finalize_bucket_dense(Bucket& bucket) {
  for (size_t slot = 0; slot < bucket.variables.size(); ++slot) {
    const int64_t index = bucket.variables[slot];
    const bool unused = tracks_unused_parameters() && globally_unused(index);
    if (unused) continue;  // a parameter no rank used keeps its .grad untouched
    at::Tensor& grad = grad_of(index);
    const at::Tensor& view = bucket.views_in[slot];  // reduced in place
    if (!options_.gradient_as_bucket_view) {
      if (!grad.defined()) {
        // Locally unused, used elsewhere: a new gradient laid out like the parameter.
        grad = at::empty_like(params_[index], at::MemoryFormat::Preserve).copy_(view);
      } else {
        grad.copy_(view);
      }
    } else if (!grad.defined()) {
      grad = bucket.views_in[slot];
    } else if (!grad.is_alias_of(bucket.views_in[slot])) {
      throw DdpError("DDP: the gradient of parameter " + std::to_string(index) + " (" +
                     names_[index] + ") is not the bucket view expected with "
                     "gradient_as_bucket_view; something replaced param.grad during backward");
    }
  }
}

std::vector<int64_t> Reducer::last_ready_order() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ready_order_;
}

}  // namespace dpscope::ddp
