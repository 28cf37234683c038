#pragma once
// Measurements behind `zeroplan calibrate` and the bench_cuda_* benchmarks, and the fits that turn
// them into GpuProfile fields (hwprofiles/gpu_profile.h):
//   - GEMM efficiency by size: eff(f) = E * f / (f + H) with f the GEMM's GFLOP; E = gemm_max_efficiency,
//     H = gemm_half_efficiency_gflop (the size at which half of E is reached). Fitted by least squares on
//     1/eff = 1/E + (H/E) * (1/f), which is linear in 1/f.
//   - HBM bandwidth: a device-to-device copy of S bytes moves 2S (read + write) in time t.
//   - host<->device: S/t for pinned and pageable buffers, both directions.
//   - collectives (two or more GPUs): nccl-tests doc/PERFORMANCE.md definitions, algbw = S/t and
//     busbw = algbw * 2(n-1)/n (all-reduce) or (n-1)/n (reduce-scatter, all-gather), with S the full
//     message; data is exactly verifiable (rank r contributes r+1; sums are n(n+1)/2).
// Timing: CUDA events around `reps` back-to-back operations after warm-up; the median of several
// such batches is reported (METHOD.md: warm up, repeat, take the median).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "executor/communicator.h"
#include "executor/cuda/gemm.h"
#include "hwprofiles/gpu_profile.h"

namespace zeroplan::exec::cuda {

class CudaBackend;

struct GemmEfficiencyFit {
  double max_efficiency = 0;         // E
  double half_efficiency_gflop = 0;  // H
  double rms_relative_residual = 0;  // of eff over the points
  int points = 0;
  bool capped_at_peak = false;  // the free fit's E was above 1; E held at 1 and H refit
};
// points: (GFLOP of one GEMM, achieved/peak). Needs >= 2 points with distinct sizes; throws otherwise.
GemmEfficiencyFit fit_gemm_efficiency(const std::vector<std::pair<double, double>>& points);

// nccl-tests bus factor for a collective over n ranks (doc/PERFORMANCE.md).
double bus_factor(CollKind k, int n);

// Shapes calibrate times: square GEMMs from 256 to 8192 and the Llama-7B projection shapes at 4096
// tokens (m = tokens, n = out features, k = in features), so the fit covers the sizes a step uses.
std::vector<GemmShape> calibration_gemm_shapes(bool quick);

// Median seconds of one GEMM (bf16 in, bf16 out, fp32 accumulate) on random data.
double time_gemm(CudaBackend& be, const GemmShape& s, int reps);

// Device copy bandwidth (bytes read + written per second, GB/s = 1e9 B/s).
double measure_device_copy_GBps(CudaBackend& be, int64_t bytes, int reps);
// Host<->device bandwidth (bytes per second of the copy, GB/s).
double measure_host_copy_GBps(CudaBackend& be, int64_t bytes, bool pinned, bool host_to_device, int reps);

struct CollectiveSample {
  CollKind kind = CollKind::AllReduce;
  int64_t bytes = 0;  // full message S
  double seconds = 0;
  double algbw_GBps = 0, busbw_GBps = 0;
  bool verified = false;  // the exact expected values arrived
};
// One thread per rank; comms[i] is rank i's communicator on backends[i].
CollectiveSample measure_collective(const std::vector<CudaBackend*>& backends,
                                    const std::vector<Communicator*>& comms, CollKind kind, int64_t bytes,
                                    int reps);

const char* coll_name(CollKind k);

// Everything `zeroplan calibrate` measured on one machine.
struct CalibrationMeasurements {
  std::string stamp;  // "zeroplan calibrate on '<device>' (<SMs> SMs), <date>, CUDA runtime .., driver .."
  int64_t memory_total_bytes = 0;   // cudaMemGetInfo total
  int64_t baseline_used_bytes = 0;  // in use after context + streams + cuBLASLt workspace
  GemmEfficiencyFit gemm;
  double device_copy_GBps = 0;  // read + write
  double pinned_h2d_GBps = 0, pinned_d2h_GBps = 0, pageable_h2d_GBps = 0, pageable_d2h_GBps = 0;
  int gpus = 1;
  std::vector<CollectiveSample> all_reduce;  // by message size; empty with one GPU
};

// The calibrated profile: `base` (datasheet peaks, links, node layout) with the measured fields
// replaced; host copies take the slower direction (the planner uses one number for both).
// Named "<base>-calibrated" without aliases, so it never collides with a built-in name.
hw::GpuProfile calibrated_profile(const hw::GpuProfile& base, const CalibrationMeasurements& m);

}  // namespace zeroplan::exec::cuda
