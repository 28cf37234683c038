#pragma once
// CPU AdamW for the optimizer-offload tier (DeepSpeed's DeepSpeedCPUAdam, csrc/adam/cpu_adam_impl.cpp,
// does the same work with hand-written AVX; here plain loops that GCC/Clang vectorise at -O2/-O3
// without any -march flag, split over std::threads). Same update as executor/backend.h's AdamParams:
//   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p = p (1 - lr wd) - lr * (m / bc1) / (sqrt(v / bc2) + eps),   bc_i = 1 - b_i^step.
#include <cstdint>

#include "executor/backend.h"

namespace zeroplan::exec::cuda {

// Round-to-nearest-even fp32 -> bf16 bit pattern (NaN stays NaN), as __float2bfloat16 does.
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);

// Updates elements [begin, end) of one chunk on the calling thread. out16 (may be null) receives the
// updated parameters as bf16 bits, indexed from `begin` (out16[0] is element `begin`).
void host_adam_range(const AdamChunk& c, const AdamParams& p, int64_t begin, int64_t end, uint16_t* out16);

// Whole chunk, split over `threads` std::threads (0 = hardware concurrency, at most 32).
void host_adam_parallel(const AdamChunk& c, const AdamParams& p, int64_t begin, int64_t end, uint16_t* out16,
                        int threads);

}  // namespace zeroplan::exec::cuda
