// fsdp_worker: one rank of test_fsdp_worker, run under `dpscope launch`. Trains small models
// through engine/fsdp's FullyShardedDataParallel on data that is a formula of (rank, step), and
// checks or saves what a case needs. Usage: fsdp_worker MODE [ARGS]
//   save DIR          mlp, 2 steps; sharded state into DIR, the full state into DIR/full.pt
//   load DIR OUT      a freshly initialised mlp loads DIR (any world size), writes its full state
//                     to OUT, then trains one more step
//   load_other DIR    an mlp of another width loads DIR: expected error
//   clip              clip_grad_norm against the norm of the global gradient computed here
//   noparams          a module without parameters: expected error
//   fp16              fp16 compute on the CPU: expected error
//   mismatch          rank 1 builds a wider mlp: expected error
//   forward_only      a forward with grad but no backward, then a normal step and an evaluation
// Prints "rank R: FAIL ..." per failed check and exits 1; an expected error is printed as
// "rank R: error: MESSAGE" and exits 3 after a barrier.
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/world.h"
#include "engine/fsdp/fully_sharded_data_parallel.h"
#include "engine/models/models.h"
#include "engine/train/trainer.h"
#include "tests/rank_worker.h"

using namespace dpscope;
using namespace dpscope::testing::worker;

