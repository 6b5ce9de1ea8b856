// The model and data a tutorial trains: the MLP on synthetic rows, or a model shaped like the ones
// people train, the GPT-shaped character model of `dpscope train --model gpt`, on the text in
// data/ (tutorials 04, 11, 12 and 18 offer both with --model; 05 its own stack or the GPT).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/data/dataset.h"
#include "engine/models/model_config.h"

namespace CLI {
class App;
}

namespace dpscope::tutorials {

struct Workload {
  models::ModelConfig config;  // every size set (models::with_defaults)
  data::Dataset data;
  int64_t batch_size = 0;      // rows (mlp) or sequences (gpt) per rank and step
};

// Sizes a tutorial's flags give; unset ones take the tutorial's MLP defaults or the GPT's own
// (128 wide, 4 blocks, 16 sequences of 64 characters a batch).
struct WorkloadSizes {
  std::optional<int64_t> hidden;
  std::optional<int64_t> layers;
  std::optional<int64_t> batch_size;
};

// `model` is "mlp" (synthetic classification: 2048 rows of 64 features, 10 classes, `seed`) or
// "gpt" (data/opticks.txt.gz, its characters the vocabulary). Throws std::invalid_argument for
// another name, and what data::load_text throws when the text is missing.
Workload make_workload(const std::string& model, const WorkloadSizes& sizes, const WorkloadSizes& mlp_defaults,
                       uint64_t seed);

// The flags that choose a workload: --model mlp|gpt into `model`, --hidden, --layers and
// --batch-size into `sizes`, their help naming `mlp_defaults` and the GPT's; `gpt_lesson` says in
// --model's help what the GPT shows in this tutorial ("a unit per block").
void add_workload_options(CLI::App& app, std::string& model, WorkloadSizes& sizes,
                          const WorkloadSizes& mlp_defaults, std::string_view gpt_lesson);

}  // namespace dpscope::tutorials
