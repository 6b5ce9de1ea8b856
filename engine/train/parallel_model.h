// ParallelModel: the training loop's one view of a data-parallel wrapper — DDP, FSDP or FSDP2 —
// so that the loop, the tutorials and the demo run any strategy with the same code.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/memory/memory_sampler.h"
#include "engine/models/models.h"
#include "engine/replica/gradient_sync.h"
#include "engine/train/train_config.h"
#include "trace/recorder.h"

namespace dpscope::train {

// Thread-safety: one training loop thread (as the wrappers themselves).
class ParallelModel {
 public:
  virtual ~ParallelModel() = default;
  // The model's forward on `x`, through the wrapper.
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  // The wrapper's gradient switch: while a replica::NoSyncGuard on it lives, backward
  // accumulates locally without communication.
  virtual replica::GradientSync& gradient_sync() = 0;
  // After a synced backward, before the optimizer step (DDP: checks that every bucket was
  // reduced).
  virtual void finish_backward() {}
  // What the optimizer steps on: the model's parameters (DDP) or the shards (FSDP, FSDP2).
  virtual std::vector<at::Tensor> optimizer_parameters() = 0;
  // The full parameters and buffers by name on rank 0 (empty elsewhere). Collective.
  virtual std::vector<std::pair<std::string, at::Tensor>> full_state() = 0;
  // "ddp over gloo"-style words for the start-up line.
  virtual std::string describe() const = 0;
};

// Builds the wrapper `config.strategy` names around `model`, with the config's options, which
// validate_train_config has accepted (run_training checks them first; a tutorial writes its own).
// Collective (construction broadcasts rank 0's state).
std::unique_ptr<ParallelModel> make_parallel_model(const TrainConfig& config,
                                                   std::shared_ptr<models::Model> model,
                                                   std::shared_ptr<comm::ProcessGroup> group,
                                                   trace::Recorder* recorder,
                                                   memory::MemorySampler* sampler);

}  // namespace dpscope::train
