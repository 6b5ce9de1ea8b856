// FsdpParamGroup (fsdp_param_group.h): a group's all-gather through the copy-in buffer and its
// copy-out, resharding, the post-backward reduce-scatter of its gradients and its view-out into
// the sharded gradients, and the group's lane in the trace (Note [Group lifecycle]).
#include "engine/fsdp2/fsdp_param_group.h"

#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <algorithm>

#include "engine/comm/nccl_backend.h"
#include "engine/fsdp2/fsdp2_options.h"
#include "engine/memory/memory_sampler.h"
#include "engine/memory/tracking_allocator.h"

namespace dpscope::fsdp2 {

void Fsdp2Context::sample_memory() const {
  if (memory_sampler) memory_sampler->sample();
}

FsdpParamGroup::FsdpParamGroup(std::vector<std::unique_ptr<FsdpParam>> params, std::string name,
                               c10::ScalarType reduce_dtype)
    : params_(std::move(params)), name_(std::move(name)), reduce_dtype_(reduce_dtype) {
  std::vector<int64_t> chunk_numels;
  for (const auto& param : params_) chunk_numels.push_back(param->padded_chunk_numel());
  layout_ = chunk_layout(chunk_numels, params_.empty() ? 1 : params_[0]->chunks().world_size);
  for (const auto& param : params_) {
    FsdpParam* raw = param.get();
    param->post_hook_key = param->grad_accumulator()->add_post_hook(
        std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, raw](const torch::autograd::variable_list& outputs,
                        const torch::autograd::variable_list& /*inputs*/) {
              // The unsharded gradient, kept until the group reduces it (Note [Memory categories]).
              const at::Tensor& grad = raw->unsharded_param().grad();
              memory::count_as(grad, memory::MemoryCategory::FullGradients);
              on_gradient_accumulated();
              return outputs;
            }));
  }
}

FsdpParamGroup::~FsdpParamGroup() {
  for (comm::WorkHandle* work : {&gather_work_, &reduce_work_}) {
    if (!*work) continue;
    try {
      (*work)->wait();
    } catch (const std::exception&) {
    }
  }
  for (const auto& param : params_) param->grad_accumulator()->del_post_hook(param->post_hook_key);
}

void FsdpParamGroup::attach(std::shared_ptr<Fsdp2Context> context, int32_t index, int32_t parent,
                            std::string name, const RootParams& root_params) {
  ctx_ = std::move(context);
  index_ = index;
  parent_ = parent;
  name_ = std::move(name);
  record_layout(root_params);
}

c10::ScalarType FsdpParamGroup::compute_dtype() const {
  return params_.empty() ? c10::ScalarType::Float : params_[0]->all_gather_output().scalar_type();
}

c10::Device FsdpParamGroup::compute_device() const {
  return params_.empty() ? c10::Device(c10::kCPU) : params_[0]->all_gather_output().device();
}

int FsdpParamGroup::world_size() const { return ctx_ ? ctx_->group->size() : layout_.world_size; }

comm::CollectiveTag FsdpParamGroup::tag(uint8_t flags) const {
  return {ctx_->traced_iteration(), trace::kNone, index_, flags};
}

// ---- All-gather -----------------------------------------------------------------------------

void FsdpParamGroup::unshard(uint8_t flags) {
  if (empty()) return;
  if (residency_ == GroupResidency::ShardedPostForward) {
    unshard_from_post_forward(flags);
    return;
  }
  if (residency_ != GroupResidency::Sharded) return;
  c10::NoGradGuard no_grad;
  if (world_size() == 1) {
    // Nothing to gather: the padded shard is the whole parameter (PyTorch copies it over too).
    for (const auto& param : params_) {
      param->alloc_unsharded();
      param->all_gather_output().copy_(param->padded_shard());
    }
    move_to(GroupResidency::Unsharded);
    ctx_->sample_memory();
    return;
  }
  {
    trace::ScopedPhase copy_in(ctx_->recorder, 0, ctx_->copy_in_name, ctx_->traced_iteration());
    std::vector<at::Tensor> shards;
    for (const auto& param : params_) shards.push_back(param->padded_shard());
    gather_buffers_ = foreach_all_gather_copy_in(shards, layout_, ctx_->group->rank(), compute_dtype(), compute_device());
  }
  gather_layout_ = layout_;
  move_to(GroupResidency::Gathering);
  gather_work_ = ctx_->group->all_gather(gather_buffers_.output, gather_buffers_.input, tag(flags));
  ctx_->sample_memory();
}

