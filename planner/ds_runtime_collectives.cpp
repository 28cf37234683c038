// The collective calls of one DeepSpeed step; see ds_runtime_collectives.h. Rules (DeepSpeed 0.19.8):
//  - stage 0 (FP16_Optimizer / plain optimizer): engine.py allreduce_gradients ->
//    buffered_allreduce_fallback -> allreduce_no_retain: gradients of module.parameters() in order,
//    a bucket flushed (allreduce_bucket: one all_reduce in communication_data_type) once its numel
//    EXCEEDS elements_per_buffer = MEMORY_OPT_ALLREDUCE_SIZE (5e8), at the accumulation boundary only.
//  - stages 1/2 (stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads): a gradient that
//    would overflow reduce_bucket_size first flushes the bucket (reduce_ipg_grads -> allreduce_bucket,
//    one all_reduce per flush); one larger than the bucket is reduced alone (extra_large_param_to_reduce).
//    Stage 2 reduces every micro-step, stage 1 at the boundary. Step: has_overflow (1-byte all_reduce),
//    get_grad_norm_direct (fp32 scalar all_reduce), all_gather_into_tensor_dp_groups of the updated
//    16-bit partition (utils.py; one call per group when torch has all_gather_into_tensor).
//  - stage 3: gradients go to the IPG bucket in backward order; `bucket.elements + param.ds_numel >
//    reduce_bucket_size and bucket.elements > 0` flushes first (stage3.py
//    reduce_independent_p_g_buckets_and_remove_grads), so a bucket holds whole parameters and is never
//    split; each flush is one reduce_scatter of the padded partitions (reduce_scatter_coalesced);
//    the epilogue flushes the rest. Step: get_grad_norm_direct (fp64 scalar all_reduce), then _post_step
//    all-gathers the persistent parameters, one all_gather per parameter (partition_parameters.py
//    _allgather_params_coalesced loops `for param_idx, param in enumerate(param_list)`).
//    Parameter gathers: partitioned_param_coordinator.py fetch_sub_module gathers a module's
//    unavailable parameters in ONE coalesced call (__all_gather_params -> all_gather_coalesced), then
//    prefetches the next parameters of the trace up to stage3_prefetch_bucket_size (capped by
//    max_live_parameters minus those available) in one more call; the root module (no parameters of
//    its own) is fetched first, so its prefetch gathers the first bucket of the trace.
#include "planner/ds_runtime_collectives.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/checked.h"
#include "planner/comm_model.h"
#include "planner/ds_runtime.h"
#include "planner/expert_parallel.h"
#include "planner/muon.h"
#include "planner/parallel.h"
#include "planner/sequence_parallel.h"
#include "planner/vision.h"
#include "planner/zero3_leaf.h"
#include "planner/zeropp_quant.h"

