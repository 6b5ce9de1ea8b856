// The C++ side of the tests' numeric comparisons (tests/ddp/compare_state.py is the Python side):
// the largest absolute difference of two tensors, where a NaN or an infinity in either counts as
// an infinite difference. A NaN compares false with everything, so `diff > tolerance` and
// std::max would otherwise let it through as no difference at all.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>

namespace dpscope::testing {

// Infinite when either tensor holds a NaN or an infinity (a - b is then NaN or infinite, and
// max() propagates NaN); 0 for two empty tensors. The shapes must be equal.
inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.sizes() == b.sizes(), "max_abs_diff: shapes ", a.sizes(), " and ", b.sizes(),
              " differ");
  if (a.numel() == 0) return 0;
  const double diff =
      (a.detach().to(at::kDouble) - b.detach().to(at::kDouble)).abs().max().item<double>();
  return std::isfinite(diff) ? diff : std::numeric_limits<double>::infinity();
}

}  // namespace dpscope::testing
