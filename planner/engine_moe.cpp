#include "planner/engine_moe.h"

#include <algorithm>

#include "common/checked.h"

namespace zeroplan::planner {

EngineMoeLayer engine_moe_layer(const Workload& w, int64_t n) {
  const auto& m = w.model;
  EngineMoeLayer out;
  if (!m.is_moe()) return out;
  out.applies = true;
  // Shapes as engine.cpp names them: C hidden, E experts, K experts per token, F expert width
  // (moe_intermediate_size; Mixtral's experts are intermediate_size wide), R = N*K routed rows;
  // e = bytes of the activation dtype, 4 for the fp32 and int32 routing buffers.
  const int64_t e = w.train.precision == Precision::FP32 ? 4 : 2;
  const int64_t C = m.hidden_size, E = m.num_experts, K = std::max<int64_t>(1, m.experts_per_token);
  const int64_t F = m.moe_intermediate_size > 0 ? m.moe_intermediate_size : m.intermediate_size;
  const int64_t R = checked_mul(n, K);
  const auto bytes = [](int64_t rows, int64_t width, int64_t b) {
    return checked_mul(checked_mul(rows, width), b);
  };
  // alloc_layer_acts (MoE branch): probs, topk_idx, topk_w, pairs (4 bytes each), xg, gate, up, act, eo.
  out.saved_mlp =
      checked_add(checked_add(bytes(n, E + 2 * K, 4), bytes(R, 1, 4)), bytes(R, 2 * C + 3 * F, e));
  out.router_logits = bytes(n, E, e);  // moe_forward: `logits`, freed after moe_route_forward
  // moe_backward, in order: dw [N, K] fp32 and deo [R, C]; + dact [R, F]; deo freed, + dgate, dup
  // [R, F]; dact freed, + dxg [R, C]; dgate/dup freed, + dln [N, C]; dxg freed, + dlogits [N, E];
  // dw freed, dlogits freed; dln goes on to the post_attention_layernorm and attention backward.
  const int64_t dw = bytes(n, K, 4), RC = bytes(R, C, e), RF = bytes(R, F, e), hidden = bytes(n, C, e);
  out.backward_transient = std::max({
      dw + RC + RF,                  // down_proj backward (deo, dact)
      dw + 3 * RF,                   // swiglu backward
      dw + 2 * RF + RC,              // gate_up backward (dxg)
      dw + RC + hidden,              // index_add_ backward into dln
      dw + hidden + bytes(n, E, e),  // router backward (dlogits)
  });
  return out;
}

}  // namespace zeroplan::planner
