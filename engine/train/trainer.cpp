// One rank's training loop for `dpscope train`, the tutorials and the demo: the world, the data,
// the model under DDP, SGD, and the trace (phases, loss and step time, memory by category).
#include "engine/train/trainer.h"

#include <ATen/Parallel.h>
#include <ATen/ops/cat.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/link_model.h"
#include "core/steady_steps.h"
#include "engine/comm/host_values.h"
#include "engine/comm/world.h"
#include "engine/data/dataset.h"
#include "engine/data/distributed_sampler.h"
#include "engine/fault/fault_injection.h"
#include "engine/memory/heap_policy.h"
#include "engine/memory/memory_sampler.h"
#include "engine/memory/tracking_allocator.h"
#include "engine/train/parallel_model.h"
#include "engine/train/rank_threads.h"
#include "engine/train/run_device.h"
#include "engine/train/trace_files.h"
#include "engine/train/traced_step.h"
#include "trace/flush_guard.h"
#include "trace/vocabulary.h"

namespace dpscope::train {

namespace {

// The run's data set, and for token data the vocabulary size the model is built with.
struct RunData {
  data::Dataset all;
  int64_t vocab = 0;
};

RunData load_data(const TrainConfig& config, const models::ModelConfig& model) {
  if (config.data == "digits") {
    if (config.model.name == "transformer") {
      throw std::invalid_argument("the transformer trains on token sequences; use --data synthetic");
    }
    return {data::load_digits(data::find_digits_file())};
  }
  if (config.data == "text") {  // validate_train_config: the model is gpt
    data::TextSamples text = data::load_text(data::find_text_file(), *model.sequence);
    return {std::move(text.samples), static_cast<int64_t>(text.vocabulary.size())};
  }
  if (config.data != "synthetic") {
    throw std::invalid_argument("unknown --data '" + config.data +
                                "'; choose digits, text or synthetic");
  }
  if (config.model.name == "transformer") {
    return {data::make_synthetic_sequences(config.synthetic_samples, *model.sequence, model.vocab,
                                           config.seed),
            model.vocab};
  }
  if (config.model.name == "toy") {
    return {data::make_synthetic_classification(config.synthetic_samples, 10, 5, config.seed)};
  }
  return {data::make_synthetic_classification(config.synthetic_samples, 64, 10, config.seed)};
}

}  // namespace

void zero_grad(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) {
      at::Tensor& grad = param.mutable_grad();
      if (!grad.defined()) continue;
      if (grad.grad_fn()) {
        grad.detach_();
      } else {
        grad.requires_grad_(false);
      }
      grad.zero_();
    }
  }
}

