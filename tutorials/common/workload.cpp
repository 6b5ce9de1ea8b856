// The tutorials' two workloads: the MLP on synthetic rows and the GPT on text (see workload.h).
#include "tutorials/common/workload.h"

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

}  // namespace dpscope::tutorials
