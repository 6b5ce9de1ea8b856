// Tutorial 20: FSDP1 against FSDP2 on the same model, data and ranks. Trains an MLP once under
// FSDP1 (flat parameters, engine/fsdp) and once under FSDP2 (fully_shard, per-parameter dim-0
// shards, engine/fsdp2) and shows what differs: what each rank holds, the all-gather's copy-in and
// copy-out, a checkpoint saved without communication, and HSDP's two-level reduction.
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/fsdp/fully_sharded_data_parallel.h"
#include "engine/fsdp2/dim0_chunks.h"
#include "engine/comm/device_mesh.h"
#include "engine/fsdp2/fully_shard.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"
#include "tutorials/20_fsdp1_vs_fsdp2/layout.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-20-fsdp1-vs-fsdp2";

struct Settings {
  // 10 rows do not divide by 3 or 4 ranks: FSDP2's last chunks come out shorter, and FSDP1's
  // flat ranges cut rows in two.
  int64_t hidden = 10;
  int64_t layers = 2;
  int64_t batch_size = 16;
};

models::ModelConfig model_config(const Settings& settings) {
  models::ModelConfig config;
  config.name = "mlp";
  config.hidden = settings.hidden;
  config.layers = settings.layers;
  return config;
}

// What one training leaves for the printout: its run file, the full parameters at the end (rank
// 0), and how many collectives the two kinds of state dict took.
struct Trained {
  std::string run_file;
  std::vector<std::pair<std::string, at::Tensor>> final_state;
  int64_t sharded_save_collectives = 0;
  int64_t full_state_collectives = 0;
  std::string checkpoint_dir;
};

// The same traced loop for both: zero_grad, forward through `forward`, backward, step.
template <class Forward>
void train_loop(tutorials::TracedRun& run, models::Model& model, torch::optim::Optimizer& optimizer,
                const Settings& settings, const Forward& forward) {
  const tutorials::CommonOptions& options = run.session().options();
  tutorials::ShardedBatches batches(data::make_synthetic_classification(2048, 64, 10, options.seed),
                                    run.session(), settings.batch_size, options.seed);
  for (int32_t i = 0; i < options.steps; ++i) {
    const data::Dataset batch = batches.next();
    tutorials::Step step(run, i);
    tutorials::zero_grad(optimizer);
    const at::Tensor loss = step.forward([&] { return model.loss(forward(batch.x), batch.y); });
    step.backward(loss);
    step.optimizer_step(optimizer);
  }
}

// FSDP1: every Linear a unit (FSDP1's wrap policy), one reduce-scatter per unit (no bucket), as
// FSDP2 does.
Trained train_fsdp1(tutorials::Session& session, const Settings& settings) {
  const std::shared_ptr<models::Model> model = session.build_model(model_config(settings));
  tutorials::TracedRun run(session, "fsdp1");
  run.describe(trace::Strategy::Fsdp, "mlp", *model,
               {{"sharding", "full"}, {"wrap_min_params", 1}, {"reduce_bucket_mb", 0}});
  Trained trained;
  {
    fsdp::FsdpOptions options;
    options.wrap_policy = fsdp::size_based_wrap_policy(1);
    options.reduce_bucket_bytes = 0;
    options.recorder = &run.recorder();
    options.memory_sampler = &run.memory_sampler();
    fsdp::FullyShardedDataParallel fsdp(model, run.group(), options);
    torch::optim::SGD optimizer(fsdp.parameters(), torch::optim::SGDOptions(0.05));
    train_loop(run, *model, optimizer, settings, [&](const at::Tensor& x) {
      return fsdp.forward(x, [&](const at::Tensor& in) { return model->forward(in); });
    });
    const int64_t before = run.group()->next_seq();
    trained.final_state = fsdp.full_state_dict(0);
    trained.full_state_collectives = run.group()->next_seq() - before;
  }
  trained.run_file = run.finish();
  return trained;
}