namespace {

// The run's metadata: how it was started and configured, as `dpscope stats` and the viewer show it.
void record_run_meta(trace::Recorder& recorder, const TrainConfig& config, const comm::LaunchEnv& env,
                     comm::Backend backend, bool fault_injected) {
  namespace key = trace::meta_key;
  recorder.set_meta(key::kCommandLine, config.command_line);
  recorder.set_meta(key::kConfig, config_json(config));
  recorder.set_meta(key::kStrategy, trace::to_string(config.strategy));
  recorder.set_meta(key::kBackend, trace::to_string(backend));
  recorder.set_meta(key::kWorldSize, std::to_string(env.world_size));
  recorder.set_meta(key::kModel, config.model.name);
  recorder.set_meta(key::kTraceLevel, trace::to_string(config.trace_level));
  recorder.set_meta(key::kDevice, config.device);
  recorder.set_meta(key::kIntraOpThreads, std::to_string(at::get_num_threads()));
  if (fault_injected) recorder.set_meta(key::kFaultInjected, std::getenv("DPSCOPE_FAULT"));
  if (config.straggler) {
    char straggler[64];
    std::snprintf(straggler, sizeof(straggler), "%d:%g", config.straggler->rank, config.straggler->ms);
    recorder.set_meta(key::kStraggler, straggler);
  }
}

// This rank's extra milliseconds of work per step (See StragglerSpec): 0 unless it is the slow one.
double straggler_ms_of(const TrainConfig& config, const comm::LaunchEnv& env) {
  if (!config.straggler) return 0;
  if (config.straggler->rank >= env.world_size) {
    throw std::invalid_argument("--straggler: rank " + std::to_string(config.straggler->rank) +
                                " is not in this run of " + std::to_string(env.world_size) +
                                " ranks; pick one of 0.." + std::to_string(env.world_size - 1));
  }
  return config.straggler->rank == env.rank ? config.straggler->ms : 0;
}

// The model `config` names, sized for `all` (its features or vocabulary), initialised this rank's
// own way: DDP's (FSDP's) broadcast makes rank 0's the common start.
std::shared_ptr<models::Model> build_model(const TrainConfig& config, const comm::LaunchEnv& env,
                                           const RunData& run_data, c10::Device device) {
  models::ModelConfig model_config = models::with_defaults(config.model);
  if (run_data.vocab > 0) {
    model_config.vocab = run_data.vocab;
  } else {
    model_config.input_features = run_data.all.x.size(1);
  }
  if (model_config.name == "toy") model_config.classes = 5;
  torch::manual_seed(config.seed + 1000 * static_cast<uint64_t>(env.rank));
  memory::CategoryScope parameters(memory::MemoryCategory::Parameters);
  // Initialised on the CPU, from the same generator whatever the device, then moved.
  std::shared_ptr<models::Model> model = models::make_model(model_config);
  model->to(device);
  // The model's state is the run's parameters until a wrapper makes it its own (Note [Ownership
  // accounting]).
  for (const at::Tensor& param : model->parameters()) memory::own(param, memory::MemoryCategory::Parameters);
  for (const at::Tensor& buffer : model->buffers()) memory::own(buffer, memory::MemoryCategory::Parameters);
  return model;
}

// Rank 0's opening line: the model, the wrapper, the backend and link, the ranks and steps.
void print_start(const TrainConfig& config, const comm::LaunchEnv& env, const comm::World& world,
                 comm::Backend backend, const std::string& summary, const ParallelModel& parallel) {
  if (env.rank != 0) return;
  const std::string link =
      world.link ? " on an emulated " + core::link_value_text(world.link->spec().gbps) + " Gb/s, " +
                       core::link_value_text(world.link->spec().latency_us) + " us link"
                 : "";
  std::printf("train: %s, %s over %s%s, %d rank(s), %lld steps of %lld per rank\n",
              summary.c_str(), parallel.describe().c_str(),
              std::string(trace::to_string(backend)).c_str(), link.c_str(), env.world_size,
              static_cast<long long>(config.steps), static_cast<long long>(config.batch_size));
  std::fflush(stdout);
}

// The steps, each a TracedStep (Note [A traced step]) of grad_accum micro-steps, the first
// K - 1 under no_sync. Returns each step's milliseconds; sets result.final_loss.
// --all-reduce-loss: the step's loss averaged over the ranks, by an all-reduce this rank issues
// unless the mode leaves it to rank 0 (a bug on purpose: the others never issue it). Returns the
// mean, or this rank's loss when it issued none.
double mean_loss(const TrainConfig& config, const comm::LaunchEnv& env, comm::ProcessGroup& group,
                 int64_t step, double loss) {
  const bool issues = config.all_reduce_loss == LossAllReduce::AllRanks ||
                      (config.all_reduce_loss == LossAllReduce::RankZeroOnly && env.rank == 0);
  if (!issues) return loss;
  comm::CollectiveTag tag;
  tag.iteration = static_cast<int32_t>(step);
  const at::Tensor value = at::full({1}, loss, at::TensorOptions().dtype(at::kFloat));
  return comm::HostValues::all_reduce(group, value, comm::ReduceOp::Average, tag).wait().item<double>();
}

std::vector<double> run_steps(const TrainConfig& config, const comm::LaunchEnv& env,
                              c10::Device device, const data::Dataset& train_set,
                              models::Model& model, comm::ProcessGroup& group,
                              ParallelModel& parallel, trace::Recorder& recorder,
                              memory::MemorySampler& sampler, TrainResult& result) {
  const double straggler_ms = straggler_ms_of(config, env);
  torch::optim::SGD optimizer(parallel.optimizer_parameters(),
                              torch::optim::SGDOptions(config.lr).momentum(config.momentum));
  data::EpochBatches batches(
      data::DistributedSampler(train_set.size(), env.world_size, env.rank, true, config.seed),
      config.batch_size);
  std::vector<double> step_ms;
  for (int64_t step = 0; step < config.steps; ++step) {
    TracedStep traced(recorder, sampler, static_cast<int32_t>(step));
    zero_grad(optimizer);
    for (int micro = 0; micro < config.grad_accum; ++micro) {
      const data::Dataset batch = train_set.rows(batches.next()).to(device);
      std::optional<replica::NoSyncGuard> no_sync;
      if (micro + 1 < config.grad_accum) no_sync.emplace(parallel.gradient_sync());
      const at::Tensor loss = traced.forward([&] {
        at::Tensor micro_loss = model.loss(parallel.forward(batch.x), batch.y) / config.grad_accum;
        if (straggler_ms > 0 && micro + 1 == config.grad_accum) traced.delay(straggler_ms);
        return micro_loss;
      });
      traced.backward(loss);
    }
    parallel.finish_backward();
    traced.optimizer_step(optimizer);
    const double ms = traced.finish();
    step_ms.push_back(ms);
    result.final_loss = traced.loss();
    const double loss = mean_loss(config, env, group, step, traced.loss());
    if (env.rank == 0 && config.progress_every > 0 &&
        ((step + 1) % config.progress_every == 0 || step + 1 == config.steps)) {
      std::printf("step %lld/%lld  loss %.4f%s  %.2f ms\n", static_cast<long long>(step + 1),
                  static_cast<long long>(config.steps), loss,
                  config.all_reduce_loss == LossAllReduce::None ? "" : " (mean over ranks)", ms);
      std::fflush(stdout);
    }
  }
  return step_ms;
}

// Accuracy on the held-out rows (--eval-fraction), printed on rank 0 and recorded.
void evaluate(const TrainConfig& config, const comm::LaunchEnv& env, c10::Device device,
              const data::Dataset& eval_set, models::Model& model, ParallelModel& parallel,
              trace::Recorder& recorder, TrainResult& result) {
  c10::NoGradGuard no_grad;
  model.eval();
  const data::Dataset on_device = eval_set.to(device);
  at::Tensor logits;
  {
    // Outside every iteration, so that no step's figures count it (Note [Work outside iterations]).
    const trace::ScopedPhase phase(recorder, 0, recorder.name(trace::kPhaseEvaluation), trace::kNone);
    logits = parallel.forward(on_device.x);
  }
  result.eval_accuracy = static_cast<double>(model.correct(logits, on_device.y)) /
                         static_cast<double>(eval_set.y.numel());
  model.train();
  if (env.rank == 0) {
    std::printf("accuracy %.4f on the last %lld rows\n", result.eval_accuracy,
                static_cast<long long>(eval_set.size()));
  }
  recorder.metric(static_cast<int32_t>(config.steps - 1), recorder.name("accuracy"), result.eval_accuracy);
}

// The accounting's line on the CPU under ownership: how far it came from the tracking allocator's
// categories of the same samples, the largest difference of any owned category as a share of the
// run's peak (tests/memory/test_ownership_equality.cpp reads it).
void print_accounting_difference(const memory::MemorySampler& sampler) {
  const int64_t peak = sampler.largest_tracked_total();
  if (sampler.accounting() != memory::MemoryAccounting::Ownership || peak <= 0) return;
  trace::MemoryCategory largest = trace::MemoryCategory::Parameters;
  for (const trace::MemoryCategory c : trace::kStackedCategories) {
    if (sampler.largest_difference(c) > sampler.largest_difference(largest)) largest = c;
  }
  std::printf("memory_accounting ownership: largest difference from tracking %.3f %% of the peak "
              "%.3f MiB (%s, %lld bytes)\n",
              100.0 * static_cast<double>(sampler.largest_difference(largest)) / static_cast<double>(peak),
              static_cast<double>(peak) / (1 << 20), std::string(trace::to_string(largest)).c_str(),
              static_cast<long long>(sampler.largest_difference(largest)));
}

// The run's last lines: the peak with its categories, the median step, the trace files.
void print_end(const TrainResult& result, const std::optional<std::array<int64_t, trace::kMemoryCategoryCount>>& peak,
               const memory::MemorySampler& sampler, c10::Device device, const std::string& trace_line) {
  if (result.peak_memory_bytes > 0) {
    std::string breakdown;
    for (const trace::MemoryCategory c : trace::kStackedCategories) {
      if (!peak || (*peak)[static_cast<size_t>(c)] <= 0) continue;
      char part[96];
      std::snprintf(part, sizeof(part), "%s%s %.2f", breakdown.empty() ? "" : ", ",
                    std::string(trace::to_string(c)).c_str(),
                    static_cast<double>((*peak)[static_cast<size_t>(c)]) / (1 << 20));
      breakdown += part;
    }
    // Ownership splits the run device's memory; tracking the host's (Note [Ownership accounting]).
    const char* whose = !device.is_cuda() ? ""
                        : sampler.accounting() == memory::MemoryAccounting::Ownership ? "GPU memory: "
                                                                                      : "host memory: ";
    std::printf("peak_memory_mb %.3f (%s%s)\n", static_cast<double>(result.peak_memory_bytes) / (1 << 20),
                whose, breakdown.c_str());
  }
  print_accounting_difference(sampler);
  if (device.is_cuda()) {
    std::printf("peak_cuda_memory_mb %.3f (cuda_allocated; reserved %.3f)\n",
                static_cast<double>(sampler.peak(memory::MemoryCategory::CudaAllocated)) / (1 << 20),
                static_cast<double>(sampler.peak(memory::MemoryCategory::CudaReserved)) / (1 << 20));
  }
  std::printf("step_ms %.3f (measured on this machine)\n", result.step_ms_median);
  if (!trace_line.empty()) std::printf("%s\n", trace_line.c_str());
  std::fflush(stdout);
}

// Everything after the trace is open: a failure here is recorded as the rank's status.
void train_rank(const TrainConfig& config, const comm::LaunchEnv& env, c10::Device device,
                const std::optional<fault::FaultSpec>& fault, const TraceFiles& trace_files,
                trace::Recorder& recorder, TrainResult& result) {
  memory::TrackingAllocator* allocator =
      config.trace_level == trace::TraceLevel::Full ? &memory::TrackingAllocator::install() : nullptr;
  // On a GPU the tracking allocator sees only host memory; the CUDA caching allocator's bytes are
  // sampled beside it (cuda_allocated, cuda_reserved), and ownership accounting (the default there)
  // splits them by category. Made before the data and the model, so that the ownership registry
  // is installed when they are claimed.
  memory::MemorySampler sampler(&recorder, allocator, device,
                                config.memory_accounting.value_or(memory::default_accounting(device)));

  comm::WorldOptions world_options;
  world_options.backend = backend_for(config.backend, device);
  world_options.recorder = &recorder;
  world_options.collective_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(config.timeout_s * 1000.0 + 0.5));
  world_options.link =
      core::check_link(config.link_gbps, config.link_latency_us, core::kLinkGbpsFlag, core::kLinkLatencyFlag);
  comm::World world = comm::init_world(world_options);
  straggler_ms_of(config, env);  // refuses a slow rank outside the run before anything is built
  record_run_meta(recorder, config, env, world_options.backend, fault.has_value());

