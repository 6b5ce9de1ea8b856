// The model a run trains, as a plain struct without LibTorch, so that train_config.h (and with it
// the command line's option definitions, which the CLI fuzzer builds) needs no LibTorch.
// models.h builds the models from it.
#pragma once

#include <cstdint>
#include <string>

namespace dpscope::models {

struct ModelConfig {
  std::string name = "mlp";     // toy | mlp | cnn | transformer | branch
  int64_t input_features = 64;  // mlp: width of x
  int64_t classes = 10;         // mlp, cnn: output classes
  int64_t hidden = 256;         // mlp: width of the hidden layers
  int64_t layers = 2;           // mlp: Linear+ReLU blocks before the output layer
  int64_t vocab = 16;           // transformer: tokens
  int64_t sequence = 8;         // transformer: sequence length
  int64_t model_dim = 32;       // transformer: width
};

}  // namespace dpscope::models
