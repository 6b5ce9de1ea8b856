// `--model gpt`: a GPT-2-shaped causal language model (nanoGPT's layout, without dropout and
// without tying the head to the token embedding), trained on characters of data/opticks.txt.gz.
// It is the engine's model shaped like the ones people train: 12 tensors a block plus 6, from a
// LayerNorm bias of a few hundred bytes to MLP weights of 16 * hidden^2 bytes, so DDP's buckets
// and FSDP's units have something to plan. Twin: Gpt in tests/ddp/models.py.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/models/models.h"

namespace dpscope::models {

// Parameters, in registration order (the contract with the twin):
//   wte [vocab, hidden], wpe [sequence, hidden],
//   block<i>.{ln_1, attn_qkv (hidden -> 3 hidden), attn_proj, ln_2, mlp_fc (-> 4 hidden),
//   mlp_proj}.{weight, bias} for i < layers, ln_f.{weight, bias}, lm_head.{weight, bias}.
// Blocks are children of the model itself (not of a ModuleList) so that FSDP can wrap each one
// (wrap_policy.h: a unit's parent must call it through call_module). Weights are drawn as GPT-2
// draws them: normal(0, 0.02), the two projections into the residual stream 0.02 / sqrt(2 layers),
// biases zero. Forward maps tokens [B, T <= sequence] to logits [B, T, vocab]; position t sees
// positions 0..t only. Sizes must satisfy check_model_config (model_config.h).
std::shared_ptr<Model> make_gpt(int64_t vocab, int64_t sequence, int64_t hidden, int64_t layers,
                                int64_t heads);

}  // namespace dpscope::models
