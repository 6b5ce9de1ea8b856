// The training loop of one rank: world, data, model, the DDP (or FSDP) wrapper, SGD, tracing and
// checkpoints, as the README's `dpscope train` contract describes it.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <string>
#include <utility>
#include <vector>

#include "engine/train/train_config.h"

namespace dpscope::train {

// Runs `config` as this rank (torchrun's environment; a single rank without it). Prints progress
// lines and, at the end, `step_ms <median>`. Throws std::exception with a message naming the
// flag, file or rank at fault.
TrainResult run_training(const TrainConfig& config);

// torch.optim.Optimizer.zero_grad(set_to_none=False): zeroes every gradient in place. A gradient
// that is a view (of a DDP bucket, with gradient_as_bucket_view) cannot be detached in place as
// LibTorch's own zero_grad does, so only leaves are.
void zero_grad(torch::optim::Optimizer& optimizer);

// Writes `tensors` by name as torch::pickle_save of a c10::Dict<std::string, at::Tensor> (CPU
// copies), readable by Python's torch.load. Throws naming the path.
void save_tensors(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                  const std::string& path);
// Writes `module`'s parameters and buffers, by name, as torch::pickle_save of a
// c10::Dict<std::string, at::Tensor> — readable by Python's torch.load. Throws naming the path.
void save_state(torch::nn::Module& module, const std::string& path);
// Reads such a file into `module` (every name must match). Throws naming the path and name.
void load_state(torch::nn::Module& module, const std::string& path);

}  // namespace dpscope::train