namespace zeroplan::planner {

namespace {

// engine.py: MEMORY_OPT_ALLREDUCE_SIZE = 500000000 (allreduce_gradients' default bucket_size).
constexpr int64_t kMemoryOptAllreduceSize = 500'000'000;

int64_t elem_bytes_of(Precision p) {
  return p == Precision::FP32 ? 4 : 2;
}

// HF decoder layers whose __init__ registers self_attn and mlp before their norms
// (modeling_llama.py LlamaDecoderLayer.__init__: self_attn, mlp, input_layernorm,
// post_attention_layernorm; the same in the Mistral/Qwen2/Qwen3/Mixtral/Gemma/Phi-3 modeling files),
// so module.parameters() lists a layer's norms last although the inventory lists them in execution
// order.
bool norms_registered_last(const std::string& model_type) {
  // DeepseekV3DecoderLayer registers self_attn, mlp, input_layernorm, post_attention_layernorm too
  // (model.named_parameters() of the fixture's tiny config, transformers 5.24), as does
  // Glm4MoeDecoderLayer, SeedOss, MiniMaxM2, Phimoe, Olmo3, Exaone4, SmolLM3, Arcee and Dots1 DecoderLayers
  // (their modeling files' __init__: self_attn, mlp, then the norms).
  for (const char* t : {"llama",          "mistral",    "qwen2",       "qwen3",       "mixtral",
                        "qwen2_moe",      "qwen3_moe",  "gemma",       "gemma2",      "gemma3",
                        "gemma3_text",    "phi3",       "deepseek_v2", "deepseek_v3", "glm4_moe",
                        "seed_oss",       "minimax_m2", "phimoe",      "olmo3",       "exaone4",
                        "smollm3",        "arcee",      "dots1",       "ernie4_5",    "hunyuan_v1_dense",
                        "hunyuan_v1_moe", "apertus",    "ernie4_5_moe"})
    if (model_type == t) return true;
  // Qwen3NextDecoderLayer / Qwen3_5DecoderLayer: linear_attn or self_attn, mlp, then the two norms
  // (recorded: qwen3_5_s3_n2_bf16_s128's step gathers end each layer with its two norms).
  // GraniteMoeHybridDecoderLayer registers its norms first, then block_sparse_moe, shared_mlp and the mixer
  // (mamba or self_attn, assigned last): register_decoder_tensors orders it so.
  return model_type == "qwen3_next" || model_type.rfind("qwen3_5", 0) == 0 ||
         model_type == "granitemoehybrid";
}

// A linear-time mixer's parameters (Gated DeltaNet or Mamba-2) in module.parameters() order. A Gated
// DeltaNet's: the module's own dt_bias and A_log, then its
// children in __init__ order (Qwen3_5GatedDeltaNet: conv1d, norm, out_proj, in_proj_qkv, in_proj_z,
// in_proj_b, in_proj_a; Qwen3NextGatedDeltaNet: conv1d, in_proj_qkvz, in_proj_ba, norm, out_proj).
// Recorded: qwen3_5_s3_n2_bf16_s128's persistent gathers after the step, 4, 4, 1536, 32, 32768, 98304,
// 32768, 1024, 1024 elements.
int mixer_registration_rank(const std::string& model_type, const std::string& tensor_name) {
  // A Mamba-2 mixer (GraniteMoeHybridMambaLayer.__init__: conv1d, in_proj, dt_bias, A_log, norm, D,
  // out_proj): its own dt_bias, A_log and D, then conv1d, in_proj, norm, out_proj.
  const bool mamba = tensor_name.find("mamba.") != std::string::npos;
  const std::string_view mixer = mamba ? "mamba." : "linear_attn.";
  const std::string_view rest = std::string_view(tensor_name).substr(tensor_name.find(mixer) + mixer.size());
  const auto dot = rest.find('.');
  if (dot == std::string_view::npos) return 0;  // the module's own parameters
  const std::string_view child = rest.substr(0, dot);
  static constexpr std::array<std::string_view, 7> kQwen35 = {
      "conv1d", "norm", "out_proj", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"};
  static constexpr std::array<std::string_view, 5> kQwen3Next = {"conv1d", "in_proj_qkvz", "in_proj_ba",
                                                                 "norm", "out_proj"};
  static constexpr std::array<std::string_view, 4> kMamba2 = {"conv1d", "in_proj", "norm", "out_proj"};
  auto rank_in = [&](const auto& order) {
    const auto it = std::find(order.begin(), order.end(), child);
    return 1 + static_cast<int>(it - order.begin());
  };
  if (mamba) return rank_in(kMamba2);
  return model_type == "qwen3_next" ? rank_in(kQwen3Next) : rank_in(kQwen35);
}

// Trainable parameter tensors in module.parameters() order (the order of DeepSpeed's flat buffers
// and gradient/persistent-parameter lists) and in the order the forward uses them (autograd fires each
// parameter's gradient hook in reverse execution order: recorded in llama-gqa_s2_n2_bf16_rbs50k as
// lm_head, final norm, down, up, gate, post_attention_layernorm, o, v, k, q, input_layernorm, ...).
// The inventory lists a Llama-layout layer's norms first; its forward (modeling_llama.py
// LlamaDecoderLayer.forward) runs input_layernorm, self_attn, post_attention_layernorm, mlp.
// LoRA adapters are not in the inventory, so LoRA falls back to the size table (order unknown:
// listed in docs/conformance.md).
struct ParamOrder {
  std::vector<int64_t> numel;  // module.parameters() order
  std::vector<size_t> exec;    // indices into numel, in execution order
  // Stage 3's module trace (partitioned_param_coordinator.py record_module: every module whose
  // forward runs, each fetch one step of the trace), forward part: each module's own parameters
  // (indices into numel; empty for modules owning none: the model wrappers, a decoder layer, its
  // self_attn/mlp containers, the rotary embedding, the activation). `no_backward` marks modules whose
  // output needs no gradient (the rotary embedding): they fire no backward hook.
  std::vector<std::vector<size_t>> fwd_modules;
  std::vector<bool> no_backward;
  // ZeRO-3 leaf modules (a MoE block, planner/zero3_leaf.h): the module's gradients are reduced
  // together from its full backward hook, in module.parameters() order (stage3.py
  // create_reduce_and_remove_grad_hooks, reduce_leaf_module_grads), not one hook per parameter.
  std::vector<bool> leaf;
  std::vector<bool> trainable;  // per parameter (LoRA: the adapters only)
  // Per parameter: max(shape[0], shape[1]) for two or more dimensions, 0 for a 1-D tensor or an unknown
  // shape (QLoRA's and --params models' size tables). ZeRO++ qgZ's group count (planner/zeropp_quant.h).
  std::vector<int64_t> lead;
};

// max(shape[0], shape[1]) of a tensor of two or more dimensions, 0 for a 1-D one.
int64_t lead_of(const std::vector<int64_t>& shape) {
  return shape.size() >= 2 ? std::max(shape[0], shape[1]) : 0;
}

// The module owning a tensor: its name without the last component.
std::string owner_of(const std::string& tensor_name) {
  const auto dot = tensor_name.rfind('.');
  return dot == std::string::npos ? tensor_name : tensor_name.substr(0, dot);
}

// Builds a ParamOrder tensor by tensor (param_order below): the module trace, the registration order and
// the execution order, with LoRA's adapters where PEFT puts them.
struct ParamOrderBuilder {
  const Workload& w;
  const ZeroConfig& z;
  ParamOrder o;
  bool lora = false;
  int64_t r = 0;
  const std::vector<std::string>& tg;
  bool all_linear = false;

  // A tensor of the layer inside the decoder (the decoder layer container holds the norms, self_attn
  // and mlp), with its parameter index and its LoRA adapters' indices.
  struct T {
    const models::TensorSpec* spec;
    std::string owner;
    size_t index = 0;                // parameter index of the tensor
    std::vector<size_t> adapters{};  // LoRA A, B parameter indices
  };

  ParamOrderBuilder(const Workload& w_, const ZeroConfig& z_)
      : w(w_),
        z(z_),
        lora(w_.train.method == Method::LoRA),
        r(w_.train.lora_rank),
        tg(w_.train.lora_targets) {
    all_linear = tg.empty() || std::find(tg.begin(), tg.end(), "all-linear") != tg.end();
  }

  // PEFT (tuners/lora/model.py _create_and_replace): a targeted nn.Linear becomes a LoraLayer holding
  // base_layer (the frozen Linear), lora_A.default [r, in] and lora_B.default [out, r], registered in
  // that order and run in that order (lora.Linear.forward: base_layer, lora_dropout, lora_A, lora_B).
  bool targeted(const models::TensorSpec& t, bool in_layer) const {
    if (!lora || !t.is_linear || t.is_bias || t.shape.size() != 2) return false;
    return all_linear ? in_layer && t.module != "lm_head"
                      : std::find(tg.begin(), tg.end(), t.module) != tg.end();
  }
  // A targeted linear's LoRA adapters, A [r, in] then B [out, r]: (numel, lead_of(shape)) each.
  std::array<std::pair<int64_t, int64_t>, 2> adapter_shapes(const models::TensorSpec& t) const {
    return {{{r * t.shape[1], std::max(r, t.shape[1])}, {t.shape[0] * r, std::max(t.shape[0], r)}}};
  }
  void module(bool no_bwd = false) {
    o.fwd_modules.push_back({});
    o.no_backward.push_back(no_bwd);
    o.leaf.push_back(false);
  }
  // Adds a tensor (and, if targeted, its adapters as their own modules right after it).
  void push(const models::TensorSpec& t, bool in_layer) {
    o.fwd_modules.back().push_back(o.numel.size());
    o.exec.push_back(o.numel.size());
    o.numel.push_back(t.numel());
    o.trainable.push_back(!lora && !t.frozen);
    o.lead.push_back(lead_of(t.shape));
    if (!targeted(t, in_layer)) return;
    for (const auto& [n, lead] : adapter_shapes(t)) {
      module();
      o.fwd_modules.back().push_back(o.numel.size());
      o.exec.push_back(o.numel.size());
      o.numel.push_back(n);
      o.trainable.push_back(true);
      o.lead.push_back(lead);
    }
  }
  // A vision-language model's tower or projector group (planner/vision.h): registered and partitioned,
  // but not run (no image in the batch), so it is in no module's trace and no gradient reaches it.
  void add_unrun_layer(const models::LayerInventory& layer) {
    for (const auto& t : layer.tensors) {
      o.numel.push_back(t.numel());
      o.trainable.push_back(!lora && !t.frozen);
      o.lead.push_back(lead_of(t.shape));
    }
  }
  // The frozen vision tower run on the batch's images (planner/vision.h): the groups registered from
  // parameter index `first` by add_unrun_layer, each owner one module in forward order after the vision
  // model's own; none fires a backward hook (nothing in a frozen tower fed pixel values needs a gradient).
  void run_vision_layers(const std::vector<models::LayerInventory>& groups, size_t first) {
    module(true);  // the vision model (model.visual, model.vision_tower)
    std::string last;
    size_t index = first;
    for (const auto& g : groups)
      for (const auto& t : g.tensors) {
        const std::string owner = owner_of(t.name);
        if (owner != last) module(true);
        last = owner;
        o.fwd_modules.back().push_back(index);
        o.exec.push_back(index++);
      }
  }
  // A layer outside the decoder (embedding, final norm, head), or any layer of a model whose norms are
  // not registered last: its tensors in inventory order, one module per owner.
  void add_plain_layer(const models::LayerInventory& layer, bool llama_layout);
  void add_decoder_layer(const models::LayerInventory& layer);
  // Within the decoder layer: the parameter indices in registration order (self_attn, mlp, norms).
  void register_decoder_tensors(std::vector<T>& attn, std::vector<T>& rest, std::vector<T>& norms);
  std::vector<const T*> attention_exec_order(const std::vector<T>& attn) const;
  void add_mlp(const models::LayerInventory& layer, const std::vector<T>& rest, const std::string& moe_prefix,
               std::string& last);
  void use(const T& x, std::string& last);
};

void ParamOrderBuilder::add_plain_layer(const models::LayerInventory& layer, bool llama_layout) {
  if (layer.is_decoder_layer) module();  // the decoder layer container
  std::string last;
  for (const auto& t : layer.tensors) {
    const std::string owner = owner_of(t.name);
    if (owner != last || targeted(t, layer.is_decoder_layer)) module();
    last = targeted(t, layer.is_decoder_layer) ? std::string() : owner;
    push(t, layer.is_decoder_layer);
  }
  // modeling_llama.py LlamaModel.forward computes the rotary embedding right after the token
  // embedding (a module without parameters or gradient).
  if (llama_layout && !layer.tensors.empty() && layer.tensors.front().is_embedding) module(true);
}

void ParamOrderBuilder::register_decoder_tensors(std::vector<T>& attn, std::vector<T>& rest,
                                                 std::vector<T>& norms) {
  // modeling_phi3.py Phi3Attention.__init__ creates o_proj before qkv_proj, so module.parameters()
  // lists it first (named_parameters() of the fixture's tiny config, transformers 5.24); the forward
  // still runs qkv_proj first (the inventory's order, kept for execution below).
  std::vector<T> attn_registered = attn;
  if (w.model.model_type == "phi3")
    std::stable_partition(attn_registered.begin(), attn_registered.end(),
                          [](const T& x) { return x.spec->module == "o_proj"; });
  if (!attn.empty() && (attn.front().spec->name.find("linear_attn.") != std::string::npos ||
                        attn.front().spec->name.find("mamba.") != std::string::npos))
    std::stable_sort(attn_registered.begin(), attn_registered.end(), [&](const T& x, const T& y) {
      return mixer_registration_rank(w.model.model_type, x.spec->name) <
             mixer_registration_rank(w.model.model_type, y.spec->name);
    });
  // registration: self_attn, mlp, norms (each targeted linear's adapters right after it); Granite-4.0-H's
  // layer registers the norms, the MLPs, then the mixer. Execution: norm 0, self_attn, other norms, mlp.
  const bool mixer_last = w.model.model_type == "granitemoehybrid";
  const std::array<std::vector<T>*, 3> groups =
      mixer_last ? std::array<std::vector<T>*, 3>{&norms, &rest, &attn_registered}
                 : std::array<std::vector<T>*, 3>{&attn_registered, &rest, &norms};
  for (auto* v : groups)
    for (T& x : *v) {
      x.index = o.numel.size();
      o.numel.push_back(x.spec->numel());
      o.trainable.push_back(!lora && !x.spec->frozen);
      o.lead.push_back(lead_of(x.spec->shape));
      if (targeted(*x.spec, true))
        for (const auto& [n, lead] : adapter_shapes(*x.spec)) {
          x.adapters.push_back(o.numel.size());
          o.numel.push_back(n);
          o.trainable.push_back(true);
          o.lead.push_back(lead);
        }
    }
  for (T& x : attn)  // the parameter indices of the registration copies
    for (const T& y : attn_registered)
      if (y.spec == x.spec) {
        x.index = y.index;
        x.adapters = y.adapters;
      }
}

void ParamOrderBuilder::use(const T& x, std::string& last) {
  if (x.owner != last || !x.adapters.empty()) module();
  last = x.adapters.empty() ? x.owner : std::string();
  o.fwd_modules.back().push_back(x.index);
  o.exec.push_back(x.index);
  for (size_t a : x.adapters) {
    module();
    o.fwd_modules.back().push_back(a);
    o.exec.push_back(a);
  }
}

// Attention's forward order: q/k norms run on their projection's output, right after it
// (modeling_qwen3.py Qwen3Attention.forward: q_norm(q_proj(x)), k_norm(k_proj(x)), v_proj; recorded
// in qwen3_moe_s3_n2_bf16_persist0_prefetch0), except Gemma-3, which projects q, k, v first
// (modeling_gemma3.py Gemma3Attention.forward), and HunYuan, which projects q, k, v, applies the
// rotary embedding and then query_layernorm / key_layernorm (modeling_hunyuan_v1_dense.py); the rest
// in registration order.
std::vector<const ParamOrderBuilder::T*> ParamOrderBuilder::attention_exec_order(
    const std::vector<T>& attn) const {
  std::vector<const T*> attn_exec;
  const bool norms_after_qkv = w.model.model_type == "gemma3" || w.model.model_type == "gemma3_text" ||
                               w.model.model_type == "hunyuan_v1_dense" ||
                               w.model.model_type == "hunyuan_v1_moe" || w.model.model_type == "apertus";
  auto is_qk_norm = [](const T& x) {
    return x.spec->module == "q_norm" || x.spec->module == "k_norm" || x.spec->module == "query_layernorm" ||
           x.spec->module == "key_layernorm";
  };
  for (size_t i = 0; i < attn.size(); ++i) {
    const T& x = attn[i];
    if (is_qk_norm(x)) continue;
    if (norms_after_qkv && x.spec->module == "o_proj")
      for (const T& n : attn)
        if (is_qk_norm(n)) attn_exec.push_back(&n);
    attn_exec.push_back(&x);
    // After the projection's last tensor (its bias, where it has one: GLM-4.5 has q/k norms and
    // q/k/v biases; recorded in glm4_moe_s2_n2_bf16_default, one all_reduce of exactly the model).
    const bool last_of_module = i + 1 == attn.size() || attn[i + 1].spec->module != x.spec->module;
    if (!norms_after_qkv && last_of_module && (x.spec->module == "q_proj" || x.spec->module == "k_proj"))
      for (const T& n : attn)
        if (is_qk_norm(n) && n.spec->module[0] == x.spec->module[0]) attn_exec.push_back(&n);
  }
  for (const T& x : attn)
    if (is_qk_norm(x) && std::find(attn_exec.begin(), attn_exec.end(), &x) == attn_exec.end())
      attn_exec.push_back(&x);
  return attn_exec;
}

void ParamOrderBuilder::add_mlp(const models::LayerInventory& layer, const std::vector<T>& rest,
                                const std::string& moe_prefix, std::string& last) {
  if (!moe_prefix.empty()) {
    // (Leaf modules exist at stage 3 only: stages 1/2 reduce from per-parameter hooks.)
    if (z.stage == 3 &&
        moe_block_is_leaf(layer.moe_block_class, effective_moe_leaf(w, z), w.train.deepspeed_version)) {
      // A leaf: fetched as one module with every parameter under it (partitioned_param_coordinator.py
      // fetch_sub_module: iter_params(sub_module, recurse=z3_leaf_module(sub_module))), sorted by ds_id
      // (registration order); its children run without hooks (parameter_offload.py
      // _register_deepspeed_module stops at a leaf).
      o.leaf.back() = true;
      for (const T& x : rest) {
        if (x.spec->name.rfind(moe_prefix, 0) != 0) continue;
        o.fwd_modules.back().push_back(x.index);
        o.exec.push_back(x.index);
      }
    } else {
      // Not a leaf: each parameter-owning child in the order the block's forward calls it (router,
      // experts, shared experts: models::LayerInventory::moe_exec).
      for (const std::string& mod : layer.moe_exec)
        for (const T& x : rest)
          if (x.owner == mod) use(x, last);
    }
    // An MLP beside the block, run after it (Granite-4.0-H's shared_mlp: GraniteMoeHybridDecoderLayer.forward
    // `self.block_sparse_moe(h) + self.shared_mlp(h)`).
    last.clear();
    for (const T& x : rest)
      if (x.spec->name.rfind(moe_prefix, 0) != 0) use(x, last);
    return;
  }
  for (size_t i = 0; i < rest.size(); ++i) {
    use(rest[i], last);
    // LlamaMLP.forward: down_proj(act_fn(gate_proj(x)) * up_proj(x)): the activation module runs
    // after the first projection.
    if (i == 0) {
      module();
      last.clear();
    }
  }
}

void ParamOrderBuilder::add_decoder_layer(const models::LayerInventory& layer) {
  std::vector<T> norms, attn, rest;
  const std::string moe_prefix = layer.moe_block.empty() ? std::string() : layer.moe_block + ".";
  for (const auto& t : layer.tensors) {
    T x{&t, owner_of(t.name)};
    if (!moe_prefix.empty() && t.name.rfind(moe_prefix, 0) == 0)
      rest.push_back(x);  // the MoE block (a MoE layer has no dense MLP)
    else if (t.name.find("self_attn.") != std::string::npos ||
             t.name.find("linear_attn.") != std::string::npos || t.name.find(".mamba.") != std::string::npos)
      attn.push_back(x);  // q/k norms (Qwen3, Gemma-3), MLA's q_a/kv_a norms and a Gated DeltaNet's gated
                          // norm are registered in their token mixer
    else if (t.is_norm)
      norms.push_back(x);
    else
      rest.push_back(x);
  }
  register_decoder_tensors(attn, rest, norms);
  std::string last;
  module();  // decoder layer
  if (!norms.empty()) use(norms[0], last);
  module();  // self_attn container
  last.clear();
  for (const T* x : attention_exec_order(attn)) use(*x, last);
  last.clear();
  for (size_t i = 1; i < norms.size(); ++i) use(norms[i], last);
  module();  // mlp container (the MoE block)
  last.clear();
  add_mlp(layer, rest, moe_prefix, last);
}

ParamOrder param_order(const Workload& w, const ModelStats& s, const ZeroConfig& z) {
  if (w.train.method == Method::QLoRA || w.model.params_only) {
    ParamOrder o;
    const TensorSizeTable& t = s.mem.trainable_tensors;
    for (size_t i = 0; i < t.numel.size(); ++i)
      for (int64_t k = 0; k < t.count[i]; ++k) o.numel.push_back(t.numel[i]);
    for (size_t i = 0; i < o.numel.size(); ++i) o.exec.push_back(i);
    o.trainable.assign(o.numel.size(), true);
    o.lead.assign(o.numel.size(), 0);
    return o;
  }
  const bool llama_layout = norms_registered_last(w.model.model_type);
  ParamOrderBuilder b(w, z);
  b.module();  // the *ForCausalLM root
  b.module();  // the base model (LlamaModel, GPT2Model, ...)
  const std::vector<models::LayerInventory> vision = vision_groups_as_trained(w);
  const size_t vision_first = b.o.numel.size();
  for (const auto& layer : vision) b.add_unrun_layer(layer);
  // The runtime tree (transformers 5 fuses a MoE block's experts: models/runtime_inventory.cpp) is
  // what DeepSpeed registers; LoRA keeps the checkpoint names PEFT targets (as planner/memory_stats.cpp).
  for (const auto& layer : b.lora ? w.model.inventory() : w.model.runtime_inventory()) {
    if (!llama_layout || !layer.is_decoder_layer)
      b.add_plain_layer(layer, llama_layout);
    else
      b.add_decoder_layer(layer);
    // Images run the vision model after the token embedding (modeling_qwen2_5_vl.py Qwen2_5_VLModel.forward:
    // get_input_embeddings()(input_ids), then get_image_features; Gemma3Model and LlavaModel alike).
    if (layer.name == "embed" && w.train.images_per_sample > 0) b.run_vision_layers(vision, vision_first);
  }
  return std::move(b.o);
}

// param_order builds the model's tensor inventory (strings per tensor): the search prices many
// candidates of one workload, so the order is kept per (workload, leaf setting) on the calling thread.
// The reference stays valid until this thread's next call (the cache may then move its entries).
const ParamOrder& cached_param_order(const Workload& w, const ModelStats& s, const ZeroConfig& z) {
  struct Entry {
    const void* stats;
    int64_t total, trainable;
    std::string model;
    int leaf;  // -1 below stage 3, else the effective MoeLeaf
    int version, method;
    int64_t lora_rank, images;
    std::vector<std::string> targets;
    ParamOrder order;
  };
  thread_local std::vector<Entry> cache;
  const int leaf = z.stage == 3 ? static_cast<int>(effective_moe_leaf(w, z)) : -1;
  const std::string model = w.model.name + "/" + w.model.model_type;
  for (const Entry& e : cache)
    if (e.stats == &s && e.total == s.mem.total_params && e.trainable == s.mem.trainable_params &&
        e.model == model && e.leaf == leaf && e.version == static_cast<int>(w.train.deepspeed_version) &&
        e.method == static_cast<int>(w.train.method) && e.lora_rank == w.train.lora_rank &&
        e.images == w.train.images_per_sample && e.targets == w.train.lora_targets)
      return e.order;
  if (cache.size() >= 8) cache.erase(cache.begin());
  cache.push_back({&s, s.mem.total_params, s.mem.trainable_params, model, leaf,
                   static_cast<int>(w.train.deepspeed_version), static_cast<int>(w.train.method),
                   w.train.lora_rank, w.train.images_per_sample, w.train.lora_targets, param_order(w, s, z)});
  return cache.back().order;
}

// Greedy bucketing shared by stages 1-3: flush when the next gradient would overflow the bucket
// (and the bucket is not empty). Returns the indices (into grads_in_order) of each flush, in order.
std::vector<std::vector<size_t>> bucket_flush_members(const std::vector<int64_t>& grads_in_order,
                                                      int64_t bucket) {
  std::vector<std::vector<size_t>> flushes;
  std::vector<size_t> cur;
  int64_t elems = 0;
  for (size_t i = 0; i < grads_in_order.size(); ++i) {
    const int64_t g = grads_in_order[i];
    if (elems > 0 && elems + g > bucket) {
      flushes.push_back(cur);
      cur.clear();
      elems = 0;
    }
    elems += g;
    cur.push_back(i);
  }
  if (elems > 0) flushes.push_back(cur);
  return flushes;
}

// reduce_scatter_coalesced pads every tensor to ceil(numel/N) per rank.
int64_t padded_to_n(int64_t g, int64_t n) {
  return ceil_div(g, n) * n;
}

}  // namespace

PartitionHoldings params_in_partition_numel(const Workload& w, const ModelStats& s) {
  PartitionHoldings h;
  if (w.model.params_only || w.train.method == Method::QLoRA) return h;      // order unknown
  const int64_t n = layout_of(w, ZeroConfig::deepspeed_defaults(2)).zero();  // the ZeRO group
  const ParamOrder order = param_order(w, s, ZeroConfig::deepspeed_defaults(2));
  std::vector<bool> runs(order.numel.size(), false);
  for (size_t i : order.exec) runs[i] = true;
  std::vector<int64_t> grads;
  std::vector<bool> grad_runs;
  for (size_t i = 0; i < order.numel.size(); ++i)
    if (order.trainable[i]) {
      grads.push_back(order.numel[i]);
      grad_runs.push_back(runs[i]);
    }
  int64_t total = 0;
  for (int64_t g : grads) total += g;
  if (total == 0) return h;
  const int64_t part = ceil_div(total, 2 * n) * 2;  // padded / N
  // Walk the parameters once: each adds its numel to every rank whose partition it overlaps.
  std::vector<int64_t> held(static_cast<size_t>(n), 0), piece(static_cast<size_t>(n), 0),
      unused(static_cast<size_t>(n), 0);
  int64_t lo = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    const int64_t g = grads[i];
    const int64_t hi = lo + g;
    for (int64_t r = lo / part; r <= (hi - 1) / part && r < n; ++r) {
      held[static_cast<size_t>(r)] += g;
      if (!grad_runs[i]) unused[static_cast<size_t>(r)] += g;
      const int64_t overlap = std::min(hi, (r + 1) * part) - std::max(lo, r * part);
      piece[static_cast<size_t>(r)] = std::max(piece[static_cast<size_t>(r)], overlap);
    }
    lo = hi;
  }
  h.valid = true;
  h.rank0 = held[0];
  h.largest = *std::max_element(held.begin(), held.end());
  h.rank0_piece = piece[0];
  h.largest_piece = *std::max_element(piece.begin(), piece.end());
  h.unused_rank0 = unused[0];
  h.unused_largest = *std::max_element(unused.begin(), unused.end());
  return h;
}

const char* call_op_name(const CollectiveCall& c) {
  return c.to_one_rank ? "reduce" : collective_name(c.kind);
}

// One parameter use in stage 3's module trace: the parameter and the trace step using it.
struct InTrace {
  size_t param;
  int64_t step;
};

// Stage 3's module trace (forward modules, then the backward's in reverse, those without a backward
// skipped), its parameter queue, the elements traversed before each step and each parameter's uses.
struct Stage3Trace {
  std::vector<std::vector<size_t>> steps;
  std::vector<bool> leaf;
  std::vector<InTrace> params;
  std::vector<int64_t> prefix;
  std::vector<std::vector<int64_t>> occurrences;
  size_t fwd_len = 0;
};

Stage3Trace stage3_trace(const ParamOrder& order) {
  const size_t P = order.numel.size();
  const std::vector<int64_t>& all = order.numel;
  Stage3Trace t;
  std::vector<std::vector<size_t>>& trace = t.steps;
  trace = order.fwd_modules;
  std::vector<bool>& trace_leaf = t.leaf;
  trace_leaf = order.leaf;
  for (size_t k = order.fwd_modules.size(); k-- > 0;)
    if (!order.no_backward[k]) {
      trace.push_back(order.fwd_modules[k]);
      trace_leaf.push_back(order.leaf[k]);
    }
  std::vector<InTrace>& param_trace = t.params;
  for (size_t k = 0; k < trace.size(); ++k)
    for (size_t p : trace[k]) param_trace.push_back({p, static_cast<int64_t>(k)});
  // Elements traversed before each trace step, and the steps each parameter is used at (ascending).
  std::vector<int64_t>& prefix = t.prefix;
  prefix.assign(trace.size() + 1, 0);
  std::vector<std::vector<int64_t>>& occurrences = t.occurrences;
  occurrences.assign(P, {});
  for (size_t k = 0; k < trace.size(); ++k) {
    prefix[k + 1] = prefix[k];
    for (size_t p : trace[k]) {
      prefix[k + 1] += all[p];
      if (occurrences[p].empty() || occurrences[p].back() != static_cast<int64_t>(k))
        occurrences[p].push_back(static_cast<int64_t>(k));
    }
  }
  t.fwd_len = order.fwd_modules.size();
  return t;
}

// DeepSpeed's collective calls for one plan, built path by path (deepspeed_collectives below): the
// engine's all-reduce (stage 0 wrappers), the stage-1/2 optimizer's bucketed reductions, stage 3's
// fetches and reduce-scatters from a simulation of its parameter coordinator; then each path's step.
struct CallListBuilder {
  const Workload& w;
  const ModelStats& s;
  const ZeroConfig& z;
  int n;
  int64_t N;
  int stage;
  int64_t accum;
  bool off_opt;
  RuntimePath path;
  int64_t comm;  // engine.py communication_data_type: the config's value, else fp16/bf16, else fp32
  // The gradient reductions' element size: comm, or fp32 under Ulysses SP (sequence_parallel.h
  // gradient_reduce_bytes).
  int64_t grad_comm;
  int micro_step = -1;  // set inside the per-micro-step loops; -1: once per step
  std::vector<CollectiveCall> out;
  const ParamOrder& order;
  std::vector<int64_t> grads;        // the trainable parameters, module.parameters() order
  std::vector<size_t> backward_idx;  // indices into grads, reverse execution order