void FsdpParamGroup::unshard_from_post_forward(uint8_t flags) {
  c10::NoGradGuard no_grad;
  comm::ProcessGroup& group = *post_forward_group_;
  {
    trace::ScopedPhase copy_in(ctx_->recorder, 0, ctx_->copy_in_name, ctx_->traced_iteration());
    std::vector<at::Tensor> shards;
    std::vector<int64_t> slice_numels;
    for (const auto& param : params_) {
      shards.push_back(param->post_forward_shard());
      slice_numels.push_back(param->post_forward_shard().numel());
    }
    gather_layout_ = chunk_layout(slice_numels, group.size());
    gather_buffers_ = foreach_all_gather_copy_in(shards, gather_layout_, group.rank(), compute_dtype(), compute_device());
  }
  move_to(GroupResidency::Gathering);
  gather_work_ = group.all_gather(gather_buffers_.output, gather_buffers_.input, tag(flags));
  ctx_->sample_memory();
}

void FsdpParamGroup::set_post_forward_group(std::shared_ptr<comm::ProcessGroup> group) {
  post_forward_group_ = std::move(group);
}

void FsdpParamGroup::reshard_to_post_forward() {
  if (empty() || residency_ != GroupResidency::Unsharded) return;
  for (const auto& param : params_) {
    param->keep_post_forward_shard(post_forward_group_->size(), post_forward_group_->rank());
    param->free_unsharded();
  }
  move_to(GroupResidency::ShardedPostForward);
  ctx_->sample_memory();
}

void FsdpParamGroup::free_post_forward_shards() {
  for (const auto& param : params_) param->free_post_forward_shard();
}

void FsdpParamGroup::wait_for_unshard() {
  if (empty()) return;
  if (residency_ == GroupResidency::Sharded || residency_ == GroupResidency::ShardedPostForward) {
    unshard(0);
  }
  if (residency_ != GroupResidency::Gathering) return;
  c10::NoGradGuard no_grad;
  const comm::WorkHandle work = std::move(gather_work_);
  gather_work_.reset();
  // On a GPU the compute stream waits for the all-gather's stream, not the host (Note [Streams]
  // in nccl_backend.cpp); Gloo waits on the host.
  comm::wait_on_stream(work);
  {
    trace::ScopedPhase copy_out(ctx_->recorder, 0, ctx_->copy_out_name, ctx_->traced_iteration());
    std::vector<at::Tensor> outputs;
    for (const auto& param : params_) {
      param->alloc_unsharded();
      outputs.push_back(param->all_gather_output());
    }
    foreach_all_gather_copy_out(gather_buffers_.output, gather_layout_, outputs);
  }
  free_post_forward_shards();  // PyTorch's to_unsharded frees them after the copy-out too
  // PyTorch keeps a forward all-gather's buffer until the next group's copy-out, to overlap that
  // copy-out with the next all-gather on its streams; on the host it goes at once.
  gather_buffers_ = AllGatherBuffers();
  move_to(GroupResidency::Unsharded);
  ctx_->sample_memory();
}

void FsdpParamGroup::reshard() {
  if (empty()) return;
  if (residency_ == GroupResidency::Gathering) {
    // Never free memory an all-gather still writes into.
    const comm::WorkHandle work = std::move(gather_work_);
    gather_work_.reset();
    comm::wait_on_stream(work);
    gather_buffers_ = AllGatherBuffers();
  } else if (residency_ == GroupResidency::Unsharded) {
    for (const auto& param : params_) param->free_unsharded();
  } else if (residency_ != GroupResidency::ShardedPostForward) {
    return;
  }
  free_post_forward_shards();
  move_to(GroupResidency::Sharded);
  ctx_->sample_memory();
}

