#pragma once
// ModelStats: everything about the model the planner needs, computed once per Workload so that
// evaluating a candidate ZeroConfig is plain arithmetic (the search evaluates millions).
//  - MemoryStats (planner/memory_stats.h): parameter counts, trainable/frozen split (LoRA/QLoRA),
//    tensor sizes for stage-3 padding/persistence, activation bytes per token.
//  - ComputeStats (planner/compute_stats.h): FLOPs per token by GEMM shape, attention FLOPs.
#include "planner/compute_stats.h"
#include "planner/memory_stats.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

struct ModelStats {
  MemoryStats mem;
  ComputeStats compute;
};

// Memory and compute stats, then the stage-1/2 partition holdings (which need the parameter order of
// planner/ds_runtime_collectives.cpp). model_stats.cpp.
ModelStats compute_model_stats(const Workload& w);

}  // namespace zeroplan::planner
