// The boilerplate every tutorial needs, kept here so that each tutorial shows only the idea it
// teaches: common options, one rank's world, traced runs (a trace file per rank, merged into
// run.sqlite), a traced training step, this rank's batches, and printing on rank 0.
#pragma once

#include <ATen/core/Tensor.h>
#include <CLI/CLI.hpp>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/comm/world.h"
#include "engine/data/dataset.h"
#include "engine/data/distributed_sampler.h"
#include "engine/memory/memory_sampler.h"
#include "engine/memory/tracking_allocator.h"
#include "engine/models/models.h"
#include "engine/train/parallel_model.h"
#include "engine/train/traced_step.h"
#include "engine/train/trainer.h"
#include "trace/recorder.h"
#include "trace/vocabulary.h"

namespace dpscope::ddp {
class DistributedDataParallel;
}

namespace dpscope::tutorials {

// ---- Options and main -----------------------------------------------------------------------

// The options every tutorial takes; a tutorial adds its own to the same CLI::App.
struct CommonOptions {
  int64_t steps = 5;    // optimizer steps of each traced run
  int threads = 0;      // LibTorch threads per rank; 0: this host's cores / its ranks
  std::string backend;  // "gloo" or "nccl"; "": nccl when CUDA devices are visible, else gloo
  uint64_t seed = 0;    // model initialisation and data
};
// Adds --steps, --threads, --backend and --seed.
void add_common_options(CLI::App& app, CommonOptions& options);

// Runs `body` (the tutorial) and returns main's exit status: 0, or 1 after printing one line
// "<program>: rank R: <what>" on stderr — the launcher then names the rank and stops the
// others. Usage: int main(...) { ...parse...; return tutorials::guarded_main(kProgram, [&] {...}); }
int guarded_main(std::string_view program, const std::function<void()>& body);

// ---- The session: one rank of a tutorial -----------------------------------------------------

// Who this rank is (torchrun's environment, as `dpscope launch` sets it; a single rank without
// it), LibTorch's thread count, the tracking allocator (memory by category in the traces) and
// the world: the rendezvous with the other ranks and an untraced process group that the helper
// uses for its own coordination (barriers, gathering numbers to print), so that only what a
// tutorial does shows up in its traces. Construct it first, on every rank.
class Session {
 public:
  // `program` names the tutorial in messages and in the default trace directory. Throws
  // comm::CommError naming the fix when the environment is incomplete or a rank never arrives.
  Session(std::string program, const CommonOptions& options, int argc, char** argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const { return world_.env.rank; }
  int world_size() const { return world_.env.world_size; }
  bool leader() const { return rank() == 0; }  // the rank that prints and reads the traces
  const comm::LaunchEnv& env() const { return world_.env; }
  comm::Backend backend() const { return backend_; }
  // Where tensors live for the backend: CPU for gloo, this rank's GPU (LOCAL_RANK) for nccl.
  at::Device device() const;
  const CommonOptions& options() const { return options_; }
  const std::string& program() const { return program_; }
  const std::string& command_line() const { return command_line_; }
  // Where this rank's traces go: $DPSCOPE_TRACE_DIR (dpscope launch sets it from --trace-dir),
  // else traces/<program>.
  const std::string& trace_dir() const { return trace_dir_; }
  comm::World& world() { return world_; }

  // LibTorch's generator, seeded differently on every rank (seed + 1000 * rank): each rank builds
  // its own random model, as separate processes do, and DDP's broadcast makes them one.
  void seed_per_rank(uint64_t seed) const;
  // One of the engine's models (models::make_model), drawn after seed_per_rank(options().seed),
  // counted as Parameters by the tracking allocator, moved to device(), and claimed as parameters
  // in the ownership registry (installed first on a GPU, whose runs account by ownership).
  std::shared_ptr<models::Model> build_model(const models::ModelConfig& config) const;

  // printf to stdout on rank 0 only, flushed (the launcher prefixes every line with "[rank]").
  void say(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  // printf on every rank, after "rank R: ".
  void say_each(const char* format, ...) const __attribute__((format(printf, 2, 3)));

  // Untraced collectives of the helper. Every rank must call them in the same order.
  void barrier();
  // Every rank's `value`, in rank order.
  std::vector<double> gather(double value);

  // Process group ids: 0 is the world's; each TracedRun takes the next.
  int16_t next_group_id() { return ++last_group_id_; }

 private:
  std::string program_;
  CommonOptions options_;
  std::string command_line_;
  comm::Backend backend_;
  comm::World world_;
  std::string trace_dir_;
  int16_t last_group_id_ = 0;
};

// ---- Traced runs -----------------------------------------------------------------------------

// One traced run inside a tutorial: this rank's trace file <trace_dir>[/<part>]/rank<R>.sqlite,
// a new process group whose collectives it records, and memory samples by category. A tutorial
// that compares settings makes one TracedRun per setting (part "cap-1mb", ...), each its own
// run file for the viewer — two of them side by side with `dpscope-view A --compare B`.
// Strategy-agnostic: give group() to DDP or FSDP and recorder() to their options.
// Construct on every rank in the same order (it connects a process group: collective).
class TracedRun {
 public:
  TracedRun(Session& session, std::string part = "");
  // Without finish() (an exception is unwinding): closes the trace as "failed", no collective.
  ~TracedRun();
  TracedRun(const TracedRun&) = delete;
  TracedRun& operator=(const TracedRun&) = delete;

  Session& session() { return session_; }
  trace::Recorder& recorder() { return *recorder_; }
  const std::shared_ptr<comm::ProcessGroup>& group() { return group_; }
  const std::string& part() const { return part_; }
  const std::string& rank_file() const { return rank_file_; }
  // The merged file of every rank, <trace_dir>[/<part>]/run.sqlite, complete after finish().
  const std::string& run_file() const { return run_file_; }

  // What `dpscope stats` and the viewer show as the run: the strategy, the model's name and
  // one-line summary, and the settings (meta `config`, with `dpscope train`'s key names where
  // they mean the same, so that whatif and the viewer read them alike). Strategy::Unknown records
  // no strategy: a tutorial whose way of training the vocabulary has no word for writes its own
  // (meta_key::kStrategy), which the analysis shows as recorded.
  void describe(trace::Strategy strategy, std::string_view model_name, torch::nn::Module& model,
                const nlohmann::json& config = nlohmann::json::object());
  // Records the bytes each memory category holds now (Step does it between phases).
  void sample_memory() { memory_sampler_.sample(); }
  // The run's memory sampler, for a wrapper that samples memory itself (FSDP's
  // FsdpOptions::memory_sampler, train::make_parallel_model's `sampler`).
  memory::MemorySampler& memory_sampler() { return memory_sampler_; }

  // Ends the run on every rank: waits for all, disconnects the group, closes the trace files,
  // and rank 0 merges them into run_file() (when every rank runs on this host; otherwise rank 0
  // keeps its own file, and `dpscope merge` joins them). Returns the file rank 0 reads: run_file()
  // or its rank file; "" on other ranks. Throws std::logic_error when a DDP/FSDP wrapper still
  // holds the group: let the wrapper go out of scope first.
  std::string finish();

 private:
  Session& session_;
  std::string part_;
  std::string rank_file_;
  std::string run_file_;
  std::unique_ptr<trace::Recorder> recorder_;
  memory::MemorySampler memory_sampler_;
  std::shared_ptr<comm::ProcessGroup> group_;
  bool finished_ = false;
};

// One training step of a TracedRun, recorded as `dpscope train` records its steps (Note [A traced
// step], engine/train/traced_step.h): the phases `dpscope stats` and the viewer measure overlap
// and step time with. Strategy-agnostic: call the wrapper inside forward().
//   tutorials::Step step(run, iteration);
//   at::Tensor loss = step.forward([&] { return model->loss(ddp.forward([&] {...}), y); });
//   step.backward(loss);
//   step.optimizer_step(optimizer);
// The iteration phase and the metrics are recorded when the Step is destroyed.
class Step : public train::TracedStep {
 public:
  Step(TracedRun& run, int32_t iteration)
      : TracedStep(run.recorder(), run.memory_sampler(), iteration) {}
};

// torch.optim.Optimizer.zero_grad(set_to_none=False), also for gradients that are views of a DDP
// bucket (gradient_as_bucket_view): the training loop's own (engine/train/trainer.h).
using train::zero_grad;

// `tensors` (float32) concatenated into plain memory outside LibTorch's allocator: a tutorial's
// own copy of parameters or gradients to compare runs with, kept out of the traces' memory so that
// they show the training alone.
std::vector<float> untracked_copy(const std::vector<at::Tensor>& tensors);

// ---- Data --------------------------------------------------------------------------------------

// This rank's batches of `dataset`, as PyTorch's DataLoader(batch_size) over a
// DistributedSampler(shuffle=True, seed) with set_epoch(e) each epoch: each rank sees different
// rows, the ranks together see every row once per epoch, and steps run on across epochs.
class ShardedBatches {
 public:
  ShardedBatches(data::Dataset dataset, const Session& session, int64_t batch_size,
                 uint64_t seed = 0);
  // The next batch, on the session's device.
  data::Dataset next();

 private:
  data::Dataset dataset_;
  data::EpochBatches batches_;
  at::Device device_;
};

// `steps` traced steps (iterations 0, 1, ...) of `parallel` (DDP or FSDP from
// train::make_parallel_model) around `model`, one batch of `batches` each: zero_grad, forward,
// backward, finish_backward, the optimizer's step — the loop of `dpscope train` without
// accumulation, for the tutorials whose lesson is not the loop itself.
void train_steps(TracedRun& run, train::ParallelModel& parallel, models::Model& model,
                 torch::optim::Optimizer& optimizer, ShardedBatches& batches, int64_t steps);
// The same loop for a DDP the tutorial built itself, to show the options its lesson is about.
void train_steps(TracedRun& run, ddp::DistributedDataParallel& ddp, models::Model& model,
                 torch::optim::Optimizer& optimizer, ShardedBatches& batches, int64_t steps);

}  // namespace dpscope::tutorials
