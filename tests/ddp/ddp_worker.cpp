// ddp_worker: one rank of test_ddp_worker, run under `dpscope launch` (or alone). Builds small
// torch::nn models in code, trains them through engine/ddp's DistributedDataParallel and checks
// the result against the same training computed in this one process (every rank can compute
// every rank's batch: the data is a formula of (rank, iteration, micro-step)), or provokes and
// prints an expected error. Usage: ddp_worker MODE [VARIANT]
//   plain                          MLP, 3 steps, against one process on the global batch
//   mismatch                       rank 1 builds a wider layer, rank 2 an extra parameter
//   unused check|forward           a layer that gets no gradient, no find_unused_parameters
//   noparams                       a module without parameters / with all requires_grad=false
//   noncontiguous                  a transposed-view weight and a channels_last conv weight
//   sparse                         an Embedding with sparse gradients + dense layers
//   join plain|unused|fp16|zero|sparse  rank r trains 4 + r (zero: 2 r) batches, then joins
//   nosync                         3 micro-steps per step, 2 under no_sync
//   trace                          momentum SGD with memory sampling, small buckets (full trace)
//   broadcast                      broadcast_coalesced with tiny buffers, several dtypes
//   static shared|changing|unused  static_graph with a shared layer / a graph that changes / a
//                                  layer that never gets a gradient
// Prints "rank R: FAIL ..." per failed check and exits 1 if any; an expected error is printed as
// "rank R: error: MESSAGE", then every rank meets at a barrier and exits 3. Traces into
// $DPSCOPE_TRACE_DIR/rank<R>.sqlite when that is set.
#include <ATen/ops/empty.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <torch/utils.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/comm/world.h"
#include "engine/ddp/distributed_data_parallel.h"
#include "engine/ddp/join.h"
#include "engine/memory/memory_sampler.h"
#include "engine/memory/tracking_allocator.h"
#include "engine/replica/broadcast_coalesced.h"
#include "tests/tensor_diff.h"
#include "trace/recorder.h"
#include "trace/vocabulary.h"

using namespace dpscope;

namespace {

int rank = 0;
int world = 1;
int failures = 0;

void fail(const std::string& what) {
  std::printf("rank %d: FAIL %s\n", rank, what.c_str());
  std::fflush(stdout);
  ++failures;
}

// An expected error: thrown out of the mode to main, which prints it and meets the others.
struct ExpectedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- Deterministic data: a formula of the batch key, the same in every process.
int64_t key_of(int r, int iteration, int micro = 0) { return r * 1000 + iteration * 10 + micro; }

at::Tensor inputs(int64_t rows, int64_t cols, int64_t key) {
  at::Tensor i = torch::arange(rows, at::kFloat).unsqueeze(1);
  at::Tensor j = torch::arange(cols, at::kFloat).unsqueeze(0);
  return torch::sin(0.37 * (i + 1) * (j + 1) + 0.11 * static_cast<double>(key) + 0.05 * i);
}

at::Tensor targets(int64_t rows, int64_t cols, int64_t key) {
  return torch::cos(inputs(rows, cols, key + 7) * 1.3);
}

// ---- Models. run() is the forward of batch `key` in `iteration`; loss() its loss.
struct TestNet : torch::nn::Module {
  virtual at::Tensor run(int64_t key, int iteration) = 0;
  virtual at::Tensor loss(const at::Tensor& output, int64_t key) {
    return torch::nn::functional::mse_loss(output, targets(output.size(0), output.size(1), key));
  }
};

struct Mlp : TestNet {
  // width: the hidden width (rank-dependent for the mismatch); extra_param: one more parameter;
  // unused: a layer forward never uses.
  explicit Mlp(int64_t width = 16, bool extra_param = false, bool unused = false) {
    fc1 = register_module("fc1", torch::nn::Linear(8, width));
    fc2 = register_module("fc2", torch::nn::Linear(width, 16));
    fc3 = register_module("fc3", torch::nn::Linear(16, 4));
    if (unused) idle = register_module("idle", torch::nn::Linear(16, 16));
    if (extra_param) {  // registered last: parameter 6, "extra.scale"
      extra = register_module("extra", std::make_shared<torch::nn::Module>());
      extra->register_parameter("scale", torch::zeros({3, 2}));
    }
  }
  at::Tensor run(int64_t key, int) override {
    at::Tensor h = torch::relu(fc1(inputs(6, 8, key)));
    return fc3(torch::relu(fc2(h)));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr}, idle{nullptr};
  std::shared_ptr<torch::nn::Module> extra;
};

// Wider MLP for the trace: several buckets with a small cap.
struct WideMlp : TestNet {
  WideMlp() {
    for (int i = 0; i < 4; ++i) {
      layers.push_back(register_module("fc" + std::to_string(i),
                                       torch::nn::Linear(i == 0 ? 8 : 32, i == 3 ? 4 : 32)));
    }
  }
  at::Tensor run(int64_t key, int) override {
    at::Tensor h = inputs(6, 8, key);
    for (size_t i = 0; i < layers.size(); ++i) {
      h = layers[i](h);
      if (i + 1 < layers.size()) h = torch::relu(h);
    }
    return h;
  }
  std::vector<torch::nn::Linear> layers;
};

// A weight that is a transposed view (non-contiguous leaf) and a channels_last conv weight.
struct NonContiguous : TestNet {
  NonContiguous() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 3, 2)));
    conv->weight.set_data(conv->weight.contiguous(at::MemoryFormat::ChannelsLast));
    weight = register_parameter("weight", (torch::randn({4, 27}) * 0.2).t().detach());
    bias = register_parameter("bias", torch::randn({4}) * 0.1);
  }
  at::Tensor run(int64_t key, int) override {
    at::Tensor x = inputs(5, 2 * 4 * 4, key).view({5, 2, 4, 4});
    at::Tensor h = torch::relu(conv(x)).flatten(1);  // [5, 27]
    return h.matmul(weight) + bias;                  // weight: [27, 4], strides (1, 27)
  }
  torch::nn::Conv2d conv{nullptr};
  at::Tensor weight, bias;
};