namespace {

std::shared_ptr<models::Model> mlp(int64_t hidden, uint64_t seed) {
  torch::manual_seed(seed);
  models::ModelConfig config;
  config.hidden = hidden;
  return models::make_model(config);
}

fsdp::FsdpOptions nested() {
  fsdp::FsdpOptions options;
  options.wrap_policy = fsdp::size_based_wrap_policy(100);
  return options;
}

void train_steps(fsdp::FullyShardedDataParallel& fsdp, models::Model& model, int first, int steps) {
  torch::optim::SGD sgd(fsdp.parameters(), torch::optim::SGDOptions(0.1));
  for (int step = first; step < first + steps; ++step) {
    sgd.zero_grad();
    const int64_t key = rank * 100 + step;
    const at::Tensor out = fsdp.forward(inputs(key), [&](const at::Tensor& x) { return model.forward(x); });
    model.loss(out, labels(key)).backward();
    sgd.step();
  }
}

void save(comm::World& w, const std::string& dir) {
  auto model = mlp(33, 1);
  fsdp::FullyShardedDataParallel fsdp(model, w.group, nested());
  train_steps(fsdp, *model, 0, 2);
  fsdp.save_sharded_state(dir);
  const auto state = fsdp.full_state_dict(0);
  if (rank == 0) train::save_tensors(state, dir + "/full.pt");
}

void load(comm::World& w, const std::string& dir, const std::string& out) {
  auto model = mlp(33, 2);  // other values: only the loaded state may show
  fsdp::FullyShardedDataParallel fsdp(model, w.group, nested());
  fsdp.load_sharded_state(dir);
  const auto state = fsdp.full_state_dict(0);
  if (rank == 0) train::save_tensors(state, out);
  train_steps(fsdp, *model, 2, 1);
}

void load_other(comm::World& w, const std::string& dir) {
  auto model = mlp(34, 1);
  fsdp::FullyShardedDataParallel fsdp(model, w.group, nested());
  try {
    fsdp.load_sharded_state(dir);
  } catch (const fsdp::FsdpError& error) {
    throw ExpectedError(error.what());
  }
  fail("loading a checkpoint of another model succeeded");
}

void clip(comm::World& w) {
  // The reference: every rank's batch through one plain copy, gradients averaged over ranks.
  auto reference = mlp(33, 1);
  for (int r = 0; r < world; ++r) {
    (reference->loss(reference->forward(inputs(r * 100)), labels(r * 100)) / world).backward();
  }
  double squares = 0;
  for (const at::Tensor& p : reference->parameters()) squares += p.grad().pow(2).sum().item<double>();
  const double expected = std::sqrt(squares);
  if (!(expected > 0 && std::isfinite(expected))) fail("the reference gradient norm is " + std::to_string(expected));

  auto model = mlp(33, 1);
  fsdp::FullyShardedDataParallel fsdp(model, w.group, nested());
  const int64_t key = rank * 100;
  const at::Tensor out = fsdp.forward(inputs(key), [&](const at::Tensor& x) { return model->forward(x); });
  model->loss(out, labels(key)).backward();
  const double total = fsdp.clip_grad_norm(expected / 2).item<double>();
  // Written as !(within): a NaN fails it.
  if (!(std::abs(total - expected) <= 1e-5 * expected)) {
    fail("clip_grad_norm total " + std::to_string(total) + ", expected " + std::to_string(expected));
  }
  const double after = fsdp.clip_grad_norm(1e9).item<double>();
  if (!(std::abs(after - expected / 2) <= 1e-4 * expected)) {
    fail("after clipping to " + std::to_string(expected / 2) + " the norm is " + std::to_string(after));
  }
  std::printf("rank %d: norm %.6f\n", rank, total);
}

void noparams(comm::World& w) {
  auto empty = std::make_shared<torch::nn::Module>();
  try {
    fsdp::FullyShardedDataParallel fsdp(empty, w.group);
  } catch (const fsdp::FsdpError& error) {
    throw ExpectedError(error.what());
  }
  fail("a module without parameters was accepted");
}

// Rank 1 builds a wider model: every rank refuses it at construction, in FSDP's own words.
void mismatch(comm::World& w) {
  auto model = mlp(rank == 1 ? 34 : 33, 1);
  try {
    fsdp::FullyShardedDataParallel fsdp(model, w.group, nested());
  } catch (const fsdp::FsdpError& error) {
    throw ExpectedError(error.what());
  }
  fail("models that differ across ranks were accepted");
}

void fp16(comm::World& w) {
  auto model = mlp(33, 1);
  fsdp::FsdpOptions options = nested();
  options.mixed_precision = fsdp::mixed_precision_for(fsdp::ComputePrecision::Fp16, false);
  try {
    fsdp::FullyShardedDataParallel fsdp(model, w.group, options);
  } catch (const fsdp::FsdpError& error) {
    throw ExpectedError(error.what());
  }
  fail("fp16 compute on the CPU was accepted");
}

void forward_only(comm::World& w) {
  auto model = mlp(33, 1);
  fsdp::FullyShardedDataParallel fsdp(model, w.group, nested());
  fsdp.forward(inputs(rank), [&](const at::Tensor& x) { return model->forward(x); });
  train_steps(fsdp, *model, 0, 2);
  c10::NoGradGuard no_grad;
  const at::Tensor out = fsdp.forward(inputs(rank), [&](const at::Tensor& x) { return model->forward(x); });
  if (!torch::isfinite(out).all().item<bool>()) fail("evaluation output is not finite");
  for (size_t u = 0; u < fsdp.unit_count(); ++u) {
    if (fsdp.sharding() != fsdp::ShardingStrategy::NoShard && fsdp.flat_param(u).is_materialized() &&
        !fsdp.flat_param(u).empty()) {
      fail("unit " + fsdp.unit_name(u) + " is still full after an evaluation");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const std::string mode = args.empty() ? "" : args[0];
  auto arg = [&](size_t i) { return i < args.size() ? args[i] : std::string(); };
  comm::World w = comm::init_world({});
  rank = w.group->rank();
  world = w.group->size();
  torch::set_num_threads(1);
  int code = 0;
  try {
    if (mode == "save") save(w, arg(1));
    else if (mode == "load") load(w, arg(1), arg(2));
    else if (mode == "load_other") load_other(w, arg(1));
    else if (mode == "clip") clip(w);
    else if (mode == "noparams") noparams(w);
    else if (mode == "fp16") fp16(w);
    else if (mode == "mismatch") mismatch(w);
    else if (mode == "forward_only") forward_only(w);
    else {
      std::fprintf(stderr, "fsdp_worker: unknown mode '%s'\n", mode.c_str());
      return 2;
    }
  } catch (const ExpectedError& error) {
    std::printf("rank %d: error: %s\n", rank, error.what());
    code = 3;
  }
  std::fflush(stdout);
  w.group->barrier()->wait();
  if (code == 0 && failures > 0) code = 1;
  return code;
}
