// ComputeStats from the layer inventory. Conventions and sources:
//  - GEMM FLOPs: 2*m*n*k for [m,k] x [k,n] (Kaplan et al. 2020, "Scaling Laws for Neural Language
//    Models", §2.1: 2N forward FLOPs per token, one multiply-add = 2 FLOPs).
//  - Model FLOPs for MFU: PaLM (Chowdhery et al. 2022), Appendix B: 6N + 12*L*H*Q*T per token
//    (N parameters, L layers, H heads, Q head dim, T sequence length), no recomputation counted.
//    N here is the parameters a token touches (MoE: active parameters), embeddings included: our
//    stated convention (excluding the input-embedding lookup, as some authors do, lowers N by V*h).
//    Under LoRA the frozen base weights need no weight-gradient GEMM, so the model
//    FLOPs the job must do are 4*N_frozen + 6*N_trainable (our stated extension of PaLM's 6N).
//  - Element-wise traffic of a Llama-style layer, derived here per token (elements read + written):
//      2 RMSNorms        2 x (read h + write h)                 = 4h
//      2 residual adds   2 x (read 2h + write h)                = 6h
//      rotary on q and k read + write (q_dim + kv_dim)          = 2(q_dim + kv_dim)
//      SwiGLU act*mul    read gate + up, write f                = 3f   (plain MLP: read f, write f = 2f)
//    The head's softmax + cross-entropy over V logits: read logits, write probabilities, read them
//    back for the loss/gradient = 3V. Flash attention's own I/O is inside the attention kernel.
#include "planner/compute_stats.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <set>
#include <string>