// An embedding with sparse gradients and dense layers after it.
struct SparseNet : TestNet {
  SparseNet() {
    embedding = register_module(
        "embedding", torch::nn::Embedding(torch::nn::EmbeddingOptions(20, 6).sparse(true)));
    fc1 = register_module("fc1", torch::nn::Linear(6, 8));
    fc2 = register_module("fc2", torch::nn::Linear(8, 3));
  }
  at::Tensor run(int64_t key, int) override {
    at::Tensor ids = torch::remainder(torch::arange(7, at::kLong) * 3 + key, 20);
    return fc2(torch::relu(fc1(embedding(ids))));
  }
  torch::nn::Embedding embedding{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// One square layer registered under two names and applied twice (shared weight); with
// `changing`, a side layer used in iteration 0 only.
struct SharedNet : TestNet {
  explicit SharedNet(bool changing_graph) : changing(changing_graph) {
    fc_in = register_module("fc_in", torch::nn::Linear(8, 12));
    shared = register_module("shared", torch::nn::Linear(12, 12));
    register_module("shared_again", shared);
    side = register_module("side", torch::nn::Linear(12, 12));
    fc_out = register_module("fc_out", torch::nn::Linear(12, 4));
  }
  at::Tensor run(int64_t key, int iteration) override {
    at::Tensor h = torch::relu(fc_in(inputs(6, 8, key)));
    h = torch::relu(shared(h));
    h = torch::tanh(shared(h));
    if (!changing || iteration == 0) h = h + side(h);
    return fc_out(h);
  }
  bool changing;
  torch::nn::Linear fc_in{nullptr}, shared{nullptr}, side{nullptr}, fc_out{nullptr};
};

using Builder = std::function<std::shared_ptr<TestNet>()>;

// Every rank initialises differently (DDP's broadcast makes rank 0's the common start); the
// reference takes rank 0's seed.
std::shared_ptr<TestNet> build(const Builder& builder, int seed_rank) {
  torch::manual_seed(1234 + 1000 * static_cast<uint64_t>(seed_rank));
  memory::CategoryScope parameters(memory::MemoryCategory::Parameters);
  return builder();
}

// As `dpscope train --save-init`: a c10::Dict readable by Python's torch.load.
void save_state(torch::nn::Module& module, const std::string& path) {
  c10::Dict<std::string, at::Tensor> state;
  for (const auto& item : module.named_parameters(true)) {
    state.insert(item.key(), item.value().detach().contiguous().clone());
  }
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(state));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

void zero_grad(torch::nn::Module& module) {
  for (at::Tensor& param : module.parameters()) param.mutable_grad() = at::Tensor();
}

// See tests/tensor_diff.h: a NaN or an infinity anywhere makes the result infinite.
double max_abs_diff(torch::nn::Module& a, torch::nn::Module& b) {
  const auto pa = a.named_parameters();
  const auto pb = b.named_parameters();
  double worst = 0;
  for (const auto& item : pa) {
    worst = std::max(worst, dpscope::testing::max_abs_diff(item.value(), pb[item.key()]));
  }
  return worst;
}

// FNV-1a over every parameter's values: ranks compare it to show they ended identical.
uint64_t params_hash(torch::nn::Module& module) {
  uint64_t hash = 1469598103934665603ULL;
  for (const at::Tensor& param : module.parameters()) {
    const at::Tensor values = param.detach().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(values.data_ptr());
    for (int64_t i = 0; i < values.numel() * values.element_size(); ++i) {
      hash = (hash ^ bytes[i]) * 1099511628211ULL;
    }
  }
  return hash;
}

// Checks this rank's model against the reference and prints the cross-rank hash.
void report(torch::nn::Module& mine, torch::nn::Module& reference, double tolerance,
            const std::string& what) {
  const double diff = max_abs_diff(mine, reference);
  std::printf("rank %d: %s max_abs_diff %.3g\n", rank, what.c_str(), diff);
  std::printf("rank %d: params_hash %016llx\n", rank,
              static_cast<unsigned long long>(params_hash(mine)));
  if (!(diff <= tolerance)) fail(what + ": differs from one process by " + std::to_string(diff));
}

// One process training on the global batch: the gradient of each step is the sum over the
// ranks in `active(iteration)` and the micro-steps of their losses' gradients, divided by
// world * micro_steps; then SGD. Parameters that get no gradient stay.
void reference_training(TestNet& model, int iterations, int micro_steps, double lr,
                        const std::function<bool(int r, int iteration)>& active) {
  std::vector<at::Tensor> initial;
  for (const at::Tensor& param : model.parameters()) initial.push_back(param.detach().clone());
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(lr));
  for (int it = 0; it < iterations; ++it) {
    zero_grad(model);
    at::Tensor total;
    for (int r = 0; r < world; ++r) {
      if (!active(r, it)) continue;
      for (int m = 0; m < micro_steps; ++m) {
        const int64_t key = key_of(r, it, m);
        at::Tensor loss = model.loss(model.run(key, it), key) / (world * micro_steps);
        total = total.defined() ? total + loss : loss;
      }
    }
    total.backward();
    optimizer.step();
  }
  // A comparison of two untouched models proves nothing.
  double moved = 0;
  const auto params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    moved = std::max(moved, dpscope::testing::max_abs_diff(params[i], initial[i]));
  }
  if (!std::isfinite(moved)) fail("the reference training produced a NaN or an infinity");
  if (moved < 1e-4) fail("the reference training did not move the parameters");
}

