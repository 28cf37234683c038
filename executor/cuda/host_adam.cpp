#include "executor/cuda/host_adam.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

namespace zeroplan::exec::cuda {

uint16_t float_to_bf16_bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float bf16_bits_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

void host_adam_range(const AdamChunk& c, const AdamParams& a, int64_t begin, int64_t end, uint16_t* out16) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(a.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(a.step));
  // Loop-invariant factors hoisted so the body is branch-free fp32 arithmetic (vectorisable).
  const float step_size = static_cast<float>(a.lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float decay = 1.0f - a.lr * a.weight_decay;
  const float b1 = a.beta1, b2 = a.beta2, one_b1 = 1.0f - a.beta1, one_b2 = 1.0f - a.beta2;
  const float gs = a.grad_scale, eps = a.eps;
  float* __restrict p = c.param;
  const float* __restrict g = c.grad;
  float* __restrict m = c.exp_avg;
  float* __restrict v = c.exp_avg_sq;
  for (int64_t i = begin; i < end; ++i) {
    const float gi = g[i] * gs;
    const float mi = b1 * m[i] + one_b1 * gi;
    const float vi = b2 * v[i] + one_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
  }
  if (out16 != nullptr)
    for (int64_t i = begin; i < end; ++i) out16[i - begin] = float_to_bf16_bits(p[i]);
}

void host_adam_parallel(const AdamChunk& c, const AdamParams& p, int64_t begin, int64_t end, uint16_t* out16,
                        int threads) {
  if (threads <= 0)
    threads = static_cast<int>(std::min(32u, std::max(1u, std::thread::hardware_concurrency())));
  const int64_t n = end - begin;
  // Below ~64K elements per thread, thread start-up (tens of microseconds) costs more than it saves.
  const int64_t useful = std::max<int64_t>(1, n / 65536);
  const int t = static_cast<int>(std::min<int64_t>(threads, useful));
  if (t <= 1) {
    host_adam_range(c, p, begin, end, out16);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(t));
  const int64_t per = (n + t - 1) / t;
  for (int k = 0; k < t; ++k) {
    const int64_t b = begin + k * per, e = std::min(end, b + per);
    if (b >= e) break;
    pool.emplace_back([&, b, e] { host_adam_range(c, p, b, e, out16 ? out16 + (b - begin) : nullptr); });
  }
  for (auto& th : pool) th.join();
}

}  // namespace zeroplan::exec::cuda
