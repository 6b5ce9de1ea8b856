// The model a run trains, as a plain struct without LibTorch, so that train_config.h (and with it
// the command line's option definitions, which the CLI fuzzer builds) needs no LibTorch.
// models.h builds the models from it; model_config.cpp holds its sizes to what they can build.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dpscope::models {

struct ModelConfig {
  std::string name = "mlp";     // toy | mlp | cnn | transformer | branch | gpt
  int64_t input_features = 64;  // mlp, branch: width of x
  int64_t classes = 10;         // mlp, branch, cnn: output classes
  // A size left unset is its model's own default (with_defaults): --hidden and --layers size the
  // mlp and gpt alike, and a default that suits one does not suit the other.
  std::optional<int64_t> hidden;    // mlp, branch: hidden width (256); gpt: residual width (128)
  std::optional<int64_t> layers;    // mlp: Linear+ReLU blocks before the output (2); gpt: blocks (4)
  std::optional<int64_t> heads;     // gpt: attention heads, each hidden / heads wide (4)
  std::optional<int64_t> sequence;  // transformer: sequence length (8); gpt: context, characters (64)
  int64_t vocab = 16;               // transformer: tokens; gpt: the text's characters (set from it)
  int64_t model_dim = 32;           // transformer: width
};

// `config` with every size its model uses set: the given ones, else the model's defaults.
ModelConfig with_defaults(const ModelConfig& config);

// Throws std::invalid_argument naming the flag and the fix when `config` asks for a size its
// model cannot be built with (gpt: --hidden not a multiple of --heads), or sets a flag its model
// has no use for (--heads other than with gpt, --seq other than with gpt or transformer).
// make_model checks this; so does `dpscope train` before it starts (train_config.cpp).
void check_model_config(const ModelConfig& config);

}  // namespace dpscope::models
