// Counting an optimizer's state tensors as optimizer state (in both accountings), for every optimizer the engine and
// the tutorials step (see optimizer_memory.h).
#include "engine/memory/optimizer_memory.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"

namespace dpscope::memory {

void count_optimizer_state(const torch::optim::Optimizer& optimizer) {
  if (!TrackingAllocator::installed() && !OwnershipRegistry::installed()) return;
  for (const auto& item : optimizer.state()) {
    const torch::optim::OptimizerParamState* state = item.second.get();
    if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(state)) {
      if (sgd->momentum_buffer().defined()) {
        count_as(sgd->momentum_buffer(), MemoryCategory::OptimizerState);
      }
    } else if (const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(state)) {
      count_as(adam->exp_avg(), MemoryCategory::OptimizerState);
      count_as(adam->exp_avg_sq(), MemoryCategory::OptimizerState);
      if (adam->max_exp_avg_sq().defined()) {
        count_as(adam->max_exp_avg_sq(), MemoryCategory::OptimizerState);
      }
    } else if (const auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(state)) {
      count_as(adamw->exp_avg(), MemoryCategory::OptimizerState);
      count_as(adamw->exp_avg_sq(), MemoryCategory::OptimizerState);
      if (adamw->max_exp_avg_sq().defined()) {
        count_as(adamw->max_exp_avg_sq(), MemoryCategory::OptimizerState);
      }
    }
  }
}

}  // namespace dpscope::memory