  const RunData run_data = load_data(config, models::with_defaults(config.model));
  const int64_t train_rows =
      run_data.all.size() - static_cast<int64_t>(run_data.all.size() * config.eval_fraction);
  const data::Dataset train_set = run_data.all.slice(0, train_rows);
  const data::Dataset eval_set = run_data.all.slice(train_rows, run_data.all.size());
  const std::shared_ptr<models::Model> model = build_model(config, env, run_data, device);
  const std::string summary = models::summarize(config.model.name, *model);
  recorder.set_meta(trace::meta_key::kModelSummary, summary);

  const std::unique_ptr<ParallelModel> parallel =
      make_parallel_model(config, model, world.group, &recorder, &sampler);
  sampler.sample();
  if (!config.save_init.empty()) {
    const auto state = parallel->full_state();  // collective: every rank takes part
    if (env.rank == 0) save_tensors(state, config.save_init);
  }
  print_start(config, env, world, world_options.backend, summary, *parallel);
  const std::vector<double> step_ms =
      run_steps(config, env, device, train_set, *model, *world.group, *parallel, recorder, sampler, result);
  if (eval_set.size() > 0) {
    evaluate(config, env, device, eval_set, *model, *parallel, recorder, result);
  }
  if (!config.save_final.empty()) {
    const auto state = parallel->full_state();  // collective: every rank takes part
    if (env.rank == 0) save_tensors(state, config.save_final);
  }

