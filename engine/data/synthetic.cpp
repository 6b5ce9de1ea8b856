// Synthetic data sets made from a seeded CPU generator, drawn in the same order as the Python in
// dataset.h so that torch in Python reproduces them bit for bit (the tests' oracle).
#include "engine/data/dataset.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>

#include <stdexcept>
#include <string>

#include "engine/memory/tracking_allocator.h"

namespace dpscope::data {

namespace {

void require_positive(const char* what, const char* name, int64_t value) {
  if (value < 1) {
    throw std::invalid_argument(std::string(what) + ": " + name + " must be at least 1, got " +
                                std::to_string(value));
  }
}

}  // namespace

Dataset make_synthetic_classification(int64_t n, int64_t features, int64_t classes,
                                      uint64_t seed) {
  const char* what = "make_synthetic_classification";
  if (n < 0) throw std::invalid_argument(std::string(what) + ": n must be >= 0");
  require_positive(what, "features", features);
  require_positive(what, "classes", classes);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  memory::CategoryScope data(memory::MemoryCategory::Data);
  Dataset out;
  out.x = at::randn({n, features}, g, at::kFloat);
  at::Tensor w = at::randn({features, classes}, g, at::kFloat);
  out.y = at::argmax(at::matmul(out.x, w), 1);
  return out.owned_as_data();
}

Dataset make_synthetic_sequences(int64_t n, int64_t length, int64_t vocab, uint64_t seed) {
  const char* what = "make_synthetic_sequences";
  if (n < 0) throw std::invalid_argument(std::string(what) + ": n must be >= 0");
  require_positive(what, "length", length);
  require_positive(what, "vocab", vocab);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  memory::CategoryScope data(memory::MemoryCategory::Data);
  Dataset out;
  // The header says x is float32 [N, ...] for classification; token data stays int64 (the
  // embedding's input), as Python's randint gives it.
  out.x = at::randint(vocab, {n, length}, g, at::kLong);
  out.y = at::flip(out.x, {1});
  return out.owned_as_data();
}

}  // namespace dpscope::data