#include "models/model_spec.h"
#include "planner/gated_delta_net.h"
#include "planner/mamba2.h"
#include "planner/memory_stats.h"
#include "planner/op_model.h"
#include "planner/time_model.h"
#include "planner/vision.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {
namespace {

// PEFT LoraConfig target matching, the same rule as models/lora.cpp (peft/tuners/tuners_utils.py
// matches the module's last name component): empty targets or "all-linear" = every nn.Linear except
// the output layer; otherwise the named linear (or embedding) modules.
bool is_lora_target(const models::TensorSpec& t, const std::vector<std::string>& targets) {
  if (t.shape.size() != 2 || t.is_bias || t.is_norm) return false;
  const bool all_linear =
      targets.empty() || std::find(targets.begin(), targets.end(), "all-linear") != targets.end();
  if (all_linear) return t.is_linear && t.module != "lm_head" && t.module != "embed_out";
  return (t.is_linear || t.is_embedding) &&
         std::find(targets.begin(), targets.end(), t.module) != targets.end();
}

// The module a tensor belongs to: its name without the last component (".weight", ".bias").
std::string module_path(const std::string& tensor_name) {
  const auto dot = tensor_name.rfind('.');
  return dot == std::string::npos ? tensor_name : tensor_name.substr(0, dot);
}

bool is_expert_tensor(const models::TensorSpec& t) {
  return models::is_routed_expert_tensor(t.name);
}

// Hooked module calls of one MoE decoder layer as transformers 5.24 builds it (ModelSpec::runtime_inventory:
// the routed experts are ONE module holding two 3-D parameters, not E expert MLPs), with the block a
// ZeRO-3 leaf and without. Counted from the layer's parameters: every module owning a parameter, every
// module above one inside the layer (the layer, self_attn, the MoE block, a shared expert's MLP
// container), and the parameter-less activation modules: the experts' act_fn (MixtralExperts,
// Qwen2/3MoeExperts, OlmoeExperts, DeepseekV3NaiveMoe, Llama4TextExperts; GptOssExperts has none, its
// GLU is inline) and one per shared expert MLP. Checked by forward pre-hooks on every module of tiny
// configs with transformers 5.24: qwen3_moe 14, mixtral 12, qwen2_moe 18, olmoe 14, deepseek_v3 20,
// gpt_oss 11 modules per layer, all called once per forward (tests/test_time_hooks.cpp).
struct MoeLayerHooks {
  int64_t all = 0, leaf = 0;
};
MoeLayerHooks moe_layer_hooks(const models::ModelSpec& m, const models::LayerInventory& l) {
  std::set<std::string> owners, containers;
  // The block is "model.layers.3.mlp"; the layer's own path is what precedes its last component.
  const std::string& block = l.moe_block;
  const std::string layer_path = block.substr(0, block.rfind('.'));
  for (const auto& t : l.tensors) {
    std::string path = module_path(t.name);
    owners.insert(path);
    while (path.size() > layer_path.size()) {
      path = path.substr(0, path.rfind('.'));
      containers.insert(path);
    }
  }
  for (const auto& o : owners) containers.erase(o);
  int64_t act = m.moe_style == models::MoeStyle::FusedGptOss ? 0 : 1;  // the experts' act_fn
  for (const auto& c : containers) {
    // A shared expert is a gated MLP with its own act_fn.
    // (GraniteMoeShared's shared_mlp, an MLP with its own activation, lies outside the block.)
    if (c.ends_with(".shared_expert") || c.ends_with(".shared_experts") || c.ends_with(".shared_mlp")) ++act;
  }
  MoeLayerHooks h;
  h.all = static_cast<int64_t>(owners.size() + containers.size()) + act;
  // As a leaf the block is hooked once and nothing inside it is.
  const std::string inside = block + ".";
  int64_t below = 0;
  for (const auto& o : owners) below += o.rfind(inside, 0) == 0 ? 1 : 0;
  for (const auto& c : containers) below += c.rfind(inside, 0) == 0 ? 1 : 0;
  h.leaf = h.all - below - act;
  return h;
}

// Parameter-less modules whose forward runs in one decoder layer of the HF module tree; stage 3
// hooks them like any other module (parameter_offload.py _register_deepspeed_module recurses through
// every child). Dense layouts: the decoder layer itself, its attention block, its MLP block and the
// MLP's activation module (ACT2FN returns an nn.Module: transformers modeling_llama.py LlamaMLP.act_fn,
// modeling_gpt2.py GPT2MLP.act) = 4. MoE (transformers 4.x modeling_mixtral.py): the layer, the
// attention block and the sparse-MoE block, plus per expert the expert MLP module and its activation
// module (MixtralBlockSparseTop2MLP.act_fn); every expert runs once it receives tokens, which at
// training batch sizes it does. Not counted: dropout modules (GPT-2 calls 3 per layer, Llama none),
// so for dropout-carrying layouts the count is a lower bound.
int64_t parameterless_modules_per_layer(const models::ModelSpec& m) {
  if (m.is_moe()) return 3 + 2 * m.num_experts;
  return 4;
}

// Adds a GEMM family, merging with an identical shape already present (q/k/v of equal size etc.).
void add_gemm(std::vector<GemmShape>& v, const GemmShape& g) {
  for (auto& e : v) {
    if (e.n == g.n && e.k == g.k && e.token_fraction == g.token_fraction && e.trainable == g.trainable &&
        e.layer_fraction == g.layer_fraction) {
      e.count += g.count;
      return;
    }
  }
  v.push_back(g);
}

}  // namespace

HfAttentionPath hf_attention_path(const models::ModelSpec& m) {
  // BLOOM (modeling_bloom.py): ALiBi scores via alibi.baddbmm, no SDPA path.
  if (m.layout == models::Layout::Bloom) return HfAttentionPath::Eager;
  // Falcon (transformers modeling_falcon.py): FalconModel.forward always materialises the causal mask
  // (create_causal_mask(..., allow_is_causal_skip=False), "so alibi can be added") and
  // FalconAttention.forward passes it to SDPA with is_causal False. PyTorch's SDPA dispatcher rejects
  // the flash kernel for any attn_mask, and both fused kernels when query and key/value head counts
  // differ without enable_gqa (aten/src/ATen/native/transformers/sdp_utils_cpp.h,
  // check_batch_size_and_num_heads_dense: "both fused kernels require query, key and value to have
  // the same num_heads"). Multi-query Falcon (new_decoder_architecture false: K/V of one head against
  // num_heads query heads, _split_heads) therefore runs SDPA's math path -- materialised scores,
  // costed as eager attention; Falcon-40B/180B (K/V broadcast to every head in _split_heads) run the
  // memory-efficient kernel over the full square (op_model.cpp).
  // Gemma-2 (attn_logit_softcapping): modeling_gemma2.py Gemma2PreTrainedModel sets
  // `_supports_sdpa = False  # sdpa does not support softcapping`, so HF runs eager_attention_forward
  // unless the user asks for flash_attention_2.
  if (m.attn_logit_softcapping > 0) return HfAttentionPath::Eager;
  if (m.layout == models::Layout::Falcon && !m.new_decoder_architecture && m.num_kv_heads < m.num_heads)
    return HfAttentionPath::SdpaMath;
  return HfAttentionPath::Sdpa;
}

