// fully_shard and FsdpState (fully_shard.h): which parameters a call manages and which states
// below it become its children, the root's lazy init (the shared context, unit order, the trace
// layout), and the forward path (Note [FSDP2 hooks], steps 1 and 2). Backward is
// fully_shard_backward.cpp, state dicts fully_shard_state.cpp.
#include "engine/fsdp2/fully_shard.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "engine/memory/memory_sampler.h"
#include "engine/memory/tracking_allocator.h"
#include "engine/nn/forward_hooks.h"
#include "trace/vocabulary.h"

namespace dpscope::fsdp2 {

namespace {

// Every module fully_shard was applied to (PyTorch keeps the state on the module itself), and
// the states no ancestor's fully_shard has claimed yet, held here until one does or until the
// state becomes a root (its lazy init): fully_shard's result may be dropped, as in Python. The
// registry is never destroyed, so a state left unclaimed at exit is never torn down.
struct ShardRegistry {
  std::mutex mutex;
  std::unordered_map<const torch::nn::Module*, FsdpState*> live;
  std::unordered_map<const torch::nn::Module*, std::shared_ptr<FsdpState>> unclaimed;
};

ShardRegistry& shard_registry() {
  static auto* registry = new ShardRegistry();
  return *registry;
}

// Group ids of the post-forward groups: above those of the world (0) and the tutorials' groups,
// below HSDP's (Note [HSDP mesh]).
constexpr int kPostForwardGroupIds = 1000;

// The group of `size` ranks this rank keeps post-forward slices for (See Note [Resharding to a
// smaller group]): the shard group's ranks k * size .. k * size + size - 1, numbered across the
// world so that every such group has an id of its own under HSDP too.
std::shared_ptr<comm::ProcessGroup> make_post_forward_group(const comm::DeviceMesh& mesh, int size) {
  const int index = mesh.world_rank() / size;
  return comm::make_subgroup(mesh.shard, mesh.shard->rank() % size, size,
                       kPostForwardGroupIds + mesh.world_size() * size + index,
                       "reshard_after_forward " + std::to_string(size) + " #" + std::to_string(index));
}

}  // namespace

std::shared_ptr<FsdpState> fully_shard(torch::nn::Module& module,
                                       std::shared_ptr<comm::ProcessGroup> group,
                                       FullyShardOptions options) {
  return fully_shard(module, comm::DeviceMesh::sharded_over(std::move(group)), options);
}

std::shared_ptr<FsdpState> fully_shard(torch::nn::Module& module, comm::DeviceMesh mesh,
                                       FullyShardOptions options) {
  if (!mesh.shard) throw Fsdp2Error("fully_shard needs a process group (got null)");
  const std::shared_ptr<comm::ProcessGroup>& group = mesh.shard;
  resolve_reshard(options.reshard_after_forward, group->size());  // refuses a bad int form
  ShardRegistry& registry = shard_registry();
  std::vector<std::shared_ptr<FsdpState>> children;
  std::vector<std::pair<std::string, const FsdpState*>> sharded_below;
  {
    const std::lock_guard<std::mutex> lock(registry.mutex);
    if (registry.live.count(&module)) {
      throw Fsdp2Error("fully_shard was applied to this module already; apply it once to each "
                       "module, innermost first, the root last");
    }
    for (const auto& item : module.named_modules("", /*include_self=*/false)) {
      const auto live = registry.live.find(item.value().get());
      if (live != registry.live.end()) sharded_below.emplace_back(item.key(), live->second);
      const auto unclaimed = registry.unclaimed.find(item.value().get());
      if (unclaimed == registry.unclaimed.end()) continue;
      // A module registered under two names is one child.
      if (std::find(children.begin(), children.end(), unclaimed->second) == children.end()) {
        children.push_back(unclaimed->second);
      }
    }
  }
  std::unordered_set<const void*> managed_below;
  std::unordered_set<const FsdpState*> states_below;
  for (const auto& child : children) {
    if (!(child->mesh_ == mesh)) {
      throw Fsdp2Error("fully_shard: a submodule was sharded over another process group or mesh; "
                       "shard a model over one group (FSDP) or one comm::DeviceMesh (HSDP) throughout");
    }
    child->add_managed(&managed_below, &states_below);
  }
  for (const auto& [name, state] : sharded_below) {
    if (!states_below.count(state)) {
      throw Fsdp2Error("fully_shard: '" + name + "' was used (forward, unshard, no_sync or "
                       "full_state_dict) before fully_shard reached this ancestor of it; apply "
                       "fully_shard to every module first, innermost first, then use the root");
    }
  }
  const c10::ScalarType compute_dtype = scalar_type_of(options.mp_policy.param);
  std::vector<std::unique_ptr<FsdpParam>> params;
  std::unordered_set<const void*> seen;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const void* impl = item.value().unsafeGetTensorImpl();
    if (managed_below.count(impl) || !seen.insert(impl).second) continue;
    if (compute_dtype == c10::ScalarType::Half && item.value().is_cpu()) {
      throw Fsdp2Error("fp16 compute is not available on the CPU (LibTorch has no float16 matrix "
                       "multiply there); use bf16 on the CPU, fp16 on CUDA devices");
    }
    params.push_back(std::make_unique<FsdpParam>(item.value(), item.key(), group->rank(),
                                                 group->size(), compute_dtype, options.offload_policy));
  }
  // The module's buffers stay whole on every rank: counted as parameters in both accountings
  // (Note [Ownership accounting]).
  for (const at::Tensor& buffer : module.buffers()) memory::count_as(buffer, memory::MemoryCategory::Parameters);
  auto state = std::make_shared<FsdpState>(module, mesh, options, children, std::move(params));
  {
    const std::lock_guard<std::mutex> lock(registry.mutex);
    for (const auto& child : children) {
      registry.unclaimed.erase(child->module_);
      child->parent_ = state.get();
    }
    registry.live[&module] = state.get();
    registry.unclaimed[&module] = state;
  }
  if (options.memory_sampler) options.memory_sampler->sample();
  return state;
}

