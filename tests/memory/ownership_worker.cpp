// ownership_worker: one rank of test_ownership_equality, run under `dpscope launch`. Trains a
// two-layer model under STRATEGY with ownership accounting, on the CPU and then on meta, sampling
// memory after construction and after every forward, backward and optimizer step into
// DIR/cpu/rank<R>.sqlite and DIR/meta/rank<R>.sqlite: points
// where every rank and every device holds the same, unlike FSDP's own samples at each gather and
// free, whose contents depend on which asynchronous collective has finished (`dpscope train` takes
// those; test_ownership_equality checks them against tracking). Usage:
//   ownership_worker STRATEGY DIR
//     STRATEGY: ddp, ddp_view (gradient as bucket view), ddp_accum (2 micro-steps, the first under
//               no_sync), fsdp_full, fsdp_grad_op, fsdp_no_shard, fsdp_bf16, fsdp2, fsdp2_keep
//               (reshard_after_forward false), fsdp2_groups (reshard_after_forward 1),
//               fsdp2_bf16, zero1
// On the CPU (over Gloo, the tracking allocator beside) it prints each owned category's largest
// difference from tracking, "rank R: difference CATEGORY BYTES of PEAK"; on meta (over a process
// group on meta) the same bytes come without any memory.
// Prints "rank R: FAIL ..." per failed check and exits 1.
#include <torch/nn/functional/linear.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/comm/world.h"
#include "engine/data/dataset.h"
#include "engine/ddp/distributed_data_parallel.h"
#include "engine/fsdp/fsdp_options.h"
#include "engine/fsdp/fully_sharded_data_parallel.h"
#include "engine/fsdp2/fully_shard.h"
#include "engine/memory/memory_sampler.h"
#include "engine/memory/optimizer_memory.h"
#include "engine/memory/ownership_registry.h"
#include "engine/models/models.h"
#include "engine/nn/forward_hooks.h"
#include "engine/replica/gradient_sync.h"
#include "engine/train/trainer.h"
#include "engine/zero/zero_redundancy_optimizer.h"
#include "tests/device_generic/meta_process_group.h"
#include "tests/rank_worker.h"
#include "trace/recorder.h"

using namespace dpscope;
using namespace dpscope::testing::worker;
using memory::MemoryCategory;