bool hf_attention_explicit_mask(const models::ModelSpec& m) {
  return m.layout == models::Layout::Falcon;
}

// The element-wise work per token beside the GEMMs: the MLP activation's element passes and
// launches, the residual stream's and the head's, and the residual dropouts.
void set_elementwise_costs(const models::ModelSpec& m, int64_t kv_width, ComputeStats& s) {
  // MLP element-wise work, element reads + writes per intermediate element (transformers
  // activations.py ACT2FN):
  //  - single-kernel activations (nn.SiLU / F.silu, nn.ReLU, nn.GELU, GELUTanh = F.gelu tanh):
  //    forward r1 w1 = 2, backward (grad, saved input -> grad) r2 w1 = 3, one launch each;
  //  - gated MLPs add act(gate) * up: forward r2 w1, backward two products r3 w2 (5 and 8 in all,
  //    2 and 3 launches);
  //  - "gelu_new" (NewGELUActivation, GPT-2/GPT-3 configs) is Python arithmetic:
  //    0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) = 8 launches (pow, mul, add, mul, tanh,
  //    add, mul, mul) reading 10 and writing 8 elements; its autograd backward walks the same chain
  //    (tanh', the products' two-sided gradients and the sums of the three paths back to x): ~12
  //    launches, ~27 element passes (counted node by node, ASSUMPTION within +-20%). BLOOM's
  //    bloom_gelu (modeling_bloom.py BloomGelu: a custom autograd function of the same tanh
  //    formula) is counted the same.
  //  - "xielu" (XIELUActivation._xielu_python, Apertus, without the optional xielu CUDA wheel):
  //    where(x > 0, alpha_p*x*x + beta*x, (expm1(min(x, eps)) - x)*alpha_n + beta*x) = 12 full-width
  //    launches (gt, mul, mul, mul, add, minimum, expm1, sub, mul, mul, add, where) + 3 on the scalars,
  //    30 element passes (a scalar operand 2, two tensors 3, where 4); backward ASSUMED 1.5x in both
  //    launches and passes, the ratio counted for gelu_new above.
  const bool python_gelu = m.activation == "gelu_new" || m.layout == models::Layout::Bloom;
  const bool xielu = m.activation == "xielu";
  // Element passes and launches of the activation, forward and backward.
  struct ActCost {
    double f, b, kf, kb;
  };
  const ActCost act = python_gelu ? ActCost{18.0, 27.0, 8.0, 12.0}
                      : xielu     ? ActCost{30.0, 45.0, 15.0, 22.0}
                                  : ActCost{2.0, 3.0, 1.0, 1.0};
  s.act_elem_passes_fwd = act.f + (s.gated_mlp ? 3.0 : 0.0);
  s.act_elem_passes_bwd = act.b + (s.gated_mlp ? 5.0 : 0.0);
  s.act_kernels_fwd = act.kf + (s.gated_mlp ? 1.0 : 0.0);
  s.act_kernels_bwd = act.kb + (s.gated_mlp ? 2.0 : 0.0);
  s.mlp_act_elems_per_token = static_cast<double>(m.intermediate_size) *
                              (m.is_moe() ? static_cast<double>(m.experts_per_token) : 1.0);
  // MoE: the routed experts' width times top-k plus the shared experts (ModelSpec::active_mlp_width;
  // Qwen3-MoE's intermediate_size is its dense width, 8x an expert's).
  const double f = static_cast<double>(m.active_mlp_width());
  const double h = static_cast<double>(m.hidden_size);
  s.elementwise_elems_per_token_fwd =
      4 * h + 6 * h +
      (m.position == models::PositionKind::Rotary ? 2.0 * static_cast<double>(s.attn_width + kv_width)
                                                  : 0.0) +
      (m.mlp == models::MlpKind::Gated ? 3 * f : 2 * f);
  s.head_elementwise_elems_per_token_fwd = 3.0 * static_cast<double>(m.vocab_size);
  // Residual dropouts: the same rule as the activation memory (memory_stats.cpp dropout_on): the
  // config's probability when it names one, else GPT-style layers (LayerNorm + plain MLP) have them.
  {
    const bool gpt_style = m.norm == models::NormKind::LayerNorm && m.mlp == models::MlpKind::Plain;
    const bool on = m.resid_dropout < 0 ? gpt_style : m.resid_dropout > 0;
    s.resid_dropouts_per_layer = on ? 2.0 : 0.0;
  }
}