bool everyone(int, int) { return true; }

// Trains `builder`'s model with DDP for `iterations` steps of the rank's batches, and the same
// in one process; compares.
void train_and_compare(const Builder& builder, ddp::DdpOptions options, int iterations,
                       double tolerance, const std::string& what,
                       std::shared_ptr<comm::ProcessGroup> group) {
  std::shared_ptr<TestNet> model = build(builder, rank);
  ddp::DistributedDataParallel ddp(model, group, options);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  for (int it = 0; it < iterations; ++it) {
    zero_grad(*model);
    const int64_t key = key_of(rank, it);
    at::Tensor out = ddp.forward([&] { return model->run(key, it); });
    model->loss(out, key).backward();
    ddp.reducer().check_reduction_finished();
    optimizer.step();
  }
  // PyTorch's gradient layout contract: a dense parameter's gradient has its strides, and DDP
  // leaves parameters as they were laid out.
  for (const auto& item : model->named_parameters()) {
    const at::Tensor& grad = item.value().grad();
    if (grad.defined() && !grad.is_sparse() && grad.strides() != item.value().strides()) {
      fail(what + ": the gradient of " + item.key() + " has other strides than the parameter");
    }
  }
  std::shared_ptr<TestNet> reference = build(builder, 0);
  for (const auto& item : reference->named_parameters()) {
    if (model->named_parameters()[item.key()].strides() != item.value().strides()) {
      fail(what + ": DDP changed the layout of " + item.key());
    }
  }
  reference_training(*reference, iterations, 1, 0.1, everyone);
  report(*model, *reference, tolerance, what);
}