// FSDP2: fully_shard on every Linear, innermost first, then on the root — the API as PyTorch 2's
// users write it. Then a sharded checkpoint, each rank its own rows, and the full state dict.
// `shard_group_size` 0 shards across the world; N makes it HSDP: the ranks as world/N "hosts" of
// N ranks, each parameter sharded within a host and replicated across them.
Trained train_fsdp2(tutorials::Session& session, const Settings& settings, int shard_group_size = 0) {
  const std::shared_ptr<models::Model> model = session.build_model(model_config(settings));
  const bool hybrid = shard_group_size > 0;
  tutorials::TracedRun run(session, hybrid ? "hsdp" : "fsdp2");
  run.describe(trace::Strategy::Fsdp2, "mlp", *model,
               {{"wrap_min_params", 1}, {"reshard_after_forward", "true"},
                {"sharding", hybrid ? "hybrid" : "full"}, {"shard_group_size", shard_group_size}});
  Trained trained;
  {
    fsdp2::FullyShardOptions options;
    options.recorder = &run.recorder();
    options.memory_sampler = &run.memory_sampler();
    fsdp2::sync_module_states(*model, *run.group());  // fully_shard itself broadcasts nothing
    const comm::DeviceMesh mesh = hybrid ? comm::make_hsdp_mesh(run.group(), shard_group_size)
                                        : comm::DeviceMesh{run.group(), nullptr};
    for (const auto& child : model->named_children()) {
      if (!child.value()->parameters().empty()) fsdp2::fully_shard(*child.value(), mesh, options);
    }
    const std::shared_ptr<fsdp2::FsdpState> root = fsdp2::fully_shard(*model, mesh, options);
    torch::optim::SGD optimizer(root->parameters(), torch::optim::SGDOptions(0.05));
    train_loop(run, *model, optimizer, settings, [&](const at::Tensor& x) {
      return root->forward(x, [&](const at::Tensor& in) { return model->forward(in); });
    });
    trained.checkpoint_dir = session.trace_dir() + (hybrid ? "/hsdp-checkpoint" : "/fsdp2-checkpoint");
    int64_t before = run.group()->next_seq();
    root->save_sharded_state(trained.checkpoint_dir);
    trained.sharded_save_collectives = run.group()->next_seq() - before;
    before = run.group()->next_seq();
    trained.final_state = root->full_state_dict(0);
    trained.full_state_collectives = run.group()->next_seq() - before;
  }
  trained.run_file = run.finish();
  return trained;
}

double max_difference(const std::vector<std::pair<std::string, at::Tensor>>& a,
                      const std::vector<std::pair<std::string, at::Tensor>>& b) {
  std::map<std::string, at::Tensor> by_name(b.begin(), b.end());
  double worst = 0;
  for (const auto& [name, tensor] : a) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) return INFINITY;
    worst = std::max(worst, (tensor - it->second).abs().max().item<double>());
  }
  return worst;
}

// The all-gather's copy-in and copy-out around FSDP2's collectives, rank 0, iteration 1, in time
// order: what FSDP1 does not need, because its parameters are views into the flat parameter the
// all-gather writes.
void print_copy_phases(trace::Reader& reader) {
  const std::vector<std::string> names = reader.names();
  const std::vector<trace::UnitInfo> units = reader.units();
  std::vector<trace::Event> events;
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Phase, 0)) {
    const std::string& name = e.name >= 0 && static_cast<size_t>(e.name) < names.size() ? names[e.name] : "";
    if (e.iteration == 1 && name.rfind("fsdp2.", 0) == 0 && name.find("copy") != std::string::npos) {
      events.push_back(e);
    }
  }
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Collective, 0)) {
    if (e.iteration == 1) events.push_back(e);
  }
  std::sort(events.begin(), events.end(),
            [](const trace::Event& a, const trace::Event& b) { return a.begin_ns < b.begin_ns; });
  std::printf("\nFSDP2, rank 0, iteration 1 — the copies around each collective, in time order:\n");
  const int64_t t0 = events.empty() ? 0 : events.front().begin_ns;
  for (const trace::Event& e : events) {
    std::string what;
    if (e.kind == trace::EventKind::Phase) {
      what = names[e.name];
    } else {
      const std::string unit = e.unit >= 0 && static_cast<size_t>(e.unit) < units.size() ? units[e.unit].name : "?";
      what = std::string(trace::to_string(static_cast<trace::CollectiveOp>(e.op))) + " " + unit + ", " +
             std::to_string(e.bytes) + " B from this rank";
    }
    std::printf("  %8.3f ms  %6.0f us  %s\n", (e.begin_ns - t0) / 1e6, (e.end_ns - e.begin_ns) / 1e3, what.c_str());
  }
}

void print_state_dicts(const Trained& fsdp1, const Trained& fsdp2, int world_size) {
  std::printf("\nState dicts:\n");
  std::printf("  FSDP2 save_sharded_state: %lld collectives; each rank wrote its rows of every parameter:\n",
              static_cast<long long>(fsdp2.sharded_save_collectives));
  for (int rank = 0; rank < world_size; ++rank) {
    const std::string file = fsdp2.checkpoint_dir + "/shard-rank" + std::to_string(rank) + "-of-" +
                             std::to_string(world_size) + ".pt";
    std::error_code error;
    const auto bytes = std::filesystem::file_size(file, error);
    std::printf("    %s  %lld bytes\n", file.c_str(), error ? -1LL : static_cast<long long>(bytes));
  }
  std::printf("  full state dict (every parameter whole, on rank 0): FSDP1 %lld all-gathers, FSDP2 %lld —\n"
              "  one per unit or group, from the float32 shards.\n",
              static_cast<long long>(fsdp1.full_state_collectives),
              static_cast<long long>(fsdp2.full_state_collectives));
}

