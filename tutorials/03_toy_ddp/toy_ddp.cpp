// Tutorial 03: the seeds' ToyModel (net1 Linear(10,10), ReLU, net2 Linear(10,5)) under DDP.
// Shows what DistributedDataParallel's constructor does — verify the model across ranks,
// broadcast rank 0's state, plan the buckets, hook every gradient — and what one iteration does.
#include <torch/optim/sgd.h>

#include <cstdio>

#include "engine/ddp/distributed_data_parallel.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-03-toy-ddp";

// One number per rank that changes when any weight does: enough to see whether ranks agree.
double checksum(const std::vector<at::Tensor>& tensors) {
  double sum = 0;
  for (const at::Tensor& t : tensors) sum += t.detach().to(at::kDouble).abs().sum().item<double>();
  return sum;
}

std::vector<at::Tensor> gradients_of(torch::nn::Module& model) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : model.parameters()) grads.push_back(p.grad());
  return grads;
}

// Prints every rank's checksum in one line on rank 0, and whether they are all equal.
void print_agreement(tutorials::Session& session, const char* what, double value) {
  const std::vector<double> all = session.gather(value);
  std::string line;
  bool equal = true;
  for (size_t r = 0; r < all.size(); ++r) {
    char cell[64];
    std::snprintf(cell, sizeof(cell), "%srank %zu %.6f", r ? ", " : "", r, all[r]);
    line += cell;
    equal = equal && all[r] == all[0];
  }
  session.say("  %-34s %s  -> %s\n", what, line.c_str(), equal ? "equal on every rank" : "DIFFERENT");
}

// Part 1: the ToyModel on this rank's device, each rank's drawn from its own random numbers.
std::shared_ptr<models::Model> build_toy(tutorials::Session& session) {
  // Each process builds its own model from its own random numbers, as separate processes do.
  // Nothing in DDP requires the ranks to start equal: its constructor makes them equal.
  session.seed_per_rank(session.options().seed);
  models::ModelConfig toy;
  toy.name = "toy";
  std::shared_ptr<models::Model> model = models::make_model(toy);
  model->to(session.device());
  session.say("1. Before DDP every rank has its own random weights:\n");
  print_agreement(session, "sum |weights|", checksum(model->parameters()));
  return model;
}

// Part 3: what the constructor planned, the parameters and their buckets.
void print_plan(tutorials::Session& session, ddp::DistributedDataParallel& ddp) {
  session.say("\n3. The parameters DDP synchronises, in registration order (the trace's index):\n");
  const auto& params = ddp.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    session.say("  %zu  %-12s %-8s %6lld floats\n", i, ddp.parameter_names()[i].c_str(),
                c10::str(params[i].sizes()).c_str(), static_cast<long long>(params[i].numel()));
  }
  // 165 floats (660 bytes) are far below the first bucket's 1 MiB limit: one bucket, so one
  // all-reduce per iteration. Tutorial 04 makes several.
  session.say("\n   and the bucket plan (gradients that travel in one all-reduce):\n");
  for (const ddp::Reducer::BucketView& bucket : ddp.reducer().buckets()) {
    std::string names;
    for (const int32_t p : bucket.params) names += (names.empty() ? "" : ", ") + ddp.parameter_names()[p];
    session.say("  bucket %d: %lld bytes [%s]\n", bucket.index, static_cast<long long>(bucket.bytes),
                names.c_str());
  }
}

