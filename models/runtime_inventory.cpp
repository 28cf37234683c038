// ModelSpec::runtime_inventory: the parameters transformers 5.24 creates at runtime, where they differ
// from the Hub checkpoint's names that inventory() lists: the routed experts of a MoE block.
//
// transformers 5 keeps a layer's routed experts in ONE module holding two 3-D nn.Parameters (the
// checkpoint's per-expert 2-D weights are fused at load time, same element count), and the router as
// a module holding a bare `weight` [E, h] (not an nn.Linear):
//   mixtral    MixtralSparseMoeBlock: gate (MixtralTopKRouter), experts (MixtralExperts: gate_up_proj
//              [E, 2f, h], down_proj [E, h, f]); forward: gate, experts (modeling_mixtral.py)
//   qwen2_moe  Qwen2MoeSparseMoeBlock: gate, experts, shared_expert (Qwen2MoeMLP), shared_expert_gate
//              (Linear(h, 1)); forward: shared_expert, gate, experts, shared_expert_gate
//   qwen3_next Qwen3NextSparseMoeBlock: gate (Qwen3NextTopKRouter), experts, shared_expert,
//              shared_expert_gate; forward as qwen2_moe (modeling_qwen3_next.py)
//   qwen3_5_moe_text Qwen3_5MoeSparseMoeBlock: as qwen3_next (modeling_qwen3_5_moe.py)
//   qwen3_moe  Qwen3MoeSparseMoeBlock: experts, gate; forward: gate, experts
//   olmoe      OlmoeSparseMoeBlock: gate, experts; forward: gate, experts
//   deepseek_v2/v3  DeepseekV2Moe / DeepseekV3MoE: experts, gate, shared_experts (an MLP);
//              forward: gate, experts, shared_experts (the V3 router's e_score_correction_bias is a
//              buffer, no parameter)
//   glm4_moe   Glm4MoeMoE: experts, gate (Glm4MoeTopkRouter), shared_experts; forward: gate, experts,
//              shared_experts (e_score_correction_bias a buffer)
//   dots1      Dots1MoE: experts, gate, shared_experts (as glm4_moe)
//   hunyuan_v1_moe HunYuanMoEV1Moe: gate (HunYuanMoEV1Gate holding wg, a Linear), experts, shared_mlp;
//              forward: shared_mlp, gate, experts
//   ernie4_5_moe Ernie4_5_MoeSparseMoeBlock: gate (Ernie4_5_MoeTopKRouter: weight, then moe_statics
//              holding e_score_correction_bias [1, E], a frozen parameter), experts, shared_experts;
//              forward: shared_experts, gate (moe_statics inside it), experts
//   minimax_m2 MiniMaxM2SparseMoeBlock: gate, experts; forward: gate, experts
//   flex_olmo  FlexOlmoSparseMoeBlock: gate, experts; forward: gate, experts
//   solar_open SolarOpenMoE: experts, gate (SolarOpenTopkRouter, e_score_correction_bias a buffer),
//              shared_experts; forward: gate, experts, shared_experts
//   exaone_moe ExaoneMoeSparseMoEBlock: experts, gate (bias a buffer), shared_experts; forward as solar_open
//   mellum     MellumSparseMoeBlock: experts, gate; forward: gate, experts
//   kolibri1   Kolibri1SparseMoeBlock: experts, gate (bias a buffer), shared_experts; forward as solar_open
//   sarvam_moe built as Glm4MoeForCausalLM (Glm4MoeMoE, as glm4_moe)
//   hy_v3      HYV3MoE: gate, experts (e_score_correction_bias a buffer of the block), shared_experts;
//              forward: gate, experts, shared_experts
//   glm4_moe_lite Glm4MoeLiteMoE: experts, gate (bias a buffer), shared_experts (GLM-4-MoE's block)
//   phimoe     PhimoeSparseMoeBlock: router (PhimoeTopKRouter), experts; forward: router, experts
//   granitemoe GraniteMoeMoE (block_sparse_moe): router (GraniteMoeTopKRouter), experts; forward: router,
//              experts (granitemoeshared: GraniteMoeSharedMoE alike; its shared_mlp is outside the block)
//   gpt_oss, llama4 text: already fused in their checkpoints (inventory() lists them as stored);
//              GptOssMLP: router, experts; Llama4TextMoe: experts, router, shared_expert (forward:
//              router, experts, shared_expert).
// Checked against model.named_parameters() / named_modules() of the tiny fixture configs
// (tests/deepspeed/cases.py) and small configs of the other families, with transformers 5.24.
#include <string>

#include "models/model_spec.h"

