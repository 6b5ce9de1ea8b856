// The GPT model (gpt.h): blocks of causal multi-head self-attention and a GELU MLP, each behind
// a pre-norm residual. Every module call and every operation on the way is written in the twin's
// order (tests/ddp/models.py, Gpt), one statement each: see the note in forward.
#include "engine/models/gpt.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <c10/core/GradMode.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/nn/forward_hooks.h"

namespace dpscope::models {

namespace {

constexpr double kInitStd = 0.02;  // GPT-2's

torch::nn::LayerNorm layer_norm(int64_t width) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({width}));
}

// GPT-2's initialisation; LibTorch's defaults (uniform Linear, unit-normal embeddings) train
// far slower under plain SGD, the only optimizer `dpscope train` has.
void init_linear(torch::nn::Linear& layer, double stddev) {
  c10::NoGradGuard no_grad;
  layer->weight.normal_(0, stddev);
  layer->bias.zero_();
}

// One block: h = x + attention(ln_1(x)); out = h + mlp(ln_2(h)). A Model (though not a whole
// one) because FSDP's wrap policy makes a module's children units only when that module is a
// Model whose forward calls them through call_module.
class GptBlockImpl final : public Model {
 public:
  GptBlockImpl(int64_t hidden, int64_t heads, int64_t layers)
      : heads_(heads),
        ln_1_(register_module("ln_1", layer_norm(hidden))),
        attn_qkv_(register_module("attn_qkv", torch::nn::Linear(hidden, 3 * hidden))),
        attn_proj_(register_module("attn_proj", torch::nn::Linear(hidden, hidden))),
        ln_2_(register_module("ln_2", layer_norm(hidden))),
        mlp_fc_(register_module("mlp_fc", torch::nn::Linear(hidden, 4 * hidden))),
        mlp_proj_(register_module("mlp_proj", torch::nn::Linear(4 * hidden, hidden))) {
    // The projections into the residual stream are scaled down by the number of residual
    // additions (two a block), so that the stream's variance does not grow with depth.
    const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(layers));
    init_linear(attn_qkv_, kInitStd);
    init_linear(attn_proj_, residual_std);
    init_linear(mlp_fc_, kInitStd);
    init_linear(mlp_proj_, residual_std);
  }

  bool calls_children_through_hooks() const override { return true; }

  at::Tensor forward(const at::Tensor& x) override {
    const int64_t batch = x.size(0);
    const int64_t length = x.size(1);
    const int64_t width = x.size(2);
    const int64_t head_width = width / heads_;
    // Note: one statement per module call, and every operation in the twin's order. C++ leaves
    // the order of a call's arguments open; the order forward creates autograd nodes is the order
    // backward runs them, so it decides the order gradients reach DDP, which builds its buckets
    // from that order (docs/ddp.md, "The first iteration's buckets").
    const at::Tensor a = nn::call_module(ln_1_, x);
    const at::Tensor qkv = nn::call_module(attn_qkv_, a);
    const std::vector<at::Tensor> parts = qkv.split(width, 2);
    const at::Tensor q = parts[0].view({batch, length, heads_, head_width}).transpose(1, 2);
    const at::Tensor k = parts[1].view({batch, length, heads_, head_width}).transpose(1, 2);
    const at::Tensor v = parts[2].view({batch, length, heads_, head_width}).transpose(1, 2);
    const at::Tensor key_t = k.transpose(-2, -1);
    const at::Tensor scores = at::matmul(q, key_t) / std::sqrt(static_cast<double>(head_width));
    // Causal: position t attends to positions 0..t; the future is masked before the softmax.
    const at::Tensor future = at::ones({length, length}, scores.options().dtype(at::kBool)).triu(1);
    const at::Tensor masked = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
    const at::Tensor weights = at::softmax(masked, -1);
    const at::Tensor mixed = at::matmul(weights, v);
    const at::Tensor merged = mixed.transpose(1, 2).contiguous().view({batch, length, width});
    const at::Tensor h = x + nn::call_module(attn_proj_, merged);
    const at::Tensor m = nn::call_module(ln_2_, h);
    const at::Tensor up = nn::call_module(mlp_fc_, m);
    const at::Tensor activated = at::gelu(up);
    return h + nn::call_module(mlp_proj_, activated);
  }

 private:
  int64_t heads_;
  torch::nn::LayerNorm ln_1_;
  torch::nn::Linear attn_qkv_;
  torch::nn::Linear attn_proj_;
  torch::nn::LayerNorm ln_2_;
  torch::nn::Linear mlp_fc_;
  torch::nn::Linear mlp_proj_;
};
TORCH_MODULE(GptBlock);

class Gpt final : public Model {
 public:
  Gpt(int64_t vocab, int64_t sequence, int64_t hidden, int64_t layers, int64_t heads)
      : sequence_(sequence),
        wte_(register_module("wte", torch::nn::Embedding(vocab, hidden))),
        wpe_(register_module("wpe", torch::nn::Embedding(sequence, hidden))) {
    for (int64_t i = 0; i < layers; ++i) {
      blocks_.push_back(
          register_module("block" + std::to_string(i), GptBlock(hidden, heads, layers)));
    }
    ln_f_ = register_module("ln_f", layer_norm(hidden));
    lm_head_ = register_module("lm_head", torch::nn::Linear(hidden, vocab));
    c10::NoGradGuard no_grad;
    wte_->weight.normal_(0, kInitStd);
    wpe_->weight.normal_(0, kInitStd);
    init_linear(lm_head_, kInitStd);
  }

  bool calls_children_through_hooks() const override { return true; }

  at::Tensor forward(const at::Tensor& tokens) override {
    const int64_t length = tokens.size(-1);
    if (length > sequence_) {
      throw std::invalid_argument("gpt: a sample of " + std::to_string(length) +
                                  " tokens is longer than the model's context (--seq " +
                                  std::to_string(sequence_) + ")");
    }
    // One statement per module call, in the twin's order (see the note in the block's forward).
    const at::Tensor token_embedding = nn::call_module(wte_, tokens);
    const at::Tensor positions = at::arange(length, tokens.options());
    const at::Tensor position_embedding = nn::call_module(wpe_, positions);
    at::Tensor h = token_embedding + position_embedding;
    for (GptBlock& block : blocks_) h = nn::call_module(block, h);
    const at::Tensor normed = nn::call_module(ln_f_, h);
    return nn::call_module(lm_head_, normed);
  }

 private:
  int64_t sequence_;
  torch::nn::Embedding wte_;
  torch::nn::Embedding wpe_;
  std::vector<GptBlock> blocks_;
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::nn::Linear lm_head_{nullptr};
};

}  // namespace

std::shared_ptr<Model> make_gpt(int64_t vocab, int64_t sequence, int64_t hidden, int64_t layers,
                                int64_t heads) {
  return std::make_shared<Gpt>(vocab, sequence, hidden, layers, heads);
}

}  // namespace dpscope::models