  CallListBuilder(const Workload& w_, const ModelStats& s_, const ZeroConfig& z_);
  void add(Phase ph, CollectiveKind k, int64_t bytes, int64_t eb, const char* caller) {
    out.push_back(CollectiveCall{ph, k, bytes, eb, n, caller});
    out.back().micro_step = micro_step;
  }
  void engine_allreduce();
  void zero12();
  void zero12_multi_rank_flush(const std::vector<size_t>& members, const std::vector<size_t>& reduce_idx,
                               const std::vector<int64_t>& offset, int64_t part);
  void zero12_per_owner_flush(const std::vector<size_t>& members, const std::vector<size_t>& reduce_idx,
                              const std::vector<int64_t>& offset, int64_t part);
  void stage3();
  void stage3_micro_step(const Stage3Trace& tr, std::vector<bool>& available, std::vector<bool>& secondary,
                         bool gathers);
  // One fetch of `params` (indices into order.numel, the ones not yet available): ZeRO++ hpZ splits it
  // into the parameters holding a secondary partition, gathered first in the hpZ group, and the rest,
  // gathered over the ZeRO group (partitioned_param_coordinator.py __all_gather_params_: "some of the
  // parameters have a valid hpz secondary tensor ... but others do not", one all_gather_coalesced each).
  void stage3_fetch(Phase ph, const std::vector<size_t>& params, const std::vector<bool>& secondary);
  void stage3_reduce(const std::vector<size_t>& members, int64_t payload);
  int hpz = 1;  // ZeRO++ hpZ group size (zero_config.h ZeroConfig::hpz); 1: no secondary partition
  std::vector<size_t> fetching;  // one fetch's parameters (reused: a step makes one per trace step)
  void stage3_step();
};

// Every ZeRO collective runs over the ZeRO group (SP x DP; planner/parallel.h).
CallListBuilder::CallListBuilder(const Workload& w_, const ModelStats& s_, const ZeroConfig& z_)
    : w(w_),
      s(s_),
      z(z_),
      n(layout_of(w_, z_).zero()),
      N(n),
      stage(std::clamp(z_.stage, 0, 3)),
      accum(std::max<int64_t>(1, z_.grad_accum)),
      off_opt(stage >= 1 && z_.offload_optimizer != Offload::None),
      path(runtime_path(w_.train.deepspeed_version, stage, w_.train.precision, z_.grad_accum_dtype, off_opt)),
      comm(elem_bytes_of(w_.train.precision)),
      grad_comm(gradient_reduce_bytes(w_, z_, elem_bytes_of(w_.train.precision))),
      order(cached_param_order(w_, s_, z_)) {
  // module.parameters() order: DeepSpeed's flat buffers, the stage-0 all-reduce, stage 1's
  // boundary reduction (stage_1_and_2.py reduce_gradients walks bit16_groups in order) and the
  // persistent-parameter list. Stages 2 and 3 reduce from autograd hooks, in reverse execution order.
  const std::vector<int64_t>& all = order.numel;  // every parameter (stage 3 partitions frozen ones too)
  // The trainable ones (DeepSpeed's optimizer groups), in module.parameters() order.
  std::vector<size_t> grad_of(all.size(), SIZE_MAX);
  for (size_t i = 0; i < all.size(); ++i)
    if (order.trainable[i]) {
      grad_of[i] = grads.size();
      grads.push_back(all[i]);
    }
  for (auto it = order.exec.rbegin(); it != order.exec.rend(); ++it)
    if (order.trainable[*it]) backward_idx.push_back(grad_of[*it]);
  hpz = z.hpz(w.cluster.world_size());
}

void CallListBuilder::stage3_fetch(Phase ph, const std::vector<size_t>& params,
                                   const std::vector<bool>& secondary) {
  const std::vector<int64_t>& all = order.numel;
  int64_t primary = 0, second = 0;
  for (size_t p : params) {
    if (secondary[p])
      // partition_parameters.py _partition_param_sec: the secondary partition is the padded tensor
      // (padded to a multiple of N, _aligned_size) over the hpZ group: ceil(numel / N) x N / hpz elements.
      second += ceil_div(all[p], N) * (N / hpz);
    else
      primary += ceil_div(all[p], N);
  }
  // ZeRO++ qwZ (planner/zeropp_quant.h): the int8 partition, then its fp32 scales, in the same group.
  const auto gather = [&](int64_t numel, int group, CallGroup in) {
    if (z.qwz()) {
      out.push_back(CollectiveCall{ph, CollectiveKind::AllGather, numel, 1, group, "_dist_allgather_fn",
                                   false, micro_step, in});
      // DeepSpeed asserts where qwz_groups finds no group count; the scales are then sized at the
      // target group size (0.05% of the data).
      const int64_t g = qwz_groups(numel);
      const int64_t groups = g > 0 ? g : (numel + kQwzTargetGroupSize - 1) / kQwzTargetGroupSize;
      out.push_back(CollectiveCall{ph, CollectiveKind::AllGather, groups * 4, 4, group, "_dist_allgather_fn",
                                   false, micro_step, in});
      return;
    }
    out.push_back(CollectiveCall{ph, CollectiveKind::AllGather, numel * comm, comm, group,
                                 "_dist_allgather_fn", false, micro_step, in});
  };
  if (second > 0) gather(second, hpz, CallGroup::kHpzSecondary);
  if (primary > 0) gather(primary, n, CallGroup::kZero);
}

// One flush of stage 3's IPG bucket (stage3.py __avg_scatter_grads): one reduce_scatter_coalesced call, or
// under ZeRO++ qgZ on several nodes all_to_all_quant_reduce's exchanges, gradient by gradient
// (planner/zeropp_quant.h).
void CallListBuilder::stage3_reduce(const std::vector<size_t>& members, int64_t payload) {
  const int nodes = w.cluster.nodes;
  if (!z.qgz(nodes)) {
    add(kBackward, CollectiveKind::ReduceScatter, payload * grad_comm, grad_comm, "_torch_reduce_scatter_fn");
    return;
  }
  const int L = w.cluster.gpus_per_node;
  for (size_t p : members) {
    const int64_t numel = order.numel[p];
    // N: the ZeRO group's ranks (an int in ParallelLayout), held as int64_t for the size arithmetic.
    const QgzExchange e =
        qgz_exchange(numel, p < order.lead.size() ? order.lead[p] : 0, static_cast<int>(N), L);
    if (!e.quantized) {
      add(kBackward, CollectiveKind::ReduceScatter, padded_to_n(numel, N) * grad_comm, grad_comm,
          "_torch_reduce_scatter_fn");
      continue;
    }
    const auto a2a = [&](int64_t bytes, int64_t eb, int group, const char* caller, CallGroup in) {
      out.push_back(CollectiveCall{kBackward, CollectiveKind::AllToAll, bytes, eb, group, caller, false,
                                   micro_step, in});
    };
    a2a(e.intra_data, 1, L, kQgzIntraCaller, CallGroup::kQgzNode);
    a2a(e.intra_scales, 4, L, kQgzIntraCaller, CallGroup::kQgzNode);
    a2a(e.inter_data, 1, nodes, kQgzInterCaller, CallGroup::kQgzAcross);
    a2a(e.inter_scales, 4, nodes, kQgzInterCaller, CallGroup::kQgzAcross);
  }
}

// Stage 0 (Basic, FP16_Optimizer, BF16_Optimizer): the engine's allreduce_bucket, then the step's calls.
void CallListBuilder::engine_allreduce() {
  // allreduce_no_retain: append, then flush when numel > elements_per_buffer.
  int64_t numel = 0;
  for (int64_t g : grads) {
    numel += g;
    if (numel > kMemoryOptAllreduceSize) {
      add(kBackward, CollectiveKind::AllReduce, numel * grad_comm, grad_comm,
          "DeepSpeedEngine.allreduce_bucket");
      numel = 0;
    }
  }
  if (numel > 0)
    add(kBackward, CollectiveKind::AllReduce, numel * grad_comm, grad_comm,
        "DeepSpeedEngine.allreduce_bucket");
  // Plain fp32 optimizer with gradient_clipping (HF Trainer default max_grad_norm 1.0; recorded runs
  // use 1.0): engine.py _take_model_step -> clip_fp32_gradients -> runtime/utils.py clip_grad_norm_,
  // one fp32 all_reduce of the norm (recorded in llama-gqa_s0_n*_fp32_default).
  if (path.wrapper == OptimizerWrapper::Basic) add(kStep, CollectiveKind::AllReduce, 4, 4, "clip_grad_norm_");
  // FP16_Optimizer under Ulysses SP: DeepSpeed's SP mpu makes the SP group the model-parallel group, and
  // FP16_Optimizer.step all-reduces its overflow flag (CheckOverflow.has_overflow, uint8) and gradient
  // norm (get_flattened_grad_norm, fp32) over it (recorded: 1 and 4 bytes in the group of sp ranks;
  // without an mpu neither call is made).
  // Under AutoTP the mpu is deepspeed.utils.groups, whose model-parallel group is the TP group (recorded
  // in fixtures-tp: the same two calls in the group of tp ranks).
  const int mp = std::max({1, w.train.sequence_parallel, w.train.tensor_parallel});
  if (path.wrapper == OptimizerWrapper::FP16Optimizer && mp > 1) {
    out.push_back(CollectiveCall{kStep, CollectiveKind::AllReduce, 1, 1, mp, "CheckOverflow.has_overflow"});
    out.push_back(CollectiveCall{kStep, CollectiveKind::AllReduce, 4, 4, mp, "get_flattened_grad_norm"});
  }
  if (path.wrapper == OptimizerWrapper::BF16Optimizer) {
    // bf16_optimizer.py step -> update_lp_params -> all_gather_dp_groups of the bf16 partitions.
    const int64_t part = ceil_div(ceil_div(s.mem.trainable_params, 2 * N) * 2 * N, N);
    if (N > 1) add(kStep, CollectiveKind::AllGather, part * 2, 2, "all_gather_into_tensor_dp_groups");
  }
}

// average_tensor with use_multi_rank_bucket_allreduce: one flush's all_reduce calls.
void CallListBuilder::zero12_multi_rank_flush(const std::vector<size_t>& members,
                                              const std::vector<size_t>& reduce_idx,
                                              const std::vector<int64_t>& offset, int64_t part) {
  // average_tensor with use_multi_rank_bucket_allreduce: the flush's gradients are cut at the
  // partition boundaries into slices (consecutive slices of one owner merged), and
  // allreduce_and_scatter(numel_per_bucket = reduce_bucket_size) issues an all_reduce each
  // time the running numel EXCEEDS the bucket, then one for the rest. A flush holds at most
  // the bucket, so this splits only a parameter larger than the bucket (reduced alone,
  // extra_large_param_to_reduce) whose first slice already exceeds it: two calls when it
  // straddles a partition boundary (issue 23, item 10).
  std::vector<int64_t> slices;
  int64_t prev_owner = -1;
  for (size_t i : members) {
    const size_t fwd = reduce_idx[i];
    for (int64_t lo = offset[fwd], hi = offset[fwd + 1]; lo < hi;) {
      const int64_t owner = lo / part;
      const int64_t end = std::min(hi, (owner + 1) * part);
      if (owner == prev_owner && !slices.empty())
        slices.back() += end - lo;
      else
        slices.push_back(end - lo);
      prev_owner = owner;
      lo = end;
    }
  }
  int64_t numel = 0;
  for (int64_t e : slices) {
    numel += e;
    if (numel > z.reduce_bucket_size) {
      add(kBackward, CollectiveKind::AllReduce, numel * grad_comm, grad_comm,
          "DeepSpeedZeroOptimizer.allreduce_bucket");
      numel = 0;
    }
  }
  if (numel > 0)
    add(kBackward, CollectiveKind::AllReduce, numel * grad_comm, grad_comm,
        "DeepSpeedZeroOptimizer.allreduce_bucket");
}

// use_multi_rank_bucket_allreduce false: one flush's slices reduced to their owning ranks.
void CallListBuilder::zero12_per_owner_flush(const std::vector<size_t>& members,
                                             const std::vector<size_t>& reduce_idx,
                                             const std::vector<int64_t>& offset, int64_t part) {
  std::vector<int64_t> owners, numel;
  for (size_t i : members) {
    const size_t fwd = reduce_idx[i];  // index in module.parameters() order
    int64_t lo = offset[fwd];
    const int64_t hi = offset[fwd + 1];
    while (lo < hi) {
      const int64_t owner = lo / part;
      const int64_t end = std::min(hi, (owner + 1) * part);
      auto it = std::find(owners.begin(), owners.end(), owner);
      if (it == owners.end()) {
        owners.push_back(owner);
        numel.push_back(0);
        it = owners.end() - 1;
      }
      numel[static_cast<size_t>(it - owners.begin())] += end - lo;
      lo = end;
    }
  }
  for (int64_t e : numel) {
    add(kBackward, CollectiveKind::AllReduce, e * grad_comm, grad_comm,
        "DeepSpeedZeroOptimizer.allreduce_bucket");
    out.back().to_one_rank = true;
  }
}

// Stages 1/2 (DeepSpeedZeroOptimizer): the gradient reductions, then the step's calls.
void CallListBuilder::zero12() {
  const int64_t reductions = stage == 2 ? accum : 1;
  // average_tensor: with reduce_scatter (default) and use_multi_rank_bucket_allreduce (default
  // True in 0.19.8) every slice goes to one "allreduce" bucket, sub-bucketed by allreduce_and_scatter
  // at reduce_bucket_size (reached only by a parameter larger than the bucket, below) -> one
  // all_reduce per flush; reduce_scatter False -> gradient_reduction_w_predivide,
  // one all_reduce per flush. use_multi_rank_bucket_allreduce False: the flush's gradient slices are
  // grouped by the rank owning them (partition boundaries of the padded flat) and each group is
  // dist.reduce'd to its owner (allreduce_no_retain(rank=dst)), owners in order of first slice.
  const bool per_owner = z.reduce_scatter && !z.use_multi_rank_bucket_allreduce && N > 1;
  // Offsets of each gradient in the flat buffer (module.parameters() order).
  std::vector<int64_t> offset(grads.size() + 1, 0);
  for (size_t i = 0; i < grads.size(); ++i) offset[i + 1] = offset[i] + grads[i];
  const int64_t part = ceil_div(s.mem.trainable_params, 2 * N) * 2;
  // Stage 2 reduces from the gradient hooks (reverse execution order). So does stage 1 with
  // overlap_comm, at the boundary micro-step (stage_1_and_2.py process_gradients: `if
  // self.partition_gradients or self.overlap_comm: reduce_ready_partitions_and_remove_grads`, which
  // reduces `if self.partition_gradients or self.is_gradient_accumulation_boundary()`); without it,
  // stage 1 walks bit16_groups in module.parameters() order after the backward (reduce_gradients:
  // `if not self.overlap_comm: for param in group: ...`).
  // Either way only parameters that received a gradient are reduced (reduce_gradients: `if grad_reduc is
  // not None`): a vision tower that saw no image is not (planner/vision.h).
  std::vector<size_t> reduce_idx = backward_idx;
  if (stage == 1 && !z.overlap_comm) std::sort(reduce_idx.begin(), reduce_idx.end());
  std::vector<int64_t> reduce_order;
  for (size_t i : reduce_idx) reduce_order.push_back(grads[i]);
  const auto flushes = bucket_flush_members(reduce_order, z.reduce_bucket_size);
  for (int64_t m = 0; m < reductions; ++m)
    for (const auto& members : flushes) {
      micro_step = stage == 2 ? static_cast<int>(m) : -1;  // stage 1: once, at the boundary
      if (per_owner) {
        zero12_per_owner_flush(members, reduce_idx, offset, part);
      } else if (!z.reduce_scatter || N == 1) {
        // gradient_reduction_w_predivide: one all_reduce of the flush (a world of one: every slice
        // is rank 0's, merged into one below-or-above-bucket slice, one call either way).
        int64_t b = 0;
        for (size_t i : members) b += reduce_order[i];
        add(kBackward, CollectiveKind::AllReduce, b * grad_comm, grad_comm,
            "DeepSpeedZeroOptimizer.allreduce_bucket");
      } else {
        zero12_multi_rank_flush(members, reduce_idx, offset, part);
      }
    }
  micro_step = -1;
  // has_overflow's 1-byte all_reduce only in 16-bit training (recorded: absent in the fp32 runs).
  // Only in 0.19.8 (recorded: tests/deepspeed/fixtures-other-versions/0.16.9 and 0.18.9 issue the norm
  // all-reduce alone).
  // Under AutoTP the engine's mpu is deepspeed.utils.groups (engine.py _configure_tensor_parallel_states),
  // and both scalars are then all-reduced again over its model-parallel group, the TP group
  // (stage_1_and_2.py _model_parallel_all_reduce; recorded in fixtures-tp).
  const int tp = std::max(1, w.train.tensor_parallel);
  const auto tp_scalar = [&](int64_t bytes) {
    if (tp > 1)
      out.push_back(CollectiveCall{kStep, CollectiveKind::AllReduce, bytes, bytes, tp,
                                   "DeepSpeedZeroOptimizer._model_parallel_all_reduce"});
  };
  if (w.train.precision != Precision::FP32 && w.train.deepspeed_version == DeepSpeedVersion::V0_19_8) {
    add(kStep, CollectiveKind::AllReduce, 1, 1, "DeepSpeedZeroOptimizer.has_overflow");
    tp_scalar(1);
  }
  if (z.muon) {
    // Muon's two param groups (planner/muon.h), each normed and gathered on its own, Muon's first
    // (recorded: tests/deepspeed/fixtures-muon, llama-gqa_s{1,2}_n{2,4}_*_muon).
    const MuonHoldings h = muon_holdings(w.model, N);
    add(kStep, CollectiveKind::AllReduce, 4, 4, "DeepSpeedZeroOptimizer.get_grad_norm_direct");
    add(kStep, CollectiveKind::AllReduce, 4, 4, "DeepSpeedZeroOptimizer.get_grad_norm_direct");
    if (N > 1) {
      add(kStep, CollectiveKind::AllGather, h.muon_partition * comm, comm,
          "all_gather_into_tensor_dp_groups");
      add(kStep, CollectiveKind::AllGather, h.adam_partition * comm, comm,
          "all_gather_into_tensor_dp_groups");
    }
    return;
  }
  add(kStep, CollectiveKind::AllReduce, 4, 4, "DeepSpeedZeroOptimizer.get_grad_norm_direct");
  tp_scalar(4);
  // utils.py all_gather_into_tensor_dp_groups: `if dp_world_size == 1: continue`.
  if (N > 1) add(kStep, CollectiveKind::AllGather, part * comm, comm, "all_gather_into_tensor_dp_groups");
}

// Stage 3: the parameter fetches and gradient reduce-scatters of every micro-step.
// One micro-step of the coordinator simulation (CallListBuilder::stage3): `available` carries over.
void CallListBuilder::stage3_micro_step(const Stage3Trace& tr, std::vector<bool>& available,
                                        std::vector<bool>& secondary, bool gathers) {
  const std::vector<int64_t>& all = order.numel;
  const size_t P = all.size();
  const int64_t thr = z.param_persistence_threshold;
  auto persistent = [&](size_t i) { return all[i] <= thr; };
  const std::vector<std::vector<size_t>>& trace = tr.steps;
  const std::vector<bool>& trace_leaf = tr.leaf;
  const std::vector<InTrace>& param_trace = tr.params;
  const std::vector<int64_t>& prefix = tr.prefix;
  const std::vector<std::vector<int64_t>>& occurrences = tr.occurrences;
  const size_t fwd_len = tr.fwd_len;
  size_t queue = 0;  // position in param_trace
  std::vector<int64_t> recent(P, static_cast<int64_t>(-1e10));
  int64_t n_available = 0;
  int64_t bucket_elems = 0, bucket_payload = 0;
  std::vector<size_t> bucket;  // the IPG bucket's parameters (qgZ exchanges them one by one)
  for (size_t step = 0; step < trace.size(); ++step) {
    const Phase ph = step < fwd_len ? kForward : kBackward;
    const auto& params = trace[step];
    fetching.clear();
    for (size_t p : params)
      if (!available[p]) {
        available[p] = true;
        n_available += all[p];
        fetching.push_back(p);
      }
    if (gathers) stage3_fetch(ph, fetching, secondary);
    // Pop this module's own uses off the queue.
    size_t not_fetched = 0;
    for (size_t p : params) not_fetched += recent[p] < static_cast<int64_t>(step);
    for (size_t popped = 0; queue < param_trace.size() && popped < not_fetched; ++popped, ++queue)
      recent[param_trace[queue].param] = param_trace[queue].step;
    if (z.prefetch_bucket_size > 0) {
      const int64_t cap = std::min(z.max_live_parameters - n_available, z.prefetch_bucket_size);
      int64_t numel = 0;
      fetching.clear();
      while (queue < param_trace.size() && numel < cap) {
        const InTrace& t = param_trace[queue++];
        recent[t.param] = std::max(recent[t.param], t.step);
        if (!available[t.param]) {
          available[t.param] = true;
          numel += all[t.param];
          fetching.push_back(t.param);
        }
      }
      n_available += numel;
      if (gathers) stage3_fetch(ph, fetching, secondary);
    }
    // Backward: the module's gradients enter the IPG bucket as autograd produces them (reverse
    // execution order); a gradient that would overflow a non-empty bucket flushes it first.
    if (ph == kBackward) {
      std::vector<size_t> grad_order(params.rbegin(), params.rend());
      if (trace_leaf[step]) grad_order.assign(params.begin(), params.end());
      for (size_t pi : grad_order) {
        if (!order.trainable[pi]) continue;  // frozen: no gradient, no hook
        const int64_t g = all[pi];
        if (bucket_elems > 0 && bucket_elems + g > z.reduce_bucket_size) {
          stage3_reduce(bucket, bucket_payload);
          bucket_elems = bucket_payload = 0;
          bucket.clear();
        }
        bucket_elems += g;
        bucket_payload += padded_to_n(g, N);
        bucket.push_back(pi);
      }
    }
    // release_sub_module after the module ran (step id already advanced): __params_to_release
    // walks the trace from the next module, whole modules at a time, while fewer than
    // stage3_max_reuse_distance elements are traversed, and keeps the parameters it meets. A
    // parameter is therefore kept iff its first use at or after `next` starts within the window:
    // found by its occurrence list and the trace's prefix sums (one lookup instead of a walk).
    const int64_t next = static_cast<int64_t>(step) + 1;
    for (size_t p : params) {
      if (persistent(p) || recent[p] > next || !available[p]) continue;
      const std::vector<int64_t>& o = occurrences[p];
      const auto it = std::lower_bound(o.begin(), o.end(), next);
      const bool reused =
          it != o.end() &&
          prefix[static_cast<size_t>(*it)] - prefix[static_cast<size_t>(next)] < z.max_reuse_distance;
      if (reused) continue;
      available[p] = false;
      n_available -= all[p];
      // Released: Init._partition makes the secondary partition of a parameter that has none
      // (_partition_param_sec) when hpZ is on.
      secondary[p] = hpz > 1;
    }
  }
  // The backward epilogue flushes what is left (stage3.py independent_gradient_partition_epilogue).
  if (bucket_elems > 0) stage3_reduce(bucket, bucket_payload);
}

void CallListBuilder::stage3() {
  const int64_t thr = z.param_persistence_threshold;
  // partition_parameters.py all_gather_coalesced and _allgather_params_coalesced:
  // `if all(self._partition_world_size(param) == 1 ...): return _no_gather_coalesced(params)`, so a
  // world of one issues no parameter gathers.
  const bool gathers = N > 1;
  if (w.model.params_only) return;
  const std::vector<int64_t>& all = order.numel;
  // A simulation of partitioned_param_coordinator.py with a complete trace (every step after the
  // first): fetch_sub_module gathers the module's unavailable parameters in one coalesced call, then
  // prefetches from the parameter queue while the prefetched numel is below
  // min(max_live_parameters - available, stage3_prefetch_bucket_size) (one more call);
  // release_sub_module frees the module's non-persistent parameters unless they are used again
  // within stage3_max_reuse_distance parameters of the module trace (__params_to_release) or were
  // already popped from the queue for a later use. reset_step at each forward empties the counters;
  // the optimizer step releases everything (stage3.py step -> _partition_all_parameters).
  const Stage3Trace t = stage3_trace(order);
  std::vector<bool> available(all.size(), false);
  for (size_t i = 0; i < all.size(); ++i) available[i] = all[i] <= thr;
  // ZeRO++ hpZ: which parameters hold a secondary partition when the step begins. The previous step's
  // _post_step ran invalidate_secondary_tensor, which drops those of the optimizer's (trainable)
  // parameters only; a frozen parameter keeps the one zero.Init made when it partitioned it.
  std::vector<bool> secondary(all.size(), false);
  for (size_t i = 0; i < all.size(); ++i) secondary[i] = hpz > 1 && !order.trainable[i];
  for (int64_t micro = 0; micro < accum; ++micro) {
    micro_step = static_cast<int>(micro);
    stage3_micro_step(t, available, secondary, gathers);
  }
}

// Stage 3's step: the norm all-reduces per sub-group and the persistent parameters' gathers.
void CallListBuilder::stage3_step() {
  const int64_t thr = z.param_persistence_threshold;
  const bool gathers = N > 1;
  const std::vector<int64_t>& all = order.numel;
  micro_step = -1;
  // stage3.py _get_norm_groups: one norm all_reduce per sub-group (fp16_groups), fp64 from
  // get_grad_norm_direct, fp32 from complete_grad_norm_calculation_for_cpu_offload with optimizer
  // offload. Sub-groups (_create_fp16_sub_groups): parameters in order, a group closed once its
  // partition numel reaches sub_group_size (one group when sub_group_size >= the whole partition).
  {
    int64_t total = 0;
    for (int64_t g : grads) total += ceil_div(g, N);
    int64_t groups = 0, acc = 0;
    if (z.sub_group_size >= total) {
      groups = 1;
    } else {
      for (size_t i = 0; i < grads.size(); ++i) {
        acc += ceil_div(grads[i], N);
        if (acc >= z.sub_group_size || i + 1 == grads.size()) {
          ++groups;
          acc = 0;
        }
      }
    }
    const int64_t nb = off_opt ? 4 : 8;
    // Under AutoTP each norm is all-reduced again over the TP group (stage3.py _model_parallel_all_reduce
    // with the engine's mpu = deepspeed.utils.groups; recorded in fixtures-tp).
    const int tp = std::max(1, w.train.tensor_parallel);
    for (int64_t g = 0; g < groups; ++g) {
      add(kStep, CollectiveKind::AllReduce, nb, nb,
          off_opt ? "DeepSpeedZeroOptimizer_Stage3.complete_grad_norm_calculation_for_cpu_offload"
                  : "DeepSpeedZeroOptimizer_Stage3.get_grad_norm_direct");
      if (tp > 1)
        out.push_back(CollectiveCall{kStep, CollectiveKind::AllReduce, nb, nb, tp,
                                     "DeepSpeedZeroOptimizer_Stage3._model_parallel_all_reduce"});
    }
  }
  // _post_step: persistent parameters, one all_gather each (in module order).
  for (int64_t g : all)
    if (gathers && g <= thr)
      add(kStep, CollectiveKind::AllGather, ceil_div(g, N) * comm, comm, "Init._allgather_params_coalesced");
}

std::vector<CollectiveCall> deepspeed_collectives(const Workload& w, const ModelStats& s,
                                                  const ZeroConfig& z) {
  if (z.ep_size > 1) {
    // AutoEP (planner/expert_parallel.h): its all_to_all_single calls after the ZeRO ones. Not modelled
    // here: the ZeRO calls of the separate `moe` parameter group over the expert-data-parallel group.
    ZeroConfig dense = z;
    dense.ep_size = 1;
    std::vector<CollectiveCall> calls = deepspeed_collectives(w, s, dense);
    const std::vector<CollectiveCall> a2a = expert_parallel_calls(w, z);
    calls.insert(calls.end(), a2a.begin(), a2a.end());
    return calls;
  }
  CallListBuilder b(w, s, z);
  if (b.path.wrapper == OptimizerWrapper::Unsupported) return {};
  if (b.path.wrapper == OptimizerWrapper::Basic || b.path.wrapper == OptimizerWrapper::FP16Optimizer ||
      b.path.wrapper == OptimizerWrapper::BF16Optimizer) {
    b.engine_allreduce();
  } else if (b.path.wrapper == OptimizerWrapper::ZeroStage1And2) {
    b.zero12();
  } else {
    b.stage3();
    b.stage3_step();
  }
  return std::move(b.out);
}

double collectives_time_s(const CommTopology& t, const std::vector<CollectiveCall>& calls) {
  double total = 0;
  for (const CollectiveCall& c : calls) {
    int64_t size = c.bytes;
    CollectiveKind k = c.kind;
    if (c.kind == CollectiveKind::AllGather) size = checked_mul(c.bytes, c.group_size);
    if (c.to_one_rank) k = CollectiveKind::Broadcast;
    total += collective_time_s(t, k, size);
  }
  return total;
}

}  // namespace zeroplan::planner