// ---- Modes.

void run_plain(std::shared_ptr<comm::ProcessGroup> group) {
  train_and_compare([] { return std::make_shared<Mlp>(); }, {}, 3, 1e-5, "plain", group);
}

void run_mismatch(std::shared_ptr<comm::ProcessGroup> group) {
  std::shared_ptr<TestNet> model = build([] {
    return std::make_shared<Mlp>(rank == 1 ? 17 : 16, rank == 2);
  }, rank);
  try {
    ddp::DistributedDataParallel ddp(model, group, {});
  } catch (const ddp::DdpError& error) {
    throw ExpectedError(error.what());
  }
  fail("mismatch: DDP accepted models that differ across ranks");
}

void run_unused(std::shared_ptr<comm::ProcessGroup> group, const std::string& variant) {
  std::shared_ptr<TestNet> model = build([] { return std::make_shared<Mlp>(16, false, true); }, rank);
  ddp::DdpOptions options;
  options.bucket_cap_bytes = 1024;  // several buckets: some launch, the idle layer's does not
  options.first_bucket_bytes = 512;
  ddp::DistributedDataParallel ddp(model, group, options);
  try {
    for (int it = 0; it < 2; ++it) {
      const int64_t key = key_of(rank, it);
      at::Tensor out = ddp.forward([&] { return model->run(key, it); });
      model->loss(out, key).backward();
      if (variant == "check") ddp.reducer().check_reduction_finished();
    }
  } catch (const ddp::DdpError& error) {
    throw ExpectedError(error.what());
  }
  fail("unused: no error for a parameter without a gradient");
}

void run_noparams(std::shared_ptr<comm::ProcessGroup> group) {
  struct Empty : torch::nn::Module {};
  struct Frozen : torch::nn::Module {
    Frozen() {
      fc = register_module("fc", torch::nn::Linear(3, 3));
      for (at::Tensor& p : parameters()) p.requires_grad_(false);
    }
    torch::nn::Linear fc{nullptr};
  };
  const std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> cases = {
      {"no parameters", std::make_shared<Empty>()},
      {"no parameter requires grad", std::make_shared<Frozen>()}};
  for (const auto& [what, module] : cases) {
    try {
      ddp::DistributedDataParallel ddp(module, group, {});
      fail(what + ": DDP was constructed");
    } catch (const ddp::DdpError& error) {
      std::printf("rank %d: expected error (%s): %s\n", rank, what.c_str(), error.what());
    }
  }
  // The group is still usable: nothing was half-sent.
  at::Tensor one = at::ones({1});
  group->all_reduce(one, comm::ReduceOp::Sum)->wait();
  if (one.item<float>() != static_cast<float>(world)) fail("noparams: group broken afterwards");
}

void run_noncontiguous(std::shared_ptr<comm::ProcessGroup> group) {
  Builder builder = [] { return std::make_shared<NonContiguous>(); };
  {
    std::shared_ptr<TestNet> probe = build(builder, rank);
    auto* net = static_cast<NonContiguous*>(probe.get());
    if (net->weight.is_contiguous() ||
        !net->conv->weight.is_contiguous(at::MemoryFormat::ChannelsLast) ||
        net->conv->weight.is_contiguous()) {
      fail("noncontiguous: the model's parameters are not laid out as intended");
    }
  }
  for (const bool view : {false, true}) {
    ddp::DdpOptions options;
    options.gradient_as_bucket_view = view;
    options.bucket_cap_bytes = 256;
    options.first_bucket_bytes = 128;
    train_and_compare(builder, options, 4, 1e-5,
                      view ? "noncontiguous bucket-view" : "noncontiguous", group);
  }
}

