// Tutorial 15: a real training. The small CNN learns the digits to 95 % and more on the held-out
// last 20 % of the rows, once with DDP and once with FSDP (FULL_SHARD, every layer a unit), on the
// engine's public training API (train::make_parallel_model); the loss curves, read back from the
// traces' metrics, are drawn as text.
#include <torch/optim/sgd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/models/models.h"
#include "engine/train/parallel_model.h"
#include "trace/recorder.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-15-real-training";

struct Settings {
  double lr = 0.05;
  double momentum = 0.9;
  int64_t batch_size = 32;      // per rank
  double eval_fraction = 0.2;   // the last rows, never trained on (dpscope train --eval-fraction)
  int64_t wrap_min_params = 100;  // every layer of the CNN (160 parameters and up) is its own unit
  std::vector<train::Strategy> strategies;  // --strategy's: DDP, FSDP, or both in this order
};

// --strategy's choices: DDP, FSDP (FSDP1, the flat parameters this tutorial's lesson is about),
// or "both" of them.
constexpr std::array<train::Strategy, 2> kTutorialStrategies{train::Strategy::Ddp,
                                                             train::Strategy::Fsdp};
constexpr const char* kBoth = "both";
std::vector<std::string> strategy_choices() {
  std::vector<std::string> choices = trace::mode_spellings(kTutorialStrategies);
  choices.emplace_back(kBoth);
  return choices;
}

// The strategies --strategy's text (one of strategy_choices()) names.
std::vector<train::Strategy> strategies_named(const std::string& text) {
  if (const std::optional<train::Strategy> one = trace::parse_mode(kTutorialStrategies, text)) return {*one};
  return {kTutorialStrategies.begin(), kTutorialStrategies.end()};
}

struct Outcome {
  std::string name;      // "DDP", "FSDP"
  std::string run_file;  // on rank 0
  double accuracy = 0;
};

// One training of the CNN with `strategy`, traced into <trace_dir>/<part>/.
Outcome train_once(tutorials::Session& session, const Settings& settings, train::Strategy strategy,
                   const data::Dataset& train_set, const data::Dataset& eval_set) {
  const tutorials::CommonOptions& options = session.options();
  const bool fsdp = strategy == train::Strategy::Fsdp;
  Outcome outcome;
  outcome.name = fsdp ? "FSDP" : "DDP";

  // The same start for both strategies: each rank draws its own weights from the same seeds, and
  // both wrappers begin from rank 0's (DDP broadcasts them; FSDP shards rank 0's too).
  models::ModelConfig model_config;
  model_config.name = "cnn";
  const std::shared_ptr<models::Model> model = session.build_model(model_config);

  // The flags of `dpscope train` as a struct: what make_parallel_model reads.
  train::TrainConfig config;
  config.strategy = strategy;
  config.sharding = fsdp::ShardingStrategy::FullShard;
  config.wrap_min_params = settings.wrap_min_params;

  tutorials::TracedRun run(session, std::string(trace::to_string(strategy)));
  nlohmann::json described = {{"lr", settings.lr},
                              {"momentum", settings.momentum},
                              {"batch_size", settings.batch_size},
                              {"eval_fraction", settings.eval_fraction}};
  if (fsdp) {
    described["sharding"] = "full";
    described["wrap"] = "every layer";
  }
  run.describe(strategy, "cnn", *model, described);
  {
    const std::unique_ptr<train::ParallelModel> parallel = train::make_parallel_model(
        config, model, run.group(), &run.recorder(), &run.memory_sampler());
    session.say("%s: training, the wrapper is %s\n", outcome.name.c_str(), parallel->describe().c_str());
    tutorials::ShardedBatches batches(train_set, session, settings.batch_size, options.seed);
    // The optimizer steps what the wrapper says: DDP's parameters, or FSDP's shards only.
    torch::optim::SGD optimizer(parallel->optimizer_parameters(),
                                torch::optim::SGDOptions(settings.lr).momentum(settings.momentum));
    for (int32_t i = 0; i < options.steps; ++i) {
      const data::Dataset batch = batches.next();
      tutorials::Step step(run, i);
      tutorials::zero_grad(optimizer);
      const at::Tensor loss =
          step.forward([&] { return model->loss(parallel->forward(batch.x), batch.y); });
      step.backward(loss);
      parallel->finish_backward();
      step.optimizer_step(optimizer);
    }

    // Every rank evaluates (FSDP's forward gathers parameters: a collective), on the same rows.
    c10::NoGradGuard no_grad;
    model->eval();
    const at::Tensor x = eval_set.x.to(session.device());
    const at::Tensor y = eval_set.y.to(session.device());
    at::Tensor logits;
    {
      // No iteration's work: recorded as an `evaluation` phase (Note [Work outside iterations]).
      const trace::ScopedPhase phase(run.recorder(), 0, run.recorder().name(trace::kPhaseEvaluation), trace::kNone);
      logits = parallel->forward(x);
    }
    outcome.accuracy = static_cast<double>(model->correct(logits, y)) / static_cast<double>(eval_set.size());
    model->train();
    run.recorder().metric(static_cast<int32_t>(options.steps - 1), run.recorder().name("accuracy"),
                          outcome.accuracy);
  }
  outcome.run_file = run.finish();
  session.say("%s: accuracy %.4f on the held-out %lld rows -> %s\n\n", outcome.name.c_str(),
              outcome.accuracy, static_cast<long long>(eval_set.size()), outcome.run_file.c_str());
  return outcome;
}

