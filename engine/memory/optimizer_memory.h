// Counting an optimizer's state as optimizer state. LibTorch's optimizers make their state
// tensors inside step(), sometimes on an intra-op worker thread that no CategoryScope covers, so
// whoever steps an optimizer retags its state afterwards.
#pragma once

#include <torch/optim/optimizer.h>

namespace dpscope::memory {

// Counts the state tensors of `optimizer` (SGD's momentum buffers, Adam's and AdamW's moments)
// as MemoryCategory::OptimizerState: retagged in the installed tracking allocator, claimed in the
// installed ownership registry (count_as); nothing without either.
// Call after step(), on any thread.
void count_optimizer_state(const torch::optim::Optimizer& optimizer);

}  // namespace dpscope::memory
