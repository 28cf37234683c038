#pragma once
// `zeroplan ... --explain`: every GPU and host buffer of a plan (name, category, bytes, phases in
// which it is live, where its size comes from), per-phase totals and the peak phase.
#include <string>

#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

std::string render_explain(const Workload& w, const Plan& p);

}  // namespace zeroplan::planner
