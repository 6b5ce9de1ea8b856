// Tutorial 10: FSDP basics. Wraps an MLP in FSDP (FULL_SHARD, three layers units of their own)
// and reads the trace back: each unit's flat parameter and every rank's shard of it, then per
// iteration the all-gathers (forward, backward, prefetched) and the reduce-scatters of gradients.
#include <torch/optim/sgd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "engine/fsdp/fully_sharded_data_parallel.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-10-fsdp-basics";

struct Settings {
  int64_t hidden = 256;
  int64_t layers = 3;
  // fc0, fc1, fc2 (16,640 and 65,792 elements) become units; fc3 (2,570) stays in the root.
  int64_t wrap_min_params = 10000;
  std::string backward_prefetch = "pre";
  int64_t batch_size = 32;
};

// One traced FSDP training; `bucket_mb` is the reduce-scatter bucket (0: none). Returns the run
// file on rank 0.
std::string train(tutorials::Session& session, const Settings& settings, const std::string& part,
                  double bucket_mb) {
  const tutorials::CommonOptions& options = session.options();
  models::ModelConfig config;
  config.name = "mlp";
  config.hidden = settings.hidden;
  config.layers = settings.layers;
  const std::shared_ptr<models::Model> model = session.build_model(config);

  tutorials::TracedRun run(session, part);
  run.describe(trace::Strategy::Fsdp, "mlp", *model,
               {{"sharding", "full"},
                {"wrap_min_params", settings.wrap_min_params},
                {"backward_prefetch", settings.backward_prefetch},
                {"reduce_bucket_mb", bucket_mb}});
  {
    fsdp::FsdpOptions fsdp_options;
    fsdp_options.sharding = fsdp::ShardingStrategy::FullShard;
    fsdp_options.wrap_policy = fsdp::size_based_wrap_policy(settings.wrap_min_params);
    fsdp_options.backward_prefetch = *trace::parse_mode(fsdp::kBackwardPrefetches, settings.backward_prefetch);
    fsdp_options.reduce_bucket_bytes = static_cast<int64_t>(bucket_mb * 1024 * 1024);
    fsdp_options.recorder = &run.recorder();
    fsdp_options.memory_sampler = &run.memory_sampler();
    fsdp::FullyShardedDataParallel fsdp(model, run.group(), fsdp_options);

    tutorials::ShardedBatches batches(data::make_synthetic_classification(2048, 64, 10, options.seed),
                                      session, settings.batch_size, options.seed);
    // The optimizer sees the shards only: each rank steps its own part of every unit.
    torch::optim::SGD optimizer(fsdp.parameters(), torch::optim::SGDOptions(0.05));
    for (int32_t i = 0; i < options.steps; ++i) {
      const data::Dataset batch = batches.next();
      tutorials::Step step(run, i);
      tutorials::zero_grad(optimizer);
      const at::Tensor loss = step.forward([&] {
        return model->loss(fsdp.forward(batch.x, [&](const at::Tensor& x) { return model->forward(x); }),
                           batch.y);
      });
      step.backward(loss);
      step.optimizer_step(optimizer);
    }
  }
  return run.finish();
}

std::string unit_label(const std::vector<trace::UnitInfo>& units, int32_t unit) {
  return unit < 0 || static_cast<size_t>(unit) >= units.size() ? "?" : units[static_cast<size_t>(unit)].name;
}

void print_units(trace::Reader& reader) {
  const std::vector<trace::UnitInfo> units = reader.units();
  const std::vector<trace::ParamInfo> params = reader.params();
  std::printf("\nUnits (innermost first, the root last): each flattens its parameters into one flat "
              "parameter,\npadded to a multiple of the world size, and every rank keeps one equal "
              "chunk of it — its shard.\n");
  std::printf("  %-5s %-8s %10s %10s %12s  %s\n", "unit", "name", "numel", "padded", "shard numel",
              "parameters");
  for (const trace::UnitInfo& u : units) {
    std::string names;
    for (const trace::ParamInfo& p : params) {
      if (p.unit == u.index) names += (names.empty() ? "" : ", ") + p.name;
    }
    std::printf("  %-5d %-8s %10lld %10lld %12lld  %s\n", u.index, unit_label(units, u.index).c_str(),
                static_cast<long long>(u.numel), static_cast<long long>(u.padded_numel),
                static_cast<long long>(u.shard_numel), names.c_str());
  }
  std::printf("\nShards: the elements [begin, end) of the padded flat parameter each rank keeps (real: "
              "not padding).\n");
  for (const trace::UnitShard& s : reader.unit_shards()) {
    std::printf("  unit %d %-8s rank %d: [%7lld, %7lld)  real %lld\n", s.unit,
                unit_label(units, s.unit).c_str(), s.rank, static_cast<long long>(s.shard_begin),
                static_cast<long long>(s.shard_end), static_cast<long long>(s.real_numel));
  }
}

