#pragma once
// The time model (issue 4): compute, every collective DeepSpeed issues, overlap, offload.
#include "planner/model_stats.h"
#include "planner/step_time.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

// Pure and allocation-free: the search calls it for every candidate.
StepTime estimate_time(const Workload& w, const ModelStats& s, const ZeroConfig& z);

}  // namespace zeroplan::planner
