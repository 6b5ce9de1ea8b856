// The tutorials' shared boilerplate (see tutorial.h): options, the session, traced runs and steps,
// sharded batches. It follows engine/train/trainer.cpp, so a tutorial's trace reads like one
// written by `dpscope train`.
#include "tutorials/common/tutorial.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <thread>

#include "engine/ddp/distributed_data_parallel.h"
#include "engine/memory/heap_policy.h"
#include "engine/train/rank_threads.h"
#include "engine/models/models.h"
#include "trace/merge.h"
#include "trace/vocabulary.h"

#ifdef DPSCOPE_HAVE_CUDA
#include "engine/comm/nccl_backend.h"
#endif
#include "engine/comm/gloo_backend.h"

namespace dpscope::tutorials {

namespace {

std::string rank_prefix() {
  const char* rank = std::getenv("RANK");
  return std::string("rank ") + (rank && *rank ? rank : "0");
}

// Collectives of a tutorial should fail long before a test's or a learner's patience does.
constexpr std::chrono::seconds kCollectiveTimeout{120};

}  // namespace

void add_common_options(CLI::App& app, CommonOptions& options) {
  app.add_option("--steps", options.steps, "Optimizer steps of each traced run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", options.threads,
                 "LibTorch threads per rank (0: this host's cores divided by its ranks)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--backend", options.backend, "gloo or nccl (default: nccl with CUDA devices, else gloo)")
      ->check(CLI::IsMember(trace::mode_spellings(trace::kBackends)));
  app.add_option("--seed", options.seed, "Seed of the model's initialisation and of the data")
      ->capture_default_str();
}

int guarded_main(std::string_view program, const std::function<void()>& body) {
  try {
    body();
    return 0;
  } catch (const std::exception& error) {
    std::fflush(stdout);
    // The engine's messages often name the rank already.
    const std::string what = error.what();
    const std::string rank = rank_prefix();
    std::fprintf(stderr, "%.*s: %s%s\n", static_cast<int>(program.size()), program.data(),
                 what.rfind(rank + ":", 0) == 0 ? "" : (rank + ": ").c_str(), what.c_str());
    return 1;
  }
}

// ---- Session ---------------------------------------------------------------------------------

Session::Session(std::string program, const CommonOptions& options, int argc, char** argv)
    : program_(std::move(program)), options_(options),
      backend_(options.backend.empty() ? comm::default_backend() : comm::parse_backend(options.backend)) {
  for (int i = 0; i < argc; ++i) command_line_ += (i ? " " : "") + std::string(argv[i]);
  const comm::LaunchEnv env = comm::read_launch_env();
  // The ranks of one host share its cores; more threads than cores only makes them fight. See
  // Note [One thread a rank on an emulated link].
  at::set_num_threads(options.threads > 0 ? options.threads
                                          : train::default_intra_op_threads(
                                                env.local_world_size, train::emulated_link_in_environment()));
  // Before any tensor exists, so that every allocation is counted by category, and stays in
  // the heap once freed (See Note [Freed memory stays in the heap]).
  memory::keep_freed_memory_in_heap();
  memory::TrackingAllocator::install();

  const char* dir = std::getenv("DPSCOPE_TRACE_DIR");
  trace_dir_ = dir && *dir ? dir : "traces/" + program_;

  comm::WorldOptions world_options;
  world_options.backend = backend_;
  world_options.timeout = kCollectiveTimeout;
  world_options.recorder = nullptr;  // the helper's own collectives stay out of the traces
  world_ = comm::init_world(world_options);
  if (world_.link) {
    say("%s: on an emulated link of %s Gb/s and %s us (dpscope launch --link-gbps, --link-latency-us): "
        "each collective lasts what that link would take, not what this machine took\n",
        program_.c_str(), core::link_value_text(world_.link->spec().gbps).c_str(),
        core::link_value_text(world_.link->spec().latency_us).c_str());
  }
}

Session::~Session() = default;

at::Device Session::device() const {
  return backend_ == comm::Backend::Nccl ? at::Device(at::kCUDA, static_cast<int8_t>(env().local_rank))
                                         : at::Device(at::kCPU);
}

void Session::seed_per_rank(uint64_t seed) const {
  torch::manual_seed(seed + 1000 * static_cast<uint64_t>(rank()));
}

std::shared_ptr<models::Model> Session::build_model(const models::ModelConfig& config) const {
  seed_per_rank(options_.seed);
  std::shared_ptr<models::Model> model;
  {
    memory::CategoryScope parameters(memory::MemoryCategory::Parameters);
    model = models::make_model(config);
  }
  model->to(device());
  // A GPU run's memory is accounted by ownership (TracedRun's sampler): the registry is installed
  // before the model, whose state is the run's parameters until a wrapper makes it its own (Note
  // [Ownership accounting]).
  if (memory::default_accounting(device()) == memory::MemoryAccounting::Ownership) {
    memory::OwnershipRegistry::install();
  }
  for (const at::Tensor& param : model->parameters()) memory::own(param, memory::MemoryCategory::Parameters);
  for (const at::Tensor& buffer : model->buffers()) memory::own(buffer, memory::MemoryCategory::Parameters);
  return model;
}

void Session::say(const char* format, ...) const {
  if (!leader()) return;
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
  std::fflush(stdout);
}

void Session::say_each(const char* format, ...) const {
  char line[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof(line), format, args);
  va_end(args);
  // One write per line, so that ranks sharing a terminal do not cut into each other's lines.
  std::printf("rank %d: %s", rank(), line);
  std::fflush(stdout);
}

void Session::barrier() { world_.group->barrier()->wait(); }

std::vector<double> Session::gather(double value) {
  const at::TensorOptions options = at::TensorOptions().dtype(at::kDouble).device(device());
  at::Tensor all = at::empty({world_size()}, options);
  world_.group->all_gather(all, at::full({1}, value, options))->wait();
  all = all.cpu();
  return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + world_size());
}

