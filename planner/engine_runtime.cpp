#include "planner/engine_runtime.h"

#include <algorithm>
#include <array>
#include <string>

#include "common/checked.h"
#include "planner/engine_moe.h"

namespace zeroplan::planner {

namespace {

// The engine's decoder-layer projections in executor/engine.cpp's LayerParam order (kQ..kDown), as
// HF names them; LoraSettings: no targets or "all-linear" adapts all seven.
constexpr std::array<const char*, 7> kProjections = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                     "gate_proj", "up_proj", "down_proj"};

bool adapted(const Workload& w, const char* module) {
  if (w.train.method == Method::Full) return false;
  const auto& t = w.train.lora_targets;
  if (t.empty() || std::find(t.begin(), t.end(), "all-linear") != t.end()) return true;
  return std::find(t.begin(), t.end(), std::string(module)) != t.end();
}

}  // namespace

EngineActivations engine_activations(const Workload& w, int64_t micro_batch, bool full_checkpointing) {
  const auto& m = w.model;
  // Shapes as engine.cpp names them: n = B*T rows, C hidden, I intermediate, Hq/Hkv heads, D head
  // dim, V vocab; e = bytes of the activation dtype (bf16 2, fp32 4); fp32 side buffers 4 bytes.
  const int64_t e = w.train.precision == Precision::FP32 ? 4 : 2;
  const int64_t n = checked_mul(std::max<int64_t>(1, micro_batch), w.train.seq_len);
  const int64_t C = m.hidden_size, I = m.intermediate_size, V = m.vocab_size, L = m.num_layers;
  const int64_t Hq = m.num_heads, Hkv = m.kv_heads();
  const int64_t D = m.head_width();
  const int64_t qd = Hq * D, kd = Hkv * D;
  const int64_t r = w.train.method == Method::Full ? 0 : w.train.lora_rank;
  bool lora[7];
  int64_t adapters = 0;
  for (size_t i = 0; i < kProjections.size(); ++i)
    adapters += (lora[i] = adapted(w, kProjections[i])) ? 1 : 0;
  const auto rows = [&](int64_t width, int64_t bytes) { return checked_mul(checked_mul(n, width), bytes); };
  const int64_t xa = rows(r, e);  // one adapter's x A^T [N, r]

  // alloc_layer_acts: ln1, xmid, ln2 [N, C]; q, att [N, Hq*D]; k, v [N, Hkv*D]; gate, up, act [N, I];
  // rstd1, rstd2 [N] fp32; lse [Hq, N] fp32; x A^T [N, r] per adapted projection.
  int64_t layer = checked_add(rows(3 * C + 2 * qd + 2 * kd + 3 * I + adapters * r, e), rows(2 + Hq, 4));
  // Qwen3's per-head q/k norms: the projections' outputs qraw [N, Hq*D], kraw [N, Hkv*D] and their
  // rstd [N*Hq], [N*Hkv] fp32; in the backward the projections' output gradients join dq, dk, dv.
  const bool qk = m.qk_norm == models::QkNorm::PerHead;
  if (qk) layer = checked_add(layer, checked_add(rows(qd + kd, e), rows(Hq + Hkv, 4)));
  // A MoE layer (Mixtral: all of them) has the sparse block's buffers instead of gate/up/act
  // (planner/engine_moe.h).
  const EngineMoeLayer moe = engine_moe_layer(w, n);
  if (moe.applies) layer = checked_add(layer - rows(3 * I, e), moe.saved_mlp);
  const int64_t hidden = rows(C, e);  // one [N, C] buffer in the activation dtype
  const int64_t tokens = rows(2, 4);  // tok_in_, tok_tgt_: int32 ids in 4-byte buffers
  const int64_t logits = rows(V, e);  // [N, V]; the loss gradient overwrites it in place
  const int64_t kept_layers = full_checkpointing ? 0 : checked_mul(L, layer);
  // forward(): the residual stream x_[0..L] ([N, C] each) and, without checkpointing, every layer's
  // acts; with it, one layer's acts at a time (alloc'd and dropped per layer). Then the head: rstdf_
  // [N] fp32, lnf_ [N, C], logits_ [N, V], losses_ [N] fp32 (freed before the forward ends).
  const int64_t stream = checked_add(tokens, checked_mul(L + 1, hidden));
  const int64_t head = checked_add(checked_add(rows(1, 4), hidden), checked_add(logits, rows(1, 4)));
  EngineActivations out;
  out.forward_peak = checked_add(stream, checked_add(kept_layers, head));
  if (full_checkpointing) out.forward_peak = std::max(out.forward_peak, checked_add(stream, layer));
  // MoE: the last layer's router logits, while its acts (and every earlier layer's) exist.
  if (moe.applies)
    out.forward_peak = std::max(
        out.forward_peak, checked_add(checked_add(stream, full_checkpointing ? layer : kept_layers), moe.router_logits));

  // backward(): at its start the forward's buffers less losses_; dln [N, C] joins (the lm_head's
  // input gradient), then logits_ is freed and dres_ [N, C] allocated; the final norm's backward
  // frees dln, lnf_, rstdf_ and x_[L].
  const int64_t start = checked_add(stream, checked_add(kept_layers, head - rows(1, 4)));
  int64_t peak = std::max(checked_add(start, hidden), checked_add(start, 2 * hidden) - logits);
  // Then the last decoder layer's backward. Alive: x_[0..L-1] and dres_ (as many [N, C] buffers as
  // `stream` counts, with the token ids) and the acts of every layer (none kept with checkpointing:
  // the layer's own, recomputed). layer_backward's transients, in order (each LoRA linear_bwd adds
  // one d(x A^T) [N, r] for its duration): dact [N, I]; + dgate, dup [N, I]; dact freed, dln [N, C];
  // dgate/dup freed, datt [N, Hq*D]; + dq [N, Hq*D], dk, dv [N, Hkv*D]; datt freed. Earlier layers
  // run with fewer buffers alive (their successors' acts and inputs are freed), so this is the max.
  const int64_t base = checked_add(stream, full_checkpointing ? layer : kept_layers);
  const auto lora_if = [&](size_t p) { return lora[p] ? xa : 0; };
  // (A MoE layer has no dense MLP transients: moe.backward_transient instead.)
  const int64_t In = moe.applies ? 0 : rows(I, e), Qn = rows(qd, e), Kn = rows(kd, e);
  const int64_t transient = std::max({
      In + lora_if(6),                                                        // down_proj backward
      3 * In,                                                                 // swiglu backward
      2 * In + hidden + std::max(lora_if(4), lora_if(5)),                     // gate/up backward
      hidden + Qn + lora_if(3),                                               // o_proj backward
      hidden + 2 * Qn + 2 * Kn,                                               // attention backward
      hidden + Qn + 2 * Kn + (qk ? Qn + Kn : 0) + std::max({lora_if(0), lora_if(1), lora_if(2)}),  // q/k/v backward
  });
  peak = std::max(peak, checked_add(base, std::max(transient, moe.backward_transient)));
  // Checkpointing: the recomputation of the layer's forward holds its acts and x_out [N, C].
  // (A MoE layer's recomputation also holds its router logits for a moment.)
  if (full_checkpointing) peak = std::max(peak, checked_add(base, hidden + moe.router_logits));
  out.backward_peak = peak;
  return out;
}

EngineGradientRules engine_gradient_rules() {
  return {};
}

}  // namespace zeroplan::planner
