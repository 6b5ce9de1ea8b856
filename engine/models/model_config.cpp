// The models' default sizes and the checks of a ModelConfig, without LibTorch: `dpscope train`
// makes them before it starts, in parse-only mode too (the CLI fuzzer), and make_model again.
#include "engine/models/model_config.h"

#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

namespace dpscope::models {

namespace {

constexpr const char* kModels = "toy, mlp, cnn, transformer, branch or gpt";
constexpr int64_t kMaxGptSize = int64_t{1} << 20;

bool is_known(const std::string& name) {
  return name == "toy" || name == "mlp" || name == "cnn" || name == "transformer" ||
         name == "branch" || name == "gpt";
}

void require_positive(const char* flag, int64_t value, const std::string& model) {
  if (value < 1) {
    throw std::invalid_argument(std::string(flag) + " must be at least 1 for --model " + model +
                                " (got " + std::to_string(value) + ")");
  }
}

// About how many parameters `c` (sizes filled in) has; the fixed-size models are small.
double parameter_estimate(const ModelConfig& c) {
  const double h = double(c.hidden.value_or(0)), layers = double(c.layers.value_or(0));
  if (c.name == "mlp" || c.name == "branch") return 64 * h + layers * h * h + h * 10;  // 64 in, 10 out
  if (c.name == "gpt") return 12 * layers * h * h + double(c.sequence.value_or(0)) * h + 256 * h;
  return 0;
}

// Training keeps about four float32 copies of the parameters (themselves, their gradients,
// DDP's buckets, the momentum): a model too big for this machine is refused before it is built,
// which would take minutes and then fail.
void require_fits_in_memory(const ModelConfig& c) {
  const double need = parameter_estimate(c) * 4 * 4;
  const double have = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
  if (have <= 0 || need <= have) return;
  char text[256];
  std::snprintf(text, sizeof(text),
                "--model %s with --layers %lld --hidden %lld has about %.3g parameters: training "
                "it needs about %.1f GiB (parameters, gradients, buckets, momentum) and this "
                "machine has %.1f GiB; choose smaller --layers or --hidden",
                c.name.c_str(), static_cast<long long>(c.layers.value_or(0)),
                static_cast<long long>(c.hidden.value_or(0)), parameter_estimate(c), need / (1 << 30),
                have / (1 << 30));
  throw std::invalid_argument(text);
}

}  // namespace

ModelConfig with_defaults(const ModelConfig& config) {
  ModelConfig out = config;
  if (config.name == "gpt") {
    // 4 blocks of 128 with 4 heads over 64 characters: about 0.8 M parameters in 54 tensors,
    // which 2 ranks on 2 cores train visibly within a minute (README.md, --model).
    out.hidden = config.hidden.value_or(128);
    out.layers = config.layers.value_or(4);
    out.heads = config.heads.value_or(4);
    out.sequence = config.sequence.value_or(64);
  } else if (config.name == "transformer") {
    out.sequence = config.sequence.value_or(8);
  } else {
    out.hidden = config.hidden.value_or(256);
    out.layers = config.layers.value_or(2);
  }
  return out;
}

void check_model_config(const ModelConfig& given) {
  const std::string& name = given.name;
  if (!is_known(name)) {
    throw std::invalid_argument("unknown model '" + name + "'; choose " + kModels);
  }
  if (given.heads && name != "gpt") {
    throw std::invalid_argument("--heads sets the attention heads of --model gpt; drop it for "
                                "--model " + name);
  }
  if (given.sequence && name != "gpt" && name != "transformer") {
    throw std::invalid_argument("--seq sets the sequence length of --model gpt or transformer; "
                                "drop it for --model " + name);
  }
  const ModelConfig c = with_defaults(given);
  if (name == "mlp" || name == "branch") {
    require_positive("--hidden", *c.hidden, name);
    if (*c.layers < 0) {
      throw std::invalid_argument("--layers must be 0 or more for --model " + name + " (got " +
                                  std::to_string(*c.layers) + ")");
    }
  } else if (name == "transformer") {
    require_positive("--seq", *c.sequence, name);
  } else if (name == "gpt") {
    require_positive("--layers", *c.layers, name);
    require_positive("--hidden", *c.hidden, name);
    require_positive("--heads", *c.heads, name);
    require_positive("--seq", *c.sequence, name);
    // Far beyond what fits in memory, and small enough that 4 * hidden and the suggestions
    // below cannot overflow.
    for (const auto& [flag, value] : {std::pair{"--layers", *c.layers}, {"--hidden", *c.hidden},
                                      {"--heads", *c.heads}, {"--seq", *c.sequence}}) {
      if (value > kMaxGptSize) {
        throw std::invalid_argument(std::string(flag) + " must be at most " +
                                    std::to_string(kMaxGptSize) + " for --model gpt (got " +
                                    std::to_string(value) + ")");
      }
    }
    if (*c.hidden % *c.heads != 0) {
      const int64_t lower = *c.hidden - *c.hidden % *c.heads;
      throw std::invalid_argument(
          "--hidden " + std::to_string(*c.hidden) + " is not a multiple of --heads " +
          std::to_string(*c.heads) + ": each head attends over an equal slice of the width; "
          "choose --hidden " + (lower > 0 ? std::to_string(lower) + " or " : std::string()) +
          std::to_string(lower + *c.heads) + ", or other --heads");
    }
  }
  require_fits_in_memory(c);
}

}  // namespace dpscope::models
