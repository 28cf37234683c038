// The layer inventory: every parameter tensor of the HF model, named as in the real checkpoint, in
// forward order, grouped the way DeepSpeed stage 3 gathers them (embedding, each decoder layer,
// final norm, LM head). Shapes follow nn.Linear's [out_features, in_features]; GPT-2's Conv1D
// stores the transpose in its checkpoint, which changes no count.
//
// Module trees read from transformers' modeling files (v4.4x; the Llama-layout families of
// transformers 5.24, each checked against a meta-device model by tests/test_models_hf.cpp):
//   Llama/Mistral/Mixtral/Qwen2/Qwen3/Qwen2-MoE/Qwen3-MoE/DeepSeek-V2/V3/gpt-oss/Llama-4 text/
//   Gemma 1-3/OLMo-2/OLMoE/Granite/GLM-4/Starcoder2/Cohere: models/<family>/modeling_<family>.py
//   Phi-3: models/phi3/modeling_phi3.py (qkv_proj, gate_up_proj)
//   OLMo-1/StableLM/GLM (glm)/Cohere2/GraniteSWA/FlexOlmo/Solar-Open/EXAONE-MoE/Mellum/Kolibri1 and
//   Sarvam-MoE (built as GLM-4-MoE): models/<family>/modeling_<family>.py of transformers 5.24
//   Qwen3-Next (Gated DeltaNet and gated-attention layers): models/qwen3_next/modeling_qwen3_next.py;
//   Qwen3.5 text models: models/qwen3_5/modeling_qwen3_5.py, models/qwen3_5_moe/modeling_qwen3_5_moe.py
//   GPT-2: models/gpt2/modeling_gpt2.py; OPT: models/opt/modeling_opt.py;
//   BLOOM: models/bloom/modeling_bloom.py; Falcon: models/falcon/modeling_falcon.py;
//   GPT-NeoX: models/gpt_neox/modeling_gpt_neox.py
#include <string>

#include "common/errors.h"
#include "models/group_builder.h"
#include "models/model_spec.h"

