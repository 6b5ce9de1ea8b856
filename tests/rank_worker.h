// What the tests' worker programs share (tests/fsdp/fsdp_worker, tests/zero/zero_worker): one
// rank under `dpscope launch` reports each failed check as a line "rank R: FAIL ...", an expected
// error as "rank R: error: ..." (tests/worker_checks.h reads both), and trains on batches that are
// a formula of a key, so every process and every run sees the same rows.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/types.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace dpscope::testing::worker {

// This rank and the world's size (main sets them from the world), and the checks failed so far.
inline int rank = 0;
inline int world = 1;
inline int failures = 0;

// Reports a failed check on this rank; main exits 1 when there was any.
inline void fail(const std::string& what) {
  std::printf("rank %d: FAIL %s\n", rank, what.c_str());
  std::fflush(stdout);
  ++failures;
}

// An error the case expects: thrown out of the case to main, which prints it and exits 3.
struct ExpectedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A batch of 8 rows of 64 features and its labels (10 classes), a formula of `key`.
inline at::Tensor inputs(int64_t key) {
  at::Tensor i = torch::arange(8, at::kFloat).unsqueeze(1);
  at::Tensor j = torch::arange(64, at::kFloat).unsqueeze(0);
  return torch::sin(0.37 * (i + 1) * (j + 1) + 0.11 * static_cast<double>(key));
}
inline at::Tensor labels(int64_t key) { return (torch::arange(8, at::kLong) + key) % 10; }

}  // namespace dpscope::testing::worker