// HSDP's two-level reduction from the hsdp run's statistics: each process group's bytes on the
// wire per step and rank (the ring model), the shard groups (within a host) against the
// replicate groups (across hosts), beside the formulas of docs/fsdp2.md and DDP's all-reduce.
void print_hsdp_links(const Trained& hsdp, const Trained& fsdp2, int world_size, int shard_group_size) {
  const analysis::RunStats stats = tutorials::read_stats(hsdp.run_file);
  double parameter_bytes = 0;
  for (const trace::ParamInfo& p : stats.params) parameter_bytes += 4.0 * static_cast<double>(p.numel);
  const int n = shard_group_size, r = world_size / shard_group_size;
  std::printf("\nHSDP: %d ranks as %d hosts of %d (--sharding hybrid --shard-group-size %d). Each parameter is\n"
              "sharded within a host and replicated across hosts; a gradient is reduce-scattered in its\n"
              "shard group, then its shard all-reduced across the replicate group. Per step and rank (ring model):\n",
              world_size, r, n, n);
  std::printf("  %-28s %-12s %17s %16s\n", "process group", "ranks", "collectives (run)", "bytes sent/step");
  double intra = 0, inter = 0;
  for (const analysis::GroupTraffic& g : stats.groups) {
    if (g.wire_bytes_per_step == 0) continue;  // the world: construction's broadcasts only
    std::string ranks;
    for (const int32_t rank : g.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(rank);
    std::printf("  %-28s %-12s %17lld %16.0f\n", g.name.c_str(), ranks.c_str(),
                static_cast<long long>(g.collectives), g.wire_bytes_per_step);
    (g.name.rfind("shard", 0) == 0 ? intra : inter) = g.wire_bytes_per_step;
  }
  std::printf("  within a host (shard group):      %8.0f B   formula 3(N-1)/N x P = %8.0f B\n", intra,
              3.0 * (n - 1) / n * parameter_bytes);
  std::printf("  across hosts (replicate group):   %8.0f B   formula 2(R-1)/(R N) x P = %8.0f B\n", inter,
              2.0 * (r - 1) / (r * n) * parameter_bytes);
  std::printf("  DDP, one all-reduce over all ranks: %6.0f B   2(W-1)/W x P on a ring through both hosts\n"
              "  (P = %.0f B of parameters)\n",
              2.0 * (world_size - 1) / world_size * parameter_bytes, parameter_bytes);
  std::printf("  HSDP against FSDP2 over the world: largest difference of the final parameters %.3g\n",
              max_difference(hsdp.final_state, fsdp2.final_state));
}

void run(tutorials::Session& session, const Settings& settings) {
  session.say("== %s: an MLP (%lld hidden layers of %lld) under FSDP1 and FSDP2 on %d rank(s), %lld steps ==\n",
              kProgram, static_cast<long long>(settings.layers), static_cast<long long>(settings.hidden),
              session.world_size(), static_cast<long long>(session.options().steps));
  const Trained fsdp1 = train_fsdp1(session, settings);
  const Trained fsdp2 = train_fsdp2(session, settings);
  // HSDP needs at least two "hosts" of two ranks: 4 ranks or more, an even number.
  const int shard_group_size = session.world_size() >= 4 && session.world_size() % 2 == 0 ? 2 : 0;
  const Trained hsdp = shard_group_size > 0 ? train_fsdp2(session, settings, shard_group_size) : Trained{};
  if (!session.leader()) return;

  trace::Reader fsdp1_reader(fsdp1.run_file);
  trace::Reader fsdp2_reader(fsdp2.run_file);
  tutorials::print_fsdp1_holdings(fsdp1_reader, session.world_size());
  tutorials::print_fsdp2_holdings(fsdp2_reader, session.world_size());
  tutorials::draw_rows_side_by_side(fsdp1_reader, session.world_size());
  tutorials::print_padding(fsdp1_reader, session.world_size());
  print_copy_phases(fsdp2_reader);
  print_state_dicts(fsdp1, fsdp2, session.world_size());

  if (shard_group_size > 0) {
    print_hsdp_links(hsdp, fsdp2, session.world_size(), shard_group_size);
  } else {
    std::printf("\nHSDP needs an even number of ranks, 4 or more (two hosts of two): run with -n 4.\n");
  }
  std::printf("\nThe same training: largest difference between FSDP1's and FSDP2's final parameters %.3g\n",
              max_difference(fsdp1.final_state, fsdp2.final_state));
  std::printf("\nOpen both: dpscope-view %s --compare %s\n", fsdp1.run_file.c_str(), fsdp2.run_file.c_str());
  if (shard_group_size > 0) std::printf("HSDP's lanes: dpscope-view %s\n", hsdp.run_file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 3;
  Settings settings;
  CLI::App app{"Tutorial 20: FSDP1 against FSDP2 — flat ranges against dim-0 rows, copy-in and "
               "copy-out, sharded checkpoints, HSDP"};
  tutorials::add_common_options(app, options);
  app.add_option("--hidden", settings.hidden, "MLP width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--layers", settings.layers, "MLP hidden layers")->check(CLI::PositiveNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