  result.step_ms_median = core::summarize_steps(step_ms).median_ms;  // Note [Steady steps]
  // The peak as the trace records it (Note [Memory at the peak]): tracking, the allocator's
  // snapshot, whose categories sum to its total; ownership, the sample whose categories summed to
  // the most. So this line and `dpscope stats` agree.
  std::optional<std::array<int64_t, trace::kMemoryCategoryCount>> peak;
  if (sampler.accounting() == memory::MemoryAccounting::Ownership) {
    if (config.trace_level == trace::TraceLevel::Full) peak = sampler.peak_moment();
  } else if (allocator) {
    peak = allocator->peak_snapshot().bytes;
  }
  result.peak_memory_bytes = peak ? (*peak)[static_cast<size_t>(memory::MemoryCategory::AllocatorTotal)]
                                  : sampler.peak(memory::MemoryCategory::AllocatorTotal);
  // Every rank finishes its collectives before the group goes away, and closes its file before
  // rank 0 merges them (Note [Trace files of a run]).
  world.group->barrier()->wait();
  recorder.close();
  world.group->barrier()->wait();
  const FinishedTrace finished = finish_trace_files(trace_files, env);
  result.run_file = finished.run_file;
  print_end(result, peak, sampler, device, finished.line);
}

void close_after_failure(trace::Recorder& recorder, const std::string& error) {
  const std::string stopped_by = trace::stop_signal_status();
  recorder.close(stopped_by.empty() ? "failed: " + error : stopped_by);
}

}  // namespace

