// The traced training step (traced_step.h, Note [A traced step]): its phases, memory samples and
// metrics.
#include "engine/train/traced_step.h"

#include <chrono>
#include <thread>

#include "engine/fault/fault_injection.h"
#include "engine/memory/optimizer_memory.h"
#include "trace/schema.h"
#include "trace/vocabulary.h"

namespace dpscope::train {

TracedStep::TracedStep(trace::Recorder& recorder, memory::MemorySampler& sampler, int32_t iteration)
    : recorder_(recorder), sampler_(sampler), iteration_(iteration),
      begin_(trace::stamp_for(&recorder, trace::TraceLevel::Summary)),
      forward_name_(recorder.name(trace::kPhaseForward)) {}

TracedStep::~TracedStep() {
  if (!finished_) finish();
}

void TracedStep::delay(double ms) {
  trace::ScopedPhase phase(recorder_, 0, recorder_.name(trace::kPhaseStragglerDelay), iteration_);
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

void TracedStep::backward(const at::Tensor& loss) {
  {
    trace::ScopedPhase phase(recorder_, 0, recorder_.name(trace::kPhaseBackward), iteration_);
    memory::CategoryScope activations(memory::MemoryCategory::Activations);
    loss.backward();
  }
  loss_ += loss.item<double>();
  sampler_.sample();
}

void TracedStep::optimizer_step(torch::optim::Optimizer& optimizer) {
  {
    trace::ScopedPhase phase(recorder_, 0, recorder_.name(trace::kPhaseOptimizerStep), iteration_);
    memory::CategoryScope state(memory::MemoryCategory::OptimizerState);
    fault::reached("optimizer_step");  // See Note [Fault points]
    optimizer.step();
  }
  // The optimizer's state tensors are made inside step(), maybe on a LibTorch worker thread.
  memory::count_optimizer_state(optimizer);
  sampler_.sample();
}

double TracedStep::finish() {
  finished_ = true;
  const trace::Stamp end = trace::stamp_for(&recorder_, trace::TraceLevel::Summary);
  const double ms = static_cast<double>(end.wall_ns - begin_.wall_ns) / 1e6;
  recorder_.phase(0, recorder_.name(trace::kPhaseIteration), begin_, end, iteration_);
  recorder_.metric(iteration_, recorder_.name(trace::kMetricLoss), loss_);
  recorder_.metric(iteration_, recorder_.name(trace::kMetricStepMs), ms);
  if (const int64_t resident = memory::resident_bytes(); resident >= 0) {
    recorder_.metric(iteration_, recorder_.name(trace::kMetricResidentMb),
                     static_cast<double>(resident) / (1 << 20));
  }
  return ms;
}

}  // namespace dpscope::train
