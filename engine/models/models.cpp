// The small training models, and make_model over them and gpt (gpt.cpp). Names and registration
// order are part of the contract with the Python twins in tests/ddp/models.py (and with
// `dpscope train`'s documented parameter names).
#include "engine/models/models.h"

#include <ATen/ops/argmax.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <stdexcept>

#include "engine/nn/forward_hooks.h"
#include "engine/models/gpt.h"

namespace dpscope::models {

at::Tensor Model::loss(const at::Tensor& logits, const at::Tensor& targets) const {
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

int64_t Model::correct(const at::Tensor& logits, const at::Tensor& targets) const {
  return at::eq(at::argmax(logits, -1), targets).sum().item<int64_t>();
}

namespace {

// The seeds' ToyModel: net1 Linear(10, 10), ReLU, net2 Linear(10, 5).
class ToyModel final : public Model {
 public:
  ToyModel()
      : net1_(register_module("net1", torch::nn::Linear(10, 10))),
        net2_(register_module("net2", torch::nn::Linear(10, 5))) {}
  bool calls_children_through_hooks() const override { return true; }
  at::Tensor forward(const at::Tensor& x) override { return nn::call_module(net2_, at::relu(nn::call_module(net1_, x))); }

 private:
  torch::nn::Linear net1_;
  torch::nn::Linear net2_;
};

// fc0..fc{L-1}: Linear + ReLU of width `hidden`; fcL: Linear to the classes.
class Mlp final : public Model {
 public:
  Mlp(int64_t inputs, int64_t hidden, int64_t layers, int64_t classes) {
    int64_t width = inputs;
    for (int64_t i = 0; i < layers; ++i) {
      layers_.push_back(register_module("fc" + std::to_string(i), torch::nn::Linear(width, hidden)));
      width = hidden;
    }
    layers_.push_back(register_module("fc" + std::to_string(layers), torch::nn::Linear(width, classes)));
  }
  bool calls_children_through_hooks() const override { return true; }
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor h = x;
    for (size_t i = 0; i + 1 < layers_.size(); ++i) h = at::relu(nn::call_module(layers_[i], h));
    return nn::call_module(layers_.back(), h);
  }

 private:
  std::vector<torch::nn::Linear> layers_;
};

// Digits as 1x8x8 images: conv1 (16) + bn1 + ReLU, conv2 (32) + ReLU, 2x2 max-pool, fc to the
// classes. bn1's running statistics are the buffers DDP broadcasts before each forward.
class Cnn final : public Model {
 public:
  explicit Cnn(int64_t classes)
      : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)))),
        bn1_(register_module("bn1", torch::nn::BatchNorm2d(16))),
        conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)))),
        fc_(register_module("fc", torch::nn::Linear(32 * 4 * 4, classes))) {}
  bool calls_children_through_hooks() const override { return true; }
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor h = x.reshape({-1, 1, 8, 8});
    h = at::relu(nn::call_module(bn1_, nn::call_module(conv1_, h)));
    h = at::relu(nn::call_module(conv2_, h));
    h = torch::nn::functional::max_pool2d(h, torch::nn::functional::MaxPool2dFuncOptions(2));
    return nn::call_module(fc_, h.flatten(1));
  }

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::BatchNorm2d bn1_;
  torch::nn::Conv2d conv2_;
  torch::nn::Linear fc_;
};