// ---- TracedRun -------------------------------------------------------------------------------

namespace {

std::unique_ptr<trace::Recorder> make_recorder(const Session& session, const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  if (error) {
    throw std::runtime_error("cannot create the trace directory of " + path + " (" +
                             error.message() + "); pass a writable --trace-dir to dpscope launch");
  }
  trace::RecorderOptions options;
  options.path = path;
  options.rank = session.rank();
  options.local_rank = session.env().local_rank;
  options.device = session.device().str();
  options.level = trace::TraceLevel::Full;
  return std::make_unique<trace::Recorder>(options);
}

}  // namespace

TracedRun::TracedRun(Session& session, std::string part)
    : session_(session), part_(std::move(part)),
      rank_file_((std::filesystem::path(session.trace_dir()) / part_ /
                  ("rank" + std::to_string(session.rank()) + ".sqlite")).string()),
      run_file_((std::filesystem::path(session.trace_dir()) / part_ / "run.sqlite").string()),
      recorder_(make_recorder(session, rank_file_)),
      // Tracking on the CPU, ownership on a GPU (the device's own accounting, as `dpscope train`).
      memory_sampler_(recorder_.get(), memory::TrackingAllocator::installed(), session.device(),
                      memory::default_accounting(session.device())) {
  recorder_->set_clock_offset(session.world().clock.offset_ns, session.world().clock.uncertainty_ns);
  namespace key = trace::meta_key;
  recorder_->set_meta(key::kCommandLine, session.command_line());
  recorder_->set_meta(key::kBackend, trace::to_string(session.backend()));
  recorder_->set_meta(key::kWorldSize, std::to_string(session.world_size()));
  recorder_->set_meta(key::kTraceLevel, trace::to_string(trace::TraceLevel::Full));
  recorder_->set_meta(key::kDevice, session.device().is_cuda() ? "cuda" : "cpu");
  recorder_->set_meta(key::kTutorial, session.program() + (part_.empty() ? "" : " / " + part_));

  comm::ProcessGroupOptions options;
  options.timeout = kCollectiveTimeout;
  options.recorder = recorder_.get();
  options.group_id = session.next_group_id();
  options.name = part_.empty() ? "run" : part_;
  options.check_collectives = comm::check_collectives_from_env();
  const comm::World& world = session.world();
  // The launcher's emulated link (`dpscope launch --link-gbps G --link-latency-us L`), if any:
  // this run's collectives queue on it, and its trace says so (Note [Link emulation]).
  options.link = world.link;
  if (world.link) comm::record_link(*recorder_, world.link->spec());
  if (session.backend() == comm::Backend::Nccl) {
#ifdef DPSCOPE_HAVE_CUDA
    group_ = comm::make_nccl_group(world.store, session.rank(), session.world_size(), options,
                                   session.env().local_rank);
#else
    throw comm::CommError("this build has no NCCL backend (LibTorch without CUDA); use --backend gloo");
#endif
  } else {
    group_ = comm::make_gloo_group(world.store, session.rank(), session.world_size(), options);
  }
  memory_sampler_.sample();
}

