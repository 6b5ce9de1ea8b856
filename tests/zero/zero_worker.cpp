// zero_worker: one rank of test_zero, run under `dpscope launch`. Trains an mlp with ZeRO-1
// (engine/zero) and checks it against DDP and a single-process computation. Usage: zero_worker MODE
//   equal_ddp     SGD with momentum and Adam, 4 steps each: ZeRO-1's parameters against DDP's
//                 (bit for bit on 2 ranks, within 1e-6 otherwise) and the local state's size
//   single        plain SGD, 3 steps: against one process training on every rank's batch at once
//   set_to_none   gradients reset to undefined between steps still reach the reduce-scatter
//   rank0_start   each rank builds another model: after construction every rank holds rank 0's
//   frozen        a parameter without requires_grad: expected error
//   closure       step(closure): expected error
// Prints "rank R: FAIL ..." per failed check and exits 1; an expected error is printed as
// "rank R: error: MESSAGE" and exits 3.
#include <ATen/ops/cat.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/world.h"
#include "engine/ddp/distributed_data_parallel.h"
#include "engine/models/models.h"
#include "engine/train/trainer.h"
#include "engine/zero/zero_redundancy_optimizer.h"
#include "tests/rank_worker.h"
#include "tests/tensor_diff.h"

using namespace dpscope;
using namespace dpscope::testing::worker;

namespace {

// Rank r's batch of step s: the same rows in every run and in the single process.
int64_t key(int r, int step) { return r * 100 + step; }

// The same model on every rank and in every run (seeded alike; DDP's and ZeRO's broadcasts keep
// it so), or another one per seed. hidden 37: the 3,119 parameters do not divide by 2 or 3, so
// the last shard is padded.
std::shared_ptr<models::Model> mlp(uint64_t seed = 7) {
  torch::manual_seed(seed);
  models::ModelConfig config;
  config.hidden = 37;
  return models::make_model(config);
}

using Factory = zero::LocalOptimizerFactory;

Factory sgd_factory(double momentum) {
  return [momentum](std::vector<at::Tensor> shard) {
    return std::make_unique<torch::optim::SGD>(shard, torch::optim::SGDOptions(0.1).momentum(momentum));
  };
}
Factory adam_factory() {
  return [](std::vector<at::Tensor> shard) {
    return std::make_unique<torch::optim::Adam>(shard, torch::optim::AdamOptions(0.01));
  };
}

std::vector<at::Tensor> snapshot(models::Model& model) {
  std::vector<at::Tensor> values;
  for (const at::Tensor& p : model.parameters()) values.push_back(p.detach().clone());
  return values;
}

// `stateful`: whether the optimizer keeps state (momentum, Adam): then for the shard alone.
std::vector<at::Tensor> train_zero(comm::World& w, const Factory& factory, int steps, bool stateful = true) {
  auto model = mlp();
  zero::ZeroRedundancyOptimizer optimizer(model->parameters(), w.group, factory);
  for (int step = 0; step < steps; ++step) {
    train::zero_grad(optimizer);
    model->loss(model->forward(inputs(key(rank, step))), labels(key(rank, step))).backward();
    optimizer.step();
  }
  int64_t state = 0;
  for (const auto& item : optimizer.local_optimizer().state()) {
    (void)item;
    ++state;
  }
  if (optimizer.local_optimizer().param_groups().at(0).params().at(0).numel() != optimizer.shard_numel()) {
    fail("the local optimizer steps " +
         std::to_string(optimizer.local_optimizer().param_groups()[0].params()[0].numel()) +
         " elements, not the shard's " + std::to_string(optimizer.shard_numel()));
  }
  if (state != (stateful ? 1 : 0)) {
    fail("the local optimizer holds state for " + std::to_string(state) + " tensors, not " +
         std::to_string(stateful ? 1 : 0));
  }
  if (optimizer.shard_numel() * world < optimizer.numel() ||
      optimizer.shard_numel() * world >= optimizer.numel() + world) {
    fail("shard of " + std::to_string(optimizer.shard_numel()) + " elements for " +
         std::to_string(optimizer.numel()) + " on " + std::to_string(world) + " ranks");
  }
  return snapshot(*model);
}

std::vector<at::Tensor> train_ddp(comm::World& w, const Factory& factory, int steps) {
  auto model = mlp();
  ddp::DistributedDataParallel ddp(model, w.group, ddp::DdpOptions{});
  std::vector<at::Tensor> parameters = model->parameters();
  // The factory builds over one tensor; DDP's optimizer sees every parameter.
  std::unique_ptr<torch::optim::Optimizer> optimizer = factory(parameters);
  for (int step = 0; step < steps; ++step) {
    train::zero_grad(*optimizer);
    const at::Tensor out = ddp.forward([&] { return model->forward(inputs(key(rank, step))); });
    model->loss(out, labels(key(rank, step))).backward();
    optimizer->step();
  }
  return snapshot(*model);
}

// Training moved the parameters away from the model's initial ones: a comparison of two
// untouched models would prove nothing.
void require_moved(const std::vector<at::Tensor>& trained, const std::string& what) {
  const std::vector<at::Tensor> initial = snapshot(*mlp());
  double moved = 0;
  for (size_t i = 0; i < trained.size(); ++i) {
    moved = std::max(moved, dpscope::testing::max_abs_diff(trained[i], initial[i]));
  }
  if (!(moved > 1e-4)) fail(what + ": training did not move the parameters");
}

void compare(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& expected,
             const std::string& what, double tolerance) {
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = dpscope::testing::max_abs_diff(got[i], expected[i]);  // NaN: infinite
    if (diff > tolerance) {
      fail(what + ": parameter " + std::to_string(i) + " differs by " + std::to_string(diff));
    }
  }
}