void run_sparse(std::shared_ptr<comm::ProcessGroup> group, trace::Recorder* recorder) {
  ddp::DdpOptions options;
  options.recorder = recorder;
  train_and_compare([] { return std::make_shared<SparseNet>(); }, options, 4, 1e-5, "sparse",
                    group);
}

void run_join(std::shared_ptr<comm::ProcessGroup> group, const std::string& variant) {
  const bool unused = variant == "unused";
  Builder builder = [unused, variant]() -> std::shared_ptr<TestNet> {
    if (variant == "sparse") return std::make_shared<SparseNet>();
    return std::make_shared<Mlp>(16, false, unused);
  };
  std::shared_ptr<TestNet> model = build(builder, rank);
  ddp::DdpOptions options;
  options.find_unused_parameters = unused;
  options.bucket_cap_bytes = 1024;
  options.first_bucket_bytes = 512;
  ddp::DistributedDataParallel ddp(model, group, options);
  if (variant == "fp16") ddp.register_comm_hook(ddp::make_comm_hook(trace::CommHookKind::Fp16));
  // For tests/ddp/join_oracle.py (PyTorch's Join from the same start): DDP_WORKER_SAVE_DIR.
  const char* save_dir = std::getenv("DDP_WORKER_SAVE_DIR");
  if (save_dir && rank == 0) save_state(*model, std::string(save_dir) + "/init.pt");
  const double lr = 0.1;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr));
  // Rank r trains 4 + r batches; with "zero", 2 * r (rank 0 joins before any iteration, so it
  // shadows the first iteration and the bucket rebuild without a gradient order of its own).
  const bool zero = variant == "zero";
  const auto batches = [zero](int r) { return zero ? 2 * r : 4 + r; };
  const int mine = batches(rank);
  const int most = batches(world - 1);
  {
    ddp::Join join(ddp);
    for (int it = 0; it < mine; ++it) {
      zero_grad(*model);
      const int64_t key = key_of(rank, it);
      at::Tensor out = ddp.forward([&] { return model->run(key, it); });
      model->loss(out, key).backward();
      optimizer.step();
    }
    join.join();
    const int expected_shadowed = most - mine;
    if (join.shadowed_iterations() != expected_shadowed) {
      fail("join: shadowed " + std::to_string(join.shadowed_iterations()) + " iterations, expected " +
           std::to_string(expected_shadowed));
    }
  }
  // PyTorch's semantics: each iteration's gradient is the sum over the ranks still training
  // divided by the world size; the last joiner's model is everyone's.
  std::shared_ptr<TestNet> reference = build(builder, 0);
  reference_training(*reference, most, 1, lr,
                     [&](int r, int iteration) { return iteration < batches(r); });
  report(*model, *reference, variant == "fp16" ? 2e-3 : 1e-5, "join " + variant);
  if (save_dir && rank == 0) save_state(*model, std::string(save_dir) + "/ours.pt");
}