TrainResult run_training(const TrainConfig& config) {
  validate_train_config(config);
  const comm::LaunchEnv env = comm::read_launch_env();
  const c10::Device device = select_run_device(config.device, env);
  const std::optional<fault::FaultSpec> fault = fault::arm_from_environment(env.rank);
  at::set_num_threads(config.threads > 0
                          ? config.threads
                          : default_intra_op_threads(env.local_world_size,
                                                     config.link_gbps || emulated_link_in_environment()));

  memory::keep_freed_memory_in_heap();  // See Note [Freed memory stays in the heap]
  TrainResult result;
  result.rank = env.rank;
  result.world_size = env.world_size;
  const TraceFiles trace_files = config.trace_level == trace::TraceLevel::Off
                                     ? TraceFiles{}
                                     : plan_trace_files(config.trace, config.model.name, env);
  result.trace_path = trace_files.rank_file;
  if (!result.trace_path.empty()) {
    const auto parent = std::filesystem::path(result.trace_path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
  }
  trace::RecorderOptions recorder_options;
  recorder_options.path = result.trace_path;
  recorder_options.rank = env.rank;
  recorder_options.local_rank = env.local_rank;
  recorder_options.device = device.str();
  recorder_options.level = config.trace_level;
  trace::Recorder recorder(recorder_options);
  try {
    train_rank(config, env, device, fault, trace_files, recorder, result);
  } catch (const c10::Error& error) {
    close_after_failure(recorder, error.what_without_backtrace());
    throw;
  } catch (const std::exception& error) {
    close_after_failure(recorder, error.what());
    throw;
  }
  return result;
}

}  // namespace dpscope::train