void equal_ddp(comm::World& w) {
  const double tolerance = world == 2 ? 0.0 : 1e-6;
  const std::vector<at::Tensor> sgd = train_zero(w, sgd_factory(0.9), 4);
  require_moved(sgd, "SGD momentum");
  compare(sgd, train_ddp(w, sgd_factory(0.9), 4), "SGD momentum", tolerance);
  const std::vector<at::Tensor> adam = train_zero(w, adam_factory(), 4);
  require_moved(adam, "Adam");
  compare(adam, train_ddp(w, adam_factory(), 4), "Adam", tolerance);
  std::printf("rank %d: zero-1 equals ddp\n", rank);
}

void single(comm::World& w) {
  const int steps = 3;
  const std::vector<at::Tensor> distributed = train_zero(w, sgd_factory(0), steps, /*stateful=*/false);
  require_moved(distributed, "single process");
  auto model = mlp();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    std::vector<at::Tensor> xs, ys;
    for (int r = 0; r < world; ++r) {
      xs.push_back(inputs(key(r, step)));
      ys.push_back(labels(key(r, step)));
    }
    // The mean over every rank's rows is the average of the ranks' means (equal batch sizes).
    model->loss(model->forward(at::cat(xs)), at::cat(ys)).backward();
    optimizer.step();
  }
  compare(distributed, snapshot(*model), "single process", 1e-5);
  std::printf("rank %d: zero-1 equals one process\n", rank);
}

void set_to_none(comm::World& w) {
  const std::vector<at::Tensor> expected = train_zero(w, sgd_factory(0.9), 3);
  require_moved(expected, "gradients set to none");
  auto model = mlp();
  zero::ZeroRedundancyOptimizer optimizer(model->parameters(), w.group, sgd_factory(0.9));
  for (int step = 0; step < 3; ++step) {
    for (at::Tensor& p : model->parameters()) p.mutable_grad() = at::Tensor();
    model->loss(model->forward(inputs(key(rank, step))), labels(key(rank, step))).backward();
    optimizer.step();
  }
  compare(snapshot(*model), expected, "gradients set to none", 0.0);
  std::printf("rank %d: set_to_none ok\n", rank);
}

// ZeRO-1's constructor starts every rank from rank 0's model, as DDP's does: here each rank built
// its own (seeded 7 + rank), so any other source shows on every rank but that one.
void rank0_start(comm::World& w) {
  auto model = mlp(7 + uint64_t(rank));
  zero::ZeroRedundancyOptimizer optimizer(model->parameters(), w.group, sgd_factory(0));
  compare(snapshot(*model), snapshot(*mlp(7)), "after construction, against rank 0's model", 0.0);
  std::printf("rank %d: starts from rank 0's model\n", rank);
}

void frozen(comm::World& w) {
  auto model = mlp();
  std::vector<at::Tensor> parameters = model->parameters();
  parameters[1].requires_grad_(false);
  try {
    zero::ZeroRedundancyOptimizer optimizer(parameters, w.group, sgd_factory(0));
  } catch (const std::invalid_argument& error) {
    throw ExpectedError(error.what());
  }
  fail("a frozen parameter was accepted");
}

void closure(comm::World& w) {
  auto model = mlp();
  zero::ZeroRedundancyOptimizer optimizer(model->parameters(), w.group, sgd_factory(0));
  try {
    optimizer.step([] { return at::Tensor(); });
  } catch (const std::invalid_argument& error) {
    throw ExpectedError(error.what());
  }
  fail("a closure was accepted");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: zero_worker equal_ddp|single|set_to_none|rank0_start|frozen|closure\n");
    return 2;
  }
  at::set_num_threads(1);
  comm::World w = comm::init_world({});
  rank = w.group->rank();
  world = w.group->size();
  const std::string mode = argv[1];
  try {
    if (mode == "equal_ddp") {
      equal_ddp(w);
    } else if (mode == "single") {
      single(w);
    } else if (mode == "set_to_none") {
      set_to_none(w);
    } else if (mode == "rank0_start") {
      rank0_start(w);
    } else if (mode == "frozen") {
      frozen(w);
    } else if (mode == "closure") {
      closure(w);
    } else {
      std::fprintf(stderr, "zero_worker: unknown mode %s\n", mode.c_str());
      return 2;
    }
  } catch (const ExpectedError& error) {
    std::printf("rank %d: error: %s\n", rank, error.what());
    std::fflush(stdout);
    return 3;
  }
  w.group->barrier()->wait();
  return failures ? 1 : 0;
}