// The loss of each of the `steps` steps, averaged over the ranks (each recorded its own batch's),
// from the trace.
std::vector<double> loss_curve(const std::string& run_file, int64_t steps) {
  const analysis::RunStats stats = tutorials::read_stats(run_file);
  std::vector<double> curve(static_cast<size_t>(steps), 0.0);
  std::vector<int> counts(curve.size(), 0);
  for (const analysis::RankStats& rank : stats.ranks) {
    for (const analysis::IterationStats& it : rank.iterations) {
      if (!it.loss || it.iteration < 0 || static_cast<size_t>(it.iteration) >= curve.size()) continue;
      curve[static_cast<size_t>(it.iteration)] += *it.loss;
      ++counts[static_cast<size_t>(it.iteration)];
    }
  }
  for (size_t i = 0; i < curve.size(); ++i) curve[i] = counts[i] ? curve[i] / counts[i] : NAN;
  return curve;
}

// The curves as a text chart: steps across (averaged into columns), loss up, one letter per
// curve ('*' where they fall on the same cell).
void print_chart(const std::vector<Outcome>& outcomes, const std::vector<std::vector<double>>& curves) {
  constexpr int kWidth = 60, kHeight = 12;
  const size_t steps = curves.front().size();
  if (steps == 0) return;
  const size_t columns = std::min<size_t>(kWidth, steps);
  std::vector<std::vector<double>> binned(curves.size(), std::vector<double>(columns, 0.0));
  double top = 0;
  for (size_t c = 0; c < curves.size(); ++c) {
    for (size_t col = 0; col < columns; ++col) {
      const size_t begin = col * steps / columns, end = std::max(begin + 1, (col + 1) * steps / columns);
      double sum = 0;
      for (size_t s = begin; s < end; ++s) sum += curves[c][s];
      binned[c][col] = sum / static_cast<double>(end - begin);
      top = std::max(top, binned[c][col]);
    }
  }
  std::vector<std::string> rows(kHeight, std::string(columns, ' '));
  for (size_t c = 0; c < curves.size(); ++c) {
    for (size_t col = 0; col < columns; ++col) {
      const int row = std::clamp(static_cast<int>(std::lround(binned[c][col] / top * (kHeight - 1))), 0,
                                 kHeight - 1);
      char& cell = rows[static_cast<size_t>(kHeight - 1 - row)][col];
      cell = cell == ' ' ? outcomes[c].name[0] : '*';
    }
  }
  std::printf("Loss (mean over the ranks; each column is %.1f steps):\n", static_cast<double>(steps) / columns);
  for (int r = 0; r < kHeight; ++r) {
    const double value = top * (kHeight - 1 - r) / (kHeight - 1);
    std::printf("%7.3f |%s\n", value, rows[static_cast<size_t>(r)].c_str());
  }
  std::printf("        +%s\n         step 1%*s%zu\n", std::string(columns, '-').c_str(),
              static_cast<int>(columns) - 7, "", steps);
  std::string legend;
  for (const Outcome& o : outcomes) legend += std::string(legend.empty() ? "" : ", ") + o.name[0] + " " + o.name;
  std::printf("        %s%s\n\n", legend.c_str(), outcomes.size() > 1 ? ", * both" : "");
}

void run(tutorials::Session& session, const Settings& settings) {
  const data::Dataset all = data::load_digits(data::find_digits_file());
  const int64_t train_rows = all.size() - static_cast<int64_t>(all.size() * settings.eval_fraction);
  const data::Dataset train_set = all.slice(0, train_rows);
  const data::Dataset eval_set = all.slice(train_rows, all.size());
  session.say("== %s: the CNN on the digits, %lld rows to train on, the last %lld held out; %d rank(s), "
              "%lld steps of %lld rows per rank, SGD lr %g momentum %g ==\n\n",
              kProgram, static_cast<long long>(train_set.size()), static_cast<long long>(eval_set.size()),
              session.world_size(), static_cast<long long>(session.options().steps),
              static_cast<long long>(settings.batch_size), settings.lr, settings.momentum);

  std::vector<Outcome> outcomes;
  for (const train::Strategy strategy : settings.strategies) {
    outcomes.push_back(train_once(session, settings, strategy, train_set, eval_set));
  }
  if (!session.leader()) return;

  std::vector<std::vector<double>> curves;
  for (const Outcome& o : outcomes) curves.push_back(loss_curve(o.run_file, session.options().steps));
  print_chart(outcomes, curves);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const auto& c = curves[i];
    std::printf("%-5s loss %.4f at step 1, %.4f at the last; accuracy %.4f (%s 0.95)\n",
                outcomes[i].name.c_str(), c.front(), c.back(), outcomes[i].accuracy,
                outcomes[i].accuracy >= 0.95 ? ">=" : "below");
  }
  if (outcomes.size() == 2) {
    double most = 0;
    for (size_t s = 0; s < std::min(curves[0].size(), curves[1].size()); ++s) {
      most = std::max(most, std::abs(curves[0][s] - curves[1][s]));
    }
    std::printf("largest loss difference DDP - FSDP over the steps: %.2g (the same training, to float "
                "rounding)\n", most);
  }
  std::printf("\nOpen both: dpscope-view %s --compare %s\n", outcomes.front().run_file.c_str(),
              outcomes.back().run_file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 300;
  Settings settings;
  CLI::App app{"Tutorial 15: a real training — the digits to 95 % with DDP and with FSDP"};
  tutorials::add_common_options(app, options);
  app.add_option("--lr", settings.lr, "SGD learning rate")->capture_default_str();
  app.add_option("--momentum", settings.momentum, "SGD momentum")->capture_default_str();
  app.add_option("--batch-size", settings.batch_size, "Rows per rank and step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  std::string strategy = kBoth;
  app.add_option("--strategy", strategy, "ddp | fsdp | both")
      ->check(CLI::IsMember(strategy_choices()))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  settings.strategies = strategies_named(strategy);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