void run_nosync(std::shared_ptr<comm::ProcessGroup> group, trace::Recorder* recorder) {
  Builder builder = [] { return std::make_shared<Mlp>(); };
  std::shared_ptr<TestNet> model = build(builder, rank);
  ddp::DdpOptions options;
  options.recorder = recorder;
  options.bucket_cap_bytes = 1024;
  options.first_bucket_bytes = 512;
  ddp::DistributedDataParallel ddp(model, group, options);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  const int iterations = 3;
  const int micro_steps = 3;
  const trace::NameId nosync_name = recorder ? recorder->name("nosync_micro") : trace::kNone;
  for (int it = 0; it < iterations; ++it) {
    zero_grad(*model);
    for (int m = 0; m < micro_steps; ++m) {
      const int64_t key = key_of(rank, it, m);
      const int64_t begin_ns = trace::now_ns();
      const int64_t seq_before = group->next_seq();
      const bool rebuilt_before = ddp.reducer().has_rebuilt_buckets();
      std::optional<replica::NoSyncGuard> no_sync;
      if (m + 1 < micro_steps) no_sync.emplace(ddp.gradient_sync());
      at::Tensor out = ddp.forward([&] { return model->run(key, it); });
      (model->loss(out, key) / micro_steps).backward();
      if (no_sync) {
        // The one-time bucket rebuild (a broadcast) happens in the first forward after the
        // first iteration, under no_sync or not, as in PyTorch; nothing else communicates.
        const bool rebuilt = !rebuilt_before && ddp.reducer().has_rebuilt_buckets();
        if (rebuilt) {
          std::printf("rank %d: nosync rebuild in iteration %d micro-step %d\n", rank, it, m);
        }
        if (group->next_seq() - seq_before != (rebuilt ? 1 : 0)) {
          fail("nosync: micro-step " + std::to_string(m) + " of iteration " + std::to_string(it) +
               " under no_sync issued " + std::to_string(group->next_seq() - seq_before) +
               " collectives");
        }
        if (recorder) recorder->phase(0, nosync_name, begin_ns, trace::now_ns(), it);
      }
    }
    ddp.reducer().check_reduction_finished();
    optimizer.step();
  }
  std::shared_ptr<TestNet> reference = build(builder, 0);
  reference_training(*reference, iterations, micro_steps, 0.1, everyone);
  report(*model, *reference, 1e-5, "nosync");
}

// As engine/train/trainer.cpp does it: tracking allocator, sampler, phases, momentum SGD with
// its state retagged.
void run_trace(std::shared_ptr<comm::ProcessGroup> group, trace::Recorder* recorder,
               memory::TrackingAllocator* allocator) {
  memory::MemorySampler sampler(recorder, allocator);
  Builder builder = [] { return std::make_shared<WideMlp>(); };
  std::shared_ptr<TestNet> model = build(builder, rank);
  ddp::DdpOptions options;
  options.recorder = recorder;
  options.bucket_cap_bytes = 4 * 1024;  // 4 buckets
  options.first_bucket_bytes = 1024;
  ddp::DistributedDataParallel ddp(model, group, options);
  sampler.sample();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  const trace::NameId forward_name = recorder->name(trace::kPhaseForward);
  const trace::NameId backward_name = recorder->name(trace::kPhaseBackward);
  const trace::NameId step_name = recorder->name(trace::kPhaseOptimizerStep);
  const trace::NameId iteration_name = recorder->name(trace::kPhaseIteration);
  for (int it = 0; it < 3; ++it) {
    const int64_t begin_ns = trace::now_ns();
    zero_grad(*model);
    const int64_t key = key_of(rank, it);
    at::Tensor loss;
    {
      trace::ScopedPhase phase(*recorder, 0, forward_name, it);
      at::Tensor out = ddp.forward([&] { return model->run(key, it); });
      memory::CategoryScope activations(memory::MemoryCategory::Activations);
      loss = model->loss(out, key);
    }
    sampler.sample();
    {
      trace::ScopedPhase phase(*recorder, 0, backward_name, it);
      memory::CategoryScope activations(memory::MemoryCategory::Activations);
      loss.backward();
    }
    sampler.sample();
    {
      trace::ScopedPhase phase(*recorder, 0, step_name, it);
      memory::CategoryScope state(memory::MemoryCategory::OptimizerState);
      optimizer.step();
    }
    if (it == 0) {
      for (const auto& item : optimizer.state()) {
        const auto& sgd_state = static_cast<const torch::optim::SGDParamState&>(*item.second);
        if (sgd_state.momentum_buffer().defined()) {
          allocator->retag(sgd_state.momentum_buffer(), memory::MemoryCategory::OptimizerState);
        }
      }
    }
    sampler.sample();
    recorder->phase(0, iteration_name, begin_ns, trace::now_ns(), it);
    recorder->metric(it, recorder->name(trace::kMetricLoss), loss.item<double>());
  }
  std::printf("rank %d: params_hash %016llx\n", rank,
              static_cast<unsigned long long>(params_hash(*model)));
}