std::vector<at::Tensor> FsdpParamGroup::gather_float32() {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> shards;
  std::vector<at::Tensor> outputs;
  for (const auto& param : params_) {
    shards.push_back(param->padded_shard());
    memory::CategoryScope full(memory::MemoryCategory::FullParameters);
    outputs.push_back(at::empty({param->all_gather_output().numel()},
                                param->padded_shard().options().device(compute_device())));
    memory::own(outputs.back(), memory::MemoryCategory::FullParameters);
  }
  if (world_size() == 1) {
    for (size_t i = 0; i < params_.size(); ++i) outputs[i].copy_(shards[i]);
  } else if (!params_.empty()) {
    const AllGatherBuffers buffers =
        foreach_all_gather_copy_in(shards, layout_, ctx_->group->rank(), c10::ScalarType::Float, compute_device());
    comm::wait_on_stream(ctx_->group->all_gather(buffers.output, buffers.input, tag(0)));
    foreach_all_gather_copy_out(buffers.output, layout_, outputs);
  }
  std::vector<at::Tensor> full;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& param = params_[i]->unsharded_param();
    full.push_back(outputs[i].narrow(0, 0, param.numel()).view(param.sizes()));
  }
  return full;
}

// ---- Reduce-scatter -------------------------------------------------------------------------

void FsdpParamGroup::on_gradient_accumulated() {
  if (++accumulated_ == params_.size()) post_backward();
}

void FsdpParamGroup::post_backward() {
  if (pass_ == GroupPass::PostBackward || !ctx_) return;
  pass_ = GroupPass::PostBackward;
  accumulated_ = 0;
  c10::NoGradGuard no_grad;
  // Take the gradients before resharding, while their parameters still have memory (PyTorch
  // does the same); under no_sync they stay in .grad and the next backward adds to them.
  std::vector<at::Tensor> grads;
  std::vector<size_t> which;
  if (ctx_->gradient_sync.enabled()) {
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor& grad = params_[i]->unsharded_param().mutable_grad();
      if (!grad.defined()) continue;
      grads.push_back(std::move(grad));
      grad = at::Tensor();
      which.push_back(i);
    }
  }
  reshard();
  if (!grads.empty()) issue_reduce_scatter(grads, which);
}

void FsdpParamGroup::issue_reduce_scatter(const std::vector<at::Tensor>& grads,
                                          const std::vector<size_t>& which) {
  // One reduce-scatter in flight: the previous group's is finished before this copy-in, as
  // PyTorch's compute stream waits for reduce_scatter_state's event (Note [Group lifecycle]).
  if (ctx_->reducing) ctx_->reducing->finish_reduce();
  std::vector<int64_t> chunk_numels;
  std::vector<Dim0Chunks> chunks;
  for (const size_t i : which) {
    chunk_numels.push_back(params_[i]->padded_chunk_numel());
    chunks.push_back(params_[i]->chunks());
  }
  reduce_layout_ = chunk_layout(chunk_numels, world_size());
  reduced_params_ = which;
  reduce_begin_ns_ = trace::now_ns();
  if (world_size() == 1 && !ctx_->replicate) {
    // Nothing to reduce: each gradient is all of this rank's rows.
    for (size_t k = 0; k < which.size(); ++k) {
      params_[which[k]]->accumulate_sharded_grad(grads[k].reshape({-1}));
    }
    reduced_params_.clear();
    return;
  }
  {
    trace::ScopedPhase copy_in(ctx_->recorder, 0, ctx_->reduce_copy_in_name, ctx_->traced_iteration());
    reduce_input_ = foreach_reduce_scatter_copy_in(grads, chunks, reduce_layout_, reduce_dtype_);
  }
  if (world_size() == 1) {
    // HSDP with shard groups of one rank: the copy-in is this rank's part; only the all-reduce
    // across the replicas is left (See Note [HSDP mesh]).
    reduce_output_ = reduce_input_;
    reduce_work_ = ctx_->replicate->all_reduce(reduce_output_, comm::ReduceOp::Average,
                                               tag(trace::kFlagBackward));
  } else {
    {
      memory::CategoryScope gradient_shards(memory::MemoryCategory::GradientShards);
      reduce_output_ = at::empty({reduce_layout_.rank_numel}, reduce_input_.options());
      memory::own(reduce_output_, memory::MemoryCategory::GradientShards);
    }
    // Averaged over the ranks as DDP averages (PyTorch's FSDP2 reduces float32 with
    // ReduceOp.AVG); under HSDP over the shard group's, the all-reduce then over the replicas.
    reduce_work_ = ctx_->group->reduce_scatter(reduce_output_, reduce_input_, comm::ReduceOp::Average,
                                               tag(trace::kFlagBackward), comm::ScatterInput::Workspace);
  }
  ctx_->reducing = this;
  ctx_->sample_memory();
}

