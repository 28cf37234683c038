#pragma once
// Physical checks every plan passes before it leaves the planner (issue 16, item 6). A plan that
// fails one is a bug of ours, never a number to print: enforce_plan_invariants throws InternalError
// (the CLI exits 3) with one line naming the plan and the quantity.
//
// The checks:
//   time:       step_s finite and > 0; every component finite and >= 0; step_s equals the sum of its
//               parts (compute + exposed communication + offload + hook overhead + overlap slowdown);
//               exposed communication <= communication; communication_s and comm_bytes_per_rank
//               equal the sums over the plan's collectives; each collective's exposed <= its time.
//   throughput: tokens/s finite and > 0, and equal to global batch x seq len / step_s; per GPU =
//               tokens/s / GPUs; MFU <= the GPU profile's gemm_max_efficiency (the best dense GEMM
//               efficiency the profile states; no training step beats its best GEMM); HFU <= 1 and
//               MFU <= HFU; MFU equal to tokens/s x model FLOPs per token / (GPUs x peak), with the
//               plan's own FLOPs per token and the profile's dense peak for the precision.
//   memory:     every buffer's bytes >= 0; peak >= model states (parameters + gradients + optimizer
//               states at the peak); the categories at the peak sum to the peak; the peak is the
//               largest phase total and each phase total is the sum of the buffers live in it.
#include <string>
#include <vector>

#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

struct InvariantViolation {
  std::string quantity;  // "mfu", "step_s", "memory.peak", ...
  std::string detail;    // the numbers, in one sentence
};

// Every violated check of `p` (empty when the plan is physical).
std::vector<InvariantViolation> plan_violations(const Workload& w, const Plan& p);

// Throws InternalError naming the plan and the first violated quantity.
void enforce_plan_invariants(const Workload& w, const Plan& p);

}  // namespace zeroplan::planner