// A layer whose last linear is the MLP's output GEMM with nothing saved after it (no norm, no dropout,
// not MoE): a non-reentrant checkpoint's recomputation stops before that GEMM (recompute_early_stop).
void set_recompute_early_stop(const models::TensorSpec& last_linear, bool wrapped, int64_t r,
                              ComputeStats& s) {
  const std::string& mod = last_linear.module;
  const bool mlp_out = mod == "down_proj" || mod == "fc2" || mod == "dense_4h_to_h" ||
                       (mod == "c_proj" && last_linear.name.find("mlp.") != std::string::npos);
  if (mlp_out && wrapped) {
    // PEFT's lora.Linear runs base_layer, then lora_A, then lora_B: the last saved tensor is
    // lora_B's input, so only lora_B [out, r] (and the scale-and-add after it) is skipped.
    s.recompute_early_stop = true;
    s.recompute_early_stop_lora = true;
    s.recompute_early_stop_gemm = GemmShape{last_linear.shape[0], r, 1, 1.0, true};
  } else if (mlp_out && !s.quantized_base) {
    // A plain (or frozen) nn.Linear; bitsandbytes' 4-bit linear saves after its forward.
    s.recompute_early_stop = true;
    s.recompute_early_stop_gemm =
        GemmShape{last_linear.shape[0], last_linear.shape[1], 1, 1.0, !s.frozen_base};
  }
}

// --params N: a model known by its size only.
ComputeStats params_only_stats(const Workload& w, ComputeStats s) {
  // --params N: no shapes. The time model uses 6*Psi per token at the large-GEMM efficiency and
  // says so; stage 3 is costed as one group of N elements.
  s.params_only = true;
  s.trainable_params = s.total_params;
  s.model_flops_per_token_dense = 6.0 * static_cast<double>(s.active_params);
  s.gemm_flops_per_token_fwd = 2.0 * static_cast<double>(s.active_params);
  ParamGroup g;
  g.repeat = 1;
  g.numels = {s.total_params};
  g.trainable = {true};
  g.modules = 1;
  s.groups.push_back(std::move(g));
  fill_comm_cache(s, w);
  return s;
}

// What walking the model's layers accumulates (compute_compute_stats): the LoRA settings it reads, and
// what it has seen so far.
struct LayerWalk {
  const std::vector<std::string>& targets;  // LoRA targets
  int64_t r = 0;                            // LoRA rank
  double moe_fraction = 1.0;                // top-k / experts: the tokens one routed expert sees
  // The decoder layers the layer being walked stands for: their count and share of num_layers (all of
  // them for uniform layers; a hybrid walks one layer per kind).
  int64_t layer_repeat = 0;
  double layer_fraction = 1.0;
  int64_t layer_hooks = 0;  // the walked decoder layer's hooked module calls (add_layer_group)
  int64_t representative = -1;  // the decoder layer standing for the (attention) layers
  int64_t trainable = 0;
  bool head_has_weight = false;
};

