#pragma once
// The planner's model of the native engine's MoE block (executor/engine.cpp moe_forward /
// moe_backward, a Mixtral-style sparse block), for planner/engine_runtime.cpp's walk of the engine's
// activation buffers. Read from the engine's code, never by calling it.
#include <cstdint>

#include "planner/training_spec.h"

namespace zeroplan::planner {

struct EngineMoeLayer {
  bool applies = false;  // the model has routed experts (the engine runs Mixtral: every layer MoE)
  // Saved tensors of one MoE layer's MLP part, in place of the dense gate/up/act [N, I] x 3:
  // probs [N, E] fp32, top-k experts [N, K] int32, top-k weights [N, K] fp32, pairs [N*K] int32,
  // gathered rows xg and expert outputs eo [N*K, C], gate/up/act [N*K, F] (F = the expert width).
  int64_t saved_mlp = 0;
  // Router logits [N, E], held in the forward from the router GEMM until the routing kernel ran
  // (and in the checkpointed recomputation).
  int64_t router_logits = 0;
  // Largest set of moe_backward's transient gradient buffers alive at once (dL/d(ln2) [N, C], which
  // layer_backward keeps through the attention's backward, counted): see engine_moe.cpp.
  int64_t backward_transient = 0;
};

// For one micro-step of `n` tokens (micro-batch x sequence) in the run's activation dtype.
EngineMoeLayer engine_moe_layer(const Workload& w, int64_t n);

}  // namespace zeroplan::planner