namespace {

// A linear layer made on `device` (LibTorch 1.13's Module::to cannot move parameters to meta).
struct DeviceLinearImpl : torch::nn::Module {
  DeviceLinearImpl(int64_t in, int64_t out, c10::Device device) {
    torch::manual_seed(in * 131 + out);
    weight = register_parameter("weight", torch::randn({out, in}).mul_(0.1).to(device));
    bias = register_parameter("bias", torch::zeros({out}).to(device));
  }
  at::Tensor forward(const at::Tensor& x) { return torch::nn::functional::linear(x, weight, bias); }
  at::Tensor weight, bias;
};
TORCH_MODULE(DeviceLinear);

// 64 -> 48 -> 10; children called through nn::call_module, so each layer can be a unit.
struct Net : models::Model {
  explicit Net(c10::Device device) {
    first = register_module("first", DeviceLinear(64, 48, device));
    second = register_module("second", DeviceLinear(48, 10, device));
  }
  at::Tensor forward(const at::Tensor& x) override {
    // tanh: relu has no meta kernel in LibTorch 1.13.
    return nn::call_module(second, torch::tanh(nn::call_module(first, x)));
  }
  bool calls_children_through_hooks() const override { return true; }
  DeviceLinear first{nullptr}, second{nullptr};
};

// A strategy's forward and what its optimizer steps.
struct Wrapped {
  std::function<at::Tensor(const at::Tensor&)> forward;
  std::function<replica::GradientSync&()> sync;  // null: no no_sync
  std::vector<at::Tensor> optimized;
  std::unique_ptr<ddp::DistributedDataParallel> ddp;
  std::unique_ptr<fsdp::FullyShardedDataParallel> fsdp;
  std::shared_ptr<fsdp2::FsdpState> fsdp2;
};

Wrapped wrap(const std::string& strategy, const std::shared_ptr<Net>& net,
             const std::shared_ptr<comm::ProcessGroup>& group) {
  Wrapped w;
  if (strategy.rfind("ddp", 0) == 0) {
    ddp::DdpOptions options;
    options.gradient_as_bucket_view = strategy == "ddp_view";
    options.bucket_cap_bytes = 8192;  // several buckets
    options.first_bucket_bytes = 4096;
    w.ddp = std::make_unique<ddp::DistributedDataParallel>(net, group, options);
    ddp::DistributedDataParallel* raw = w.ddp.get();
    w.forward = [raw, net](const at::Tensor& x) { return raw->forward([&] { return net->forward(x); }); };
    w.sync = [raw]() -> replica::GradientSync& { return raw->gradient_sync(); };
    w.optimized = net->parameters();
  } else if (strategy.rfind("fsdp2", 0) == 0) {
    fsdp2::FullyShardOptions options;
    if (strategy == "fsdp2_keep") options.reshard_after_forward = fsdp2::ReshardSpec::keep();
    if (strategy == "fsdp2_groups") options.reshard_after_forward = fsdp2::ReshardSpec::to_group_size(1);
    if (strategy == "fsdp2_bf16") options.mp_policy = {fsdp::ComputePrecision::Bf16, fsdp::ComputePrecision::Bf16};
    fsdp2::fully_shard(*net->first, group, options);
    fsdp2::fully_shard(*net->second, group, options);
    w.fsdp2 = fsdp2::fully_shard(*net, group, options);
    fsdp2::FsdpState* raw = w.fsdp2.get();
    w.forward = [raw, net](const at::Tensor& x) {
      return raw->forward(x, [&](const at::Tensor& input) { return net->forward(input); });
    };
    w.sync = [raw]() -> replica::GradientSync& { return raw->gradient_sync(); };
    w.optimized = w.fsdp2->parameters();
  } else if (strategy.rfind("fsdp", 0) == 0) {
    fsdp::FsdpOptions options;
    options.wrap_policy = fsdp::size_based_wrap_policy(100);  // a unit per layer, and the root
    if (strategy == "fsdp_grad_op") options.sharding = fsdp::ShardingStrategy::ShardGradOp;
    if (strategy == "fsdp_no_shard") options.sharding = fsdp::ShardingStrategy::NoShard;
    if (strategy == "fsdp_bf16") options.mixed_precision = fsdp::mixed_precision_for(fsdp::ComputePrecision::Bf16, false);
    w.fsdp = std::make_unique<fsdp::FullyShardedDataParallel>(net, group, options);
    fsdp::FullyShardedDataParallel* raw = w.fsdp.get();
    w.forward = [raw, net](const at::Tensor& x) {
      return raw->forward(x, [&](const at::Tensor& input) { return net->forward(input); });
    };
    w.sync = [raw]() -> replica::GradientSync& { return raw->gradient_sync(); };
    w.optimized = w.fsdp->parameters();
  } else if (strategy == "zero1") {
    w.forward = [net](const at::Tensor& x) { return net->forward(x); };
    w.optimized = net->parameters();
  } else {
    throw std::invalid_argument("ownership_worker: unknown strategy " + strategy);
  }
  return w;
}

void run(const std::string& strategy, c10::Device device, const std::shared_ptr<comm::ProcessGroup>& group,
         const std::string& dir) {
  memory::TrackingAllocator* allocator = device.is_cpu() ? &memory::TrackingAllocator::install() : nullptr;
  trace::RecorderOptions recorder_options;
  recorder_options.path = dir + "/rank" + std::to_string(rank) + ".sqlite";
  recorder_options.rank = rank;
  trace::Recorder recorder(recorder_options);
  memory::MemorySampler sampler(&recorder, allocator, device, memory::MemoryAccounting::Ownership);
  std::shared_ptr<Net> net;
  {
    memory::CategoryScope parameters(MemoryCategory::Parameters);
    net = std::make_shared<Net>(device);
  }
  for (const at::Tensor& p : net->parameters()) memory::own(p, MemoryCategory::Parameters);
  Wrapped w = wrap(strategy, net, group);
  const auto sgd = [](std::vector<at::Tensor> params) {
    return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(0.1).momentum(0.9));
  };
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (strategy == "zero1") {
    optimizer = std::make_unique<zero::ZeroRedundancyOptimizer>(w.optimized, group, sgd);
  } else {
    optimizer = sgd(w.optimized);
  }
  sampler.sample();
  const int micro_steps = strategy == "ddp_accum" ? 2 : 1;
  for (int step = 0; step < 3; ++step) {
    train::zero_grad(*optimizer);
    for (int micro = 0; micro < micro_steps; ++micro) {
      const int64_t key = rank * 100 + step * 10 + micro;
      data::Dataset batch;
      {
        memory::CategoryScope data(MemoryCategory::Data);
        batch = data::Dataset{inputs(key), labels(key)}.to(device);
      }
      std::optional<replica::NoSyncGuard> no_sync;
      if (micro + 1 < micro_steps) no_sync.emplace(w.sync());
      at::Tensor loss;
      {
        memory::CategoryScope activations(MemoryCategory::Activations);
        loss = torch::nn::functional::cross_entropy(w.forward(batch.x), batch.y);
      }
      sampler.sample();
      {
        memory::CategoryScope activations(MemoryCategory::Activations);
        loss.backward();
      }
      sampler.sample();
    }
    {
      memory::CategoryScope state(MemoryCategory::OptimizerState);
      optimizer->step();
    }
    memory::count_optimizer_state(*optimizer);
    sampler.sample();
  }
  if (allocator) {
    for (const MemoryCategory category : trace::kStackedCategories) {
      if (category == MemoryCategory::Activations || category == MemoryCategory::Other) continue;
      std::printf("rank %d: difference %s %lld of %lld\n", rank, std::string(trace::to_string(category)).c_str(),
                  static_cast<long long>(sampler.largest_difference(category)),
                  static_cast<long long>(sampler.largest_tracked_total()));
    }
  }
  std::fflush(stdout);
  recorder.close();
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() != 2) {
    std::fprintf(stderr, "usage: ownership_worker STRATEGY DIR\n");
    return 2;
  }
  comm::World w = comm::init_world({});
  rank = w.group->rank();
  world = w.group->size();
  torch::set_num_threads(1);
  comm::ProcessGroupOptions options;
  options.group_id = 1;
  options.name = "meta";
  const auto meta = std::make_shared<testing::MetaProcessGroup>(w.store, w.group, options);
  try {
    run(args[0], c10::Device(c10::kCPU), w.group, args[1] + "/cpu");
    run(args[0], c10::Device(c10::kMeta), meta, args[1] + "/meta");
  } catch (const std::exception& error) {
    fail(std::string("training threw: ") + error.what());
  }
  w.group->barrier()->wait();
  return failures > 0 ? 1 : 0;
}