// The GEMMs one parameter tensor makes, per token: a decoder layer's linear (and its LoRA adapters'
// two), the fused 3-D experts' E GEMMs, or the head's; a head with its own weight is noted (tied
// embeddings get the embedding's GEMM later).
void add_tensor_gemms(const models::TensorSpec& t, bool decoder, bool target, bool tensor_trainable,
                      LayerWalk& walk, ComputeStats& s) {
  // Fused 3-D experts (gpt-oss, Llama-4: gate_up_proj [E, h, 2f], down_proj [E, f, h], x @ W): E GEMMs
  // of in = shape[1], out = shape[2], each on k/E of the tokens.
  // GraniteMoe's checkpoint stores them as nn.Linear weights instead (input_linear [E, 2f, h], output_linear
  // [E, h, f], F.linear per expert: out = shape[1], in = shape[2]).
  if (t.shape.size() == 3 && is_expert_tensor(t) && decoder) {
    const bool linear_layout = t.name.find(".block_sparse_moe.") != std::string::npos;
    add_gemm(s.layer_gemms,
             GemmShape{linear_layout ? t.shape[1] : t.shape[2], linear_layout ? t.shape[2] : t.shape[1],
                       t.shape[0], walk.moe_fraction, tensor_trainable, walk.layer_fraction});
    return;
  }
  if (!t.is_linear || t.shape.size() != 2) return;
  const bool expert = is_expert_tensor(t);
  GemmShape gemm{t.shape[0], t.shape[1], 1, expert ? walk.moe_fraction : 1.0, tensor_trainable};
  if (decoder) {
    gemm.layer_fraction = walk.layer_fraction;
    add_gemm(s.layer_gemms, gemm);
    if (target) {
      add_gemm(s.layer_gemms,
               GemmShape{walk.r, t.shape[1], 1, gemm.token_fraction, true, walk.layer_fraction});
      add_gemm(s.layer_gemms,
               GemmShape{t.shape[0], walk.r, 1, gemm.token_fraction, true, walk.layer_fraction});
    }
  } else if (!t.is_embedding) {
    walk.head_has_weight = true;
    add_gemm(s.head_gemms, gemm);
    if (target) {
      add_gemm(s.head_gemms, GemmShape{walk.r, t.shape[1], 1, 1.0, true});
      add_gemm(s.head_gemms, GemmShape{t.shape[0], walk.r, 1, 1.0, true});
    }
  }
}

