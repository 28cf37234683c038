#pragma once
// DeepSpeed's optimizer step on the host (ZeRO-Offload, offload_optimizer.device = cpu), priced per
// parameter of the rank's partition at the OpenMP threads each rank runs (issue 24 item 1).
//
// What the threads are: DeepSpeedCPUAdam's update loop (csrc/adam/cpu_adam_impl.cpp, `#pragma omp
// parallel for`) and the torch CPU ops around it (gradient norm, clipping, the 16-bit copy back) run on
// libgomp's threads, whose number is OMP_NUM_THREADS, read once at start. The launcher sets it:
// torchrun and `accelerate launch` set 1 per rank unless it is already set (torch/distributed/run.py,
// accelerate/utils/launch.py); DeepSpeed's launcher leaves it unset (libgomp's default: every core, for
// every rank) and with --bind_cores_to_rank sets cores / ranks (deepspeed/launcher/launch.py).
//
// Measured (planner/data/time_model.json "cpu_optimizer", raw files in docs/validation/2026-11-27-h100/):
// on a 16-vCPU Xeon beside an H100, DeepSpeed 0.19.8's whole host step for TinyLlama-1.1B takes
// 2.04 ns per parameter at 1 thread, 0.73 at 4 and 0.33 at 16 (stages 1-2), about twice that at stage
// 3. Between measured thread counts the time is interpolated in log-log; beyond the largest it is held
// (the update is memory-bound: 8 -> 16 threads gained 1.26x on DeepSpeedCPUAdam alone).
// Not modelled: ranks of one node contending for its cores or memory bandwidth.
#include <cstdint>

namespace zeroplan::planner {

// Seconds of host time for one optimizer step over `partition_params` parameters at `threads` OpenMP
// threads per rank, on the runtime path of ZeRO stage `stage` (1-2 or 3). threads >= 1.
double cpu_optimizer_step_s(int64_t partition_params, int stage, int threads);

// The ns per parameter behind it (for reasons and tests).
double cpu_optimizer_ns_per_param(int stage, int threads);

}  // namespace zeroplan::planner
