#pragma once
// The engine's backward against central finite differences of the loss, shared by the executor's
// numerics suites (full fine-tuning and LoRA).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "executor/engine.h"

namespace zeroplan::testing {

// For each trainable tensor of `g` (a run with capture_first_grads), the element with the largest
// gradient is perturbed by +-h in `params` (the values `loss_at` starts from) and the central
// difference compared with the captured gradient. Central differences err by h^2/6 f''' (truncation)
// plus ~2e-7/h from fp32 loss rounding (2e-5 at h = 1e-2); 3% relative covers the truncation for
// the O(1e-2..1e-1) gradients of the tiny test models. `params` is restored.
inline void expect_gradients_match_finite_differences(const exec::RunResult& g, std::vector<float>& params,
                                                      const std::function<double()>& loss_at) {
  ASSERT_EQ(g.first_grads.size(), params.size());
  for (size_t t = 0; t < g.param_names.size(); ++t) {
    const int64_t lo = g.param_offsets[t];
    const int64_t hi =
        t + 1 < g.param_offsets.size() ? g.param_offsets[t + 1] : static_cast<int64_t>(params.size());
    int64_t best = lo;
    for (int64_t i = lo; i < hi; ++i)
      if (std::fabs(g.first_grads[static_cast<size_t>(i)]) >
          std::fabs(g.first_grads[static_cast<size_t>(best)]))
        best = i;
    const float h = 1e-2f;
    const float orig = params[static_cast<size_t>(best)];
    params[static_cast<size_t>(best)] = orig + h;
    const double up = loss_at();
    params[static_cast<size_t>(best)] = orig - h;
    const double down = loss_at();
    params[static_cast<size_t>(best)] = orig;
    const double fd = (up - down) / (2.0 * h);
    const double an = g.first_grads[static_cast<size_t>(best)];
    EXPECT_NEAR(fd, an, 0.03 * std::fabs(an) + 5e-5) << g.param_names[t] << " element " << best - lo;
  }
}

}  // namespace zeroplan::testing