// One layer of the inventory (the first decoder layer stands for all): its parameter group (tensors,
// modules, hooked modules, runtime tensors), its GEMMs, its biases and norms, and whether the
// recomputation may stop before its last linear.
void add_layer_group(const models::ModelSpec& m, const models::LayerInventory& layer, LayerWalk& walk,
                     ComputeStats& s) {
  const auto& targets = walk.targets;
  const int64_t r = walk.r;
  const double moe_fraction = walk.moe_fraction;
  ParamGroup g;
  g.repeat = layer.is_decoder_layer ? walk.layer_repeat : 1;
  const double lf = layer.is_decoder_layer ? walk.layer_fraction : 1.0;
  std::vector<std::string> modules;
  int64_t lora_wrapped = 0;  // linears PEFT replaces by a lora.Linear wrapper
  // Trained parameter tensors as the model holds them at run time (step_param_tensors): the routed
  // experts are one module with two 3-D parameters in transformers 5 (gate_up_proj, down_proj; their
  // biases too for gpt-oss), whatever the checkpoint's per-expert tensors.
  int64_t runtime_tensors = 0;
  bool expert_weights = false, expert_biases = false;
  auto note_module = [&](const std::string& path) {
    if (std::find(modules.begin(), modules.end(), path) == modules.end()) modules.push_back(path);
  };
  // The layer's last linear in module order and whether a norm follows it (recompute_early_stop).
  const models::TensorSpec* last_linear = nullptr;
  bool norm_after_last_linear = false;
  bool last_linear_wrapped = false;
  for (const auto& t : layer.tensors) {
    // One weight per norm module (LayerNorm biases are the same module).
    // (A Gated DeltaNet's gated norm is its own operator: op_model.cpp gated_delta_net.)
    if (layer.is_decoder_layer && t.is_norm && !t.is_bias &&
        t.name.find("linear_attn.") == std::string::npos && t.name.find("mamba.") == std::string::npos)
      s.norms_per_layer += lf;
    // A trained linear bias [out] (not a norm's): its gradient is a separate reduction (op_model.cpp).
    if (layer.is_decoder_layer && t.is_bias && !t.is_norm && !s.frozen_base && t.shape.size() == 1)
      s.bias_grad_width_per_layer +=
          static_cast<double>(t.numel()) * (is_expert_tensor(t) ? moe_fraction : 1.0) * lf;
    if (layer.is_decoder_layer && t.is_bias && !t.is_norm && t.shape.size() == 1 && !is_expert_tensor(t) &&
        m.model_type != "gpt2") {
      s.linear_biases_per_layer += lf;
      s.linear_bias_width_per_layer += static_cast<double>(t.numel()) * lf;
    }
    const bool target = s.frozen_base && is_lora_target(t, targets);
    if (layer.is_decoder_layer && t.is_linear && t.shape.size() == 2) {
      last_linear = &t;
      norm_after_last_linear = false;
      last_linear_wrapped = target;
    }
    if (layer.is_decoder_layer && t.is_norm) norm_after_last_linear = true;
    const bool tensor_trainable = !s.frozen_base;
    g.numels.push_back(t.numel());
    g.trainable.push_back(tensor_trainable);
    if (tensor_trainable) {
      if (!is_expert_tensor(t))
        runtime_tensors += 1;
      else
        (t.is_bias ? expert_biases : expert_weights) = true;
    }
    note_module(module_path(t.name));
    if (tensor_trainable) walk.trainable += t.numel() * g.repeat;
    if (s.quantized_base && t.is_linear) s.quantized_params += t.numel() * g.repeat;
    if (target) {
      // PEFT adds lora_A [r, in] and lora_B [out, r], each its own nn.Linear.
      const int64_t out = t.shape[0], in = t.shape[1];
      g.numels.push_back(r * in);
      g.trainable.push_back(true);
      g.numels.push_back(out * r);
      g.trainable.push_back(true);
      note_module(module_path(t.name) + ".lora_A");
      note_module(module_path(t.name) + ".lora_B");
      runtime_tensors += 2;
      ++lora_wrapped;
      walk.trainable += (r * in + out * r) * g.repeat;
    }
    add_tensor_gemms(t, layer.is_decoder_layer, target, tensor_trainable, walk, s);
  }
  if (layer.is_decoder_layer && last_linear != nullptr && !m.is_moe() && !norm_after_last_linear &&
      s.resid_dropouts_per_layer == 0)
    set_recompute_early_stop(*last_linear, last_linear_wrapped, r, s);
  g.modules = static_cast<int64_t>(modules.size());
  // Hooked module calls: the parameter-holding modules above, plus, per LoRA-wrapped linear, the
  // PEFT wrapper (peft/tuners/lora/layer.py lora.Linear holds base_layer, lora_A/lora_B ModuleDicts
  // and lora_dropout) and its lora_dropout["default"] (nn.Dropout, or nn.Identity at p=0): both run.
  const int64_t hooked = g.modules + 2 * lora_wrapped;
  if (layer.is_decoder_layer)
    walk.layer_hooks = hooked + parameterless_modules_per_layer(m);
  else
    s.hooked_modules_outside_layers += hooked;
  runtime_tensors += (expert_weights ? 2 : 0) + (expert_biases ? 2 : 0);
  s.step_param_tensors += runtime_tensors * g.repeat;
  s.groups.push_back(std::move(g));
}

