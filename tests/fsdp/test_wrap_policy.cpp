// Unit planning (engine/fsdp/wrap_policy.h) in one process: which modules become units, innermost
// first, with which parameters and parents; what a policy cannot wrap and why; the option parsers.
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

#include "engine/fsdp/wrap_policy.h"
#include "engine/nn/forward_hooks.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"

namespace fsdp = dpscope::fsdp;
namespace models = dpscope::models;
namespace nn = dpscope::nn;

namespace {

std::shared_ptr<models::Model> mlp(int64_t hidden, int64_t layers) {
  models::ModelConfig config;
  config.hidden = hidden;
  config.layers = layers;
  return models::make_model(config);
}

std::vector<std::string> names_of(const fsdp::WrapPlan& plan) {
  std::vector<std::string> names;
  for (const auto& unit : plan.units) names.push_back(unit.name);
  return names;
}

TEST(WrapPolicy, NoPolicyOneRootUnitWithEverything) {
  auto model = mlp(33, 2);
  const fsdp::WrapPlan plan = fsdp::plan_units(*model, {});
  ASSERT_EQ(plan.units.size(), 1u);
  EXPECT_EQ(plan.units[0].name, "");
  EXPECT_EQ(plan.units[0].parent, -1);
  EXPECT_EQ(plan.units[0].param_names,
            (std::vector<std::string>{"fc0.weight", "fc0.bias", "fc1.weight", "fc1.bias",
                                      "fc2.weight", "fc2.bias"}));
}

TEST(WrapPolicy, SizeBasedWrapsEachLargeEnoughLayer) {
  auto model = mlp(33, 2);  // fc0 2145, fc1 1122, fc2 340 elements
  const fsdp::WrapPlan plan = fsdp::plan_units(*model, fsdp::size_based_wrap_policy(1000));
  EXPECT_EQ(names_of(plan), (std::vector<std::string>{"fc0", "fc1", ""}));
  EXPECT_EQ(plan.units[0].parent, 2);
  EXPECT_EQ(plan.units[1].parent, 2);
  EXPECT_EQ(plan.units[0].param_names, (std::vector<std::string>{"fc0.weight", "fc0.bias"}));
  EXPECT_EQ(plan.units[2].param_names, (std::vector<std::string>{"fc2.weight", "fc2.bias"}));
  EXPECT_TRUE(plan.notes.empty());
}

TEST(WrapPolicy, ZeroWrapsNothing) {
  auto model = mlp(33, 2);
  EXPECT_EQ(fsdp::plan_units(*model, fsdp::size_based_wrap_policy(0)).units.size(), 1u);
}

// block (own parameter `scale`, children a and b) inside a root with a head: innermost first.
class Block : public models::Model {
 public:
  Block() {
    scale_ = register_parameter("scale", torch::ones({8}));
    a_ = register_module("a", torch::nn::Linear(8, 8));
    b_ = register_module("b", torch::nn::Linear(8, 8));
  }
  at::Tensor forward(const at::Tensor& x) override {
    return nn::call_module(b_, nn::call_module(a_, x * scale_));
  }
  bool calls_children_through_hooks() const override { return true; }

 private:
  at::Tensor scale_;
  torch::nn::Linear a_{nullptr}, b_{nullptr};
};

class Outer : public models::Model {
 public:
  explicit Outer(bool hookable) : hookable_(hookable) {
    block_ = register_module("block", std::make_shared<Block>());
    head_ = register_module("head", torch::nn::Linear(8, 2));
  }
  at::Tensor forward(const at::Tensor& x) override { return head_(block_->forward(x)); }
  bool calls_children_through_hooks() const override { return hookable_; }

