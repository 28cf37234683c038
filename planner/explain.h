#pragma once
// `zeroplan ... --explain`: every GPU and host buffer of a plan (name, category, bytes, phases in
// which it is live, where its size comes from), per-phase totals and the peak phase.
#include <string>

#include "planner/model_stats.h"
#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

std::string render_explain(const Workload& w, const Plan& p);

// `--explain-time`: the operator table of the plan's micro-step (forward, backward, recompute) and
// of its optimizer step: operator, launches, FLOPs, bytes, bound, efficiency, time (op_model.h),
// then how the passes add up to the step (StepTime), with the calibration error band.
std::string render_explain_time(const Workload& w, const ModelStats& s, const Plan& p);

}  // namespace zeroplan::planner