// The inventory walked once (compute_compute_stats): the layers outside the decoder, and one representative
// decoder layer per kind. MoE models with some dense layers (DeepSeek's first_k_dense_replace: 3 of 61;
// Llama-4 Maverick: every other layer) are costed from their first MoE layer: an approximation for the
// dense ones. Hybrids (Qwen3-Next, Qwen3.5, Granite-4.0-H: ModelSpec::layer_kinds) are walked one layer per
// kind: the first softmax-attention, Gated DeltaNet and Mamba-2 layer (of the MoE ones in a MoE model),
// each standing for its kind's layers (GemmShape::layer_fraction, ParamGroup::repeat).
LayerWalk walk_layers(const Workload& w, double moe_fraction, ComputeStats& s) {
  const models::ModelSpec& m = w.model;
  using models::LayerKind;
  // Per kind (attention, Gated DeltaNet, Mamba-2): its layers and its representative, the first of them (of
  // the MoE ones in a MoE model); a uniform model's representative stays first_moe_layer().
  constexpr std::array<LayerKind, 3> kKinds = {LayerKind::Attention, LayerKind::GatedDeltaNet,
                                               LayerKind::Mamba2};
  std::array<int64_t, 3> count{}, representative = {-1, -1, -1}, hooks{};
  for (int64_t i = 0; i < m.num_layers; ++i)
    for (size_t k = 0; k < kKinds.size(); ++k) {
      if (m.layer_kind(i) != kKinds[k]) continue;
      ++count[k];
      if (representative[k] < 0 && (!m.is_moe() || m.is_moe_layer(i))) representative[k] = i;
    }
  if (!m.has_linear_attention()) representative[0] = m.first_moe_layer();
  const double layers = static_cast<double>(std::max<int64_t>(1, m.num_layers));
  s.attention_layer_fraction = static_cast<double>(count[0]) / layers;
  s.gdn_layer_fraction = static_cast<double>(count[1]) / layers;
  s.mamba2_layer_fraction = static_cast<double>(count[2]) / layers;
  int64_t decoder_index = -1;
  LayerWalk walk{w.train.lora_targets, w.train.lora_rank, moe_fraction};
  walk.representative = representative[0];
  for (const auto& layer : m.inventory()) {
    if (!layer.is_decoder_layer) {
      add_layer_group(m, layer, walk, s);
      continue;
    }
    // Uniform decoder layers: build the representative's GEMMs and parameter group, repeat it.
    ++decoder_index;
    const auto k = static_cast<size_t>(
        std::find(representative.begin(), representative.end(), decoder_index) - representative.begin());
    if (k == representative.size()) continue;
    walk.layer_repeat = count[k];
    walk.layer_fraction = static_cast<double>(count[k]) / layers;
    add_layer_group(m, layer, walk, s);
    hooks[k] = walk.layer_hooks;
  }
  const int64_t rank_seq = w.train.rank_seq_len();
  s.gdn_rule_flops_per_token_fwd =
      count[1] > 0 ? gdn_rule_flops_per_token(m, rank_seq) * static_cast<double>(count[1]) : 0.0;
  s.mamba2_scan_flops_per_token_fwd =
      count[2] > 0 ? mamba2_scan_flops_per_token(m, rank_seq) * static_cast<double>(count[2]) : 0.0;
  s.hooked_modules_per_layer = hooks[0];
  for (size_t k = 1; k < kKinds.size(); ++k)
    s.hooked_modules_layers_adjust += (hooks[k] - hooks[0]) * count[k];
  return walk;
}

