// device_generic_worker: one rank of test_device_generic, run under `dpscope launch`. Builds the
// model on LibTorch's meta device, wraps it in DDP or FSDP over a MetaProcessGroup (which refuses
// any tensor not on meta, naming the call site) and trains a few iterations, then prints every
// collective the engine issued: "rank R: site OP FILE:LINE host|device". Usage:
//   device_generic_worker ddp VARIANT    VARIANT: plain, find_unused, static, bucket_view,
//                                        join, fp16, powersgd
//   device_generic_worker fsdp VARIANT   VARIANT: full, grad_op, no_shard, bf16
//   device_generic_worker cpu_tensor     an all-reduce of a CPU tensor: expected error
// Prints "rank R: FAIL ..." per failed check and exits 1; an expected error is printed as
// "rank R: error: MESSAGE" and exits 3.
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/functional/linear.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/world.h"
#include "engine/ddp/comm_hook.h"
#include "engine/ddp/distributed_data_parallel.h"
#include "engine/ddp/join.h"
#include "engine/fsdp/fsdp_options.h"
#include "engine/fsdp/fully_sharded_data_parallel.h"
#include "engine/nn/forward_hooks.h"
#include "engine/models/models.h"
#include "engine/train/trainer.h"
#include "tests/device_generic/meta_process_group.h"
#include "tests/rank_worker.h"

using namespace dpscope;
using namespace dpscope::testing::worker;