namespace zeroplan::models {
namespace {

struct Family {
  const char* hf_class;         // fully qualified, as DeepSpeed's leaf_module `classes` match it
  bool experts_first;           // experts registered before the router
  const char* router = "gate";  // the router module's attribute name
};

Family family_of(const std::string& type) {
  if (type == "mixtral") return {"transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock", false};
  if (type == "qwen2_moe")
    return {"transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock", false};
  if (type == "qwen3_next")
    return {"transformers.models.qwen3_next.modeling_qwen3_next.Qwen3NextSparseMoeBlock", false};
  if (type == "qwen3_5_moe_text")
    return {"transformers.models.qwen3_5_moe.modeling_qwen3_5_moe.Qwen3_5MoeSparseMoeBlock", false};
  if (type == "qwen3_moe")
    return {"transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock", true};
  if (type == "olmoe") return {"transformers.models.olmoe.modeling_olmoe.OlmoeSparseMoeBlock", false};
  if (type == "deepseek_v2")
    return {"transformers.models.deepseek_v2.modeling_deepseek_v2.DeepseekV2Moe", true};
  // sarvam_mla: transformers builds DeepseekV3ForCausalLM from a SarvamMLAConfig.
  if (type == "deepseek_v3" || type == "sarvam_mla")
    return {"transformers.models.deepseek_v3.modeling_deepseek_v3.DeepseekV3MoE", true};
  if (type == "glm4_moe") return {"transformers.models.glm4_moe.modeling_glm4_moe.Glm4MoeMoE", true};
  if (type == "dots1") return {"transformers.models.dots1.modeling_dots1.Dots1MoE", true};
  if (type == "hunyuan_v1_moe")
    return {"transformers.models.hunyuan_v1_moe.modeling_hunyuan_v1_moe.HunYuanMoEV1Moe", false, "gate.wg"};
  if (type == "ernie4_5_moe")
    return {"transformers.models.ernie4_5_moe.modeling_ernie4_5_moe.Ernie4_5_MoeSparseMoeBlock", false};
  if (type == "minimax_m2")
    return {"transformers.models.minimax_m2.modeling_minimax_m2.MiniMaxM2SparseMoeBlock", false};
  if (type == "phimoe")
    return {"transformers.models.phimoe.modeling_phimoe.PhimoeSparseMoeBlock", false, "router"};
  if (type == "flex_olmo")
    return {"transformers.models.flex_olmo.modeling_flex_olmo.FlexOlmoSparseMoeBlock", false};
  if (type == "solar_open") return {"transformers.models.solar_open.modeling_solar_open.SolarOpenMoE", true};
  if (type == "exaone_moe")
    return {"transformers.models.exaone_moe.modeling_exaone_moe.ExaoneMoeSparseMoEBlock", true};
  if (type == "mellum") return {"transformers.models.mellum.modeling_mellum.MellumSparseMoeBlock", true};
  if (type == "kolibri1")
    return {"transformers.models.kolibri1.modeling_kolibri1.Kolibri1SparseMoeBlock", true};
  if (type == "hy_v3") return {"transformers.models.hy_v3.modeling_hy_v3.HYV3MoE", false};
  if (type == "glm4_moe_lite")
    return {"transformers.models.glm4_moe_lite.modeling_glm4_moe_lite.Glm4MoeLiteMoE", true};
  // sarvam_moe: transformers builds Glm4MoeForCausalLM from a SarvamMoEConfig.
  if (type == "sarvam_moe") return {"transformers.models.glm4_moe.modeling_glm4_moe.Glm4MoeMoE", true};
  if (type == "granitemoe")
    return {"transformers.models.granitemoe.modeling_granitemoe.GraniteMoeMoE", false, "router"};
  if (type == "granitemoeshared")
    return {"transformers.models.granitemoeshared.modeling_granitemoeshared.GraniteMoeSharedMoE", false,
            "router"};
  if (type == "granitemoehybrid")
    return {"transformers.models.granitemoehybrid.modeling_granitemoehybrid.GraniteMoeHybridMoE", false,
            "router"};
  if (type == "gpt_oss") return {"transformers.models.gpt_oss.modeling_gpt_oss.GptOssMLP", false};
  if (type == "llama4_text" || type == "llama4")
    return {"transformers.models.llama4.modeling_llama4.Llama4TextMoe", true};
  return {"", false};
}

TensorSpec tensor(const std::string& name, const std::string& module, std::vector<int64_t> shape,
                  bool linear) {
  TensorSpec t{.name = name, .module = module, .shape = std::move(shape)};
  t.is_linear = linear;
  return t;
}

// Where the layer's MoE block starts in the checkpoint's tensor list, and its Hub name prefix.
bool is_block_tensor(const std::string& name, const std::string& hub_block) {
  return name.rfind(hub_block + ".", 0) == 0;
}

}  // namespace

std::vector<LayerInventory> ModelSpec::runtime_inventory() const {
  std::vector<LayerInventory> inv = inventory();
  if (!is_moe() || from_checkpoint()) return inv;  // a checkpoint's own tensors are kept as read
  const Family fam = family_of(model_type);
  const int64_t h = hidden_size, E = num_experts, f = moe_intermediate_size;
  int64_t layer = -1;
  for (LayerInventory& l : inv) {
    if (!l.is_decoder_layer) continue;
    ++layer;
    if (!is_moe_layer(layer) || l.tensors.empty()) continue;
    // The layer's module prefix ("model.layers.3"): the name of its first tensor up to the layer index.
    const std::string& first = l.tensors.front().name;
    const std::string idx = "." + std::to_string(layer) + ".";
    const std::string prefix = first.substr(0, first.find(idx) + idx.size() - 1);
    const bool llama4 = moe_style == MoeStyle::FusedLlama4;
    // GraniteMoe keeps the block's checkpoint name, block_sparse_moe, at runtime.
    const bool granite =
        model_type == "granitemoe" || model_type == "granitemoeshared" || model_type == "granitemoehybrid";
    const std::string block = prefix + (llama4 ? ".feed_forward" : granite ? ".block_sparse_moe" : ".mlp");
    l.moe_block = block;
    l.moe_block_class = fam.hf_class;
    if (moe_style == MoeStyle::FusedGptOss) {
      l.moe_exec = {block + ".router", block + ".experts"};
      continue;
    }
    if (llama4) {
      const std::string se = block + ".shared_expert";
      l.moe_exec = {block + ".router", block + ".experts", se + ".gate_proj", se + ".up_proj",
                    se + ".down_proj"};
      continue;
    }
    if (moe_style != MoeStyle::Mixtral && moe_style != MoeStyle::PerExpert) continue;
    const std::string hub_block = prefix + (moe_style == MoeStyle::Mixtral ? ".block_sparse_moe" : ".mlp");
    std::vector<TensorSpec> rt;
    const std::string router_name = fam.router;
    const TensorSpec router = tensor(block + "." + router_name + ".weight", router_name, {E, h}, false);
    std::vector<TensorSpec> experts = {
        tensor(block + ".experts.gate_up_proj", "gate_up_proj", {E, 2 * f, h}, false),
        tensor(block + ".experts.down_proj", "down_proj", {E, h, f}, false)};
    // ERNIE-4.5-MoE's router module also registers moe_statics (its frozen correction bias).
    std::vector<TensorSpec> router_tensors = {router};
    if (router_score_bias_param) {
      router_tensors.push_back(tensor(block + "." + router_name + ".moe_statics.e_score_correction_bias",
                                      "moe_statics", {1, E}, false));
      router_tensors.back().frozen = true;
    }
    if (!fam.experts_first) rt.insert(rt.end(), router_tensors.begin(), router_tensors.end());
    rt.insert(rt.end(), experts.begin(), experts.end());
    if (fam.experts_first) rt.insert(rt.end(), router_tensors.begin(), router_tensors.end());
    // Shared experts: the checkpoint's tensors under the same names (an ordinary gated MLP).
    const bool qwen2 = shared_expert_gate;
    const bool hunyuan = model_type == "hunyuan_v1_moe";
    const std::string shared = block + (qwen2     ? ".shared_expert"
                                        : hunyuan ? ".shared_mlp"
                                                  : ".shared_experts");
    std::vector<std::string> shared_exec;
    for (const TensorSpec& t : l.tensors)
      if (t.name.rfind(shared + ".", 0) == 0) {
        rt.push_back(t);
        if (t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".weight") == 0)
          shared_exec.push_back(t.name.substr(0, t.name.size() - 7));
      }
    if (qwen2) rt.push_back(tensor(block + ".shared_expert_gate.weight", "shared_expert_gate", {1, h}, true));
    // Forward order of the parameter-owning modules.
    if (qwen2) {
      l.moe_exec = shared_exec;
      l.moe_exec.push_back(block + ".gate");
      l.moe_exec.push_back(block + ".experts");
      l.moe_exec.push_back(block + ".shared_expert_gate");
    } else if (router_score_bias_param || hunyuan) {
      // Ernie4_5_MoeSparseMoeBlock.forward: shared_experts, then the gate (which calls moe_statics),
      // then the experts; HunYuanMoEV1Moe.forward: shared_mlp, gate (wg), experts.
      l.moe_exec = shared_exec;
      l.moe_exec.push_back(block + "." + router_name);
      if (router_score_bias_param) l.moe_exec.push_back(block + "." + router_name + ".moe_statics");
      l.moe_exec.push_back(block + ".experts");
    } else {
      l.moe_exec = {block + "." + router_name, block + ".experts"};
      l.moe_exec.insert(l.moe_exec.end(), shared_exec.begin(), shared_exec.end());
    }
    // Replace the checkpoint's block tensors (contiguous in inventory()) by the runtime ones.
    size_t at = 0;
    while (at < l.tensors.size() && !is_block_tensor(l.tensors[at].name, hub_block)) ++at;
    size_t end = at;
    while (end < l.tensors.size() && is_block_tensor(l.tensors[end].name, hub_block)) ++end;
    l.tensors.erase(l.tensors.begin() + static_cast<std::ptrdiff_t>(at),
                    l.tensors.begin() + static_cast<std::ptrdiff_t>(end));
    l.tensors.insert(l.tensors.begin() + static_cast<std::ptrdiff_t>(at), rt.begin(), rt.end());
  }
  return inv;
}

}  // namespace zeroplan::models
