#include "planner/cpu_optimizer.h"

#include <cmath>

#include "common/errors.h"
#include "planner/op_model.h"

namespace zeroplan::planner {

double cpu_optimizer_ns_per_param(int stage, int threads) {
  ZP_CHECK(threads >= 1, "cpu optimizer: {} threads", threads);
  const TimeModelData::CpuOptimizer& c = time_model_data().cpu_optimizer;
  const std::vector<double>& ns = stage >= 3 ? c.ns_per_param_stage3 : c.ns_per_param_stage1_2;
  const std::vector<int>& t = c.threads;  // non-empty, increasing, as long as ns: checked when loaded
  if (threads <= t.front()) return ns.front();
  if (threads >= t.back()) return ns.back();
  size_t i = 1;
  while (t[i] < threads) ++i;
  // log-log: time per parameter ~ threads^-alpha between two measured counts.
  const double f =
      std::log(static_cast<double>(threads) / t[i - 1]) / std::log(static_cast<double>(t[i]) / t[i - 1]);
  return std::exp(std::log(ns[i - 1]) + f * (std::log(ns[i]) - std::log(ns[i - 1])));
}

double cpu_optimizer_step_s(int64_t partition_params, int stage, int threads) {
  return static_cast<double>(partition_params) * cpu_optimizer_ns_per_param(stage, threads) * 1e-9;
}

}  // namespace zeroplan::planner
