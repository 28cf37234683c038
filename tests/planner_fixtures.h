#pragma once
// Hand-made hardware for the time-model suites: times are then plain arithmetic on stated inputs.
#include "hwprofiles/gpu_profile.h"

namespace zeroplan::testing {

// A link with the same busbw at every message size.
inline hw::LinkProfile flat_link(const char* name, double busbw_GBps, double latency_us) {
  hw::LinkProfile l;
  l.name = name;
  l.busbw.points = {{1, busbw_GBps}};
  l.latency_us = latency_us;
  return l;
}

// A hand-made A100-80GB-like GPU (datasheet peaks: 312 TFLOP/s bf16 dense, 2039 GB/s HBM2e); the
// efficiency numbers are test inputs, not claims.
inline hw::GpuProfile test_gpu() {
  hw::GpuProfile g;
  g.name = "TestGPU";
  g.memory_bytes = 80'000'000'000;
  g.bf16_tflops = 312;
  g.fp16_tflops = 312;
  g.fp32_tflops = 19.5;
  g.hbm_GBps = 2039;
  g.host_pinned_GBps = 25;
  g.host_pageable_GBps = 12;
  g.gemm_max_efficiency = 0.8;
  g.gemm_half_efficiency_gflop = 2.5;
  g.hbm_efficiency = 0.8;
  g.cuda_context_bytes = 500'000'000;
  return g;
}

}  // namespace zeroplan::testing