// Rank `root`'s value of element i of tensor t, in t's dtype (small integers and halves: exact
// in every dtype used).
at::Tensor broadcast_values(int t, const std::vector<int64_t>& shape, c10::ScalarType type,
                            int root) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  at::Tensor v = torch::remainder(torch::arange(numel, at::kDouble) * (t + 3) + root * 11, 29) - 14;
  if (type == at::kFloat || type == at::kDouble || type == at::kHalf) v = v + 0.5;
  return v.to(type).view(shape);
}

void run_broadcast(std::shared_ptr<comm::ProcessGroup> group) {
  struct Spec {
    std::vector<int64_t> shape;
    c10::ScalarType type;
    bool transposed;
  };
  const std::vector<Spec> specs = {
      {{3, 5}, at::kFloat, false},  {{7}, at::kLong, false},   {{40}, at::kFloat, false},
      {{2, 3}, at::kDouble, false}, {{4, 6}, at::kFloat, true}, {{11}, at::kHalf, false},
      {{5}, at::kInt, false},       {{33}, at::kByte, false},  {{1}, at::kFloat, false},
      {{9, 2}, at::kLong, true},    {{100}, at::kDouble, false}, {{6}, at::kHalf, false},
  };
  for (const int root : {0, world - 1}) {
    for (const int in_flight : {1, 2}) {
      for (const int64_t buffer_bytes : {int64_t{16}, int64_t{48}}) {
        std::vector<at::Tensor> tensors;
        for (size_t t = 0; t < specs.size(); ++t) {
          at::Tensor mine = broadcast_values(static_cast<int>(t), specs[t].shape, specs[t].type, rank);
          if (specs[t].transposed) mine = mine.t().contiguous().t();  // same values, other strides
          tensors.push_back(mine);
        }
        const int64_t seq_before = group->next_seq();
        replica::broadcast_coalesced(*group, tensors, root, buffer_bytes, in_flight);
        const int64_t broadcasts = group->next_seq() - seq_before;
        const std::string what = "broadcast root " + std::to_string(root) + " in_flight " +
                                 std::to_string(in_flight) + " buffer " +
                                 std::to_string(buffer_bytes);
        if (broadcasts <= static_cast<int64_t>(specs.size()) / 2) {
          fail(what + ": only " + std::to_string(broadcasts) + " broadcasts: chunks do not split");
        }
        for (size_t t = 0; t < specs.size(); ++t) {
          const at::Tensor expected =
              broadcast_values(static_cast<int>(t), specs[t].shape, specs[t].type, root);
          if (!torch::equal(tensors[t], expected)) fail(what + ": tensor " + std::to_string(t) + " differs");
          if (specs[t].transposed && tensors[t].is_contiguous()) fail(what + ": layout changed");
        }
        std::printf("rank %d: %s: %lld broadcasts\n", rank, what.c_str(),
                    static_cast<long long>(broadcasts));
      }
    }
  }
}

