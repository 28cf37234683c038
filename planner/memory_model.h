#pragma once
// The memory model (issue 3): every byte each GPU and each host holds for one ZeroConfig, as named
// buffers with lifetimes. Sources: ZeRO paper (Rajbhandari et al. 2020, §5, Table 1) for model
// states; DeepSpeed v0.16 deepspeed/runtime/zero/{stage_1_and_2,stage3,partition_parameters}.py for
// runtime buffers; Korthikanti et al. 2022 Table 2 for activations (see memory_model.cpp).
#include "planner/memory_breakdown.h"
#include "planner/model_stats.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

// Pure and allocation-free: the search calls it for every candidate.
MemoryBreakdown estimate_memory(const Workload& w, const ModelStats& s, const ZeroConfig& z);

}  // namespace zeroplan::planner
