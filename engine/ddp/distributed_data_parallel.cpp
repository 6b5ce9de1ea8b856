// DistributedDataParallel: construction (parameters, verification, broadcast, buckets, Reducer)
// and the forward wrapper (rebuild, buffer broadcast, prepare for backward), traced.
#include "engine/ddp/distributed_data_parallel.h"

#include <c10/core/GradMode.h>
#include <torch/nn/modules/embedding.h>

#include <algorithm>
#include <unordered_set>

#include "engine/ddp/join.h"
#include "engine/fault/fault_injection.h"
#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"
#include "engine/replica/broadcast_coalesced.h"
#include "engine/replica/model_verification.h"
#include "trace/vocabulary.h"

namespace dpscope::ddp {

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module,
                                                 std::shared_ptr<comm::ProcessGroup> group,
                                                 DdpOptions options)
    : module_(std::move(module)), group_(std::move(group)), options_(options) {
  if (!module_ || !group_) {
    throw DdpError("DistributedDataParallel needs a module and a process group (got null)");
  }
  trace::Recorder* recorder = options_.recorder;
  if (recorder) forward_sync_name_ = recorder->name("ddp.sync_buffers");
  const comm::CollectiveTag construction{};  // of no iteration, bucket or unit
  collect_parameters();
  {
    trace::ScopedPhase phase(recorder, 0, "ddp.verify_model", trace::kNone);
    try {
      replica::verify_params_across_ranks(*group_, params_, names_, "DistributedDataParallel");
    } catch (const replica::ModelMismatchError& error) {
      throw DdpError(error.what());
    }
  }
  fault::reached("construction");  // See Note [Fault points]
  {
    trace::ScopedPhase phase(recorder, 0, "ddp.broadcast_state", trace::kNone);
    c10::NoGradGuard no_grad;
    std::vector<at::Tensor> state = params_;
    // Every parameter (also those that do not require grad) and buffer, as PyTorch's
    // _sync_params_and_buffers does.
    std::unordered_set<const void*> synced;
    for (const at::Tensor& param : params_) synced.insert(param.unsafeGetTensorImpl());
    for (const at::Tensor& param : module_->parameters(true)) {
      if (synced.insert(param.unsafeGetTensorImpl()).second) state.push_back(param);
    }
    for (const at::Tensor& buffer : buffers_) state.push_back(buffer);
    replica::broadcast_coalesced(*group_, state, 0, replica::kBroadcastBufferBytes, 2, construction);
  }
  // The model's state, wherever it was made: parameters in both accountings (its buffers too,
  // Note [Ownership accounting]).
  for (const at::Tensor& param : module_->parameters(true)) {
    memory::count_as(param, memory::MemoryCategory::Parameters);
  }
  for (const at::Tensor& buffer : buffers_) memory::count_as(buffer, memory::MemoryCategory::Parameters);
  trace::ScopedPhase phase(recorder, 0, "ddp.assign_buckets", trace::kNone);
  std::vector<TensorSpec> specs;
  for (const at::Tensor& param : params_) {
    specs.push_back({param.scalar_type(), param.device(), param.numel() * param.element_size()});
  }
  if (recorder) {
    recorder->set_meta(trace::meta_key::kDdpInitialBuckets, to_string(options_.initial_buckets));
  }
  BucketAssignment assignment = compute_bucket_assignment_by_size(
      specs,
      initial_size_limits(options_.initial_buckets, options_.find_unused_parameters,
                          options_.static_graph, options_.first_bucket_bytes,
                          options_.bucket_cap_bytes),
      expect_sparse_);
  // See Note [Bucket order]: gradients become ready roughly in reverse registration order.
  std::reverse(assignment.buckets.begin(), assignment.buckets.end());
  std::reverse(assignment.size_limits.begin(), assignment.size_limits.end());
  const ReducerOptions& reducer_options = options_;
  reducer_ = std::make_unique<Reducer>(params_, names_, expect_sparse_, assignment, *group_,
                                       reducer_options, recorder);
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::collect_parameters() {
  // Parameters whose gradients travel in embeddings' sparse form.
  std::unordered_set<const void*> sparse;
  for (const auto& item : module_->named_modules()) {
    if (auto* embedding = dynamic_cast<torch::nn::EmbeddingImpl*>(item.value().get())) {
      if (embedding->options.sparse()) sparse.insert(embedding->weight.unsafeGetTensorImpl());
    }
    if (auto* bag = dynamic_cast<torch::nn::EmbeddingBagImpl*>(item.value().get())) {
      if (bag->options.sparse()) sparse.insert(bag->weight.unsafeGetTensorImpl());
    }
  }
  std::unordered_set<const void*> seen;
  for (const auto& item : module_->named_parameters(true)) {
    const at::Tensor& param = item.value();
    if (!param.requires_grad()) continue;
    if (!seen.insert(param.unsafeGetTensorImpl()).second) continue;  // shared: once
    params_.push_back(param);
    names_.push_back(item.key());
    expect_sparse_.push_back(sparse.count(param.unsafeGetTensorImpl()) > 0);
  }
  if (params_.empty()) {
    throw DdpError("DistributedDataParallel is not needed when a module doesn't have any "
                   "parameter that requires a gradient; train it without DDP");
  }
  std::unordered_set<const void*> seen_buffers;
  for (const at::Tensor& buffer : module_->buffers(true)) {
    if (seen_buffers.insert(buffer.unsafeGetTensorImpl()).second) buffers_.push_back(buffer);
  }
}

void DistributedDataParallel::register_comm_hook(std::unique_ptr<CommHook> hook) {
  reducer_->register_comm_hook(std::move(hook));
}

bool DistributedDataParallel::will_sync_buffers() const {
  return require_forward_param_sync_ && options_.broadcast_buffers && !buffers_.empty();
}

void DistributedDataParallel::sync_buffers(int authoritative_rank, int32_t iteration) {
  trace::Recorder* recorder = options_.recorder;
  const trace::Stamp begin = trace::stamp_for(recorder, trace::TraceLevel::Summary);
  c10::NoGradGuard no_grad;
  replica::broadcast_coalesced(*group_, buffers_, authoritative_rank, replica::kBroadcastBufferBytes, 2,
                      collective_tag(iteration));
  if (recorder) {
    recorder->phase(0, forward_sync_name_, begin,
                    trace::stamp_for(recorder, trace::TraceLevel::Summary), iteration);
  }
}

void DistributedDataParallel::pre_forward() {
  const bool grad_enabled = c10::GradMode::is_enabled();
  if (grad_enabled && gradient_sync_.enabled()) reducer_->set_iteration(iteration_);
  if (join_) join_->notify_not_joined();
  if (grad_enabled) reducer_->rebuild_buckets();
  if (will_sync_buffers()) {
    // An evaluation forward's broadcast is no iteration's (Note [Work outside iterations]).
    sync_buffers(join_ ? join_->find_common_rank(group_->rank(), true) : 0,
                 grad_enabled ? iteration_ : trace::kNone);
  }
  if (join_) join_->share_requires_sync(gradient_sync_.enabled());
}

void DistributedDataParallel::post_forward(const std::vector<at::Tensor>& outputs) {
  if (c10::GradMode::is_enabled() && gradient_sync_.enabled()) {
    require_forward_param_sync_ = true;
    reducer_->prepare_for_backward(outputs);  // walks the graph only with GraphMode::FindUnused
    ++iteration_;
  } else {
    require_forward_param_sync_ = false;
  }
}

at::Tensor DistributedDataParallel::forward(const std::function<at::Tensor()>& run) {
  pre_forward();
  at::Tensor output = [&] {
    memory::CategoryScope activations(memory::MemoryCategory::Activations);
    return run();
  }();
  post_forward({output});
  return output;
}

std::vector<at::Tensor> DistributedDataParallel::forward(
    const std::function<std::vector<at::Tensor>()>& run) {
  pre_forward();
  std::vector<at::Tensor> outputs = [&] {
    memory::CategoryScope activations(memory::MemoryCategory::Activations);
    return run();
  }();
  post_forward(outputs);
  return outputs;
}

}  // namespace dpscope::ddp
