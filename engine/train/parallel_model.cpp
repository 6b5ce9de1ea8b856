// The three ParallelModel adapters (parallel_model.h): DDP, FSDP and FSDP2 configured from a
// TrainConfig, the way `dpscope train` documents its flags.
#include "engine/train/parallel_model.h"

#include "engine/ddp/distributed_data_parallel.h"
#include "engine/fsdp/fully_sharded_data_parallel.h"
#include "engine/fsdp2/fully_shard.h"
#include "trace/vocabulary.h"

namespace dpscope::train {

namespace {

class DdpModel final : public ParallelModel {
 public:
  DdpModel(const TrainConfig& config, std::shared_ptr<models::Model> model,
           std::shared_ptr<comm::ProcessGroup> group, trace::Recorder* recorder)
      : model_(model), ddp_(model, std::move(group), options(config, recorder)) {
    if (auto hook = ddp::make_comm_hook(config.comm_hook)) ddp_.register_comm_hook(std::move(hook));
  }

  at::Tensor forward(const at::Tensor& x) override {
    return ddp_.forward([&] { return model_->forward(x); });
  }

  replica::GradientSync& gradient_sync() override { return ddp_.gradient_sync(); }

  void finish_backward() override { ddp_.reducer().check_reduction_finished(); }

  std::vector<at::Tensor> optimizer_parameters() override { return model_->parameters(); }

  std::vector<std::pair<std::string, at::Tensor>> full_state() override {
    std::vector<std::pair<std::string, at::Tensor>> state;
    if (ddp_.group().rank() != 0) return state;
    for (const auto& item : model_->named_parameters()) state.emplace_back(item.key(), item.value());
    for (const auto& item : model_->named_buffers()) state.emplace_back(item.key(), item.value());
    return state;
  }

  std::string describe() const override { return std::string(trace::to_string(Strategy::Ddp)); }

 private:
  static ddp::DdpOptions options(const TrainConfig& config, trace::Recorder* recorder) {
    ddp::DdpOptions options;
    options.bucket_cap_bytes = static_cast<int64_t>(config.bucket_cap_mb * 1024 * 1024);
    options.first_bucket_bytes = static_cast<int64_t>(config.first_bucket_mb * 1024 * 1024);
    options.initial_buckets = config.initial_buckets;
    options.find_unused_parameters = config.find_unused_parameters;
    options.gradient_as_bucket_view = config.gradient_as_bucket_view;
    options.static_graph = config.static_graph;
    options.broadcast_buffers = config.broadcast_buffers;
    options.recorder = recorder;
    return options;
  }

  std::shared_ptr<models::Model> model_;
  ddp::DistributedDataParallel ddp_;
};

// The mesh FSDP and FSDP2 shard over: the world, or with --sharding hybrid --shard-group-size N
// an R x N mesh of shard and replicate groups (Note [HSDP mesh]).
comm::DeviceMesh hsdp_mesh(const TrainConfig& config, const std::shared_ptr<comm::ProcessGroup>& world) {
  if (config.sharding != fsdp::ShardingStrategy::HybridShard) return comm::DeviceMesh::sharded_over(world);
  comm::check_shard_group_size(config.shard_group_size, world->size(), "--shard-group-size");
  return comm::make_hsdp_mesh(world, config.shard_group_size);
}

class FsdpModel final : public ParallelModel {
 public:
  FsdpModel(const TrainConfig& config, std::shared_ptr<models::Model> model,
            std::shared_ptr<comm::ProcessGroup> group, trace::Recorder* recorder,
            memory::MemorySampler* sampler)
      : model_(model), fsdp_(model, hsdp_mesh(config, group), options(config, recorder, sampler)) {
    if (fsdp_.world_rank() == 0) {
      for (const std::string& note : fsdp_.wrap_notes()) std::printf("fsdp: %s\n", note.c_str());
    }
  }

  at::Tensor forward(const at::Tensor& x) override {
    return fsdp_.forward(x, [&](const at::Tensor& input) { return model_->forward(input); });
  }

