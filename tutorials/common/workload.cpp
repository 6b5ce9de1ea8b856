// The tutorials' two workloads: the MLP on synthetic rows and the GPT on text (see workload.h).
#include "tutorials/common/workload.h"

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <utility>

namespace dpscope::tutorials {

Workload make_workload(const std::string& model, const WorkloadSizes& sizes, const WorkloadSizes& mlp_defaults,
                       uint64_t seed) {
  Workload w;
  w.config.name = model;
  if (model == "gpt") {
    w.config.hidden = sizes.hidden;
    w.config.layers = sizes.layers;
    w.config = models::with_defaults(w.config);
    data::TextSamples text = data::load_text(data::find_text_file(), *w.config.sequence);
    w.config.vocab = static_cast<int64_t>(text.vocabulary.size());
    w.data = std::move(text.samples);
    w.batch_size = sizes.batch_size.value_or(16);
  } else if (model == "mlp") {
    w.config.hidden = sizes.hidden ? sizes.hidden : mlp_defaults.hidden;
    w.config.layers = sizes.layers ? sizes.layers : mlp_defaults.layers;
    w.config = models::with_defaults(w.config);
    w.data = data::make_synthetic_classification(2048, 64, 10, seed);
    w.batch_size = sizes.batch_size.value_or(mlp_defaults.batch_size.value_or(32));
  } else {
    throw std::invalid_argument("--model " + model + ": choose mlp or gpt");
  }
  return w;
}

void add_workload_options(CLI::App& app, std::string& model, WorkloadSizes& sizes,
                          const WorkloadSizes& mlp_defaults, std::string_view gpt_lesson) {
  const auto value = [](const std::optional<int64_t>& v) { return std::to_string(v.value_or(0)); };
  app.add_option("--model", model,
                 "mlp, or gpt: a GPT-shaped character model on data/opticks.txt.gz, " +
                     std::string(gpt_lesson))
      ->check(CLI::IsMember({"mlp", "gpt"}))
      ->capture_default_str();
  app.add_option("--hidden", sizes.hidden,
                 "Width: the MLP's layers (" + value(mlp_defaults.hidden) +
                     "), the GPT's residual stream (128)")
      ->check(CLI::PositiveNumber);
  app.add_option("--layers", sizes.layers,
                 "The MLP's hidden layers (" + value(mlp_defaults.layers) + "), the GPT's blocks (4)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch-size", sizes.batch_size,
                 "Samples per rank and step (mlp " + value(mlp_defaults.batch_size) +
                     " rows, gpt 16 sequences)")
      ->check(CLI::PositiveNumber);
}

}  // namespace dpscope::tutorials
