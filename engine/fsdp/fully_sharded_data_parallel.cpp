// FullyShardedDataParallel (fully_sharded_data_parallel.h): construction (units, module-state
// broadcast, flattening, trace layout), the forward path (pre- and post-forward, gathering with
// prefetch and its limit, resharding) and the unit-state trace. Backward is fsdp_backward.cpp.
#include "engine/fsdp/fully_sharded_data_parallel.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "engine/comm/nccl_backend.h"
#include "engine/fault/fault_injection.h"
#include "engine/memory/memory_sampler.h"
#include "engine/nn/forward_hooks.h"
#include "engine/replica/broadcast_coalesced.h"
#include "engine/replica/model_verification.h"
#include "trace/vocabulary.h"

namespace dpscope::fsdp {

namespace {

// PyTorch's _get_gradient_predivide_factor: divide by a power of two before the reduction and by
// the rest after it, so that summing many gradients neither overflows nor underflows in low
// precision; the product is the world size (DDP's average).
double predivide_factor(int world_size) {
  int factor = 1;
  while (world_size % factor == 0 && world_size / factor > factor) factor *= 2;
  return factor;
}

}  // namespace

FullyShardedDataParallel::FullyShardedDataParallel(std::shared_ptr<torch::nn::Module> module,
                                                   std::shared_ptr<comm::ProcessGroup> group,
                                                   FsdpOptions options)
    : FullyShardedDataParallel(std::move(module), comm::DeviceMesh::sharded_over(std::move(group)),
                               std::move(options)) {}

FullyShardedDataParallel::FullyShardedDataParallel(std::shared_ptr<torch::nn::Module> module,
                                                   comm::DeviceMesh mesh, FsdpOptions options)
    : module_(std::move(module)), group_(std::move(mesh.shard)), replicate_(std::move(mesh.replicate)),
      options_(std::move(options)) {
  if (!module_ || !group_) {
    throw FsdpError("FullyShardedDataParallel needs a module and a process group (got null)");
  }
  if (options_.limit_all_gathers < 0 || options_.limit_reduce_scatters < 0) {
    throw FsdpError("limit_all_gathers and limit_reduce_scatters must be 0 (no limit) or more");
  }
  choose_strategy();
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  {
    std::unordered_set<const void*> seen;
    for (const auto& item : module_->named_parameters()) {
      if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
      params.push_back(item.value());
      names.push_back(item.key());
    }
  }
  if (params.empty()) {
    throw FsdpError("the module has no parameters; FSDP has nothing to shard (wrap a module "
                    "with parameters)");
  }
  for (const at::Tensor& buffer : module_->buffers()) buffers_.push_back(buffer);
  if (options_.mixed_precision.param_dtype == c10::ScalarType::Half && params[0].is_cpu()) {
    throw FsdpError("fp16 compute is not available on the CPU (LibTorch has no float16 matrix "
                    "multiply there); use --mixed-precision bf16 on the CPU, fp16 on CUDA devices");
  }

  if (options_.sync_module_states) sync_module_states(params, names);
  {
    trace::ScopedPhase phase(options_.recorder, 0, "fsdp.flatten", trace::kNone);
    const WrapPlan plan = plan_units(*module_, options_.wrap_policy);
    wrap_notes_ = plan.notes;
    build_units(plan);
  }
  if (options_.mixed_precision.enabled()) {
    c10::NoGradGuard no_grad;
    for (at::Tensor& buffer : buffers_) {
      if (buffer.is_floating_point()) buffer.set_data(buffer.to(options_.mixed_precision.buffer_dtype));
    }
  }
  // The module's state outside the units: its buffers, counted as parameters in both accountings
  // (Note [Ownership accounting]).
  for (const at::Tensor& buffer : buffers_) memory::count_as(buffer, memory::MemoryCategory::Parameters);
  bucketer_ = std::make_unique<ReduceScatterBucketer>(*group_, options_.reduce_bucket_bytes,
                                                      options_.limit_reduce_scatters);
  install_post_backward_hooks();
  record_layout();
  sample_memory();
}

void FullyShardedDataParallel::choose_strategy() {
  const bool hybrid = options_.sharding == ShardingStrategy::HybridShard;
  if (hybrid != (replicate_ != nullptr)) {
    throw FsdpError(hybrid ? "HYBRID_SHARD needs a mesh with a replicate group: construct "
                             "FullyShardedDataParallel over comm::make_hsdp_mesh(world, N)"
                           : "a mesh with a replicate group is for HYBRID_SHARD: set "
                             "options.sharding to HybridShard, or pass the world group");
  }
  const int world = group_->size() * (replicate_ ? replicate_->size() : 1);
  // One rank shards nothing; HYBRID_SHARD over shard groups of one rank neither, and all-reduces
  // every gradient across the replicas.
  sharding_ = world == 1 ? ShardingStrategy::NoShard : options_.sharding;
  predivide_ = predivide_factor(world);
  postdivide_ = world / predivide_;
  trace::Recorder* recorder = options_.recorder;
  if (!recorder) return;
  final_callback_name_ = recorder->name("fsdp.final_callback");
  namespace key = trace::meta_key;
  recorder->set_meta(key::kFsdpSharding, to_string(sharding_));
  if (hybrid) recorder->set_meta(key::kFsdpShardGroupSize, std::to_string(group_->size()));
  recorder->set_meta(key::kFsdpBackwardPrefetch, to_string(options_.backward_prefetch));
  recorder->set_meta(key::kFsdpForwardPrefetch, trace::flag_text(options_.forward_prefetch));
  recorder->set_meta(key::kFsdpComputeDtype, c10::toString(options_.mixed_precision.param_dtype));
  recorder->set_meta(key::kFsdpReduceDtype, c10::toString(options_.mixed_precision.reduce_dtype));
}

void FullyShardedDataParallel::sync_module_states(const std::vector<at::Tensor>& params,
                                                  const std::vector<std::string>& names) {
  const comm::CollectiveTag construction{};  // of no iteration, bucket or unit
  trace::ScopedPhase phase(options_.recorder, 0, "fsdp.sync_module_states", trace::kNone);
  try {
    replica::verify_params_across_ranks(*group_, params, names, "FullyShardedDataParallel");
  } catch (const replica::ModelMismatchError& error) {
    throw FsdpError(error.what());
  }
  fault::reached("construction");  // See Note [Fault points]
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> state = params;
  state.insert(state.end(), buffers_.begin(), buffers_.end());
  // Replica 0's values to every shard group's rank s, then shard rank 0's (world rank 0's) to all.
  if (replicated()) {
    replica::broadcast_coalesced(*replicate_, state, 0, replica::kBroadcastBufferBytes, 2, construction);
  }
  replica::broadcast_coalesced(*group_, state, 0, replica::kBroadcastBufferBytes, 2, construction);
}

int FullyShardedDataParallel::world_rank() const {
  return (replicate_ ? replicate_->rank() * group_->size() : 0) + group_->rank();
}

FullyShardedDataParallel::~FullyShardedDataParallel() {
  for (auto& unit : units_) {
    if (unit.get() != units_.back().get()) nn::clear_forward_hooks(*unit->module);
    if (unit->gather_work) {
      try {
        unit->gather_work->wait();
      } catch (const std::exception&) {
      }
    }
  }
  remove_post_backward_hooks();
}

void FullyShardedDataParallel::build_units(const WrapPlan& plan) {
  FlatParamConfig config;
  config.rank = group_->rank();
  config.world_size = group_->size();
  // HYBRID_SHARD over shard groups of one rank has nothing to shard (See Note [HSDP mesh]).
  config.sharded = sharding_ != ShardingStrategy::NoShard && group_->size() > 1;
  config.compute_dtype = options_.mixed_precision.param_dtype;
  for (const UnitPlan& unit_plan : plan.units) {
    if (!unit_plan.params.empty()) {
      config.compute_device = unit_plan.params[0].device();
      break;
    }
  }
  config.shard_device = options_.cpu_offload ? c10::Device(c10::kCPU) : config.compute_device;
  for (size_t i = 0; i < plan.units.size(); ++i) {
    const UnitPlan& unit_plan = plan.units[i];
    auto unit = std::make_unique<Unit>();
    unit->index = static_cast<int32_t>(i);
    unit->name = unit_plan.name.empty() ? "root" : unit_plan.name;
    unit->parent = unit_plan.parent;
    unit->module = unit_plan.module;
    unit->flat = std::make_unique<FlatParameter>(unit_plan, config);
    // See Note [Unit lifecycle]: a full parameter that is the shard's own storage never moves.
    if (unit->flat->full_aliases_shard()) unit->residency = Residency::Full;
    const bool root = i + 1 == plan.units.size();
    // The root's backward begins as soon as forward ends: freeing it would only gather it again.
    unit->reshard_after_forward = config.sharded && !root &&
                                  (sharding_ == ShardingStrategy::FullShard ||
                                   sharding_ == ShardingStrategy::HybridShard);
    if (options_.recorder) {
      unit->lane = options_.recorder->add_lane("unit " + std::to_string(i) + " " + unit->name,
                                               trace::LaneKind::Unit);
    }
    Unit* raw = unit.get();
    if (!root) {
      nn::set_forward_hooks(
          *unit->module,
          {[this, raw] { pre_forward(*raw); },
           [this, raw](at::Tensor output) { return post_forward(*raw, std::move(output)); }});
    }
    units_.push_back(std::move(unit));
  }
}

void FullyShardedDataParallel::record_layout() {
  trace::Recorder* recorder = options_.recorder;
  if (!recorder) return;
  std::unordered_map<const void*, int32_t> index_of;
  for (const at::Tensor& param : module_->parameters()) {
    index_of.emplace(param.unsafeGetTensorImpl(), static_cast<int32_t>(index_of.size()));
  }
  for (const auto& unit : units_) {
    const FlatParameter& flat = *unit->flat;
    recorder->add_unit({unit->index, unit->name, unit->parent, flat.numel(), flat.padded_numel(),
                        flat.shard_numel()});
    for (int rank = 0; rank < group_->size(); ++rank) {
      const int64_t begin = flat.config().sharded ? flat.shard_numel() * rank : 0;
      recorder->add_unit_shard(
          {unit->index, rank, begin, begin + flat.shard_numel(), flat.real_numel_of(rank)});
    }
    for (size_t k = 0; k < flat.params().size(); ++k) {
      const at::Tensor& param = flat.params()[k];
      trace::ParamInfo info;
      info.index = index_of.at(param.unsafeGetTensorImpl());
      info.name = flat.param_names()[k];
      info.shape = param.sizes().vec();
      info.numel = param.numel();
      info.dtype = trace::DType::Float32;
      info.unit = unit->index;
      info.unit_offset = flat.offsets()[k];
      recorder->add_param(info);
    }
  }
}

std::vector<at::Tensor> FullyShardedDataParallel::parameters() const {
  std::vector<at::Tensor> shards;
  for (const auto& unit : units_) {
    if (!unit->flat->empty()) shards.push_back(unit->flat->shard());
  }
  return shards;
}

// ---- Forward ------------------------------------------------------------------------------

at::Tensor FullyShardedDataParallel::forward(
    const at::Tensor& input, const std::function<at::Tensor(const at::Tensor&)>& run) {
  Unit& root = *units_.back();
  // An evaluation forward is no iteration's work (Note [Work outside iterations]).
  const ScopedWork work(*this, c10::GradMode::is_enabled() ? work_scope_ : WorkScope::OutsideIterations);
  begin_root_forward();
  const MixedPrecision& mp = options_.mixed_precision;
  const at::Tensor cast_input =
      mp.enabled() && input.is_floating_point() ? input.to(mp.param_dtype) : input;
  pre_forward(root);
  // What the model computes counts as activations, as under DDP's forward; the gathers inside
  // set their own category (Note [Memory categories]).
  const at::Tensor output = post_forward(root, [&] {
    memory::CategoryScope activations(memory::MemoryCategory::Activations);
    return run(cast_input);
  }());
  if (!c10::GradMode::is_enabled()) {
    // Evaluation: no backward will come to free what forward gathered.
    for (auto& unit : units_) reshard(*unit);
  }
  return mp.enabled() && output.is_floating_point() ? output.to(c10::ScalarType::Float) : output;
}

void FullyShardedDataParallel::begin_root_forward() {
  if (!c10::GradMode::is_enabled()) return;
  if (step_finished_) {
    ++iteration_;
    step_finished_ = false;
  }
  // A forward whose backward never ran leaves units full and marked; start from sharded.
  for (auto& unit : units_) {
    if (unit->reached(UnitPass::Forwarded)) end_pass(*unit);
  }
}

void FullyShardedDataParallel::pre_forward(Unit& unit) {
  if (c10::GradMode::is_enabled()) {
    unit.flat->attach_gradient_node();
    if (recording_order_ &&
        std::find(forward_order_.begin(), forward_order_.end(), unit.index) == forward_order_.end()) {
      forward_order_.push_back(unit.index);
    }
    unit.reach(UnitPass::Forwarded);
  }
  unshard(unit, 0);
  if (options_.forward_prefetch && !recording_order_) {
    prefetch_after(unit, forward_order_, trace::kFlagPrefetch);
  }
}

at::Tensor FullyShardedDataParallel::post_forward(Unit& unit, at::Tensor output) {
  if (!c10::GradMode::is_enabled()) {
    if (&unit != units_.back().get()) reshard(unit);
    return output;
  }
  if (unit.reshard_after_forward) reshard(unit);
  register_pre_backward_hook(unit, output);
  return output;
}

// ---- Gathering and freeing ------------------------------------------------------------------

int32_t FullyShardedDataParallel::traced_iteration() const {
  return work_scope_ == WorkScope::Iteration ? iteration_ : trace::kNone;
}

comm::CollectiveTag FullyShardedDataParallel::tag(const Unit& unit, uint8_t flags) const {
  return {traced_iteration(), trace::kNone, unit.index, flags};
}

void FullyShardedDataParallel::issue_gather(Unit& unit, uint8_t flags) {
  FlatParameter& flat = *unit.flat;
  if (flat.empty() || unit.residency != Residency::Sharded) return;
  if (options_.limit_all_gathers > 0) {
    while (static_cast<int>(gathers_in_flight_.size()) >= options_.limit_all_gathers) {
      wait_gather(*gathers_in_flight_.front());
    }
  }
  flat.materialize();
  if (!flat.config().sharded) {
    // NO_SHARD with mixed precision or offload: the full parameter is a cast copy of the shard.
    flat.fill_full_from_shard();
    move_to(unit, Residency::Full);
    sample_memory();
    return;
  }
  unit.gather_input = flat.shard_for_gather();
  unit.gather_output = flat.full().detach();
  move_to(unit, Residency::Gathering);
  unit.gather_work = group_->all_gather(unit.gather_output, unit.gather_input, tag(unit, flags));
  gathers_in_flight_.push_back(&unit);
  sample_memory();
}

void FullyShardedDataParallel::wait_gather(Unit& unit) {
  if (!unit.gather_work) return;
  const comm::WorkHandle work = std::move(unit.gather_work);
  unit.gather_work.reset();
  gathers_in_flight_.erase(std::find(gathers_in_flight_.begin(), gathers_in_flight_.end(), &unit));
  // As fairscale's FSDP: the all-gather runs on its own stream, and the compute stream waits for
  // it on the GPU, not the host (See Note [Streams] in nccl_backend.cpp); Gloo waits on the host.
  comm::wait_on_stream(work);
  unit.gather_input = at::Tensor();
  unit.gather_output = at::Tensor();
  move_to(unit, Residency::Full);
}

void FullyShardedDataParallel::unshard(Unit& unit, uint8_t flags) {
  if (unit.flat->empty()) return;
  issue_gather(unit, flags);
  wait_gather(unit);
}

void FullyShardedDataParallel::reshard(Unit& unit) {
  FlatParameter& flat = *unit.flat;
  if (flat.full_aliases_shard() || flat.empty()) return;
  // Never free memory an all-gather still writes into.
  wait_gather(unit);
  if (unit.residency != Residency::Full) return;
  flat.free_full();
  move_to(unit, Residency::Sharded);
  sample_memory();
}

void FullyShardedDataParallel::move_to(Unit& unit, Residency next) {
  const int64_t now = trace::now_ns();
  if (unit.residency == Residency::Gathering) {
    record_state(unit, trace::UnitState::Gathering, unit.residency_since_ns, now);
  } else if (unit.residency == Residency::Full) {
    record_state(unit, trace::UnitState::Full, unit.residency_since_ns, now);
  }
  unit.residency = next;
  unit.residency_since_ns = now;
}

void FullyShardedDataParallel::prefetch_after(const Unit& unit, const std::vector<int32_t>& order,
                                              uint8_t flags) {
  const auto it = std::find(order.begin(), order.end(), unit.index);
  if (it == order.end() || it + 1 == order.end()) return;
  Unit& next = *units_[static_cast<size_t>(*(it + 1))];
  // A unit whose pass already came (autograd may run the units in another order than the one
  // recorded) would be gathered only to be freed again.
  const bool done = next.reached((flags & trace::kFlagBackward) ? UnitPass::BackwardStarted
                                                                : UnitPass::Forwarded);
  if (!done) issue_gather(next, flags | trace::kFlagPrefetch);
}

// ---- Trace --------------------------------------------------------------------------------

void FullyShardedDataParallel::record_state(const Unit& unit, trace::UnitState state,
                                            int64_t begin_ns, int64_t end_ns) {
  if (options_.recorder) {
    options_.recorder->unit_state(unit.lane, unit.index, state, begin_ns, end_ns, traced_iteration());
  }
}

void FullyShardedDataParallel::sample_memory() {
  if (options_.memory_sampler) options_.memory_sampler->sample();
}

}  // namespace dpscope::fsdp