  replica::GradientSync& gradient_sync() override { return fsdp_.gradient_sync(); }

  std::vector<at::Tensor> optimizer_parameters() override { return fsdp_.parameters(); }

  std::vector<std::pair<std::string, at::Tensor>> full_state() override {
    return fsdp_.full_state_dict(0);
  }

  std::string describe() const override {
    return std::string(trace::to_string(Strategy::Fsdp)) + " (" +
           std::string(fsdp::to_string(fsdp_.sharding())) + ", " +
           std::to_string(fsdp_.unit_count()) + " unit" + (fsdp_.unit_count() == 1 ? "" : "s") + ")";
  }

 private:
  static fsdp::FsdpOptions options(const TrainConfig& config, trace::Recorder* recorder,
                                   memory::MemorySampler* sampler) {
    fsdp::FsdpOptions options;
    options.sharding = config.sharding;
    if (config.wrap_min_params > 0) {
      options.wrap_policy = fsdp::size_based_wrap_policy(config.wrap_min_params);
    }
    options.mixed_precision = fsdp::mixed_precision_for(config.mixed_precision, config.reduce_fp32);
    options.cpu_offload = config.cpu_offload;
    options.backward_prefetch = config.backward_prefetch;
    options.forward_prefetch = config.forward_prefetch;
    options.limit_all_gathers = config.limit_all_gathers;
    options.limit_reduce_scatters = config.limit_reduce_scatters;
    options.reduce_bucket_bytes = static_cast<int64_t>(config.reduce_bucket_mb * 1024 * 1024);
    options.recorder = recorder;
    options.memory_sampler = sampler;
    return options;
  }

  std::shared_ptr<models::Model> model_;
  fsdp::FullyShardedDataParallel fsdp_;
};

// FSDP2: rank 0's state broadcast (PyTorch's fully_shard leaves that to the user), then
// fully_shard on the submodules the size-based wrap policy picks (FSDP1's, innermost first) and
// on the root.
// --explicit-prefetch N (PyTorch's FSDP2 example, --explicit-prefetching): `layers` in the order
// fully_shard was applied (the wrap plan's, innermost first: the layers' forward order for the
// models here), each forward-prefetching the next N and backward-prefetching the previous N.
// The root sets none, as the example's does not.
void set_explicit_prefetch(const std::vector<std::shared_ptr<fsdp2::FsdpState>>& layers, int n) {
  if (n <= 0) return;
  for (size_t i = 0; i < layers.size(); ++i) {
    std::vector<fsdp2::FsdpState*> ahead, behind;
    for (size_t j = 1; j <= size_t(n); ++j) {
      if (i + j < layers.size()) ahead.push_back(layers[i + j].get());
      if (j <= i) behind.push_back(layers[i - j].get());
    }
    layers[i]->set_modules_to_forward_prefetch(std::move(ahead));
    layers[i]->set_modules_to_backward_prefetch(std::move(behind));
  }
}

class Fsdp2Model final : public ParallelModel {
 public:
  Fsdp2Model(const TrainConfig& config, std::shared_ptr<models::Model> model,
             const std::shared_ptr<comm::ProcessGroup>& group, trace::Recorder* recorder,
             memory::MemorySampler* sampler)
      : model_(model), root_(shard(config, *model, group, recorder, sampler)) {}

  at::Tensor forward(const at::Tensor& x) override {
    return root_->forward(x, [&](const at::Tensor& input) { return model_->forward(input); });
  }

  replica::GradientSync& gradient_sync() override { return root_->gradient_sync(); }

  std::vector<at::Tensor> optimizer_parameters() override { return root_->parameters(); }

  std::vector<std::pair<std::string, at::Tensor>> full_state() override {
    return root_->full_state_dict(0);
  }