FsdpState::FsdpState(torch::nn::Module& module, comm::DeviceMesh mesh, FullyShardOptions options,
                     std::vector<std::shared_ptr<FsdpState>> children,
                     std::vector<std::unique_ptr<FsdpParam>> params)
    : module_(&module),
      mesh_(std::move(mesh)),
      options_(options),
      reshard_(resolve_reshard(options.reshard_after_forward, mesh_.shard_size())),
      param_group_(std::make_unique<FsdpParamGroup>(std::move(params), "",
                                                    scalar_type_of(options.mp_policy.reduce))),
      children_(std::move(children)) {
  nn::set_forward_hooks(
      module, {[this] { pre_forward(); },
               [this](at::Tensor output) { return post_forward(std::move(output)); }});
}

FsdpState::~FsdpState() {
  nn::clear_forward_hooks(*module_);
  ShardRegistry& registry = shard_registry();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  const auto live = registry.live.find(module_);
  if (live != registry.live.end() && live->second == this) registry.live.erase(live);
}

void FsdpState::add_managed(std::unordered_set<const void*>* params,
                            std::unordered_set<const FsdpState*>* states) const {
  states->insert(this);
  for (const auto& param : param_group_->params()) {
    params->insert(param->unsharded_param().unsafeGetTensorImpl());
  }
  for (const auto& child : children_) child->add_managed(params, states);
}

int32_t FsdpState::collect_states(std::vector<FsdpState*>* out, std::vector<int32_t>* parents) {
  std::vector<int32_t> below;
  for (const auto& child : children_) below.push_back(child->collect_states(out, parents));
  out->push_back(this);
  parents->push_back(trace::kNone);
  const auto index = static_cast<int32_t>(out->size() - 1);
  for (const int32_t child : below) (*parents)[static_cast<size_t>(child)] = index;
  return index;
}

// ---- Lazy init ----------------------------------------------------------------------------

