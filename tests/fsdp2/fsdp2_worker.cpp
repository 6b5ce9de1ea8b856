// fsdp2_worker: one rank of test_fsdp2_worker, run under `dpscope launch`. Trains a small mlp
// through engine/fsdp2's fully_shard (each Linear, then the root) on data that is a formula of
// (rank, step), and checks what a case needs. Usage: fsdp2_worker MODE [HIDDEN | DIR [OUT]]
//   sharded   each rank's sharded state dict holds exactly its dim-0 rows of the full one
//   clip      clip_grad_norm against the norm of the global gradient computed here
//   prefetch  explicit forward and backward prefetching trains to the same bits as without
//   save DIR  trains 2 steps, writes a sharded checkpoint to DIR (checking that it communicates
//             nothing) and rank 0 the full state to DIR/full.pt
//   save_hsdp DIR  the same under HSDP, shard groups of 2 ranks (every replica writes its file)
//   load DIR OUT  another model's values, the checkpoint loaded, rank 0 the full state to OUT;
//             then one more step
//   load_other DIR  a model of another width loads DIR: the error is expected (exit 3)
// HIDDEN is the mlp's width (default 10: on 3 or 4 ranks every weight's rows split unevenly; 3 on
// 4 ranks leaves the last rank's chunk of the hidden layers empty).
// Prints "rank R: FAIL ..." per failed check and exits 1.
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/world.h"
#include "engine/comm/device_mesh.h"
#include "engine/fsdp2/fully_shard.h"
#include "engine/models/models.h"
#include "engine/train/trainer.h"
#include "tests/rank_worker.h"

using namespace dpscope;
using namespace dpscope::testing::worker;

namespace {

int64_t hidden = 10;

std::shared_ptr<models::Model> mlp(uint64_t seed) {
  torch::manual_seed(seed);
  models::ModelConfig config;
  config.hidden = hidden;
  return models::make_model(config);
}

// fully_shard on every child with parameters, then the root; `layers` gets the children's states
// in order when given. `shard_group_size` > 0: HSDP over the world as groups of that many ranks.
std::shared_ptr<fsdp2::FsdpState> shard(models::Model& model, comm::World& w,
                                        std::vector<std::shared_ptr<fsdp2::FsdpState>>* layers = nullptr,
                                        int shard_group_size = 0) {
  fsdp2::sync_module_states(model, *w.group);
  const comm::DeviceMesh mesh = shard_group_size > 0 ? comm::make_hsdp_mesh(w.group, shard_group_size)
                                                    : comm::DeviceMesh{w.group, nullptr};
  for (const auto& child : model.named_children()) {
    if (child.value()->parameters().empty()) continue;
    auto state = fsdp2::fully_shard(*child.value(), mesh);
    if (layers) layers->push_back(state);
  }
  return fsdp2::fully_shard(model, mesh);
}

void train_steps(fsdp2::FsdpState& fsdp, models::Model& model, int steps) {
  torch::optim::SGD sgd(fsdp.parameters(), torch::optim::SGDOptions(0.1));
  for (int step = 0; step < steps; ++step) {
    sgd.zero_grad();
    const int64_t key = rank * 100 + step;
    const at::Tensor out = fsdp.forward(inputs(key), [&](const at::Tensor& x) { return model.forward(x); });
    model.loss(out, labels(key)).backward();
    sgd.step();
  }
}

void sharded(comm::World& w) {
  auto model = mlp(1);
  auto fsdp = shard(*model, w);
  train_steps(*fsdp, *model, 2);
  const std::vector<fsdp2::FsdpState::ShardedTensor> mine = fsdp->sharded_state_dict();
  std::map<std::string, at::Tensor> full;
  for (int r = 0; r < world; ++r) {  // every rank in turn gets the full state (a collective)
    for (auto& [name, tensor] : fsdp->full_state_dict(r)) full[name] = tensor;
  }
  if (mine.size() != model->named_parameters().size()) fail("the sharded state dict misses parameters");
  for (const auto& entry : mine) {
    const at::Tensor& whole = full.at(entry.name);
    const int64_t rows = whole.size(0);
    const int64_t chunk = (rows + world - 1) / world;
    const int64_t first = std::min(rows, chunk * rank);
    const int64_t count = std::max<int64_t>(0, std::min(chunk, rows - first));
    if (entry.first_row != first || entry.local.size(0) != count ||
        entry.full_shape != whole.sizes().vec()) {
      fail(entry.name + ": rows from " + std::to_string(entry.first_row) + ", " +
           std::to_string(entry.local.size(0)) + " of them; expected " + std::to_string(count) +
           " from " + std::to_string(first));
      continue;
    }
    if (!entry.local.detach().equal(whole.narrow(0, first, count))) {
      fail(entry.name + ": this rank's rows differ from the full state's");
    }
    std::printf("rank %d: %s rows [%lld, %lld) of %lld\n", rank, entry.name.c_str(),
                static_cast<long long>(first), static_cast<long long>(first + count),
                static_cast<long long>(rows));
  }
}

void clip(comm::World& w) {
  // The reference: every rank's batch through one plain copy, gradients averaged over ranks.
  auto reference = mlp(1);
  for (int r = 0; r < world; ++r) {
    (reference->loss(reference->forward(inputs(r * 100)), labels(r * 100)) / world).backward();
  }
  double squares = 0;
  for (const at::Tensor& p : reference->parameters()) squares += p.grad().pow(2).sum().item<double>();
  const double expected = std::sqrt(squares);

  auto model = mlp(1);
  auto fsdp = shard(*model, w);
  const int64_t key = rank * 100;
  const at::Tensor out = fsdp->forward(inputs(key), [&](const at::Tensor& x) { return model->forward(x); });
  model->loss(out, labels(key)).backward();
  const double total = fsdp->clip_grad_norm(expected / 2).item<double>();
  if (!(std::abs(total - expected) <= 1e-5 * expected)) {
    fail("clip_grad_norm total " + std::to_string(total) + ", expected " + std::to_string(expected));
  }
  const double after = fsdp->clip_grad_norm(1e9).item<double>();
  if (!(std::abs(after - expected / 2) <= 1e-4 * expected)) {
    fail("after clipping to " + std::to_string(expected / 2) + " the norm is " + std::to_string(after));
  }
  std::printf("rank %d: norm %.6f\n", rank, total);
}

// Each layer prefetches the next in forward and the one before in backward (what the implicit
// backward prefetch does too, here set by hand): the same collectives in another issue order, so
// the same sharded parameters, bit for bit.
void prefetch(comm::World& w) {
  auto plain_model = mlp(1);
  auto plain = shard(*plain_model, w);
  train_steps(*plain, *plain_model, 2);
  auto model = mlp(1);
  std::vector<std::shared_ptr<fsdp2::FsdpState>> layers;
  auto fsdp = shard(*model, w, &layers);
  for (size_t i = 0; i + 1 < layers.size(); ++i) {
    layers[i]->set_modules_to_forward_prefetch({layers[i + 1].get()});
    layers[i + 1]->set_modules_to_backward_prefetch({layers[i].get()});
  }
  train_steps(*fsdp, *model, 2);
  const std::vector<at::Tensor> expected = plain->parameters();
  const std::vector<at::Tensor> got = fsdp->parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i].detach().equal(expected[i].detach())) fail("sharded parameter " + std::to_string(i) + " differs");
  }
  std::printf("rank %d: prefetch %zu parameters equal\n", rank, got.size());
}