  std::string describe() const override {
    const size_t groups = groups_;
    return std::string(trace::to_string(Strategy::Fsdp2)) + " (" + std::to_string(groups) +
           " fully_shard group" + (groups == 1 ? "" : "s") + ", reshard_after_forward " +
           reshard_text_ + mesh_text_ +
           (explicit_prefetch_ > 0 ? ", explicit prefetch " + std::to_string(explicit_prefetch_) : "") +
           (offload_ ? ", offload cpu" : "") + ")";
  }

 private:
  std::shared_ptr<fsdp2::FsdpState> shard(const TrainConfig& config, models::Model& model,
                                          const std::shared_ptr<comm::ProcessGroup>& group,
                                          trace::Recorder* recorder, memory::MemorySampler* sampler) {
    {
      trace::ScopedPhase phase(recorder, 0, "fsdp2.sync_module_states", trace::kNone);
      fsdp2::sync_module_states(model, *group);
    }
    trace::ScopedPhase phase(recorder, 0, "fsdp2.fully_shard", trace::kNone);
    fsdp2::FullyShardOptions options;
    options.reshard_after_forward = config.reshard_after_forward;
    // --mixed-precision P [--reduce-fp32]: compute in P, reduce in P or float32 (as FSDP1's flags).
    options.mp_policy.param = config.mixed_precision;
    options.mp_policy.reduce = config.reduce_fp32 ? fsdp::ComputePrecision::Fp32 : config.mixed_precision;
    options.recorder = recorder;
    options.memory_sampler = sampler;
    // --cpu-offload: PyTorch's CPUOffloadPolicy() (pin_memory true), See Note [FSDP2 CPU offload].
    options.offload_policy = config.cpu_offload ? fsdp2::OffloadPolicy::cpu() : fsdp2::OffloadPolicy::none();
    const fsdp::WrapPlan plan = fsdp::plan_units(model, fsdp::size_based_wrap_policy(config.wrap_min_params));
    if (group->rank() == 0) {
      for (const std::string& note : plan.notes) std::printf("fsdp2: %s\n", note.c_str());
    }
    // --sharding hybrid --shard-group-size N: HSDP over an R x N mesh (Note [HSDP mesh]).
    const comm::DeviceMesh mesh = hsdp_mesh(config, group);
    std::vector<std::shared_ptr<fsdp2::FsdpState>> layers;
    for (size_t i = 0; i + 1 < plan.units.size(); ++i) {
      layers.push_back(fsdp2::fully_shard(*plan.units[i].module, mesh, options));
    }
    groups_ = plan.units.size();
    reshard_text_ = config.reshard_after_forward.text();
    if (mesh.hybrid()) {
      mesh_text_ = ", HSDP: " + std::to_string(mesh.replicate_size()) + " replicas of " +
                   std::to_string(mesh.shard_size()) + " ranks";
    }
    std::shared_ptr<fsdp2::FsdpState> root = fsdp2::fully_shard(model, mesh, options);
    set_explicit_prefetch(layers, config.explicit_prefetch);
    explicit_prefetch_ = config.explicit_prefetch;
    offload_ = config.cpu_offload;
    return root;
  }

  std::shared_ptr<models::Model> model_;
  size_t groups_ = 0;
  std::string reshard_text_;
  int explicit_prefetch_ = 0;
  bool offload_ = false;
  std::string mesh_text_;  // HSDP's layout, "" otherwise
  std::shared_ptr<fsdp2::FsdpState> root_;
};

}  // namespace

std::unique_ptr<ParallelModel> make_parallel_model(const TrainConfig& config,
                                                   std::shared_ptr<models::Model> model,
                                                   std::shared_ptr<comm::ProcessGroup> group,
                                                   trace::Recorder* recorder,
                                                   memory::MemorySampler* sampler) {
  if (config.strategy == Strategy::Fsdp) {
    return std::make_unique<FsdpModel>(config, std::move(model), std::move(group), recorder, sampler);
  }
  if (config.strategy == Strategy::Fsdp2) {
    return std::make_unique<Fsdp2Model>(config, std::move(model), group, recorder, sampler);
  }
  return std::make_unique<DdpModel>(config, std::move(model), std::move(group), recorder);
}

}  // namespace dpscope::train
