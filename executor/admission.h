#pragma once
// Admission before allocation (issue 16): what a run will certainly allocate, sized from the
// engine's own layout (exec::layout_sizes) and the same partitioning rules as RankEngine::setup and
// the first backward in executor/engine.cpp, so `zeroplan validate` can refuse a run the machine
// cannot hold before it takes a byte (a 7B model on four cpu thread ranks wanted ~75 GB of host RAM
// and was killed by the kernel's OOM killer instead of refused).
//
// These are lower bounds: activations, stage-3 gathered parameters and per-bucket staging grow with
// the batch and are left out (a run that passes admission can still run out of its device tier,
// which validate reports as a result).
#include <cstdint>

#include "executor/engine.h"

namespace zeroplan::exec {

struct RunNeeds {
  // Per rank, device tier: the 16-bit parameters (and LoRA's frozen copy), the gradient buffer or
  // partition, the fp32 master and both Adam moments when they are not offloaded, and the
  // gradient reduce bucket(s).
  int64_t device_per_rank = 0;
  // Per rank, host tier: offloaded master/Adam moments/gradient partition (offload_optimizer).
  int64_t host_tier_per_rank = 0;
  // Per rank, plain host vectors the engine holds next to those: setup's fp32 staging copy of the
  // rank's parameters and its 16-bit image (while the device tier is being filled) ...
  int64_t host_staging_per_rank = 0;
  // ... and, once the steps ran, the fp32 export of the whole model and of the rank's partition.
  int64_t host_export_per_rank = 0;
  // Once per process: the run's result (the fp32 parameters of the whole model).
  int64_t host_per_process = 0;
};

RunNeeds minimum_run_needs(const RunConfig& cfg, int world_size);

// MemAvailable from /proc/meminfo in bytes; -1 when it cannot be read.
int64_t host_memory_available();

}  // namespace zeroplan::exec