ComputeStats compute_compute_stats(const Workload& w) {
  const models::ModelSpec& m = w.model;
  // Parse the time model's data file (planner/data/time_model.json) here, once, so that costing
  // candidates never allocates (tests/test_time_alloc.cpp).
  (void)time_model_data();
  ComputeStats s;
  static std::atomic<uint64_t> next_id{1};
  s.id = next_id.fetch_add(1, std::memory_order_relaxed);
  s.frozen_base = w.train.method != Method::Full;
  s.quantized_base = w.train.method == Method::QLoRA;
  s.total_params = m.num_parameters();
  s.active_params = m.active_parameters();
  if (m.params_only) return params_only_stats(w, std::move(s));
  s.num_layers = m.num_layers;
  s.hidden = m.hidden_size;
  s.vocab = m.vocab_size;
  const int64_t head_dim = m.head_width();
  s.attn_width = m.num_heads * head_dim;
  const int64_t kv_width = std::max<int64_t>(1, m.num_kv_heads) * head_dim;
  s.kv_width = kv_width;
  s.rms_norm = m.norm == models::NormKind::RMSNorm;
  s.rotary = m.position == models::PositionKind::Rotary;
  s.gated_mlp = m.mlp == models::MlpKind::Gated;
  s.sdpa_supported = hf_attention_path(m) == HfAttentionPath::Sdpa;
  s.attention_explicit_mask = hf_attention_explicit_mask(m);
  set_elementwise_costs(m, kv_width, s);

  const double moe_fraction =
      m.is_moe() ? static_cast<double>(m.experts_per_token) / static_cast<double>(m.num_experts) : 1.0;

  const LayerWalk walk = walk_layers(w, moe_fraction, s);
  // Tied embeddings: the head GEMM multiplies by the embedding matrix [V, h].
  if (!walk.head_has_weight && m.vocab_size > 0)
    add_gemm(s.head_gemms, GemmShape{m.vocab_size, m.hidden_size, 1, 1.0, !s.frozen_base});
  // Modules outside the layers that hold no parameter of their own but run (and are hooked): the
  // *ForCausalLM wrapper and the base model (LlamaForCausalLM -> LlamaModel); a tied head is still an
  // nn.Linear module whose forward runs (its weight is the embedding's, so the inventory has no
  // lm_head group); rotary position embeddings are one model-level module called once per forward in
  // current transformers (LlamaModel.rotary_emb; before transformers 4.45 every attention block had
  // one, 1 more per layer). The ModuleList holding the layers is never called.
  s.hooked_modules_outside_layers +=
      2 + (walk.head_has_weight ? 0 : 1) + (m.position == models::PositionKind::Rotary ? 1 : 0);
  s.hooked_modules_per_layer_moe_leaf = s.hooked_modules_per_layer;
  // MoE layers run transformers 5's fused experts (the count above walks the checkpoint's per-expert
  // modules, which is what LoRA's PEFT wrappers still see: kept for LoRA).
  if (m.is_moe() && !s.frozen_base && !m.from_checkpoint()) {
    int64_t index = -1;
    for (const auto& layer : m.runtime_inventory()) {
      if (!layer.is_decoder_layer || ++index != walk.representative) continue;
      if (layer.moe_block.empty() || layer.tensors.empty()) break;
      const MoeLayerHooks h = moe_layer_hooks(m, layer);
      s.hooked_modules_per_layer = h.all;
      s.hooked_modules_per_layer_moe_leaf = h.leaf;
      break;
    }
  }
  // The authoritative adapter count (tied heads targeted by name included) comes from the models
  // module; our per-tensor walk above only decides GEMM shapes and which gradients are reduced.
  s.trainable_params =
      s.frozen_base ? models::lora_trainable_parameters(m, walk.r, walk.targets) : walk.trainable;
  s.vision_gemms = vision_forward_gemms(w);
  // A vision-language model's trained tower and projector (planner/vision.h): in the optimizer and its
  // step, in no GEMM (a trained tower is planned without images).
  if (!s.frozen_base)
    for (const auto& g : vision_groups_as_trained(w))
      for (const auto& t : g.tensors)
        if (!t.frozen) {
          s.trainable_params += t.numel();
          s.step_param_tensors += 1;
        }

  double fwd = 0;
  for (const auto& g : s.layer_gemms)
    fwd += 2.0 * static_cast<double>(g.n * g.k * g.count) * g.token_fraction * g.layer_fraction *
           static_cast<double>(m.num_layers);
  s.layer_gemm_flops_per_token_fwd = fwd;
  for (const auto& g : s.head_gemms) fwd += 2.0 * static_cast<double>(g.n * g.k * g.count) * g.token_fraction;
  s.gemm_flops_per_token_fwd = fwd;

  const double n_active = static_cast<double>(s.active_params);
  if (s.frozen_base) {
    // Frozen base: 2N forward + 2N input-grad backward; adapters: 6 N_lora.
    s.model_flops_per_token_dense = 4.0 * n_active + 6.0 * static_cast<double>(walk.trainable);
  } else {
    s.model_flops_per_token_dense = 6.0 * n_active;
  }
  fill_comm_cache(s, w);
  return s;
}

}  // namespace zeroplan::planner
