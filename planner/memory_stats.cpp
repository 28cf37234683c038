#include "planner/memory_stats.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "common/checked.h"
#include "common/errors.h"
#include "planner/compute_stats.h"
#include "planner/gated_delta_net.h"
#include "planner/mamba2.h"
#include "planner/vision.h"

namespace zeroplan::planner {

// ---------------------------------------------------------------------------------------------
// TensorSizeTable
// ---------------------------------------------------------------------------------------------

void TensorSizeTable::add(int64_t n, int64_t times) {
  if (n <= 0 || times <= 0) return;
  numel.push_back(n);
  count.push_back(times);
}

void TensorSizeTable::finish() {
  std::map<int64_t, int64_t> merged;
  for (size_t i = 0; i < numel.size(); ++i) merged[numel[i]] += count[i];
  numel.clear();
  count.clear();
  for (const auto& [n, c] : merged) {
    numel.push_back(n);
    count.push_back(c);
  }
  prefix_numel.assign(numel.size() + 1, 0);
  prefix_count.assign(numel.size() + 1, 0);
  for (size_t i = 0; i < numel.size(); ++i) {
    prefix_numel[i + 1] = checked_add(prefix_numel[i], checked_mul(numel[i], count[i]));
    prefix_count[i + 1] = prefix_count[i] + count[i];
  }
}

size_t TensorSizeTable::first_above(int64_t t) const {
  return static_cast<size_t>(std::upper_bound(numel.begin(), numel.end(), t) - numel.begin());
}

int64_t TensorSizeTable::partition_numel_above(int64_t t, int64_t n) const {
  int64_t sum = 0;
  for (size_t i = first_above(t); i < numel.size(); ++i) sum += ceil_div(numel[i], n) * count[i];
  return sum;
}

int64_t TensorSizeTable::partition_numel_at_or_below(int64_t t, int64_t n) const {
  int64_t sum = 0;
  const size_t end = first_above(t);
  for (size_t i = 0; i < end; ++i) sum += ceil_div(numel[i], n) * count[i];
  return sum;
}

// QLoRA (Dettmers et al. 2023, "QLoRA: Efficient Finetuning of Quantized LLMs", §3): NF4 codes are
// 4 bits; the first-level quantisation constants are one absmax per block of 64 weights, which
// double quantisation stores as 8-bit floats with one fp32 second-level constant per 256 first-level
// constants: 8/64 + 32/(64*256) = 0.127 bits per parameter (0.5 bits without double quantisation).
// bitsandbytes (functional.py quantize_4bit, blocksize 64 for NF4 in transformers' BitsAndBytesConfig
// with bnb_4bit_use_double_quant=True) packs two codes per byte.
int64_t nf4_bytes(int64_t n) {
  const int64_t codes = ceil_div(n, 2);
  const int64_t blocks = ceil_div(n, 64);
  const int64_t absmax_8bit = blocks;                      // 1 byte per 64-element block
  const int64_t second_level = ceil_div(blocks, 256) * 4;  // fp32 per 256 blocks
  return codes + absmax_8bit + second_level;
}

namespace {

// The module a tensor belongs to: its full name without the trailing ".weight" / ".bias".
std::string module_path(const std::string& tensor_name) {
  const auto dot = tensor_name.rfind('.');
  return dot == std::string::npos ? tensor_name : tensor_name.substr(0, dot);
}

// PEFT target matching as models/lora.cpp implements it (peft/tuners/tuners_utils.py
// check_target_module_exists and _maybe_include_all_linear_layers): "all-linear" (or no targets)
// takes every nn.Linear except the output layer; explicit targets match the module's last name
// component, for linears and embeddings.
struct LoraTargets {
  bool all_linear = true;
  std::vector<std::string> wanted;
  std::string output_module = "lm_head";
  bool wants(const std::string& module) const {
    return std::find(wanted.begin(), wanted.end(), module) != wanted.end();
  }
  bool targeted(const models::TensorSpec& t) const {
    if (t.is_bias || t.is_norm || t.vision) return false;  // adapters on the language tower only
    if (t.is_linear) return all_linear ? t.module != output_module : wants(t.module);
    if (t.is_embedding) return !all_linear && wants(t.module);
    return false;
  }
};

LoraTargets lora_targets(const Workload& w) {
  LoraTargets lt;
  const auto& tg = w.train.lora_targets;
  lt.all_linear = tg.empty() || std::find(tg.begin(), tg.end(), "all-linear") != tg.end();
  lt.wanted = tg;
  lt.output_module = w.model.layout == models::Layout::GPTNeoX ? "embed_out" : "lm_head";
  return lt;
}

// Which linear inputs of a decoder layer are saved for backward: a linear needs its input for the
// weight gradient only (the input gradient needs the weight), so a frozen linear without a LoRA
// adapter saves nothing; a LoRA adapter's A matmul saves the same input (PEFT lora.Linear.forward,
// lora_dropout defaults to 0 -> nn.Identity, so x itself is saved).
struct LayerFlags {
  bool attn_in_saved = true;  // q/k/v (or fused qkv) input
  bool o_in_saved = true;
  bool mlp_in_saved = true;   // gate/up or fc1 input
  bool down_in_saved = true;  // down_proj / fc2 input
  bool norm_weight_trainable = true;
};

LayerFlags layer_flags(const Workload& w, const models::LayerInventory* layer) {
  LayerFlags f;
  if (w.train.method == Method::Full || layer == nullptr) return f;
  f = LayerFlags{false, false, false, false, false};
  const LoraTargets lt = lora_targets(w);
  for (const auto& t : layer->tensors) {
    if (!lt.targeted(t)) continue;
    const std::string& m = t.module;
    const bool in_mlp = t.name.find("mlp") != std::string::npos;
    // GraniteMoeShared's shared_mlp: input_linear (gate and up), output_linear (down).
    if (m == "down_proj" || m == "fc2" || m == "dense_4h_to_h" || m == "w2" || (m == "c_proj" && in_mlp) ||
        m == "output_linear")
      f.down_in_saved = true;
    else if (m == "gate_proj" || m == "up_proj" || m == "gate_up_proj" || m == "fc1" || m == "c_fc" ||
             m == "dense_h_to_4h" || m == "w1" || m == "w3" || m == "input_linear")
      f.mlp_in_saved = true;
    else if (m == "o_proj" || m == "out_proj" || m == "dense" || m == "c_proj")
      f.o_in_saved = true;
    else
      f.attn_in_saved = true;  // q/k/v, fused qkv, or an unknown linear reading the attention input
  }
  return f;
}

// Activation bytes of one decoder layer for one sample of s tokens. Each term is a tensor autograd
// saves for the backward pass (PyTorch derivatives.yaml: mul saves the other operand, pow and
// silu/gelu save their input, relu/tanh/softmax/log_softmax save their output, linear saves its input
// for the weight gradient, native_layer_norm saves input + mean + rstd). Checked tensor by tensor
// against transformers 5.24 / torch 2.15 on CPU (tests/deepspeed/fixtures/0.19.8: the harness's
// saved_tensors_hooks count, dedup by storage; docs/conformance.md lists the per-op tensors). Terms of
// a few bytes per token (RMSNorm's fp32 rsqrt, LayerNorm's mean/rstd, MoE routing indices) are left
// out, as in Korthikanti et al. 2022.
struct LayerActivation {
  int64_t without_core = 0;  // everything except the attention core's s^2 tensors
  int64_t core = 0;          // eager attention scores/probabilities/dropout (recomputed by selective)
  int64_t attention = 0;     // the token mixer's part of without_core (attention block, q/k norms)
};

// Dropout with a given probability p saves a 1-byte mask (ATen Dropout.cpp: native_dropout returns
// the bool mask that its backward multiplies by); p = 0 saves nothing (`_dropout_impl` / nn.functional
// dropout return the input unchanged, Dropout.cpp `if (p == 0 || !train ...) return input`). -1 means
// the config gave no probability: GPT-style layers then keep Korthikanti's assumption (dropout on).
bool dropout_on(double p, bool gpt_style) {
  return p < 0 ? gpt_style : p > 0;
}

// Tensors of the MLP's intermediate width that a plain (fc1 -> act -> fc2) MLP's activation saves,
// fc2's input excluded (PyTorch derivatives.yaml; transformers activations.py ACT2FN):
//   gelu, gelu_pytorch_tanh, silu: one (gelu/silu save their input);
//   gelu_new (NewGELUActivation, Python ops 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))): four - pow
//     saves x, tanh saves its output, and the final product saves both 0.5*x and (1 + tanh);
//   relu: none beyond fc2's input (relu saves its output, which is fc2's input: one storage);
//   xielu (XIELUActivation._xielu_python, what transformers runs without the optional xielu CUDA
//     wheel): torch.where(x > 0, alpha_p * x * x + beta * x, (expm1(min(x, eps)) - x) * alpha_n + beta * x)
//     saves x (alpha_p * x, min), alpha_p * x (its product with x), expm1's output and expm1(...) - x
//     (its product with the trainable alpha_n): four, plus where's 1-byte condition
//     (plain_act_mask_bytes).
// Recorded: gpt2 (gelu_new) layer 262,144 B x 4 + fc2 input; opt (relu) one 262,144 B tensor.
int64_t plain_act_tensors(const std::string& act) {
  if (act == "relu") return 0;
  if (act == "gelu_new" || act == "xielu") return 4;
  return 1;
}

// Bytes per intermediate element of the masks a plain MLP's activation saves (xielu: torch.where's bool
// condition).
int64_t plain_act_mask_bytes(const std::string& act) {
  return act == "xielu" ? 1 : 0;
}

// Families whose apply_rotary_pos_emb builds q/k with torch.cat (partial rotary: Phi-3
// modeling_phi3.py `q_embed = torch.cat([(q_rot * cos) + ..., q_pass], dim=-1)`, GPT-NeoX, GLM, Phi,
// StableLM): q is then contiguous head-major, SDPA's output takes the query's strides (measured, torch
// 2.15 CPU: a head-major query gives a head-major output, a token-major one a token-major output), so
// `attn_output.reshape(*input_shape, -1)` before o_proj copies it: o_proj saves a separate e*q_width.
// RMSNorms whose saved normalised x is fp32 (layer_activation says why): Gemma's, OLMo-2/3's, and the
// zero-centred ones of Qwen3-Next and Qwen3.5 (modeling_qwen3_5.py Qwen3_5RMSNorm.forward: `output =
// self._norm(x.float()); output = output * (1.0 + self.weight.float())`, as Gemma's; recorded:
// qwen3_5_s2_n2_bf16_s128, 262,144 + 262,144 B per layer norm at 256 tokens x 256).
bool norm_saves_fp32(const std::string& t) {
  return t.rfind("gemma", 0) == 0 || t == "olmo2" || t == "olmo3" || t == "qwen3_next" ||
         t.rfind("qwen3_5", 0) == 0;
}

bool rope_by_concat(const std::string& t) {
  // Qwen3-Next and Qwen3.5 (partial rotary 0.25: modeling_qwen3_5.py apply_rotary_pos_emb ends in
  // torch.cat([q_embed, q_pass], dim=-1); recorded: qwen3_5_s2_n2_bf16_s128 saves a head-major
  // [b, heads, s, d] SDPA output and its token-major copy).
  for (const char* x :
       {"phi3", "phi", "gpt_neox", "glm", "glm4", "glm4_moe", "minimax_m2", "stablelm", "qwen3_next"})
    if (t == x) return true;
  return t.rfind("qwen3_5", 0) == 0;
}

// Bytes per token one norm of `width` saves (layer_activation's comment above its use says why).
int64_t norm_bytes(const models::ModelSpec& m, int64_t e, int64_t width, bool trains) {
  if (m.norm == models::NormKind::LayerNorm) return e * width;
  return 4 * width + (trains ? (norm_saves_fp32(m.model_type) ? 4 : e) * width : 0);
}

// The attention block's saved tensors (layer_activation): bytes per token besides the norms, the fused
// kernels' fp32 log-sum-exp and an explicit mask's copy per sample, and the core's bytes per score.
struct AttentionSaved {
  int64_t per_token = 0;
  int64_t lse_per_sample = 0;   // the fused kernels' fp32 log-sum-exp, per sample
  int64_t mask_per_sample = 0;  // a per-layer copy of an explicit attention mask, per sample
  int64_t core_per_score = 0;   // bytes per attention score (a*s^2 per sample) saved by the core
};

// Qwen3-Next / Qwen3.5 gated attention (modeling_qwen3_5.py Qwen3_5Attention.forward: `attn_output =
// attn_output * torch.sigmoid(gate)` before o_proj, the gate a view of q_proj's doubled output), bytes per
// token: sigmoid saves its output (e*qw) and the multiply saves it with the attention output, which is
// then the token-major copy whenever the query was built by torch.cat (rope_by_concat: counted by
// attention_saved only when o_proj saves it, here saved by the multiply anyway); o_proj saves the gated
// product. Recorded (qwen3_5_s2_n2_bf16_s128, layer 1): 131,072 B each at 256 tokens x 256.
int64_t gated_attention_saved(const models::ModelSpec& m, const LayerFlags& f, int64_t e, int64_t qw) {
  if (!m.gated_attention) return 0;
  return e * qw + (f.o_in_saved ? e * qw : 0) + (rope_by_concat(m.model_type) && !f.o_in_saved ? e * qw : 0);
}

AttentionSaved attention_saved(const models::ModelSpec& m, const LayerFlags& f, int64_t e, int64_t s,
                               HfAttentionPath path, bool cpu) {
  const int64_t h = m.hidden_size;
  const int64_t a = m.num_heads;
  const int64_t d = m.head_width();
  const int64_t qw = a * d;
  const int64_t kvw = m.kv_heads() * d;
  const bool eager = path == HfAttentionPath::Eager;
  const bool sdpa_math = path == HfAttentionPath::SdpaMath;
  auto norm_of = [&](int64_t width, bool trains) { return norm_bytes(m, e, width, trains); };
  AttentionSaved r;
  int64_t& per_token = r.per_token;
  int64_t& lse_per_sample = r.lse_per_sample;
  int64_t& mask_per_sample = r.mask_per_sample;
  int64_t& core_per_score = r.core_per_score;
  if (f.attn_in_saved) per_token += e * h;
  // SDPA's kernel: CUDA uses FlashAttention for 16-bit q/k/v of equal head width <= 256 and the
  // memory-efficient kernel otherwise (fp32, or a value width different from the query's, as MLA has:
  // aten/src/ATen/native/transformers/cuda/sdp_utils.cpp check_head_dim_size_flash requires q, k and v
  // of one head width, check_head_dim_size_mem_efficient only q and k). The efficient kernel's
  // logsumexp is fp32 [b, heads, ceil(s/32)*32] (cuda/attention.cu _efficient_attention_forward,
  // kAlignLSE = 32); flash's softmax_lse is fp32 [b, heads, s]. On CPU, SDPA uses its flash kernel
  // (_scaled_dot_product_flash_attention_cpu, same lse) when q/k/v share a head width and falls back to
  // the math path otherwise (sdp_utils_cpp.cpp check_head_dim_size_cpp).
  auto lse_bytes = [&](bool efficient) {
    return checked_mul(4 * a, efficient ? ceil_div(s, int64_t{32}) * 32 : s);
  };

  if (m.mla) {
    // DeepSeek-V2/V3 MLA (modeling_deepseek_v3.py DeepseekV3Attention.forward): q_a_proj ->
    // q_a_layernorm -> q_b_proj (or a plain q_proj when q_lora_rank is 0), kv_a_proj_with_mqa (same
    // input as q_a_proj: one storage) -> split -> kv_a_layernorm -> kv_b_proj. Each low-rank norm is
    // an RMSNorm of its rank; q_b_proj and kv_b_proj save the normed output (e*rank).
    const int64_t dqk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    const int64_t dv = m.v_head_dim;
    if (m.q_lora_rank > 0) per_token += norm_of(m.q_lora_rank, f.norm_weight_trainable) + e * m.q_lora_rank;
    per_token += norm_of(m.kv_lora_rank, f.norm_weight_trainable) + e * m.kv_lora_rank;
    if (eager) {
      per_token += e * a * dqk * 2 + e * a * dv + e * a * dv;  // q, k, v for the matmuls; o_proj input
      core_per_score = e == 4 ? 4 : 4 + e;
    } else if (cpu) {
      // q/k/v widths differ (dqk != dv): the CPU math fallback, which computes in fp32 for 16-bit
      // inputs (attention.cpp _scaled_dot_product_attention_math: query_acc/key_acc/value_acc
      // `.to(at::kFloat)`): matmul saves the scaled fp32 q and k^T (4*a*dqk each), matmul(attn, v)
      // the fp32 v (4*a*dv) and the fp32 probabilities (softmax's output, 4 bytes per score); the
      // head-major output is copied for o_proj (e*a*dv). Recorded (deepseek_v3, 128 tokens):
      // 98,304 + 98,304 + 65,536 + 131,072 + 32,768 B per layer.
      per_token += 4 * a * (2 * dqk + dv) + e * a * dv;
      core_per_score = 4;
    } else {
      // CUDA: the efficient kernel saves q and k (torch.cat outputs, e*a*dqk each), v (a split view
      // of kv_b_proj's output, whose whole storage e*a*(nope + dv) stays alive), the output (also
      // o_proj's input: the kernel writes it token-major) and the padded fp32 logsumexp.
      per_token += 2 * e * a * dqk + e * a * (m.qk_nope_head_dim + dv) + e * a * dv;
      lse_per_sample = lse_bytes(true);
    }
  } else if (sdpa_math) {
    // SDPA's math path (multi-query Falcon, see hf_attention_path): attention.cpp
    // _scaled_dot_product_attention_math upcasts 16-bit q, k, v to fp32 and scales q; matmul(q, k^T)
    // saves the fp32 q and k (k broadcast over the heads as a view: its own width), softmax saves its
    // fp32 output, which matmul(attn, v) saves with the fp32 v: 4 bytes per score; the mask add saves
    // nothing. The output, cast back to 16-bit, is the o_proj input.
    per_token += 4 * (qw + 2 * kvw) + (f.o_in_saved ? e * qw : 0);
    core_per_score = 4;
  } else if (eager) {
    // HF eager attention repeats K/V to all query heads (repeat_kv materialises a copy) before
    // matmul(Q, K^T) saves Q and the repeated K, and matmul(P, V) saves the repeated V.
    per_token += e * qw + e * qw + e * qw;
    if (f.o_in_saved) per_token += e * qw;
  } else {
    // SDPA / FlashAttention-2 (flash_attn_func) save q, k, v (GQA-native: k/v at kv width), the
    // output, and the fp32 log-sum-exp per head (flash_attn_interface.py _flash_attn_forward returns
    // softmax_lse, saved by FlashAttnFunc for backward). The output is o_proj's input (one storage).
    per_token += e * qw + e * kvw + e * kvw + e * qw;
    // A fused qkv projection (GPT-2 c_attn, Phi-3 qkv_proj, Falcon/NeoX query_key_value): q, k, v
    // are slices (views) of its output, so v keeps the whole e*(qw + 2kvw) storage alive; with RoPE,
    // q and k are new tensors besides it (modeling_phi3.py Phi3Attention.forward slices `qkv`).
    // Recorded: phi3 v storage 131,072 B at 128 tokens x 512 (q 256 + k 128 + v 128 wide). GPT-NeoX
    // chunks the same way (modeling_gpt_neox.py `qkv.chunk(3, dim=-1)`: views). Not Falcon: its
    // _split_heads indexes k and v with a list (`qkv[..., [-1], :]`, a copy), so no view of the fused
    // output is saved; its copies are not derived here (no Falcon fixture).
    const bool v_views_fused = m.layout == models::Layout::Phi3 || m.layout == models::Layout::GPTNeoX;
    if (m.fused_qkv && v_views_fused && m.position == models::PositionKind::Rotary)
      per_token += e * (qw + kvw);
    if (rope_by_concat(m.model_type) && f.o_in_saved) per_token += e * qw;
    const bool efficient = !cpu && (e == 4 || d > 256);
    lse_per_sample = lse_bytes(efficient || hf_attention_explicit_mask(m));
    // An explicit boolean mask (Falcon-40B/180B) sends SDPA to the memory-efficient kernel, which
    // takes an additive bias: sdpa converts the bool mask per call (attention.cpp
    // convert_boolean_attn_mask: a new [b, 1, s, s] tensor in the query's dtype) and the kernel's
    // backward keeps it (derivatives.yaml _scaled_dot_product_efficient_attention saves attn_bias):
    // e bytes per (query, key) pair per layer, not per head.
    if (hf_attention_explicit_mask(m)) mask_per_sample = checked_mul(checked_mul(e, s), s);
  }
  per_token += gated_attention_saved(m, f, e, qw);
  return r;
}

// The MLP block's saved tensors, bytes per token (layer_activation). `input_shared`: a parallel-attention
// layer whose one norm output the attention already saved; `dropout_mask`: bytes per element of the
// residual dropout's mask, 0 without one.
int64_t mlp_saved(const models::ModelSpec& m, const LayerFlags& f, int64_t e, bool moe_layer,
                  bool input_shared, int64_t dropout_mask, bool tiled) {
  const int64_t h = m.hidden_size;
  // TiledMLP (ulysses_sp.py TiledMLP.forward): the shards run under torch.no_grad() and
  // ctx.save_for_backward(x) keeps the input alone (shared with the attention when parallel).
  if (tiled && !moe_layer) return (input_shared ? 0 : e * h) + dropout_mask * h;
  // A MoE layer's tokens pass through top-k routed experts of moe_intermediate_size (Qwen2/3-MoE,
  // DeepSeek; Mixtral's experts are intermediate_size wide) plus any shared expert: the summed width
  // is ModelSpec::active_mlp_width(); a dense layer's (and a MoE model's dense layers') is
  // intermediate_size.
  const int64_t width = moe_layer ? m.active_mlp_width() : m.intermediate_size;
  int64_t mlp = 0;
  if (f.mlp_in_saved && !input_shared) mlp += e * h;  // shared input when parallel
  if (m.mlp == models::MlpKind::Gated) {
    // SwiGLU (LlamaMLP: down(act(gate(x)) * up(x))): silu saves gate(x) [e*I], the multiply saves
    // act(gate(x)) and up(x) [2e*I], down_proj saves the product [e*I] when it trains. Phi-3's fused
    // gate_up_proj gives the same bytes: silu saves the gate slice, whose storage is the whole 2I
    // output that also holds up (modeling_phi3.py Phi3MLP.forward chunk), and the multiply saves
    // act(gate) [e*I].
    mlp += 3 * e * width + (f.down_in_saved ? e * width : 0);
  } else {
    // fc1 -> act -> fc2 (Korthikanti: GeLU input 8h and fc2 input 8h for I = 4h); the activation's own
    // tensors from plain_act_tensors; relu's saved output is fc2's input (saved even when fc2 is
    // frozen).
    const bool relu = plain_act_tensors(m.activation) == 0;
    mlp += (plain_act_tensors(m.activation) * e + plain_act_mask_bytes(m.activation)) * width +
           ((f.down_in_saved || relu) ? e * width : 0);
  }
  if (moe_layer) {
    mlp += 4 * m.num_experts;  // router logits softmax (or DeepSeek's sigmoid) in fp32
    // transformers 5.x experts loop (Qwen3MoeExperts/MixtralExperts.forward): for every routed
    // (token, expert) pair, `hidden_states[token_idx]` is a gathered copy that the gate_up linear
    // saves (h), the down projection's output is saved by the multiply with the routing weight (h),
    // and the int64 token index is saved by the gather and by index_add_ (8 + 8 bytes).
    mlp += std::max<int64_t>(1, m.experts_per_token) * (2 * e * h + 16);
    // DeepSeek-V3's router runs in fp32 (modeling_deepseek_v3.py DeepseekV3TopkRouter.forward:
    // `F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32))` saves the fp32
    // input, 4h per token; recorded 131,072 B at 128 tokens x 256), besides the bf16 input the shared
    // expert saves (counted above as the MLP input).
    // GLM-4.5's Glm4MoeTopkRouter.forward and dots.llm1's Dots1TopkRouter.forward are the same fp32
    // linear (modeling_glm4_moe.py, modeling_dots1.py).
    // ERNIE-4.5-MoE's router too: F.linear(hidden_states.float(), self.weight.float())
    // (modeling_ernie4_5_moe.py Ernie4_5_MoeTopKRouter).
    if (m.model_type == "deepseek_v3" || m.model_type == "glm4_moe" || m.model_type == "dots1" ||
        m.model_type == "ernie4_5_moe")
      mlp += 4 * h;
    // A gated shared expert (Qwen2-MoE, Qwen3-Next, Qwen3.5-MoE: modeling_qwen3_5_moe.py
    // Qwen3_5MoeSparseMoeBlock.forward `F.sigmoid(self.shared_expert_gate(x)) * shared_expert_output`):
    // sigmoid saves its [tokens, 1] output and the multiply saves the shared expert's output (e*h).
    // Recorded (qwen3_5_moe_s2_n2_bf16_s128, layer 1): 512 + 131,072 B at 256 tokens x 256.
    if (m.shared_expert_gate) mlp += e + e * h;
  }
  mlp += dropout_mask * h;  // the mask after the MLP (0 without residual dropout)
  return mlp;
}

LayerActivation layer_activation(const Workload& w, const LayerFlags& f, int64_t e, bool moe_layer) {
  const auto& m = w.model;
  const int64_t s = w.train.rank_seq_len();  // per rank: Ulysses SP splits the sequence
  const int64_t h = m.hidden_size;
  const int64_t a = m.num_heads;
  const int64_t d = m.head_width();
  const int64_t qw = a * d;
  const int64_t kvw = m.kv_heads() * d;
  // The attention code HF really runs (compute_stats.h hf_attention_path): a model without an SDPA
  // path (Gemma-2, BLOOM) runs eager attention whatever --attention says, multi-query Falcon SDPA's
  // math path.
  const HfAttentionPath path =
      w.train.attention == Attention::Eager ? HfAttentionPath::Eager : hf_attention_path(m);
  const bool eager = path == HfAttentionPath::Eager;
  const bool cpu = w.train.runtime == Runtime::Cpu;
  // GPT-style layers (LayerNorm + plain MLP: GPT-2, GPT-3, OPT) may train with dropout after the
  // attention and the MLP and inside the attention (Korthikanti et al. 2022 §4.1); Llama-style
  // layers have none (attention_dropout 0.0, no residual dropout in modeling_llama.py).
  const bool gpt_style = m.norm == models::NormKind::LayerNorm && m.mlp == models::MlpKind::Plain;
  const bool resid_dropout = dropout_on(m.resid_dropout, gpt_style);
  // A dropout's saved mask: bool on CUDA (at::native_dropout, the fused kernel that
  // Dropout.cpp is_fused_kernel_acceptable picks for CUDA inputs), the scaled noise tensor in the
  // input's dtype on CPU (Dropout.cpp _dropout_impl: `noise.bernoulli_(1 - p).div_(1 - p); input *
  // noise`; recorded: seed_oss_s2_n2_bf16_default, 2 bytes per element of each residual dropout).
  const int64_t drop_mask = cpu ? e : 1;
  const bool attn_dropout = dropout_on(m.attn_dropout, gpt_style);

  // Norms. HF LlamaRMSNorm.forward upcasts the input to fp32, then pow(2) and the multiply by
  // rsqrt both save that fp32 copy (4w bytes per token), and `weight * x.to(dtype)` saves the
  // normalised x (e*w) when the weight is trained. Gemma's RMSNorm (modeling_gemma2.py
  // Gemma2RMSNorm.forward: `output = self._norm(x.float()); output = output * (1.0 +
  // self.weight.float())`) keeps the normalised output in fp32: 4w + 4w when the weight trains
  // (recorded: gemma2 131,072 + 131,072 B per norm at 128 tokens x 256). nn.LayerNorm saves its input
  // (e*w; its mean and rstd, 2 values per token, are below Korthikanti's resolution and left out).
  // OLMo-2/3's RMSNorm (modeling_olmo3.py Olmo3RMSNorm.forward: `(self.weight * hidden_states)
  // .to(input_dtype)` with hidden_states still fp32) multiplies the weight in fp32 too: the normalised x
  // it saves is fp32 (4w), its output cast back to the compute dtype (recorded:
  // olmo3_s2_n2_bf16_default, q/k norms and both post-norms).
  auto norm_of = [&](int64_t width, bool trains) { return norm_bytes(m, e, width, trains); };
  const int64_t norm = norm_of(h, f.norm_weight_trainable);
  // Parallel attention (Falcon-7B, GPT-J): one norm feeds both branches; Falcon-40B's
  // new_decoder_architecture has ln_attn and ln_mlp (modeling_falcon.py FalconDecoderLayer).
  const bool shared_input = m.parallel_attention && !m.new_decoder_architecture;
  const int64_t num_norms = (shared_input ? 1 : 2) + (m.extra_norms ? 2 : 0);

  int64_t per_token = num_norms * norm;
  // Attention block. Korthikanti Table 2 terms in brackets (bytes per token, 16-bit, b=1):
  //   QKV input [2h], Q and K [4h], V [2h], output-projection input [2h], output dropout mask [h].
  const AttentionSaved as = attention_saved(m, f, e, s, path, cpu);
  per_token += as.per_token;
  const int64_t lse_per_sample = as.lse_per_sample, mask_per_sample = as.mask_per_sample;
  int64_t core_per_score = as.core_per_score;
  if (resid_dropout) per_token += drop_mask * h;  // the mask after the attention output projection
  // Query/key norms (Qwen3, Gemma-3: RMSNorm(head_dim) on every head, modeling_qwen3.py
  // Qwen3Attention.forward `self.q_norm(self.q_proj(...).view(hidden_shape))`; OLMo-2: over the full
  // width; Cohere/Phi: LayerNorm): the same norm terms at q and k width. Recorded: qwen3_moe q_norm
  // 131,072 + 65,536 B, k_norm 65,536 + 32,768 B per layer at 128 tokens.
  if (m.qk_norm != models::QkNorm::None) {
    const bool ln = m.qk_norm == models::QkNorm::HeadMatrix || m.qk_norm == models::QkNorm::PhiPerHead;
    per_token +=
        ln ? e * (qw + kvw) : norm_of(qw, f.norm_weight_trainable) + norm_of(kvw, f.norm_weight_trainable);
  }

  const int64_t mixer_per_token = per_token - num_norms * norm;

  per_token += mlp_saved(m, f, e, moe_layer, shared_input && f.attn_in_saved, resid_dropout ? drop_mask : 0,
                         w.train.tiled_mlp);

  LayerActivation r;
  r.without_core = checked_add(checked_mul(per_token, s), lse_per_sample);
  r.attention = checked_add(checked_mul(mixer_per_token, s), lse_per_sample);
  const int64_t ss = checked_mul(checked_mul(a, s), s);
  if (eager && !m.mla) {
    // Per sample: the scores softmax'ed in fp32 (`softmax(..., dtype=torch.float32)` saves its
    // fp32 output, 4*a*s^2) then cast to the compute dtype and saved by matmul with V (e*a*s^2).
    // With dropout (GPT-style; Korthikanti's 5as^2b = softmax output 2 + mask 1 + dropout output 2):
    // softmax output, mask, dropout output.
    if (attn_dropout)
      core_per_score = e + drop_mask + e;  // Korthikanti: 2 + 1 + 2 = 5 bytes per score in 16-bit
    else
      core_per_score = e == 4 ? 4 : 4 + e;  // fp32 softmax output, plus its 16-bit cast when e = 2
    // Gemma-2 soft-capping (modeling_gemma2.py eager_attention_forward: `attn_weights / softcap;
    // tanh; * softcap`): tanh saves its output, e per score (recorded: 65,536 B per layer at b 2,
    // 4 heads, s 64, bf16).
    if (m.attn_logit_softcapping > 0) core_per_score += e;
  }
  r.core = checked_add(checked_mul(ss, core_per_score), mask_per_sample);
  return r;
}

// The parameter counts and tensor tables of the inventory `inv` (compute_memory_stats): totals, trainable
// and frozen tensors (QLoRA's NF4 ones), LoRA's adapters, module and layer sizes. Returns the adapters'
// elements; `first_decoder` receives the first decoder layer.
int64_t count_parameters(const Workload& w, const std::vector<models::LayerInventory>& inv,
                         const LoraTargets& lt, MemoryStats& st,
                         const models::LayerInventory*& first_decoder) {
  const auto& m = w.model;
  const bool lora = w.train.method != Method::Full;
  const bool qlora = w.train.method == Method::QLoRA;
  const int64_t r = w.train.lora_rank;
  std::unordered_map<std::string, int64_t> module_numel;
  int64_t adapters = 0;
  for (const auto& layer : inv) {
    if (layer.is_decoder_layer && first_decoder == nullptr) first_decoder = &layer;
    int64_t layer_numel = 0;
    int64_t moe_block_numel = 0;  // the layer's MoE block, fetched whole when it is a ZeRO-3 leaf
    for (const auto& t : layer.tensors) {
      const int64_t n = t.numel();
      layer_numel += n;
      st.total_params += n;
      module_numel[module_path(t.name)] += n;
      if (!layer.moe_block.empty() && t.name.rfind(layer.moe_block + ".", 0) == 0) moe_block_numel += n;
      if (layer.is_decoder_layer && !t.is_bias && (t.is_linear || t.shape.size() == 3) && !qlora)
        st.decoder_matmul_weights.add(n);
      if (!lora && !t.frozen) {
        st.trainable_tensors.add(n);
        continue;
      }
      st.frozen_tensors.add(n);
      st.frozen_params += n;
      // bitsandbytes replaces every nn.Linear with Linear4bit except the modules transformers keeps
      // in 16-bit (integrations/bitsandbytes.py get_keys_to_not_convert: the output embedding,
      // lm_head); biases of quantised linears stay 16-bit.
      if (qlora && t.is_linear && !t.is_bias && t.module != "lm_head") {
        st.frozen_quantized_params += n;
        st.frozen_quantized_bytes += nf4_bytes(n);
        st.largest_quantized_numel = std::max(st.largest_quantized_numel, n);
      } else {
        st.frozen_16bit_params += n;
      }
      if (lora && lt.targeted(t) && t.shape.size() == 2) {
        // PEFT lora.Linear: lora_A [r, in], lora_B [out, r] (HF Linear weight is [out, in]);
        // lora.Embedding [rows, dim]: lora_embedding_A [r, rows], lora_embedding_B [dim, r].
        const int64_t a_n = checked_mul(r, t.shape[1]);
        const int64_t b_n = checked_mul(t.shape[0], r);
        st.trainable_tensors.add(a_n);
        st.trainable_tensors.add(b_n);
        adapters += a_n + b_n;
      }
    }
    st.largest_layer_numel = std::max(st.largest_layer_numel, layer.is_decoder_layer ? layer_numel : 0);
    if (moe_block_numel > st.largest_moe_block_numel) {
      st.largest_moe_block_numel = moe_block_numel;
      st.moe_block_class = layer.moe_block_class;
    }
  }
  // Tied output layer targeted explicitly: PEFT wraps the lm_head Linear (the embedding's weight).
  if (lora && m.tie_word_embeddings && !lt.all_linear && lt.wants(lt.output_module)) {
    st.trainable_tensors.add(checked_mul(r, m.vocab_size));
    st.trainable_tensors.add(checked_mul(m.hidden_size, r));
    adapters += r * (m.vocab_size + m.hidden_size);
  }
  for (const auto& [name, n] : module_numel) st.largest_module_numel = std::max(st.largest_module_numel, n);
  if (st.largest_layer_numel == 0) st.largest_layer_numel = st.largest_module_numel;

  return adapters;
}

// The rotary cos/sin tables and position ids the layers save, one storage per micro-batch (ERNIE-4.5: a
// pair per layer); 0 for models without them. compute_memory_stats's activations.
int64_t rope_table_bytes(const models::ModelSpec& m, int64_t e, int64_t s) {
  int64_t rope = 0;
  // RoPE: LlamaRotaryEmbedding.forward (modeling_llama.py; the same in the Mistral/Qwen2/Qwen3/
  // Mixtral/Gemma/Phi-3 files) computes cos and sin of shape [1, s, head_dim] in the compute dtype
  // for the batch (position_ids [1, s], int64), and every layer's apply_rotary_pos_emb saves them:
  // one storage each for the micro-batch. Recorded: 2 x 64 x 64 x 2 + 64 x 8 = 16,896 bytes at s = 64,
  // head_dim 64, bf16 (tests/deepspeed/fixtures/0.19.8/llama-gqa_*: layer 0 saves 16,384 + 512 more
  // than layer 1; with gradient checkpointing they are most of the difference to the layer inputs).
  for (const char* t : {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "gemma",
                        "gemma2", "gemma3", "gemma3_text", "phi3", "seed_oss", "phimoe", "olmo2", "olmo3",
                        "exaone4", "smollm3", "arcee"})
    if (m.model_type == t) {
      const int64_t d = m.head_width();
      // OLMo-2/3's rotary embedding returns cos and sin in fp32 (modeling_olmo3.py
      // Olmo3RotaryEmbedding.forward `return cos, sin`, where Llama's casts them to x.dtype); recorded:
      // olmo3_s2_n2_bf16_default layer 0 saves 32,768 B more than layer 1 at s = 64, head_dim 64.
      const int64_t te = m.model_type == "olmo2" || m.model_type == "olmo3" ? 4 : e;
      rope = checked_add(checked_mul(checked_mul(2 * te, s), d), checked_mul(8, s));
    }
  if (m.model_type == "ernie4_5" || m.model_type == "ernie4_5_moe") {
    // ERNIE-4.5's apply_rotary_pos_emb (modeling_ernie4_5.py) interleaves cos and sin in every layer
    // (`cos[..., : d // 2].repeat_interleave(2, dim=-1)`, fp32 [1, s, d]): each layer saves its own
    // pair, and the shared tables are not saved. Recorded (ernie4_5_s2_n2_bf16_default): both layers
    // save 32,768 B more than Llama's second layer at s = 64, head_dim 64, = 2 x 4 x s x d. Counted
    // with the shared tables (once per micro-batch per layer); under full checkpointing only the
    // recomputed layer holds its pair, so this overstates by (L - 1) pairs there.
    const int64_t d = m.head_width();
    rope = checked_mul(m.num_layers, checked_mul(checked_mul(2 * 4, s), d));
  }
  return rope;
}

// The head's and the loss's saved tensors, and the frozen linear inputs ZeRO-3's linear wrapper keeps
// (compute_memory_stats's activations).
void head_and_loss_stats(const Workload& w, const LoraTargets& lt, const LayerFlags& f,
                         const models::LayerInventory* first_decoder, MemoryStats& st) {
  const auto& m = w.model;
  const bool fp32 = w.train.precision == Precision::FP32;
  const bool lora = w.train.method != Method::Full;
  const int64_t e = st.act_elem_bytes;
  const int64_t s = w.train.rank_seq_len();  // per rank: Ulysses SP splits the sequence
  const int64_t h = m.hidden_size;
  const int64_t V = m.vocab_size;
  ActivationStats& act = st.act;
  // Head: the final norm (as a decoder norm) and the lm_head input (when lm_head trains).
  // (Gemma's RMSNorm keeps its normalised output in fp32, as in layer_activation.)
  // (OLMo-2/3's: its normalised x, multiplied by the weight in fp32, likewise.)
  const int64_t final_norm_out = norm_saves_fp32(m.model_type) ? 4 : e;
  const int64_t final_norm =
      m.norm == models::NormKind::RMSNorm ? 4 * h + (lora ? 0 : final_norm_out * h) : e * h;
  const bool head_trains = !lora || (!lt.all_linear && lt.wants(lt.output_module));
  act.head_per_sample = checked_mul(final_norm + (head_trains ? e * h : 0), s);
  act.head_input_per_sample = head_trains ? checked_mul(e * h, s) : 0;
  // ZeRO-3: deepspeed.zero.Init (partition_parameters.py _enable_mem_efficient_linear, on with the
  // default zero_optimization.memory_efficient_linear = true, zero/config.py) sets
  // torch.nn.functional.linear = zero3_linear_wrap, and LinearFunctionForZeroStage3.setup_context
  // (zero/linear.py) calls ctx.save_for_backward(input, weight, bias) whatever requires grad: a frozen
  // linear then saves its input too. Under LoRA that adds the LM head's input (recorded:
  // llama-gqa_s3_n2_bf16_lora head_and_loss 1,246,724 B vs 1,181,188 at stage 2: +65,536 = 128 tokens x
  // 256 x 2 B; the decoder layers are equal, every linear there has an adapter saving the same input)
  // and, with explicit targets, the inputs of the untargeted decoder linears. QLoRA's 4-bit linears
  // call bitsandbytes' matmul_4bit, not F.linear, so only its 16-bit head counts.
  if (lora && !head_trains) act.stage3_frozen_head_input_per_sample = checked_mul(e * h, s);
  if (w.train.method == Method::LoRA && first_decoder != nullptr) {
    LayerFlags all = f;
    all.attn_in_saved = all.o_in_saved = all.mlp_in_saved = all.down_in_saved = true;
    act.stage3_frozen_linear_inputs_per_layer = layer_activation(w, all, e, m.is_moe()).without_core -
                                                layer_activation(w, f, e, m.is_moe()).without_core;
  }
  // Gemma-2 final_logit_softcapping (modeling_gemma2.py Gemma2ForCausalLM.forward: `logits / cap;
  // tanh; * cap`): tanh saves its output, the logits in the compute dtype (recorded: 524,288 B =
  // 128 tokens x 2048 x 2).
  if (m.final_logit_softcapping > 0)
    act.head_per_sample = checked_add(act.head_per_sample, checked_mul(checked_mul(e, V), s));
  // Logits and loss as HF LlamaForCausalLM computes them (transformers >= 4.46,
  // models/llama/modeling_llama.py forward -> loss/loss_utils.py ForCausalLMLoss): lm_head produces
  // logits in the compute dtype, ForCausalLMLoss does `logits = logits.float()` and
  // cross_entropy = log_softmax + nll_loss; log_softmax saves its fp32 output for backward.
  act.logits_per_sample = checked_mul(checked_mul(e, V), s);
  act.logprobs_fp32_per_sample = checked_mul(checked_mul(4, V), s);
  act.logits_fp32_upcast_per_sample = fp32 ? 0 : checked_mul(checked_mul(4, V), s);
}

// compute_memory_stats's activations: per decoder layer by checkpointing mode, LoRA's adapter outputs,
// the causal mask, the layer inputs, the embedding, the rotary tables, the head and the loss.
void activation_stats(const Workload& w, const std::vector<models::LayerInventory>& inv,
                      const LoraTargets& lt, const models::LayerInventory* first_decoder, MemoryStats& st) {
  const auto& m = w.model;
  const bool lora = w.train.method != Method::Full;
  // Activations.
  const int64_t e = st.act_elem_bytes;
  const int64_t s = w.train.rank_seq_len();  // per rank: Ulysses SP splits the sequence
  const int64_t h = m.hidden_size;
  const LayerFlags f = layer_flags(w, first_decoder);
  // The repeated layer is a MoE one for MoE models; dense layers among them (DeepSeek's
  // first_k_dense_replace, Qwen-MoE's mlp_only_layers: ModelSpec::is_moe_layer) save their own bytes,
  // and the difference is carried with the layer count (layers_unsaved_per_sample below).
  const LayerActivation la = layer_activation(w, f, e, m.is_moe());
  ActivationStats& act = st.act;
  act.known = true;
  act.num_layers = m.num_layers;
  act.layer_full_per_sample = checked_add(la.without_core, la.core);
  act.layer_selective_per_sample = la.without_core;
  if (m.is_moe()) {
    const LayerActivation dense = layer_activation(w, f, e, false);
    int64_t dense_layers = 0;
    for (int64_t i = 0; i < m.num_layers; ++i) dense_layers += m.is_moe_layer(i) ? 0 : 1;
    // Same attention core in both, so one difference serves full and selective recomputation.
    act.first_layer_unsaved_per_sample = checked_add(
        act.first_layer_unsaved_per_sample, checked_mul(dense_layers, la.without_core - dense.without_core));
  }
  act.recomputed_layer_per_sample = act.layer_full_per_sample;
  if (m.has_linear_attention()) {
    // Hybrids (Qwen3-Next, Qwen3.5: Gated DeltaNet; Granite-4.0-H: Mamba-2): the repeated layer is an
    // attention layer; each other layer saves its mixer's bytes (planner/gated_delta_net.cpp,
    // planner/mamba2.cpp) in place of the attention block's, and no attention core. Norms and MLP are the
    // same in every kind.
    for (const models::LayerKind kind : {models::LayerKind::GatedDeltaNet, models::LayerKind::Mamba2}) {
      const int64_t layers = m.layers_of_kind(kind);
      if (layers == 0) continue;
      const int64_t mixer =
          kind == models::LayerKind::GatedDeltaNet
              ? gdn_mixer_saved_per_sample(m, {f.attn_in_saved, f.o_in_saved, f.norm_weight_trainable}, e, s,
                                           gdn_kernels(w))
              : mamba2_mixer_saved_per_sample(m, {f.attn_in_saved, f.o_in_saved, f.norm_weight_trainable}, e,
                                              s, mamba2_kernels(w));
      const int64_t layer = checked_add(la.without_core - la.attention, mixer);
      act.first_layer_unsaved_per_sample =
          checked_add(act.first_layer_unsaved_per_sample, checked_mul(layers, la.without_core - layer));
      act.core_unsaved_per_sample = checked_add(act.core_unsaved_per_sample, checked_mul(layers, la.core));
      act.recomputed_layer_per_sample = std::max(act.recomputed_layer_per_sample, layer);
    }
  }
  if (lora && first_decoder != nullptr) {
    // PEFT lora.Linear.forward adds lora_B(lora_A(dropout(x))) * scaling: lora_B's weight gradient
    // needs its input, lora_A's output, r elements per token per adapter. Recorded: 7 adapters x r 8
    // x 2 B x 128 tokens = 14,336 B per layer (tests/deepspeed/fixtures/0.19.8/llama-gqa_*_lora).
    int64_t adapters_in_layer = 0;
    for (const auto& t : first_decoder->tensors)
      if (lt.targeted(t) && t.shape.size() == 2) ++adapters_in_layer;
    const int64_t mid = checked_mul(checked_mul(checked_mul(e, w.train.lora_rank), s), adapters_in_layer);
    act.layer_full_per_sample = checked_add(act.layer_full_per_sample, mid);
    act.layer_selective_per_sample = checked_add(act.layer_selective_per_sample, mid);
    // The embeddings are frozen unless targeted, so the first layer's input requires no gradient and
    // its first norm saves nothing: RMSNorm's fp32 upcast (4h) and fp32 variance/rsqrt (8) per token,
    // LayerNorm's input (e*h) and mean/rstd (8). Recorded: llama-gqa layer 0 saves 132,096 B
    // (= 128 tokens x (4 x 256 + 8)) less than layer 1 under LoRA.
    bool embedding_trains = false;
    for (const auto& layer : inv)
      for (const auto& t : layer.tensors) embedding_trains |= t.is_embedding && lt.targeted(t);
    if (!embedding_trains)
      act.first_layer_unsaved_per_sample +=
          checked_mul(s, (m.norm == models::NormKind::RMSNorm ? 4 * h : e * h) + 8);
  }
  // The [b, 1, s, s] causal mask every layer receives as an argument (transformers masking_utils
  // create_causal_mask): a float mask in the compute dtype for eager attention, a boolean one that
  // Falcon hands to SDPA (1 byte); none where SDPA is told is_causal. One storage for the micro-batch,
  // kept for the backward by checkpointed layers (memory_model.cpp).
  {
    const HfAttentionPath path =
        w.train.attention == Attention::Eager ? HfAttentionPath::Eager : hf_attention_path(m);
    const int64_t mask_elem = path == HfAttentionPath::Eager ? e : hf_attention_explicit_mask(m) ? 1 : 0;
    act.causal_mask_per_sample = checked_mul(checked_mul(mask_elem, s), s);
  }
  // torch.utils.checkpoint (HF gradient_checkpointing_enable, and DeepSpeed's
  // activation_checkpointing.checkpointing.checkpoint) keeps the layer's input hidden states.
  act.layer_input_per_sample = checked_mul(e * h, s);
  const bool gpt_style = m.norm == models::NormKind::LayerNorm && m.mlp == models::MlpKind::Plain;
  // Embedding: the lookup saves only the token ids; GPT-style models apply dropout to the embedding
  // output (a 1-byte mask per element, Korthikanti §4.3 "input embeddings") when its probability is
  // not 0 (GPT-2 embd_pdrop; OPT applies none).
  // (On CPU the mask is the input-dtype noise tensor, as in layer_activation.)
  const int64_t embd_mask = w.train.runtime == Runtime::Cpu ? st.act_elem_bytes : 1;
  act.embedding_per_sample = dropout_on(m.embd_dropout, gpt_style) ? checked_mul(embd_mask * h, s) : 0;
  // Images (planner/vision.h): the image features replace their placeholder tokens' embeddings through
  // inputs_embeds.masked_scatter(mask, features), whose backward keeps the mask, a bool per token expanded
  // over the hidden size (modeling_qwen2_5_vl.py get_placeholder_mask). Recorded qwen2_5_vl_img_*: +128 B
  // = 2 samples x 64 tokens over the text-only fixture; the frozen tower itself saves nothing.
  if (w.train.images_per_sample > 0) act.embedding_per_sample = checked_add(act.embedding_per_sample, s);
  act.rope_tables = rope_table_bytes(m, e, s);
  head_and_loss_stats(w, lt, f, first_decoder, st);
}

}  // namespace

MemoryStats compute_memory_stats(const Workload& w) {
  MemoryStats st;
  const auto& m = w.model;
  const bool fp32 = w.train.precision == Precision::FP32;
  st.param_elem_bytes = fp32 ? 4 : 2;
  st.act_elem_bytes = fp32 ? 4 : 2;
  st.params_only = m.params_only;

  if (m.params_only) {
    if (w.train.method != Method::Full)
      throw UserError("--method lora/qlora needs the model's architecture; use --model instead of --params");
    st.total_params = m.num_parameters();
    st.trainable_params = st.total_params;
    // Only the count is known: treat the model as one tensor (no per-parameter padding, no
    // persistent small parameters), which is exactly the ZeRO paper's accounting.
    st.trainable_tensors.add(st.total_params);
    st.trainable_tensors.finish();
    st.frozen_tensors.finish();
    st.decoder_matmul_weights.finish();
    // Module sizes are unknown: stage-3 gathering is then bounded by the prefetch bucket alone.
    st.largest_module_numel = 0;
    st.largest_layer_numel = 0;
    st.act.known = false;
    return st;
  }

  // The inventory is the source of truth for tensor sizes (models/model_spec.h). Full fine-tuning
  // uses the runtime tree (transformers 5 fuses a MoE block's experts into 3-D tensors: what ZeRO-3
  // partitions, persists and gathers; models/runtime_inventory.cpp); LoRA keeps the checkpoint names
  // PEFT targets.
  const bool lora = w.train.method != Method::Full;
  // A vision-language model's tower and projector come first, as the wrapper registers them
  // (planner/vision.h).
  const std::vector<models::LayerInventory> inv =
      with_vision(w, lora ? m.inventory() : m.runtime_inventory());
  const int64_t r = w.train.lora_rank;
  const LoraTargets lt = lora_targets(w);
  const models::LayerInventory* first_decoder = nullptr;
  const int64_t adapters = count_parameters(w, inv, lt, st, first_decoder);
  if (lora) {
    // models::lora_trainable_parameters is the count users compare with PEFT's print; the tensor
    // table above gives the per-tensor sizes stage 3 partitions.
    st.lora_params = models::lora_trainable_parameters(m, r, w.train.lora_targets);
    if (st.lora_params != adapters && st.lora_params > adapters)
      st.trainable_tensors.add(st.lora_params - adapters);  // keep the totals consistent
    st.trainable_params = st.lora_params;
  } else {
    // Full fine-tuning: every parameter but those the model itself freezes (requires_grad False).
    st.trainable_params = st.total_params - st.frozen_params;
  }
  st.trainable_tensors.finish();
  st.frozen_tensors.finish();
  st.decoder_matmul_weights.finish();

  activation_stats(w, inv, lt, first_decoder, st);
  return st;
}

}  // namespace zeroplan::planner
