// One traced training step — one optimizer step; with gradient accumulation several forward and
// backward passes — recorded the one way `dpscope train`, the tutorials and the demo record it:
// the phases and metrics `dpscope stats` and the viewer measure step time and overlap with.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <utility>

#include "engine/memory/memory_sampler.h"
#include "engine/memory/tracking_allocator.h"
#include "trace/recorder.h"

namespace dpscope::train {

// Note [A traced step]
// A step records, on the recorder's main lane (trace/schema.h names each):
//   "iteration"        from construction to finish(), around everything below
//   "forward"          each forward(), allocations counted as activations
//   "straggler_delay"  inside the last forward, when a slow rank is emulated (delay())
//   "backward"         each backward(), allocations counted as activations (the wrappers retag
//                      the gradients they keep)
//   "optimizer_step"   optimizer_step(); its state then counted as optimizer state
// and at finish() the metrics "loss" (summed over the step's backward passes), "step_ms" and
// "resident_mb" (the process's resident memory, where the system tells it). Memory is sampled
// after every phase. The wrapper (DDP, FSDP, ZeRO) is called inside forward(); its own
// collectives and hooks nest under these phases.
//
// Usage, one rank:
//   TracedStep step(recorder, sampler, iteration);
//   at::Tensor loss = step.forward([&] { return model->loss(ddp.forward(x), y); });
//   step.backward(loss);
//   step.optimizer_step(optimizer);
//   const double ms = step.finish();   // or let the destructor finish it
// Not thread-safe: the training loop's thread.
class TracedStep {
 public:
  TracedStep(trace::Recorder& recorder, memory::MemorySampler& sampler, int32_t iteration);
  // Finishes the step if finish() was not called.
  ~TracedStep();
  TracedStep(const TracedStep&) = delete;
  TracedStep& operator=(const TracedStep&) = delete;

  // Runs `forward` (which returns the loss or the outputs) as a "forward" phase.
  template <typename Forward>
  auto forward(Forward&& forward) {
    auto result = [&] {
      trace::ScopedPhase phase(recorder_, 0, forward_name_, iteration_);
      memory::CategoryScope activations(memory::MemoryCategory::Activations);
      return std::forward<Forward>(forward)();
    }();
    sampler_.sample();
    return result;
  }
  // Sleeps `ms` as a "straggler_delay" phase: work the other ranks cannot see, so they wait for
  // this rank at its first collective. A sleep, not a busy loop, so that on a laptop the other
  // ranks keep their cores. Call inside forward().
  void delay(double ms);
  // loss.backward() as a "backward" phase; adds the loss to the step's.
  void backward(const at::Tensor& loss);
  // optimizer.step() as an "optimizer_step" phase.
  void optimizer_step(torch::optim::Optimizer& optimizer);
  // Records the "iteration" phase and the metrics; returns the step's milliseconds. Once.
  double finish();

  int32_t iteration() const { return iteration_; }
  double loss() const { return loss_; }

 private:
  trace::Recorder& recorder_;
  memory::MemorySampler& sampler_;
  int32_t iteration_;
  trace::Stamp begin_;
  double loss_ = 0;
  bool finished_ = false;
  trace::NameId forward_name_;
};

}  // namespace dpscope::train