// Part 4: the traced steps, each rank on its own slice of the data; iteration 0 shows that the
// losses differ and the gradients agree.
void train_toy(tutorials::TracedRun& run, ddp::DistributedDataParallel& ddp, models::Model& model) {
  tutorials::Session& session = run.session();
  const tutorials::CommonOptions& options = session.options();
  tutorials::ShardedBatches batches(
      data::make_synthetic_classification(512, 10, 5, options.seed), session, 16, options.seed);
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.05));
  for (int32_t iteration = 0; iteration < options.steps; ++iteration) {
    const data::Dataset batch = batches.next();
    tutorials::Step step(run, iteration);
    tutorials::zero_grad(optimizer);
    const at::Tensor loss = step.forward([&] {
      // ddp.forward runs the module, then readies the Reducer for this backward.
      return model.loss(ddp.forward([&] { return model.forward(batch.x); }), batch.y);
    });
    // During backward autograd fires the four hooks as gradients become ready (net2's first:
    // backward runs from the loss towards the input). Each copies its gradient, divided by the
    // world size, into the bucket; the last one makes the bucket ready, and its all-reduce
    // sums the bucket across ranks. When backward returns, the averaged gradients are in .grad.
    step.backward(loss);
    if (iteration == 0) {
      session.say("\n4. Iteration 0: each rank's loss is its own, computed on its own batch:\n");
      print_agreement(session, "loss", loss.item<double>());
      session.say("   but after backward the gradients are the average over the ranks:\n");
      print_agreement(session, "sum |gradients|", checksum(gradients_of(model)));
    }
    step.optimizer_step(optimizer);
  }
  session.say("   so every optimizer step keeps the replicas equal:\n");
  print_agreement(session, "sum |weights|", checksum(model.parameters()));
}

// Parts 5 and 6 (rank 0): construction and iteration 0 read back from the trace at `path`, as
// `dpscope stats` and the viewer read it.
void print_from_trace(const std::string& path) {
  trace::Reader reader(path);
  const analysis::RunStats stats = analysis::compute_stats(reader);
  const analysis::RankStats& rank0 = tutorials::rank_stats(stats, 0);
  // Verification is three small collectives: rank 0 broadcasts how many numbers describe its
  // parameters, then the shapes and strides; an all-reduce (max) tells every rank whether any
  // rank differed, so that all fail together. Then the state: one flat broadcast.
  std::printf("\n5. Construction, as rank 0 recorded it (%lld broadcasts, %lld all-reduce):\n",
              static_cast<long long>(tutorials::collectives_in(rank0, trace::kNone, trace::CollectiveOp::Broadcast)),
              static_cast<long long>(tutorials::collectives_in(rank0, trace::kNone, trace::CollectiveOp::AllReduce)));
  tutorials::print_timeline(reader, stats, 0, trace::kNone);
  std::printf("\n6. Iteration 0 on rank 0: %lld hooks, %lld all-reduce of %s:\n",
              static_cast<long long>(rank0.iterations.at(0).hooks),
              static_cast<long long>(tutorials::collectives_in(rank0, 0, trace::CollectiveOp::AllReduce)),
              tutorials::bytes_text(tutorials::collective_bytes_in(rank0, 0, trace::CollectiveOp::AllReduce)).c_str());
  tutorials::print_timeline(reader, stats, 0, 0);
  std::printf("\ntrace: %s\nopen it: dpscope-view %s\n", path.c_str(), path.c_str());
}

void run(tutorials::Session& session) {
  session.say("== %s: the ToyModel under DDP on %d rank(s), %s backend ==\n\n", kProgram,
              session.world_size(), std::string(trace::to_string(session.backend())).c_str());
  std::shared_ptr<models::Model> model = build_toy(session);

  tutorials::TracedRun run(session);
  run.describe(trace::Strategy::Ddp, "toy", *model);
  {
    ddp::DdpOptions ddp_options;
    ddp_options.recorder = &run.recorder();
    // The constructor is collective: (a) rank 0 broadcasts every parameter's shape and strides
    // and each rank compares (a model that differs fails here, naming the parameter); (b) rank
    // 0's parameters and buffers are broadcast, flattened into few large buffers because one big
    // broadcast costs far less than many small ones; (c) the parameters are assigned to buckets;
    // (d) the Reducer hangs a hook on each parameter's gradient accumulator.
    ddp::DistributedDataParallel ddp(model, run.group(), ddp_options);
    session.say("\n2. After DDP's constructor the broadcast made rank 0's weights everyone's:\n");
    print_agreement(session, "sum |weights|", checksum(model->parameters()));
    print_plan(session, ddp);
    train_toy(run, ddp, *model);
  }  // DDP lets go of the run's process group here, before the run finishes.

  const std::string path = run.finish();
  if (session.leader()) print_from_trace(path);
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 1;
  CLI::App app{"Tutorial 03: the seeds' ToyModel under DDP: construction and one iteration"};
  tutorials::add_common_options(app, options);
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session);
  });
}