void FsdpParamGroup::finish_reduce() {
  if (!reduce_work_) return;
  c10::NoGradGuard no_grad;
  const comm::WorkHandle work = std::move(reduce_work_);
  reduce_work_.reset();
  comm::wait_on_stream(work);
  if (ctx_->replicate && world_size() > 1) {
    // HSDP's second step: the shard group's average, averaged across the replicas (See Note
    // [HSDP mesh]); issued after the reduce-scatter is done, on every rank in the same order.
    comm::wait_on_stream(ctx_->replicate->all_reduce(reduce_output_, comm::ReduceOp::Average,
                                                     tag(trace::kFlagBackward)));
  }
  for (size_t k = 0; k < reduced_params_.size(); ++k) {
    FsdpParam& param = *params_[reduced_params_[k]];
    param.accumulate_sharded_grad(view_out_sharded_grad(reduce_output_, reduce_layout_, k,
                                                        param.chunks().rows_of(param.rank()),
                                                        param.row_numel()));
  }
  reduce_input_ = at::Tensor();
  reduce_output_ = at::Tensor();
  reduced_params_.clear();
  if (ctx_->reducing == this) ctx_->reducing = nullptr;
  record_state(trace::UnitState::Reducing, reduce_begin_ns_, trace::now_ns());
  ctx_->sample_memory();
}

void FsdpParamGroup::end_backward() {
  pass_ = GroupPass::Idle;
  accumulated_ = 0;
  post_forward_indices.clear();
  // A prefetch no pre-backward waited for (PyTorch's finalize_backward waits and drops it too),
  // or a group gathered after its post-backward: the optimizer is about to change its shards.
  reshard();
}

// ---- Trace ----------------------------------------------------------------------------------

void FsdpParamGroup::move_to(GroupResidency next) {
  const int64_t now = trace::now_ns();
  if (residency_ == GroupResidency::Gathering) {
    record_state(trace::UnitState::Gathering, residency_since_ns_, now);
  } else if (residency_ == GroupResidency::Unsharded) {
    record_state(trace::UnitState::Full, residency_since_ns_, now);
  }
  residency_ = next;
  residency_since_ns_ = now;
}

void FsdpParamGroup::record_state(trace::UnitState state, int64_t begin_ns, int64_t end_ns) const {
  if (ctx_ && ctx_->recorder) {
    ctx_->recorder->unit_state(lane_, index_, state, begin_ns, end_ns, ctx_->traced_iteration());
  }
}

// The group as a unit of the trace: a unit's "shard" is a rank's part of the collectives'
// buffer (Note [Copy-in and copy-out]), and a parameter's unit_offset is where its padded chunk
// starts in it.
void FsdpParamGroup::record_layout(const RootParams& root_params) {
  trace::Recorder* recorder = ctx_->recorder;
  if (!recorder) return;
  const std::string shown = name_.empty() ? "root" : name_;
  lane_ = recorder->add_lane("unit " + std::to_string(index_) + " " + shown, trace::LaneKind::Unit);
  const int world = world_size();
  int64_t numel = 0;
  for (const auto& param : params_) numel += param->numel();
  recorder->add_unit({index_, shown, parent_, numel, layout_.rank_numel * world, layout_.rank_numel});
  for (int rank = 0; rank < world; ++rank) {
    int64_t real = 0;
    for (const auto& param : params_) real += param->chunks().rows_of(rank) * param->row_numel();
    recorder->add_unit_shard({index_, rank, layout_.rank_numel * rank,
                              layout_.rank_numel * (rank + 1), real});
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    const FsdpParam& param = *params_[k];
    trace::ParamInfo info;
    const void* impl = param.unsharded_param().unsafeGetTensorImpl();
    const auto named = std::find_if(root_params.begin(), root_params.end(),
                                    [&](const auto& entry) { return entry.first == impl; });
    info.index = static_cast<int32_t>(named - root_params.begin());
    info.name = named != root_params.end() ? named->second : param.name();
    info.shape = param.unsharded_param().sizes().vec();
    info.numel = param.numel();
    info.dtype = trace::DType::Float32;
    info.unit = index_;
    info.unit_offset = layout_.offsets[k];
    recorder->add_param(info);
  }
}

}  // namespace dpscope::fsdp2