void FsdpState::lazy_init() {
  if (role_ != Role::Undecided) return;
  if (parent_) {
    throw Fsdp2Error("a module under a fully_shard ancestor ran alone; run forward (and unshard, "
                     "no_sync, full_state_dict) through the root's state, as PyTorch requires");
  }
  role_ = Role::Root;
  {
    ShardRegistry& registry = shard_registry();
    const std::lock_guard<std::mutex> lock(registry.mutex);
    registry.unclaimed.erase(module_);  // the caller holds the state: it is theirs now
  }
  ctx_ = std::make_shared<Fsdp2Context>();
  ctx_->group = mesh_.shard;
  ctx_->replicate = mesh_.replicated() ? mesh_.replicate : nullptr;
  ctx_->recorder = options_.recorder;
  ctx_->memory_sampler = options_.memory_sampler;
  ctx_->root = this;
  if (trace::Recorder* recorder = options_.recorder) {
    ctx_->copy_in_name = recorder->name("fsdp2.all_gather_copy_in");
    ctx_->copy_out_name = recorder->name("fsdp2.all_gather_copy_out");
    ctx_->reduce_copy_in_name = recorder->name("fsdp2.reduce_scatter_copy_in");
    final_callback_name_ = recorder->name("fsdp2.final_callback");
    recorder->set_meta(trace::meta_key::kFsdp2ReshardAfterForward,
                       options_.reshard_after_forward.text());
    recorder->set_meta(trace::meta_key::kFsdpSharding,
                       trace::to_string(mesh_.hybrid() ? trace::ShardingStrategy::HybridShard
                                                       : trace::ShardingStrategy::FullShard));
    if (mesh_.hybrid()) {
      recorder->set_meta(trace::meta_key::kFsdpShardGroupSize, std::to_string(mesh_.shard_size()));
    }
  }
  // The root's backward begins as soon as its forward ends: resharding it would only gather it
  // again (PyTorch's lazy init clears the root's post-forward mesh likewise).
  reshard_ = ReshardAfterForward::Keep;
  std::vector<int32_t> parents;
  collect_states(&all_states_, &parents);
  attach_states(parents);
  make_post_forward_groups();
  ctx_->sample_memory();
}

void FsdpState::attach_states(const std::vector<int32_t>& parents) {
  // PyTorch's _validate_no_duplicate_params: a parameter in two groups would be gathered and
  // reduced twice.
  std::unordered_set<const void*> owned;
  for (const FsdpState* state : all_states_) {
    for (const auto& param : state->param_group_->params()) {
      if (!owned.insert(param->unsharded_param().unsafeGetTensorImpl()).second) {
        throw Fsdp2Error("parameter '" + param->name() + "' is shared by two fully_shard "
                         "groups; apply fully_shard to a module that holds every user of it");
      }
    }
  }
  RootParams root_params;
  {
    std::unordered_set<const void*> seen;
    for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
      const void* impl = item.value().unsafeGetTensorImpl();
      if (seen.insert(impl).second) root_params.emplace_back(impl, item.key());
    }
  }
  // (include_self would need the root to live in a shared_ptr.)
  std::unordered_map<const torch::nn::Module*, std::string> names{{module_, ""}};
  for (const auto& item : module_->named_modules("", /*include_self=*/false)) {
    names.emplace(item.value().get(), item.key());
  }
  for (size_t i = 0; i < all_states_.size(); ++i) {
    FsdpState& state = *all_states_[i];
    if (&state != this) state.role_ = Role::Nested;
    state.ctx_ = ctx_;
    state.param_group_->attach(ctx_, static_cast<int32_t>(i), parents[i], names[state.module_],
                               root_params);
  }
}

// One group of N ranks for every N a state reshards to, made on every rank alike (a collective).
void FsdpState::make_post_forward_groups() {
  std::map<int, std::shared_ptr<comm::ProcessGroup>> groups;
  for (FsdpState* state : all_states_) {
    if (state->reshard_ != ReshardAfterForward::ToGroupSize) continue;
    const int size = state->options_.reshard_after_forward.group_size;
    std::shared_ptr<comm::ProcessGroup>& group = groups[size];
    if (!group) group = make_post_forward_group(mesh_, size);
    state->param_group_->set_post_forward_group(group);
  }
}

// ---- Forward ------------------------------------------------------------------------------

