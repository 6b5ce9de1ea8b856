// Unit planning (wrap_policy.h): the size-based policy and the auto-wrap walk over the module
// tree, innermost first.
#include "engine/fsdp/wrap_policy.h"

#include <unordered_set>

#include "engine/nn/forward_hooks.h"

namespace dpscope::fsdp {

WrapPolicy size_based_wrap_policy(int64_t min_params) {
  return [min_params](const std::string&, const torch::nn::Module&, int64_t numel) {
    return min_params > 0 && numel >= min_params;
  };
}

namespace {

struct NamedParam {
  std::string name;
  at::Tensor tensor;
};

class Planner {
 public:
  Planner(const WrapPolicy& policy) : policy_(policy) {}

  // The parameters of `module`'s subtree not claimed by a unit inside it, in registration order.
  std::vector<NamedParam> visit(torch::nn::Module& module, const std::string& prefix) {
    std::vector<NamedParam> open;
    for (const auto& item : module.named_parameters(/*recurse=*/false)) {
      if (!seen_.insert(item.value().unsafeGetTensorImpl()).second) continue;
      open.push_back({prefix + item.key(), item.value()});
    }
    const auto* parent = dynamic_cast<const nn::HookedParent*>(&module);
    const bool children_hookable = parent && parent->calls_children_through_hooks();
    for (const auto& child : module.named_children()) {
      const std::string name = prefix + child.key();
      const size_t first_unit = plan_.units.size();
      std::vector<NamedParam> below = visit(*child.value(), name + ".");
      int64_t numel = 0;
      for (const NamedParam& p : below) numel += p.tensor.numel();
      if (policy_ && numel > 0 && policy_(name, *child.value(), numel)) {
        if (children_hookable) {
          add_unit(name, child.value().get(), std::move(below), first_unit);
          continue;
        }
        plan_.notes.push_back("'" + name + "' stays in its parent's unit: its parent's forward "
                              "calls it directly, not through nn::call_module");
      }
      for (NamedParam& p : below) open.push_back(std::move(p));
    }
    return open;
  }

  void add_unit(const std::string& name, torch::nn::Module* module, std::vector<NamedParam> params,
                size_t first_child_unit) {
    UnitPlan unit;
    unit.name = name;
    unit.module = module;
    for (NamedParam& p : params) {
      if (!p.tensor.requires_grad()) {
        throw FsdpError("parameter '" + p.name + "' does not require grad; FSDP flattens only "
                        "trainable parameters — make it a buffer, or train it");
      }
      unit.param_names.push_back(std::move(p.name));
      unit.params.push_back(std::move(p.tensor));
    }
    const int32_t index = static_cast<int32_t>(plan_.units.size());
    for (size_t i = first_child_unit; i < plan_.units.size(); ++i) {
      if (plan_.units[i].parent < 0) plan_.units[i].parent = index;
    }
    plan_.units.push_back(std::move(unit));
  }

  WrapPlan take() { return std::move(plan_); }

 private:
  const WrapPolicy& policy_;
  std::unordered_set<const void*> seen_;
  WrapPlan plan_;
};

}  // namespace

WrapPlan plan_units(torch::nn::Module& root, const WrapPolicy& policy) {
  Planner planner(policy);
  std::vector<NamedParam> rest = planner.visit(root, "");
  planner.add_unit("", &root, std::move(rest), 0);
  WrapPlan plan = planner.take();
  plan.units.back().parent = -1;
  return plan;
}

}  // namespace dpscope::fsdp
