// ZeRO++ qwZ / qgZ sizes; see zeropp_quant.h.
#include "planner/zeropp_quant.h"

#include <algorithm>

namespace zeroplan::planner {

int64_t qwz_groups(int64_t n) {
  if (n <= 0 || n % 8 != 0) return 0;
  int64_t g = (n + kQwzTargetGroupSize - 1) / kQwzTargetGroupSize;
  while (g < n && n % (8 * g) != 0) ++g;
  while (n % (16 * g) == 0 && n / g > kQwzTargetGroupSize) g *= 2;
  // The three assertions that follow the search in CUDAQuantizer.quantize.
  if (n % (8 * g) != 0 || n / g >= 16000 || n <= g) return 0;
  return g;
}

QgzExchange qgz_exchange(int64_t numel, int64_t lead, int world, int gpus_per_node) {
  QgzExchange e;
  const int64_t L = std::max(1, gpus_per_node);
  if (lead <= 0 || numel % (2 * static_cast<int64_t>(world)) != 0) return e;
  e.quantized = true;
  const int64_t groups = std::max<int64_t>(lead, world);  // intra_quant_group
  e.intra_data = numel / 2;                               // int4: two values per byte
  e.intra_scales = groups * 4;                            // fp32, one per group (Symmetric)
  e.inter_data = numel / 2 / L;                           // quantized_reduction: sz.back() / devices_per_node
  e.inter_scales = groups / L * 4;                        // inter_quant_group = intra_quant_group // L
  return e;
}

double qwz_gathered_bytes_per_elem(bool bf16) {
  return bf16 ? 7.0 : 3.0;
}

double qgz_bytes_per_grad_elem(int gpus_per_node, int nodes) {
  const double L = std::max(1, gpus_per_node), M = std::max(1, nodes);
  return 2.5 + (0.5 + 0.5 / L) + (2.5 / L) + (2.0 / L + 2.0 / (L * M));
}

}  // namespace zeroplan::planner