namespace {

const c10::Device kMeta(c10::kMeta);

// A linear layer whose parameters are made on meta. (Module::to(meta) cannot move LibTorch 1.13's
// CPU parameters: set_data refuses a tensor of another kind.)
struct MetaLinearImpl : torch::nn::Module {
  MetaLinearImpl(int64_t in, int64_t out) {
    weight = register_parameter("weight", torch::empty({out, in}, torch::TensorOptions(kMeta)));
    bias = register_parameter("bias", torch::empty({out}, torch::TensorOptions(kMeta)));
  }
  at::Tensor forward(const at::Tensor& x) { return torch::nn::functional::linear(x, weight, bias); }
  at::Tensor weight, bias;
};
TORCH_MODULE(MetaLinear);

// Two layers, and with `with_unused` a third that forward never uses. Children are called through
// nn::call_module, so FSDP makes each layer a unit of its own.
struct Net : models::Model {
  explicit Net(bool with_unused) {
    first = register_module("first", MetaLinear(64, 32));
    second = register_module("second", MetaLinear(32, 10));
    if (with_unused) unused = register_module("unused", MetaLinear(4, 4));
  }
  at::Tensor forward(const at::Tensor& x) override {
    // tanh: relu has no meta kernel in LibTorch 1.13.
    return nn::call_module(second, torch::tanh(nn::call_module(first, x)));
  }
  bool calls_children_through_hooks() const override { return true; }
  MetaLinear first{nullptr}, second{nullptr}, unused{nullptr};
};

std::shared_ptr<Net> meta_net(bool with_unused) {
  auto net = std::make_shared<Net>(with_unused);
  for (const at::Tensor& p : net->parameters()) {
    if (!p.is_meta()) fail("a parameter is on " + p.device().str());
  }
  return net;
}

at::Tensor loss_of(const at::Tensor& out, int64_t key) {
  return torch::nn::functional::cross_entropy(out, labels(key).to(kMeta));
}

void check_gradients(const std::vector<at::Tensor>& params, const std::string& what) {
  for (const at::Tensor& p : params) {
    if (p.grad().defined() && !p.grad().is_meta()) {
      fail(what + ": a gradient is on " + p.grad().device().str());
    }
  }
}

void run_ddp(const std::shared_ptr<comm::ProcessGroup>& group, const std::string& variant) {
  const bool unused = variant == "find_unused";
  auto net = meta_net(unused);
  ddp::DdpOptions options;
  options.find_unused_parameters = unused;
  options.static_graph = variant == "static";
  options.gradient_as_bucket_view = variant == "bucket_view";
  options.bucket_cap_bytes = 4096;  // several buckets, rebuilt after iteration 0
  options.first_bucket_bytes = 2048;
  ddp::DistributedDataParallel ddp(net, group, options);
  if (variant == "fp16") ddp.register_comm_hook(ddp::make_comm_hook(trace::CommHookKind::Fp16));
  if (variant == "powersgd") ddp.register_comm_hook(ddp::make_comm_hook(trace::CommHookKind::PowerSgd));
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  // With join, rank r trains 2 + r iterations and then shadows the others'.
  const int iterations = variant == "join" ? 2 + rank : 3;
  auto train = [&] {
    for (int it = 0; it < iterations; ++it) {
      train::zero_grad(sgd);  // gradients may be bucket views
      const int64_t key = rank * 100 + it;
      const at::Tensor out = ddp.forward([&] { return net->forward(inputs(key).to(kMeta)); });
      loss_of(out, key).backward();
      check_gradients(net->parameters(), "ddp " + variant);
      sgd.step();
    }
  };
  if (variant == "join") {
    ddp::Join join(ddp);
    train();
    join.join();
  } else {
    train();
  }
}

void run_fsdp(const std::shared_ptr<comm::ProcessGroup>& group, const std::string& variant) {
  auto net = meta_net(false);
  fsdp::FsdpOptions options;
  options.wrap_policy = fsdp::size_based_wrap_policy(100);  // a unit per layer, and the root
  if (variant == "grad_op") options.sharding = fsdp::ShardingStrategy::ShardGradOp;
  if (variant == "no_shard") options.sharding = fsdp::ShardingStrategy::NoShard;
  if (variant == "bf16") options.mixed_precision = fsdp::mixed_precision_for(fsdp::ComputePrecision::Bf16, false);
  options.forward_prefetch = true;
  fsdp::FullyShardedDataParallel fsdp(net, group, options);
  torch::optim::SGD sgd(fsdp.parameters(), torch::optim::SGDOptions(0.1));
  for (int it = 0; it < 3; ++it) {
    sgd.zero_grad();
    const int64_t key = rank * 100 + it;
    const at::Tensor out =
        fsdp.forward(inputs(key).to(kMeta), [&](const at::Tensor& x) { return net->forward(x); });
    loss_of(out, key).backward();
    check_gradients(fsdp.parameters(), "fsdp " + variant);
    const at::Tensor norm = fsdp.clip_grad_norm(1.0);
    if (!norm.is_meta()) fail("clip_grad_norm's norm is on " + norm.device().str());
    sgd.step();
  }
  using StateCopies = fsdp::FullyShardedDataParallel::StateCopies;
  for (const auto& [name, tensor] : fsdp.full_state_dict(0, StateCopies::OnDevice)) {
    if (!tensor.is_meta()) fail("state dict entry " + name + " on " + tensor.device().str());
  }
}

void run_cpu_tensor(const std::shared_ptr<comm::ProcessGroup>& group) {
  try {
    group->all_reduce(torch::ones({4}), comm::ReduceOp::Sum)->wait();
  } catch (const comm::CommError& error) {
    throw ExpectedError(error.what());
  }
  fail("an all-reduce of a CPU tensor on the meta group succeeded");
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const std::string mode = args.empty() ? "" : args[0];
  const std::string variant = args.size() > 1 ? args[1] : "";
  comm::World w = comm::init_world({});
  rank = w.group->rank();
  world = w.group->size();
  torch::set_num_threads(1);
  comm::ProcessGroupOptions options;
  options.group_id = 1;
  options.name = "meta";
  auto meta = std::make_shared<testing::MetaProcessGroup>(w.store, w.group, options);
  int code = 0;
  try {
    if (mode == "ddp") {
      run_ddp(meta, variant);
    } else if (mode == "fsdp") {
      run_fsdp(meta, variant);
    } else if (mode == "cpu_tensor") {
      run_cpu_tensor(meta);
    } else {
      std::fprintf(stderr, "device_generic_worker: unknown mode '%s'\n", mode.c_str());
      return 2;
    }
  } catch (const ExpectedError& error) {
    std::printf("rank %d: error: %s\n", rank, error.what());
    code = 3;
  }
  for (const auto& issued : meta->issued()) {
    std::printf("rank %d: site %s %s %s\n", rank, std::string(trace::to_string(issued.op)).c_str(),
                issued.site.c_str(), issued.host_values ? "host" : "device");
  }
  std::fflush(stdout);
  w.group->barrier()->wait();
  if (code == 0 && failures > 0) code = 1;
  return code;
}