void run_static(std::shared_ptr<comm::ProcessGroup> group, const std::string& variant) {
  const bool changing = variant == "changing";
  if (variant == "unused") {
    // The idle layer is unused in every iteration, so the graph is static; the used parameters'
    // gradients must be averaged in every iteration, not only in the first.
    ddp::DdpOptions options;
    options.static_graph = true;
    options.bucket_cap_bytes = 1024;
    options.first_bucket_bytes = 512;
    train_and_compare([] { return std::make_shared<Mlp>(16, false, true); }, options, 4, 1e-5,
                      "static unused", group);
    return;
  }
  Builder builder = [changing] { return std::make_shared<SharedNet>(changing); };
  ddp::DdpOptions options;
  options.static_graph = true;
  if (!changing) {
    {
      std::shared_ptr<TestNet> probe = build(builder, rank);
      ddp::DistributedDataParallel ddp(probe, group, options);
      if (ddp.parameters().size() != 8 || probe->named_parameters().size() != 10) {
        fail("static: the shared layer is not deduplicated (" +
             std::to_string(ddp.parameters().size()) + " parameters)");
      }
    }
    train_and_compare(builder, options, 4, 1e-5, "static shared", group);
    return;
  }
  std::shared_ptr<TestNet> model = build(builder, rank);
  ddp::DistributedDataParallel ddp(model, group, options);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  try {
    for (int it = 0; it < 3; ++it) {
      zero_grad(*model);
      const int64_t key = key_of(rank, it);
      at::Tensor out = ddp.forward([&] { return model->run(key, it); });
      model->loss(out, key).backward();
      optimizer.step();
    }
  } catch (const ddp::DdpError& error) {
    throw ExpectedError(error.what());
  }
  fail("static changing: no error for a graph that changed under static_graph");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::string variant = argc > 2 ? argv[2] : "";
  torch::set_num_threads(1);
  std::shared_ptr<comm::ProcessGroup> group;
  std::unique_ptr<trace::Recorder> recorder;
  int status = 0;
  try {
    const comm::LaunchEnv env = comm::read_launch_env();
    rank = env.rank;
    memory::TrackingAllocator* allocator = nullptr;
    if (const char* dir = std::getenv("DPSCOPE_TRACE_DIR"); dir && *dir) {
      trace::RecorderOptions options;
      options.path = std::string(dir) + "/rank" + std::to_string(env.rank) + ".sqlite";
      options.rank = env.rank;
      options.local_rank = env.local_rank;
      recorder = std::make_unique<trace::Recorder>(options);
      recorder->set_meta(trace::meta_key::kStrategy, trace::to_string(trace::Strategy::Ddp));
      recorder->set_meta(trace::meta_key::kModel, "ddp_worker " + mode);
      if (mode == "trace") allocator = &memory::TrackingAllocator::install();
    }
    comm::WorldOptions options;
    options.backend = comm::Backend::Gloo;
    // Short: a mistake that hangs shows as a timeout within the test's limit.
    options.timeout = std::chrono::seconds(20);
    options.recorder = recorder.get();
    comm::World w = comm::init_world(options);
    group = w.group;
    rank = group->rank();
    world = group->size();
    if (mode == "plain") run_plain(group);
    else if (mode == "mismatch") run_mismatch(group);
    else if (mode == "unused") run_unused(group, variant);
    else if (mode == "noparams") run_noparams(group);
    else if (mode == "noncontiguous") run_noncontiguous(group);
    else if (mode == "sparse") run_sparse(group, recorder.get());
    else if (mode == "join") run_join(group, variant);
    else if (mode == "nosync") run_nosync(group, recorder.get());
    else if (mode == "trace" && recorder) run_trace(group, recorder.get(), allocator);
    else if (mode == "broadcast") run_broadcast(group);
    else if (mode == "static") run_static(group, variant);
    else {
      std::fprintf(stderr, "usage: ddp_worker plain|mismatch|unused check|unused forward|noparams|"
                           "noncontiguous|sparse|join plain|unused|fp16|zero|sparse|nosync|trace "
                           "(needs DPSCOPE_TRACE_DIR)|broadcast|static shared|static changing\n");
      return 2;
    }
  } catch (const ExpectedError& error) {
    std::printf("rank %d: error: %s\n", rank, error.what());
    std::fflush(stdout);
    // Every rank has printed its error before any exits (the launcher stops the others when the
    // first exits non-zero).
    try {
      if (group) group->barrier()->wait();
    } catch (const std::exception& barrier_error) {
      std::printf("rank %d: barrier after the error failed: %s\n", rank, barrier_error.what());
    }
    status = 3;
  } catch (const std::exception& error) {
    std::printf("rank %d: FAIL %s\n", rank, error.what());
    std::fflush(stdout);
    return 1;
  }
  if (status == 0) {
    std::printf("rank %d: %s %s: %d failures\n", rank, mode.c_str(), variant.c_str(), failures);
    if (failures) status = 1;
  }
  std::fflush(stdout);
  group.reset();
  if (recorder) recorder->close(status ? "failed" : "complete");
  return status;
}
