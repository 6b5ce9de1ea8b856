// The models `dpscope train` and the tutorials train: the seeds' ToyModel, an MLP, a small CNN on
// digits as 1x8x8 images, a tiny transformer on a synthetic sequence task and a GPT-shaped
// character-level language model (gpt.h). Each has a Python twin in tests/ddp/models.py with the
// same parameter names and registration order, so PyTorch's own DDP can be trained from the same
// saved parameters. `branch` (an MLP head used only on some batches) shows unused parameters.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "engine/models/model_config.h"
#include "engine/nn/forward_hooks.h"

namespace dpscope::models {

// A classifier: forward maps a batch of inputs to logits; loss is the mean cross-entropy over
// the batch (over every token for the transformer and gpt).
class Model : public torch::nn::Module, public nn::HookedParent {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  virtual at::Tensor loss(const at::Tensor& logits, const at::Tensor& targets) const;
  // The number of correct predictions in a batch (every token for the transformer and gpt).
  virtual int64_t correct(const at::Tensor& logits, const at::Tensor& targets) const;
  // nn::HookedParent: the engine's models all call their children through nn::call_module; a
  // model that calls them directly keeps this default and FSDP wraps it whole.
  bool calls_children_through_hooks() const override { return false; }
};

// Builds the model, with its default sizes where `config` leaves them unset (model_config.h).
// Throws std::invalid_argument naming the choices for an unknown name, and the flag for a bad
// size (check_model_config).
std::shared_ptr<Model> make_model(const ModelConfig& config);

// "mlp: 3 layers of 1024 (1,123,338 parameters)"-style one-line summary.
std::string summarize(const std::string& name, torch::nn::Module& module);

}  // namespace dpscope::models