// One pre-norm transformer block, single-head attention, on token sequences: embed + pos,
// ln1, q/k/v/o, ln2, mlp1/mlp2 (4x), head to the vocabulary.
class TinyTransformer final : public Model {
 public:
  TinyTransformer(int64_t vocab, int64_t sequence, int64_t dim)
      : dim_(dim),
        embed_(register_module("embed", torch::nn::Embedding(vocab, dim))),
        pos_(register_parameter("pos", at::randn({sequence, dim}) * 0.02)),
        ln1_(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        q_(register_module("q", torch::nn::Linear(dim, dim))),
        k_(register_module("k", torch::nn::Linear(dim, dim))),
        v_(register_module("v", torch::nn::Linear(dim, dim))),
        o_(register_module("o", torch::nn::Linear(dim, dim))),
        ln2_(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        mlp1_(register_module("mlp1", torch::nn::Linear(dim, 4 * dim))),
        mlp2_(register_module("mlp2", torch::nn::Linear(4 * dim, dim))),
        head_(register_module("head", torch::nn::Linear(dim, vocab))) {}
  bool calls_children_through_hooks() const override { return true; }
  at::Tensor forward(const at::Tensor& tokens) override {
    at::Tensor h = nn::call_module(embed_, tokens) + pos_;
    const at::Tensor a = nn::call_module(ln1_, h);
    // One statement per call, in the reference model's order (tests/ddp/models.py): C++ leaves
    // the order of a call's arguments open, and the order of the forward's operations is the
    // order backward delivers gradients in, which the rebuilt buckets follow.
    const at::Tensor query = nn::call_module(q_, a);
    const at::Tensor key = nn::call_module(k_, a);
    const at::Tensor scores =
        at::matmul(query, key.transpose(-2, -1)) / std::sqrt(static_cast<double>(dim_));
    const at::Tensor weights = at::softmax(scores, -1);
    const at::Tensor value = nn::call_module(v_, a);
    h = h + nn::call_module(o_, at::matmul(weights, value));
    h = h + nn::call_module(mlp2_, at::relu(nn::call_module(mlp1_, nn::call_module(ln2_, h))));
    return nn::call_module(head_, h);
  }

 private:
  int64_t dim_;
  torch::nn::Embedding embed_;
  at::Tensor pos_;
  torch::nn::LayerNorm ln1_;
  torch::nn::Linear q_, k_, v_, o_;
  torch::nn::LayerNorm ln2_;
  torch::nn::Linear mlp1_, mlp2_;
  torch::nn::Linear head_;
};

// A model with a branch some batches skip (find_unused_parameters): fc0 + ReLU, then head_a,
// plus head_b only when the batch's first input value is positive — so on some steps some ranks
// leave head_b without a gradient.
class BranchModel final : public Model {
 public:
  BranchModel(int64_t inputs, int64_t hidden, int64_t classes)
      : fc0_(register_module("fc0", torch::nn::Linear(inputs, hidden))),
        head_a_(register_module("head_a", torch::nn::Linear(hidden, classes))),
        head_b_(register_module("head_b", torch::nn::Linear(hidden, classes))) {}
  bool calls_children_through_hooks() const override { return true; }
  at::Tensor forward(const at::Tensor& x) override {
    const at::Tensor h = at::relu(nn::call_module(fc0_, x));
    at::Tensor out = nn::call_module(head_a_, h);
    if (x.reshape({-1})[0].item<float>() > 0) out = out + nn::call_module(head_b_, h);
    return out;
  }

 private:
  torch::nn::Linear fc0_;
  torch::nn::Linear head_a_;
  torch::nn::Linear head_b_;
};

}  // namespace

std::shared_ptr<Model> make_model(const ModelConfig& given) {
  check_model_config(given);
  const ModelConfig config = with_defaults(given);
  if (config.name == "toy") return std::make_shared<ToyModel>();
  if (config.name == "mlp") {
    return std::make_shared<Mlp>(config.input_features, *config.hidden, *config.layers, config.classes);
  }
  if (config.name == "branch") {
    return std::make_shared<BranchModel>(config.input_features, *config.hidden, config.classes);
  }
  if (config.name == "cnn") {
    if (config.input_features != 64) {
      throw std::invalid_argument("the cnn model reads 1x8x8 images (64 features); train it on "
                                  "--data digits or synthetic data with 64 features");
    }
    return std::make_shared<Cnn>(config.classes);
  }
  if (config.name == "transformer") {
    if (config.vocab < 1 || config.model_dim < 1) {
      throw std::invalid_argument("the transformer needs a vocabulary and a width of at least 1");
    }
    return std::make_shared<TinyTransformer>(config.vocab, *config.sequence, config.model_dim);
  }
  if (config.name == "gpt") {
    if (config.vocab < 1) {
      throw std::invalid_argument("gpt needs a vocabulary of at least 1 token (the text's "
                                  "characters; --data text sets it)");
    }
    return make_gpt(config.vocab, *config.sequence, *config.hidden, *config.layers, *config.heads);
  }
  throw std::invalid_argument("unknown model '" + config.name + "'");  // check_model_config's job
}

std::string summarize(const std::string& name, torch::nn::Module& module) {
  int64_t count = 0;
  for (const at::Tensor& param : module.parameters(true)) count += param.numel();
  std::string digits = std::to_string(count);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  return name + " (" + digits + " parameters, " + std::to_string(module.parameters(true).size()) +
         " tensors)";
}

}  // namespace dpscope::models