// Per iteration on rank 0: the all-gathers by pass and flag, the reduce-scatters, and iteration 0's
// collectives in the order they were issued.
void print_collectives(trace::Reader& reader, const char* title) {
  const std::vector<trace::UnitInfo> units = reader.units();
  std::map<int32_t, std::vector<trace::Event>> by_iteration;
  for (const trace::Event& c : reader.events_of_kind(trace::EventKind::Collective, 0)) {
    if (c.iteration != trace::kNone) by_iteration[c.iteration].push_back(c);
  }
  std::printf("\n%s — collectives per iteration (rank 0):\n", title);
  std::printf("  %-9s %11s %8s %9s %11s %15s %9s %8s\n", "iteration", "all-gathers", "forward",
              "backward", "prefetched", "reduce-scatters", "bucketed", "direct");
  for (const auto& [iteration, events] : by_iteration) {
    int gathers = 0, forward = 0, backward = 0, prefetched = 0, reductions = 0, bucketed = 0;
    for (const trace::Event& c : events) {
      if (c.op == static_cast<uint8_t>(trace::CollectiveOp::AllGather)) {
        ++gathers;
        (c.flags & trace::kFlagBackward) ? ++backward : ++forward;
        prefetched += (c.flags & trace::kFlagPrefetch) != 0;
      } else if (c.op == static_cast<uint8_t>(trace::CollectiveOp::ReduceScatter)) {
        ++reductions;
        bucketed += (c.flags & trace::kFlagBucketed) != 0;
      }
    }
    std::printf("  %-9d %11d %8d %9d %11d %15d %9d %8d\n", iteration, gathers, forward, backward,
                prefetched, reductions, bucketed, reductions - bucketed);
  }
  if (by_iteration.empty()) return;
  std::printf("  iteration 0 in order:");
  for (const trace::Event& c : by_iteration.begin()->second) {
    const bool gather = c.op == static_cast<uint8_t>(trace::CollectiveOp::AllGather);
    // A bucketed reduce-scatter carries several units' chunks; the trace tags it with the root.
    const bool bucket = !gather && (c.flags & trace::kFlagBucketed);
    std::string what = gather ? "gather " : "reduce ";
    what += bucket || c.unit == trace::kNone ? "bucket" : unit_label(units, c.unit);
    if (gather) what += (c.flags & trace::kFlagBackward) ? " (bwd" : " (fwd";
    if (gather) what += (c.flags & trace::kFlagPrefetch) ? ", prefetch)" : ")";
    std::printf("%s %s", c.seq == by_iteration.begin()->second.front().seq ? "" : ",", what.c_str());
  }
  std::printf("\n");
}

void run(tutorials::Session& session, const Settings& settings) {
  session.say("== %s: an MLP (%lld layers of %lld) under FSDP FULL_SHARD on %d rank(s), %lld steps ==\n",
              kProgram, static_cast<long long>(settings.layers), static_cast<long long>(settings.hidden),
              session.world_size(), static_cast<long long>(session.options().steps));
  const std::string per_unit = train(session, settings, "per-unit", 0);
  const std::string bucketed = train(session, settings, "bucketed", 1);
  if (!session.leader()) return;

  trace::Reader reader(per_unit);
  print_units(reader);
  print_collectives(reader, "per-unit (no reduce-scatter bucket)");
  trace::Reader bucketed_reader(bucketed);
  print_collectives(bucketed_reader, "bucketed (--reduce-bucket-mb 1, the default)");

  const size_t units = reader.units().size();
  std::printf(
      "\nWhy these counts (%zu units, FULL_SHARD, backward prefetch %s):\n"
      "  forward:  every unit is gathered before its forward: %zu all-gathers. FULL_SHARD frees each\n"
      "            nested unit's full parameter after its forward; the root keeps its own, since its\n"
      "            backward comes at once.\n"
      "  backward: the %zu freed units are gathered again before their backward: %zu all-gathers.\n"
      "            With BACKWARD_PRE the next unit's gather is issued when a unit's backward begins\n"
      "            (flag prefetch), so it runs while this unit computes. In iteration 0 FSDP does not\n"
      "            know backward's order yet and takes forward's reversed, where the root comes last:\n"
      "            the root's backward prefetches nothing and the last unit of forward is gathered on\n"
      "            demand. From iteration 1 on it follows the order recorded in iteration 0 (the root\n"
      "            first): every backward gather is then a prefetch.\n"
      "  gradients: each unit's full gradient is reduce-scattered once: each rank gets the sum of\n"
      "            its own shard's gradients — %zu reduce-scatters without a bucket. With the bucket,\n"
      "            gradients whose per-rank chunk is below cap / world size wait in it and go out\n"
      "            together when it is full or at the end of backward: fewer, larger reduce-scatters.\n"
      "  No all-reduce: DDP sends every gradient to every rank; FSDP sends each rank only its shard.\n",
      units, settings.backward_prefetch.c_str(), units, units - 1, units - 1, units);
  std::printf("\nOpen both: dpscope-view %s --compare %s\n", per_unit.c_str(), bucketed.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 3;
  Settings settings;
  CLI::App app{"Tutorial 10: FSDP basics — flat parameters, shards, all-gather, reduce-scatter"};
  tutorials::add_common_options(app, options);
  app.add_option("--hidden", settings.hidden, "MLP width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--layers", settings.layers, "MLP hidden layers")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--wrap-min-params", settings.wrap_min_params,
                 "A submodule with at least this many parameter elements becomes a unit")
      ->capture_default_str();
  app.add_option("--backward-prefetch", settings.backward_prefetch, "pre | post | none")
      ->check(CLI::IsMember(trace::mode_spellings(fsdp::kBackwardPrefetches)))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
