// Unit planning: which modules become FSDP units and which parameters each unit flattens —
// PyTorch's auto-wrap, innermost first, with every parameter in exactly one unit.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "engine/fsdp/fsdp_options.h"

namespace dpscope::fsdp {

// One planned unit: a module and the parameters it flattens (its own and those of submodules
// that are not units themselves), in registration order, shared parameters once.
struct UnitPlan {
  std::string name;  // qualified module name; "" for the root
  torch::nn::Module* module = nullptr;
  int32_t parent = -1;  // index of the enclosing unit; -1 for the root
  std::vector<std::string> param_names;  // qualified, as the root's named_parameters() says
  std::vector<at::Tensor> params;
};

struct WrapPlan {
  std::vector<UnitPlan> units;  // innermost first (post-order); the root is last
  // Why a submodule the policy chose was not wrapped (its parent calls its children directly,
  // or it holds no parameters of its own), for a note to the user.
  std::vector<std::string> notes;
};

// Walks `root` and asks `policy` (may be empty: no nesting) about each submodule, innermost
// first. A submodule is wrapped only when the policy says so, it holds parameters not already in
// a unit, and its parent is an nn::HookedParent that calls its children through nn::call_module
// (otherwise nothing would gather its parameters before its forward). Parameters that do not
// require grad are not supported: throws FsdpError naming them.
WrapPlan plan_units(torch::nn::Module& root, const WrapPolicy& policy);

}  // namespace dpscope::fsdp
