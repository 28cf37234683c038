#pragma once
// Liger-Kernel's fused linear cross-entropy walks the b*s tokens in chunks (liger_kernel/ops/
// fused_linear_cross_entropy.py fused_linear_cross_entropy_forward, 0.8.5): inc_factor = ceil(V / H),
// chunk_size = triton.next_power_of_2(ceil(BT / inc_factor)), capped at BT, so a chunk's logits are about
// the size of the head's input. The memory model sizes the chunk's logits with it, the operator table
// the per-chunk GEMMs.
#include <algorithm>
#include <cstdint>

#include "common/checked.h"

namespace zeroplan::planner {

inline int64_t liger_flce_chunk_rows(int64_t bt, int64_t vocab, int64_t hidden) {
  const int64_t inc = ceil_div(vocab, std::max<int64_t>(1, hidden));
  int64_t chunk = 1;
  while (chunk < ceil_div(bt, inc)) chunk *= 2;  // triton.next_power_of_2
  return std::min(chunk, bt);
}

}  // namespace zeroplan::planner