// A sharded checkpoint is each rank's rows as they are: writing it is no collective.
void save(comm::World& w, const std::string& dir, int shard_group_size) {
  auto model = mlp(1);
  auto fsdp = shard(*model, w, nullptr, shard_group_size);
  train_steps(*fsdp, *model, 2);
  const int64_t before = w.group->next_seq();
  const int64_t shard_seq = fsdp->group().next_seq();
  fsdp->save_sharded_state(dir);
  const int64_t issued = w.group->next_seq() - before + fsdp->group().next_seq() - shard_seq;
  if (issued != 0) fail("save_sharded_state issued " + std::to_string(issued) + " collectives");
  const auto state = fsdp->full_state_dict(0);
  if (rank == 0) train::save_tensors(state, dir + "/full.pt");
  std::printf("rank %d: saved with 0 collectives\n", rank);
}

void load(comm::World& w, const std::string& dir, const std::string& out) {
  auto model = mlp(2);  // other values: only the loaded state may show
  auto fsdp = shard(*model, w);
  const int64_t before = w.group->next_seq();
  fsdp->load_sharded_state(dir);
  if (w.group->next_seq() != before) fail("load_sharded_state issued collectives");
  const auto state = fsdp->full_state_dict(0);
  if (rank == 0) train::save_tensors(state, out);
  train_steps(*fsdp, *model, 1);
}

void load_other(comm::World& w, const std::string& dir) {
  hidden += 1;
  auto model = mlp(1);
  auto fsdp = shard(*model, w);
  try {
    fsdp->load_sharded_state(dir);
  } catch (const fsdp2::Fsdp2Error& error) {
    throw ExpectedError(error.what());
  }
  fail("loading a checkpoint of another model succeeded");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool takes_paths = mode == "save" || mode == "save_hsdp" || mode == "load" || mode == "load_other";
  if (argc > 2 && !takes_paths) hidden = std::stoll(argv[2]);
  comm::World w = comm::init_world({});
  rank = w.group->rank();
  world = w.group->size();
  torch::set_num_threads(1);
  const auto arg = [&](int i) { return argc > i + 1 ? std::string(argv[i + 1]) : std::string(); };
  int code = 0;
  try {
    if (mode == "sharded") {
      sharded(w);
    } else if (mode == "clip") {
      clip(w);
    } else if (mode == "prefetch") {
      prefetch(w);
    } else if (mode == "save") {
      save(w, arg(1), 0);
    } else if (mode == "save_hsdp") {
      save(w, arg(1), 2);
    } else if (mode == "load") {
      load(w, arg(1), arg(2));
    } else if (mode == "load_other") {
      load_other(w, arg(1));
    } else {
      std::fprintf(stderr, "fsdp2_worker: unknown mode '%s'\n", mode.c_str());
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