at::Tensor FsdpState::forward(const at::Tensor& input,
                              const std::function<at::Tensor(const at::Tensor&)>& run) {
  lazy_init();
  // An evaluation forward is no iteration's work (Note [Work outside iterations]).
  const WorkScope previous = ctx_->scope;
  if (!c10::GradMode::is_enabled()) ctx_->scope = WorkScope::OutsideIterations;
  try {
    begin_root_forward();
    pre_forward();
    // Mixed precision: the root casts floating inputs to the parameters' dtype (PyTorch's
    // cast_forward_inputs) and its output back to float32 (PyTorch's output_dtype, which
    // dpscope sets: the loss is computed in float32, as FSDP1 here returns it).
    const MixedPrecisionPolicy& mp = options_.mp_policy;
    const at::Tensor cast_input = mp.enabled() && input.is_floating_point()
                                      ? input.to(scalar_type_of(mp.param))
                                      : input;
    // What the model computes counts as activations; the gathers set their own category.
    at::Tensor output = post_forward([&] {
      memory::CategoryScope activations(memory::MemoryCategory::Activations);
      return run(cast_input);
    }());
    if (mp.enabled() && output.is_floating_point()) output = output.to(c10::ScalarType::Float);
    // Evaluation: no backward will come to reshard what forward gathered (the root's group).
    if (!c10::GradMode::is_enabled()) {
      for (FsdpState* state : all_states_) state->param_group_->reshard();
    }
    ctx_->scope = previous;
    return output;
  } catch (...) {
    ctx_->scope = previous;
    throw;
  }
}

void FsdpState::begin_root_forward() {
  if (!c10::GradMode::is_enabled()) return;
  if (ctx_->step_finished) {
    ++ctx_->iteration;
    ctx_->step_finished = false;
  }
  // A forward whose backward never ran leaves groups gathered and in the post-forward order.
  if (!ctx_->post_forward_order.empty()) {
    for (FsdpState* state : all_states_) state->param_group_->end_backward();
    ctx_->post_forward_order.clear();
  }
}

void FsdpState::pre_forward() {
  if (!ctx_) lazy_init();  // a state run on its own becomes a root, as in PyTorch
  param_group_->set_pass(GroupPass::Forward);
  param_group_->unshard(0);
  param_group_->wait_for_unshard();
  for (FsdpState* target : forward_prefetch_) target->param_group_->unshard(trace::kFlagPrefetch);
}

void FsdpState::set_modules_to_forward_prefetch(std::vector<FsdpState*> states) {
  forward_prefetch_ = std::move(states);
}

void FsdpState::set_modules_to_backward_prefetch(std::vector<FsdpState*> states) {
  backward_prefetch_ = std::move(states);
}

at::Tensor FsdpState::post_forward(at::Tensor output) {
  param_group_->set_pass(GroupPass::Idle);
  if (!c10::GradMode::is_enabled()) {
    if (role_ != Role::Root) param_group_->reshard();
    return output;
  }
  switch (reshard_) {
    case ReshardAfterForward::Reshard: param_group_->reshard(); break;
    case ReshardAfterForward::ToGroupSize: param_group_->reshard_to_post_forward(); break;
    case ReshardAfterForward::Keep: break;
  }
  param_group_->post_forward_indices.push_back(ctx_->post_forward_order.size());
  ctx_->post_forward_order.push_back(param_group_.get());
  register_pre_backward_hook(output);
  return output;
}

void FsdpState::unshard() {
  lazy_init();
  param_group_->unshard(0);
  param_group_->wait_for_unshard();
}

void FsdpState::reshard() {
  if (ctx_) param_group_->reshard();
}

std::vector<at::Tensor> FsdpState::parameters() {
  std::vector<FsdpState*> states;
  std::vector<int32_t> parents;
  collect_states(&states, &parents);
  std::vector<at::Tensor> sharded;
  for (const FsdpState* state : states) {
    for (const auto& param : state->param_group_->params()) sharded.push_back(param->sharded_param());
  }
  return sharded;
}

Fsdp2Context& FsdpState::initialized_context(FsdpState& root) {
  root.lazy_init();
  return *root.ctx_;
}

replica::GradientSync& FsdpState::gradient_sync() { return initialized_context(*this).gradient_sync; }

}  // namespace dpscope::fsdp2