 private:
  bool hookable_;
  std::shared_ptr<Block> block_;
  torch::nn::Linear head_{nullptr};
};

TEST(WrapPolicy, NestedInnermostFirstWithParents) {
  Outer model(true);
  const fsdp::WrapPlan plan = fsdp::plan_units(model, fsdp::size_based_wrap_policy(1));
  EXPECT_EQ(names_of(plan), (std::vector<std::string>{"block.a", "block.b", "block", "head", ""}));
  EXPECT_EQ(plan.units[0].parent, 2);
  EXPECT_EQ(plan.units[1].parent, 2);
  EXPECT_EQ(plan.units[2].parent, 4);
  EXPECT_EQ(plan.units[3].parent, 4);
  EXPECT_EQ(plan.units[2].param_names, (std::vector<std::string>{"block.scale"}));
  EXPECT_TRUE(plan.units[4].params.empty()) << "the root keeps nothing of its own";
}

TEST(WrapPolicy, ChildrenCalledDirectlyStayInTheParentsUnit) {
  Outer model(false);
  const fsdp::WrapPlan plan = fsdp::plan_units(model, fsdp::size_based_wrap_policy(1));
  // block's own children are still wrapped (Block calls them through call_module); block and
  // head are not, since Outer calls them directly.
  EXPECT_EQ(names_of(plan), (std::vector<std::string>{"block.a", "block.b", ""}));
  ASSERT_EQ(plan.notes.size(), 2u);
  EXPECT_NE(plan.notes[0].find("'block' stays in its parent's unit"), std::string::npos);
  EXPECT_NE(plan.notes[1].find("'head'"), std::string::npos);
  EXPECT_EQ(plan.units[2].param_names,
            (std::vector<std::string>{"block.scale", "head.weight", "head.bias"}));
}

TEST(WrapPolicy, FrozenParameterIsRefused) {
  auto model = mlp(8, 1);
  model->named_parameters()["fc0.bias"].set_requires_grad(false);
  try {
    fsdp::plan_units(*model, {});
    FAIL() << "a frozen parameter was accepted";
  } catch (const fsdp::FsdpError& error) {
    EXPECT_NE(std::string(error.what()).find("'fc0.bias' does not require grad"), std::string::npos);
  }
}

TEST(WrapPolicy, ModesHaveOneSpellingEach) {
  EXPECT_EQ(dpscope::trace::parse_mode(fsdp::kShardingStrategies, "grad_op"), fsdp::ShardingStrategy::ShardGradOp);
  EXPECT_EQ(dpscope::trace::parse_mode(fsdp::kBackwardPrefetches, "post"), fsdp::BackwardPrefetch::Post);
  EXPECT_EQ(dpscope::trace::parse_mode(fsdp::kComputePrecisions, "bf16"), fsdp::ComputePrecision::Bf16);
  EXPECT_FALSE(dpscope::trace::parse_mode(fsdp::kShardingStrategies, "zero3").has_value());
  EXPECT_FALSE(dpscope::trace::parse_mode(fsdp::kComputePrecisions, "fp8").has_value());
  for (fsdp::ShardingStrategy mode : fsdp::kShardingStrategies) {
    EXPECT_EQ(dpscope::trace::parse_mode(fsdp::kShardingStrategies, fsdp::to_string(mode)), mode);
  }
  for (fsdp::BackwardPrefetch mode : fsdp::kBackwardPrefetches) {
    EXPECT_EQ(dpscope::trace::parse_mode(fsdp::kBackwardPrefetches, fsdp::to_string(mode)), mode);
  }
  EXPECT_EQ(dpscope::trace::mode_spellings(fsdp::kComputePrecisions),
            (std::vector<std::string>{"none", "fp16", "bf16"}));
}

TEST(WrapPolicy, MixedPrecisionDtypesFollowTheComputePrecision) {
  const fsdp::MixedPrecision bf16 = fsdp::mixed_precision_for(fsdp::ComputePrecision::Bf16, true);
  EXPECT_EQ(bf16.param_dtype, c10::ScalarType::BFloat16);
  EXPECT_EQ(bf16.buffer_dtype, c10::ScalarType::BFloat16);
  EXPECT_EQ(bf16.reduce_dtype, c10::ScalarType::Float);
  const fsdp::MixedPrecision fp16 = fsdp::mixed_precision_for(fsdp::ComputePrecision::Fp16, false);
  EXPECT_EQ(fp16.reduce_dtype, c10::ScalarType::Half);
  EXPECT_FALSE(fsdp::mixed_precision_for(fsdp::ComputePrecision::Fp32, false).enabled());
}

TEST(ForwardHooks, CallModuleRunsHooksAroundTheModule) {
  torch::nn::Linear linear(4, 2);
  std::vector<std::string> calls;
  nn::set_forward_hooks(*linear, {[&] { calls.push_back("pre"); },
                                      [&](at::Tensor out) {
                                        calls.push_back("post");
                                        return out * 0;
                                      }});
  const at::Tensor out = nn::call_module(linear, torch::ones({3, 4}));
  EXPECT_EQ(calls, (std::vector<std::string>{"pre", "post"}));
  EXPECT_EQ(out.abs().sum().item<float>(), 0.f) << "the post-hook's output is returned";
  nn::clear_forward_hooks(*linear);
  EXPECT_NE(nn::call_module(linear, torch::ones({3, 4})).abs().sum().item<float>(), 0.f);
  EXPECT_EQ(calls.size(), 2u);
}

}  // namespace