namespace zeroplan::models {
namespace {

// A gated MLP (gate_proj, up_proj, down_proj) of width f under `prefix` (or fused gate_up_proj).
void gated_mlp(const ModelSpec& m, GroupBuilder& g, const std::string& prefix, int64_t f, bool bias) {
  const int64_t h = m.hidden_size;
  if (m.fused_gate_up) {
    g.linear(prefix + ".gate_up_proj", 2 * f, h, bias);
  } else {
    g.linear(prefix + ".gate_proj", f, h, bias);
    g.linear(prefix + ".up_proj", f, h, bias);
  }
  g.linear(prefix + ".down_proj", h, f, bias);
}

// The attention block of a Llama-layout layer.
void llama_attention(const ModelSpec& m, GroupBuilder& g) {
  const int64_t h = m.hidden_size, q = m.num_heads * m.head_dim, kv = m.num_kv_heads * m.head_dim;
  if (m.mla) {
    // DeepSeek MLA (modeling_deepseek_v3.py DeepseekV3Attention): queries through a low-rank
    // q_a_proj -> q_a_layernorm -> q_b_proj (or one q_proj when q_lora_rank is null); keys/values
    // through kv_a_proj_with_mqa [kv_lora_rank + rope dim] -> kv_a_layernorm -> kv_b_proj
    // [heads * (nope + v)]; o_proj from heads * v_head_dim. Biases: q_a/kv_a/o_proj use
    // attention_bias, q_b/kv_b/q_proj none.
    const int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    if (m.q_lora_rank > 0) {
      g.linear("self_attn.q_a_proj", m.q_lora_rank, h, m.attention_bias);
      g.norm("self_attn.q_a_layernorm", m.q_lora_rank, false);
      g.linear("self_attn.q_b_proj", m.num_heads * qk, m.q_lora_rank, false);
    } else {
      g.linear("self_attn.q_proj", m.num_heads * qk, h, false);
    }
    g.linear("self_attn.kv_a_proj_with_mqa", m.kv_lora_rank + m.qk_rope_head_dim, h, m.attention_bias);
    g.norm("self_attn.kv_a_layernorm", m.kv_lora_rank, false);
    g.linear("self_attn.kv_b_proj", m.num_heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank, false);
    g.linear("self_attn.o_proj", h, m.num_heads * m.v_head_dim, m.attention_bias);
    return;
  }
  const bool qkv_bias = m.attention_bias || m.qkv_bias_only;
  const bool o_bias = m.attention_bias && !m.qkv_bias_only;
  if (m.attention_sinks) g.param("self_attn.sinks", {m.num_heads});  // gpt-oss: one logit per head
  if (m.fused_qkv) {
    g.linear("self_attn.qkv_proj", q + 2 * kv, h, qkv_bias);
  } else {
    // Qwen3NextAttention: q_proj is twice as wide, the second half the output gate.
    g.linear("self_attn.q_proj", m.gated_attention ? 2 * q : q, h, qkv_bias);
    g.linear("self_attn.k_proj", kv, h, qkv_bias);
    g.linear("self_attn.v_proj", kv, h, qkv_bias);
  }
  // PhiAttention calls its output projection "dense" (modeling_phi.py).
  g.linear(m.layout == Layout::Phi ? "self_attn.dense" : "self_attn.o_proj", h, q, o_bias);
  switch (m.qk_norm) {
    case QkNorm::None:
      break;
    case QkNorm::PerHead:  // Qwen3Attention / Gemma3Attention: RMSNorm(head_dim)
      // HunYuanDenseV1Attention names them query_layernorm / key_layernorm.
      g.norm(m.model_type.rfind("hunyuan_v1_", 0) == 0 ? "self_attn.query_layernorm" : "self_attn.q_norm",
             m.head_dim, false);
      g.norm(m.model_type.rfind("hunyuan_v1_", 0) == 0 ? "self_attn.key_layernorm" : "self_attn.k_norm",
             m.head_dim, false);
      break;
    case QkNorm::FullWidth:  // Olmo2Attention: RMSNorm(heads*head_dim), RMSNorm(kv_heads*head_dim);
      // OlmoeAttention: RMSNorm(hidden), RMSNorm(hidden/heads*kv_heads) -- the same without head_dim
      g.norm("self_attn.q_norm", m.model_type == "olmoe" ? h : q, false);
      g.norm("self_attn.k_norm", m.model_type == "olmoe" ? h / m.num_heads * m.num_kv_heads : kv, false);
      break;
    case QkNorm::PhiPerHead:  // PhiAttention qk_layernorm: nn.LayerNorm(head_dim), affine with bias
      g.norm("self_attn.q_layernorm", m.head_dim, true);
      g.norm("self_attn.k_layernorm", m.head_dim, true);
      break;
    case QkNorm::HeadMatrix:  // CohereAttention: CohereLayerNorm([heads, head_dim]), weight only
      g.param("self_attn.q_norm.weight", {m.num_heads, m.head_dim}, "q_norm", true);
      g.param("self_attn.k_norm.weight", {m.num_kv_heads, m.head_dim}, "k_norm", true);
      break;
  }
}

// A Gated DeltaNet token mixer (transformers 5.24 models/qwen3_next/modeling_qwen3_next.py
// Qwen3NextGatedDeltaNet.__init__), named as Qwen/Qwen3-Next-80B-A3B's checkpoint stores it:
//   in_proj_qkvz Linear(h, 2 * key_dim + 2 * value_dim), in_proj_ba Linear(h, 2 * value heads), no biases;
//   conv1d: a depthwise nn.Conv1d over conv_dim = 2 * key_dim + value_dim channels (groups = channels,
//   bias=False), weight [conv_dim, 1, kernel];
//   dt_bias and A_log: one value per value head, parameters of the module itself;
//   norm: Qwen3NextRMSNormGated(head_v_dim), weight only; out_proj Linear(value_dim, h), no bias.
// Listed in forward order: the module's own dt_bias and A_log first (ZeRO-3 gathers a module's direct
// parameters in its pre-forward hook, before any submodule runs), then the projections, the
// convolution (whose weight the forward reads directly, conv1d.weight.squeeze(1), without calling the
// Conv1d module), the gated norm and out_proj.
void gated_delta_net(const ModelSpec& m, GroupBuilder& g) {
  const int64_t h = m.hidden_size, hv = m.linear_num_value_heads;
  const int64_t key_dim = m.linear_num_key_heads * m.linear_key_head_dim;
  const int64_t value_dim = hv * m.linear_value_head_dim;
  g.param("linear_attn.dt_bias", {hv});
  g.param("linear_attn.A_log", {hv});
  if (m.model_type.rfind("qwen3_5", 0) == 0) {
    // Qwen3_5GatedDeltaNet / Qwen3_5MoeGatedDeltaNet (modeling_qwen3_5.py, modeling_qwen3_5_moe.py): the
    // same module with the input projection split, in forward order in_proj_qkv [2 * key_dim + value_dim,
    // h], in_proj_z [value_dim, h], in_proj_b and in_proj_a [value heads, h], no biases.
    g.linear("linear_attn.in_proj_qkv", 2 * key_dim + value_dim, h, false);
    g.linear("linear_attn.in_proj_z", value_dim, h, false);
    g.linear("linear_attn.in_proj_b", hv, h, false);
    g.linear("linear_attn.in_proj_a", hv, h, false);
  } else {
    g.linear("linear_attn.in_proj_qkvz", 2 * key_dim + 2 * value_dim, h, false);
    g.linear("linear_attn.in_proj_ba", 2 * hv, h, false);
  }
  g.param("linear_attn.conv1d.weight", {2 * key_dim + value_dim, 1, m.linear_conv_kernel_dim}, "conv1d");
  g.norm("linear_attn.norm", m.linear_value_head_dim, false);
  g.linear("linear_attn.out_proj", h, value_dim, false);
}

// A Mamba-2 token mixer (transformers 5.24 models/granitemoehybrid/modeling_granitemoehybrid.py
// GraniteMoeHybridMambaLayer.__init__), named as the Granite-4.0-H checkpoints store it:
//   in_proj Linear(h, inner + conv_dim + heads) (gate z, x/B/C, dt), bias = mamba_proj_bias;
//   conv1d: a depthwise nn.Conv1d over conv_dim = inner + 2 x groups x state channels, weight
//   [conv_dim, 1, kernel], bias [conv_dim] when mamba_conv_bias;
//   dt_bias, A_log and D: one value per head, parameters of the module itself;
//   norm: GraniteMoeHybridRMSNormGated(inner), weight only; out_proj Linear(inner, h), bias =
//   mamba_proj_bias.
// Listed in forward order: the module's own dt_bias, A_log and D first (ZeRO-3 gathers a module's direct
// parameters in its pre-forward hook), then in_proj, the convolution (read directly,
// conv1d.weight.squeeze(1), without calling the Conv1d module), the gated norm and out_proj.
void mamba2_mixer(const ModelSpec& m, GroupBuilder& g) {
  const int64_t h = m.hidden_size, heads = m.mamba_n_heads, inner = m.mamba_intermediate;
  const int64_t conv = m.mamba_conv_dim();
  g.param("mamba.dt_bias", {heads});
  g.param("mamba.A_log", {heads});
  g.param("mamba.D", {heads});
  g.linear("mamba.in_proj", inner + conv + heads, h, m.mamba_proj_bias);
  g.param("mamba.conv1d.weight", {conv, 1, m.mamba_d_conv}, "conv1d");
  if (m.mamba_conv_bias) g.param("mamba.conv1d.bias", {conv}, "conv1d");
  g.norm("mamba.norm", inner, false);
  g.linear("mamba.out_proj", h, inner, m.mamba_proj_bias);
}

// The MoE block of a Llama-layout layer (names as the Hub checkpoints store them).
void moe_block(const ModelSpec& m, GroupBuilder& g) {
  const int64_t h = m.hidden_size, f = m.moe_intermediate_size, E = m.num_experts;
  switch (m.moe_style) {
    case MoeStyle::None:
      break;
    case MoeStyle::Mixtral:
      if (m.model_type == "granitemoe" || m.model_type == "granitemoeshared" ||
          m.model_type == "granitemoehybrid") {
        // GraniteMoe checkpoints: block_sparse_moe.router.layer [E, h] and the experts already fused,
        // input_linear [E, 2f, h] (gate and up) and output_linear [E, h, f] (modeling_granitemoe.py;
        // conversion_mapping.py renames them to router.weight, experts.gate_up_proj, experts.down_proj);
        // GraniteMoeShared's shared_mlp (input_linear [2s, h], output_linear [h, s]) follows the block.
        g.linear("block_sparse_moe.router.layer", E, h, false);
        g.param("block_sparse_moe.input_linear.weight", {E, 2 * f, h}, "input_linear");
        g.param("block_sparse_moe.output_linear.weight", {E, h, f}, "output_linear");
        if (const int64_t s = m.shared_expert_intermediate_size; s > 0) {
          g.linear("shared_mlp.input_linear", 2 * s, h, false);
          g.linear("shared_mlp.output_linear", h, s, false);
        }
        break;
      }
      // Mixtral: block_sparse_moe.gate is the router (Linear hidden -> experts, no bias);
      // experts.{e}.w1/w3 are gate/up, w2 is down (MixtralBlockSparseTop2MLP in the checkpoints;
      // transformers 5 fuses them into mlp.experts.gate_up_proj at load time, same count).
      g.linear("block_sparse_moe.gate", E, h, false);
      for (int64_t e = 0; e < E; ++e) {
        const std::string p = "block_sparse_moe.experts." + std::to_string(e);
        g.linear(p + ".w1", f, h, m.mlp_bias);
        g.linear(p + ".w2", h, f, m.mlp_bias);
        g.linear(p + ".w3", f, h, m.mlp_bias);
      }
      break;
    case MoeStyle::PerExpert:
      // Qwen2/3-MoE, OLMoE, DeepSeek: mlp.gate router [E, h]; mlp.experts.{e}.gate/up/down_proj.
      // HunYuan-MoE's router is mlp.gate.wg (HunYuanMoEV1Gate holds the Linear).
      g.linear(m.model_type == "hunyuan_v1_moe" ? "mlp.gate.wg" : "mlp.gate", E, h, false);
      // ERNIE-4.5-MoE: the router's correction bias [1, E] is a frozen parameter (the Hub checkpoint
      // stores it as mlp.moe_statics.e_score_correction_bias; transformers moves it under the gate).
      if (m.router_score_bias_param)
        g.frozen_param("mlp.moe_statics.e_score_correction_bias", {1, E}, "moe_statics");
      for (int64_t e = 0; e < E; ++e) {
        const std::string p = "mlp.experts." + std::to_string(e);
        g.linear(p + ".gate_proj", f, h, false);
        g.linear(p + ".up_proj", f, h, false);
        g.linear(p + ".down_proj", h, f, false);
      }
      if (m.shared_expert_intermediate_size > 0) {
        // Qwen2-MoE: mlp.shared_expert (+ shared_expert_gate [1, h]); DeepSeek: mlp.shared_experts.
        const bool qwen = m.shared_expert_gate;
        // ERNIE-4.5-MoE's shared experts are an Ernie4_5_MoeMLP, biased with use_bias; HY-V3's a HYV3MLP,
        // biased with mlp_bias (modeling_hy_v3.py).
        // HunYuan-MoE's is mlp.shared_mlp.
        const char* shared = qwen                               ? "mlp.shared_expert"
                             : m.model_type == "hunyuan_v1_moe" ? "mlp.shared_mlp"
                                                                : "mlp.shared_experts";
        gated_mlp(m, g, shared, m.shared_expert_intermediate_size,
                  (m.model_type == "ernie4_5_moe" || m.model_type == "hy_v3") && m.mlp_bias);
      }
      if (m.shared_expert_gate) g.linear("mlp.shared_expert_gate", 1, h, false);
      break;
    case MoeStyle::FusedGptOss:
      // modeling_gpt_oss.py GptOssTopKRouter (weight [E, h], bias [E]) and GptOssExperts:
      // gate_up_proj [E, h, 2f] + gate_up_proj_bias [E, 2f], down_proj [E, f, h] + down_proj_bias [E, h].
      g.linear("mlp.router", E, h, m.router_bias);
      g.param("mlp.experts.gate_up_proj", {E, h, 2 * f});
      g.param("mlp.experts.gate_up_proj_bias", {E, 2 * f});
      g.param("mlp.experts.down_proj", {E, f, h});
      g.param("mlp.experts.down_proj_bias", {E, h});
      break;
    case MoeStyle::FusedLlama4:
      // modeling_llama4.py Llama4TextMoe: router [E, h]; Llama4TextExperts gate_up_proj [E, h, 2f],
      // down_proj [E, f, h]; shared_expert a Llama4TextMLP of intermediate_size.
      g.param("feed_forward.experts.gate_up_proj", {E, h, 2 * f});
      g.param("feed_forward.experts.down_proj", {E, f, h});
      g.linear("feed_forward.router", E, h, false);
      gated_mlp(m, g, "feed_forward.shared_expert", m.shared_expert_intermediate_size, false);
      break;
  }
}

// Llama-layout decoder layer (also Phi-3's fused variant): attention, gated/plain MLP or MoE, and
// the norms where the family puts them.
void llama_layer(const ModelSpec& m, GroupBuilder& g, int64_t index) {
  const int64_t h = m.hidden_size;
  const bool nb = m.norm_bias;
  // Forward order: input norm, attention, the norm(s) after it, MLP, the norm after it.
  // Apertus names the two norms attention_layernorm and feedforward_layernorm (ApertusDecoderLayer).
  const bool apertus = m.model_type == "apertus";
  if (m.norm_placement != NormPlacement::PostOnly)
    g.norm(apertus ? "attention_layernorm" : "input_layernorm", h, nb);
  if (m.layer_kind(index) == LayerKind::GatedDeltaNet)
    gated_delta_net(m, g);
  else if (m.layer_kind(index) == LayerKind::Mamba2)
    mamba2_mixer(m, g);
  else
    llama_attention(m, g);
  if (m.norm_placement != NormPlacement::Parallel)
    g.norm(apertus ? "feedforward_layernorm" : "post_attention_layernorm", h, nb);
  if (m.norm_placement == NormPlacement::Sandwich) g.norm("pre_feedforward_layernorm", h, nb);
  if (m.norm_placement == NormPlacement::Glm4) g.norm("post_self_attn_layernorm", h, nb);
  const int64_t f = m.intermediate_size;
  const std::string mlp = m.moe_style == MoeStyle::FusedLlama4 ? "feed_forward" : "mlp";
  if (m.is_moe_layer(index)) {
    moe_block(m, g);
  } else if (m.model_type == "granitemoehybrid") {
    // GraniteMoeHybridMLP, the dense model's only MLP: input_linear [2f, h] (gate and up), output_linear [h,
    // f].
    g.linear("shared_mlp.input_linear", 2 * f, h, false);
    g.linear("shared_mlp.output_linear", h, f, false);
  } else if (m.mlp == MlpKind::Gated) {
    gated_mlp(m, g, mlp, f, m.mlp_bias);
  } else if (m.mlp_c_names) {
    g.linear("mlp.c_fc", f, h, m.mlp_bias);  // Starcoder2MLP
    g.linear("mlp.c_proj", h, f, m.mlp_bias);
  } else if (m.layout == Layout::Phi) {
    g.linear("mlp.fc1", f, h, m.mlp_bias);  // PhiMLP
    g.linear("mlp.fc2", h, f, m.mlp_bias);
  } else {
    g.linear("mlp.up_proj", f, h, m.mlp_bias);
    g.linear("mlp.down_proj", h, f, m.mlp_bias);
    // xIELU's two trainable scalars: ApertusMLP registers act_fn after down_proj (it runs between the
    // two linears; both scalars are far below any persistence threshold).
    if (m.activation == "xielu") {
      g.param("mlp.act_fn.alpha_p", {1}, "act_fn");
      g.param("mlp.act_fn.alpha_n", {1}, "act_fn");
    }
  }
  if (m.norm_placement == NormPlacement::PostOnly || m.norm_placement == NormPlacement::Sandwich)
    g.norm("post_feedforward_layernorm", h, nb);
  if (m.norm_placement == NormPlacement::Glm4) g.norm("post_mlp_layernorm", h, nb);
}

// GPT-2 block: ln_1, attn.c_attn (fused qkv) + c_proj, ln_2, mlp.c_fc + c_proj; all with biases.
void gpt2_layer(const ModelSpec& m, GroupBuilder& g) {
  const int64_t h = m.hidden_size, f = m.intermediate_size;
  g.norm("ln_1", h, true);
  g.linear("attn.c_attn", 3 * h, h, m.attention_bias);
  g.linear("attn.c_proj", h, h, m.attention_bias);
  g.norm("ln_2", h, true);
  g.linear("mlp.c_fc", f, h, m.mlp_bias);
  g.linear("mlp.c_proj", h, f, m.mlp_bias);
}

// OPT decoder layer (OPTDecoderLayer): self_attn k/v/q/out_proj, self_attn_layer_norm, fc1, fc2,
// final_layer_norm; biases on every linear (enable_bias, default true).
void opt_layer(const ModelSpec& m, GroupBuilder& g) {
  const int64_t h = m.hidden_size, f = m.intermediate_size;
  g.norm("self_attn_layer_norm", h, true);
  g.linear("self_attn.q_proj", h, h, m.attention_bias);
  g.linear("self_attn.k_proj", h, h, m.attention_bias);
  g.linear("self_attn.v_proj", h, h, m.attention_bias);
  g.linear("self_attn.out_proj", h, h, m.attention_bias);
  g.norm("final_layer_norm", h, true);
  g.linear("fc1", f, h, m.mlp_bias);
  g.linear("fc2", h, f, m.mlp_bias);
}

// BLOOM block: input_layernorm, self_attention.query_key_value + dense, post_attention_layernorm,
// mlp.dense_h_to_4h + dense_4h_to_h; biases everywhere.
void bloom_layer(const ModelSpec& m, GroupBuilder& g) {
  const int64_t h = m.hidden_size, f = m.intermediate_size;
  g.norm("input_layernorm", h, true);
  g.linear("self_attention.query_key_value", 3 * h, h, m.attention_bias);
  g.linear("self_attention.dense", h, h, m.attention_bias);
  g.norm("post_attention_layernorm", h, true);
  g.linear("mlp.dense_h_to_4h", f, h, m.mlp_bias);
  g.linear("mlp.dense_4h_to_h", h, f, m.mlp_bias);
}

// Falcon block (FalconDecoderLayer / FalconAttention):
//  - new_decoder_architecture: ln_attn + ln_mlp, qkv out = (heads + 2 * kv_heads) * head_dim
//  - else multi_query: input_layernorm, qkv out = hidden + 2 * head_dim
//  - else: qkv out = 3 * hidden; post_attention_layernorm only without parallel_attn.
// LayerNorms always carry a bias; linears only with config.bias.
void falcon_layer(const ModelSpec& m, GroupBuilder& g) {
  const int64_t h = m.hidden_size, f = m.intermediate_size, hd = m.head_dim;
  int64_t qkv = 3 * h;
  if (m.new_decoder_architecture) {
    qkv = (m.num_heads + 2 * m.num_kv_heads) * hd;
    g.norm("ln_attn", h, true);
    g.norm("ln_mlp", h, true);
  } else {
    if (m.num_kv_heads == 1) qkv = h + 2 * hd;
    g.norm("input_layernorm", h, true);
  }
  g.linear("self_attention.query_key_value", qkv, h, m.attention_bias);
  g.linear("self_attention.dense", h, h, m.attention_bias);
  if (!m.new_decoder_architecture && !m.parallel_attention) g.norm("post_attention_layernorm", h, true);
  g.linear("mlp.dense_h_to_4h", f, h, m.mlp_bias);
  g.linear("mlp.dense_4h_to_h", h, f, m.mlp_bias);
}

// GPT-NeoX layer: input_layernorm, post_attention_layernorm, attention.query_key_value + dense,
// mlp.dense_h_to_4h + dense_4h_to_h.
void neox_layer(const ModelSpec& m, GroupBuilder& g) {
  const int64_t h = m.hidden_size, f = m.intermediate_size;
  g.norm("input_layernorm", h, true);
  g.norm("post_attention_layernorm", h, true);
  g.linear("attention.query_key_value", 3 * h, h, m.attention_bias);
  g.linear("attention.dense", h, h, m.attention_bias);
  g.linear("mlp.dense_h_to_4h", f, h, m.mlp_bias);
  g.linear("mlp.dense_4h_to_h", h, f, m.mlp_bias);
}

struct Names {
  std::string embed_prefix;  // owner of the embeddings, e.g. "model", "transformer"
  std::string word_embed;    // "embed_tokens", "wte", ...
  std::string layers;        // "model.layers", "transformer.h", ...
  std::string final_norm;    // "model.norm", "transformer.ln_f", ...
  std::string lm_head;       // "lm_head", "embed_out"
};

Names names_for(Layout layout) {
  switch (layout) {
    case Layout::Llama:
    case Layout::Phi3:
      return {"model", "embed_tokens", "model.layers", "model.norm", "lm_head"};
    case Layout::Phi:
      return {"model", "embed_tokens", "model.layers", "model.final_layernorm", "lm_head"};
    case Layout::GPT2:
      return {"transformer", "wte", "transformer.h", "transformer.ln_f", "lm_head"};
    case Layout::OPT:
      return {"model.decoder", "embed_tokens", "model.decoder.layers", "model.decoder.final_layer_norm",
              "lm_head"};
    case Layout::Bloom:
    case Layout::Falcon:
      return {"transformer", "word_embeddings", "transformer.h", "transformer.ln_f", "lm_head"};
    case Layout::GPTNeoX:
      return {"gpt_neox", "embed_in", "gpt_neox.layers", "gpt_neox.final_layer_norm", "embed_out"};
  }
  return {};
}

}  // namespace

std::vector<LayerInventory> ModelSpec::inventory() const {
  if (params_only)
    throw_user_error(
        "model '{}' is known only by its parameter count; this needs the architecture: pass --model with a "
        "zoo "
        "name or a config.json",
        name);
  if (from_checkpoint()) return checkpoint_tensors;
  const Names n = names_for(layout);
  const int64_t h = hidden_size;
  // OPT embeds tokens at word_embed_proj_dim and projects in/out when it differs from hidden.
  const int64_t embed_dim = (layout == Layout::OPT && word_embed_proj_dim > 0) ? word_embed_proj_dim : h;
  const bool layer_norm_bias = norm == NormKind::LayerNorm;
  std::vector<LayerInventory> out;
  out.reserve(static_cast<size_t>(num_layers) + 3);

  {
    GroupBuilder g("embed", n.embed_prefix, false);
    g.embedding(n.word_embed, vocab_size, embed_dim);
    if (position == PositionKind::Learned) {
      const char* pos = layout == Layout::OPT ? "embed_positions" : "wpe";
      g.embedding(pos, max_position_embeddings + position_offset, h);
    }
    if (embedding_layernorm) g.norm("word_embeddings_layernorm", h, layer_norm_bias);
    if (embed_dim != h) g.linear("project_in", h, embed_dim, false);
    out.push_back(g.take());
  }

  for (int64_t i = 0; i < num_layers; ++i) {
    GroupBuilder g("layers." + std::to_string(i), n.layers + "." + std::to_string(i), true);
    g.set_norm_params(norm_params);
    switch (layout) {
      case Layout::Llama:
      case Layout::Phi3:
      case Layout::Phi:
        llama_layer(*this, g, i);
        break;
      case Layout::GPT2:
        gpt2_layer(*this, g);
        break;
      case Layout::OPT:
        opt_layer(*this, g);
        break;
      case Layout::Bloom:
        bloom_layer(*this, g);
        break;
      case Layout::Falcon:
        falcon_layer(*this, g);
        break;
      case Layout::GPTNeoX:
        neox_layer(*this, g);
        break;
    }
    out.push_back(g.take());
  }

  {
    GroupBuilder g("final_norm", "", false);
    g.set_norm_params(norm_params);
    // Llama layout: the final norm is the layers' kind (Starcoder2 LayerNorm with bias, Cohere without).
    if (final_norm)
      g.norm(n.final_norm, h, layout == Layout::Llama || layout == Layout::Phi ? norm_bias : layer_norm_bias);
    if (embed_dim != h) g.linear("model.decoder.project_out", embed_dim, h, false);
    out.push_back(g.take());
  }

  if (!tie_word_embeddings) {
    GroupBuilder g("lm_head", "", false);
    g.linear(n.lm_head, lm_head_rows > 0 ? lm_head_rows : vocab_size, embed_dim, lm_head_bias);
    out.push_back(g.take());
  }
  return out;
}

}  // namespace zeroplan::models