TracedRun::~TracedRun() {
  if (finished_) return;
  group_.reset();
  recorder_->close("failed: the tutorial ended with an error");
}

void TracedRun::describe(trace::Strategy strategy, std::string_view model_name,
                         torch::nn::Module& model, const nlohmann::json& config) {
  namespace key = trace::meta_key;
  if (strategy != trace::Strategy::Unknown) {
    recorder_->set_meta(key::kStrategy, trace::to_string(strategy));
  }
  recorder_->set_meta(key::kModel, model_name);
  recorder_->set_meta(key::kModelSummary, models::summarize(std::string(model_name), model));
  recorder_->set_meta(key::kConfig, config.dump());
}

std::string TracedRun::finish() {
  if (finished_) return session_.leader() ? run_file_ : "";
  if (group_.use_count() > 1) {
    throw std::logic_error("TracedRun::finish(" + rank_file_ + "): a DDP or FSDP wrapper still holds "
                           "this run's process group; end the wrapper's scope before finish()");
  }
  // Every rank is done with the group before any disconnects, and every file is closed before
  // rank 0 merges them.
  session_.barrier();
  group_.reset();
  recorder_->close();
  finished_ = true;
  session_.barrier();
  if (!session_.leader()) return "";
  if (session_.env().local_world_size != session_.world_size()) {
    session_.say("%s: ranks on other hosts keep their own trace files; join them with "
                 "`dpscope merge %s <rank files>`\n", session_.program().c_str(), run_file_.c_str());
    return rank_file_;
  }
  std::vector<std::string> files;
  for (int r = 0; r < session_.world_size(); ++r) {
    files.push_back((std::filesystem::path(run_file_).parent_path() /
                     ("rank" + std::to_string(r) + ".sqlite")).string());
  }
  trace::merge_traces(files, run_file_);
  return run_file_;
}

// ---- Step ------------------------------------------------------------------------------------

std::vector<float> untracked_copy(const std::vector<at::Tensor>& tensors) {
  std::vector<float> values;
  for (const at::Tensor& t : tensors) {
    const at::Tensor flat = t.detach().contiguous();
    const float* data = flat.data_ptr<float>();
    values.insert(values.end(), data, data + flat.numel());
  }
  return values;
}

// ---- ShardedBatches --------------------------------------------------------------------------

ShardedBatches::ShardedBatches(data::Dataset dataset, const Session& session, int64_t batch_size,
                               uint64_t seed)
    : dataset_(std::move(dataset)),
      batches_(data::DistributedSampler(dataset_.size(), session.world_size(), session.rank(),
                                        /*shuffle=*/true, seed),
               batch_size),
      device_(session.device()) {}

data::Dataset ShardedBatches::next() {
  data::Dataset batch = dataset_.rows(batches_.next());
  if (!device_.is_cpu()) {
    batch.x = batch.x.to(device_);
    batch.y = batch.y.to(device_);
  }
  return batch;
}

namespace {

// The traced loop both train_steps run: `forward` maps a batch's inputs to the model's output
// through the wrapper, `finish_backward` runs between backward and the optimizer step.
void traced_steps(TracedRun& run, models::Model& model, torch::optim::Optimizer& optimizer,
                  ShardedBatches& batches, int64_t steps,
                  const std::function<at::Tensor(const at::Tensor&)>& forward,
                  const std::function<void()>& finish_backward) {
  for (int32_t i = 0; i < steps; ++i) {
    const data::Dataset batch = batches.next();
    Step step(run, i);
    zero_grad(optimizer);
    const at::Tensor loss = step.forward([&] { return model.loss(forward(batch.x), batch.y); });
    step.backward(loss);
    finish_backward();
    step.optimizer_step(optimizer);
  }
}

}  // namespace

void train_steps(TracedRun& run, train::ParallelModel& parallel, models::Model& model,
                 torch::optim::Optimizer& optimizer, ShardedBatches& batches, int64_t steps) {
  traced_steps(
      run, model, optimizer, batches, steps,
      [&](const at::Tensor& x) { return parallel.forward(x); },
      [&] { parallel.finish_backward(); });
}

void train_steps(TracedRun& run, ddp::DistributedDataParallel& ddp, models::Model& model,
                 torch::optim::Optimizer& optimizer, ShardedBatches& batches, int64_t steps) {
  traced_steps(
      run, model, optimizer, batches, steps,
      [&](const at::Tensor& x) { return ddp.forward([&] { return model.forward(x); }); }, [] {});
}

}  // namespace dpscope::tutorials
