#include "models/vision_tower.h"

#include <string>
#include <vector>

#include "common/checked.h"
#include "common/embedded_data.h"
#include "common/errors.h"
#include "models/group_builder.h"

namespace zeroplan::models {
namespace {

using nlohmann::json;

const json& table() {
  static const json t = json::parse(embedded_file("models/data/vision_towers.json"));
  return t;
}

// A field of the vision config, else the wrapper's default for it, else the tower class's default.
struct VisionFields {
  const json& given;
  const json& wrapper;
  const json& tower;
  // The field `k` from the first source that holds it with the JSON type `is` accepts; null if none does.
  template <typename Is>
  const json* find(const char* k, Is is) const {
    for (const json* j : {&given, &wrapper, &tower})
      if (j->contains(k) && is((*j)[k])) return &(*j)[k];
    return nullptr;
  }
  template <typename Is>
  const json& need(const char* k, Is is) const {
    const json* v = find(k, is);
    if (v == nullptr) throw_user_error("vision_config: field '{}' is missing and has no default", k);
    return *v;
  }
  int64_t get(const char* k) const {
    return need(k, [](const json& x) { return x.is_number_integer(); }).get<int64_t>();
  }
  bool flag(const char* k) const {
    const json* v = find(k, [](const json& x) { return x.is_boolean(); });
    return v != nullptr && v->get<bool>();
  }
  // The length of a list field (Qwen3-VL's deepstack_visual_indexes).
  int64_t list_size(const char* k) const {
    return static_cast<int64_t>(need(k, [](const json& x) { return x.is_array(); }).size());
  }
};

// The tower's tensors are built the way transformers 5.24 registers them (names, shapes and order checked
// against AutoModelForImageTextToText on the meta device: tests/test_vision_tower.cpp and
// tests/data/models/vlm/tensors.json). Groups are what DeepSpeed stage 3 fetches together: the embeddings,
// each encoder block, the post-norm and head, and the projector.
using Groups = std::vector<LayerInventory>;

// One encoder layer of SigLIP and CLIP (modeling_siglip.py SiglipEncoderLayer: layer_norm1, self_attn,
// layer_norm2, mlp; modeling_clip.py CLIPEncoderLayer registers self_attn first, then layer_norm1, mlp,
// layer_norm2): q/k/v/out_proj Linear(h, h) with bias (registered k, v, q, out), LayerNorms with bias, and
// the MLP fc1 Linear(h, i) and fc2 Linear(i, h) with bias.
void encoder_layer(GroupBuilder& g, int64_t h, int64_t i, bool clip) {
  if (!clip) g.norm("layer_norm1", h, true);
  for (const char* proj : {"self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj", "self_attn.out_proj"})
    g.linear(proj, h, h, true);
  if (clip) g.norm("layer_norm1", h, true);
  if (!clip) g.norm("layer_norm2", h, true);
  g.linear("mlp.fc1", i, h, true);
  g.linear("mlp.fc2", h, i, true);
  if (clip) g.norm("layer_norm2", h, true);
}

// SiglipVisionTransformer (model.vision_tower): patch_embedding Conv2d(C, h, p, p) with bias,
// position_embedding over (image / p)^2 patches, the layers, post_layernorm, and with vision_use_head the
// attention-pooling head (probe [1, 1, h], nn.MultiheadAttention in_proj [3h, h] + [3h] and out_proj
// Linear(h, h), a layernorm and an MLP). CLIPVisionTransformer: class_embedding [h], patch_embedding without
// bias, (image / p)^2 + 1 positions, pre_layrnorm, the layers, post_layernorm.
void siglip_or_clip(const VisionFields& v, bool clip, Groups& out) {
  const int64_t h = v.get("hidden_size"), i = v.get("intermediate_size"), p = v.get("patch_size");
  const int64_t side = v.get("image_size") / p, c = v.get("num_channels");
  const std::string root = "model.vision_tower";
  GroupBuilder e("vision.embed", root, false);
  if (clip) e.param("embeddings.class_embedding", {h});
  e.param("embeddings.patch_embedding.weight", {h, c, p, p}, "patch_embedding");
  if (!clip) e.param("embeddings.patch_embedding.bias", {h}, "patch_embedding");
  e.embedding("embeddings.position_embedding", side * side + (clip ? 1 : 0), h);
  if (clip) e.norm("pre_layrnorm", h, true);
  out.push_back(e.take());
  for (int64_t l = 0; l < v.get("num_hidden_layers"); ++l) {
    GroupBuilder g("vision.layers." + std::to_string(l), root + ".encoder.layers." + std::to_string(l),
                   false);
    encoder_layer(g, h, i, clip);
    out.push_back(g.take());
  }
  GroupBuilder post("vision.post", root, false);
  post.norm("post_layernorm", h, true);
  if (!clip && v.flag("vision_use_head")) {
    post.param("head.probe", {1, 1, h});
    post.param("head.attention.in_proj_weight", {3 * h, h}, "attention");
    post.param("head.attention.in_proj_bias", {3 * h}, "attention");
    post.linear("head.attention.out_proj", h, h, true);
    post.norm("head.layernorm", h, true);
    post.linear("head.mlp.fc1", i, h, true);
    post.linear("head.mlp.fc2", h, i, true);
  }
  out.push_back(post.take());
}

// The Qwen vision transformers without their mergers (model.visual):
//   modeling_qwen2_vl.py Qwen2VisionTransformerPretrainedModel: patch_embed.proj Conv3d(C, e, [T, p, p],
//     bias=False); `depth` Qwen2VLVisionBlock: norm1/norm2 LayerNorm(e) with bias, attn.qkv Linear(e, 3e) and
//     attn.proj Linear(e, e) with bias, mlp fc1 Linear(e, f), fc2 Linear(f, e) with bias, f = e * mlp_ratio.
//   modeling_qwen2_5_vl.py Qwen2_5_VisionTransformerPretrainedModel: the same patch embed at hidden_size h;
//     norm1/norm2 Qwen2_5_VLRMSNorm(h) (weight only); mlp gate_proj/up_proj Linear(h, i), down_proj with
//     bias.
//   modeling_qwen3_vl.py Qwen3VLVisionModel (and Qwen3.5's, modeling_qwen3_5.py Qwen3_5VisionModel):
//     patch_embed.proj with bias, pos_embed Embedding(num_position_embeddings, h); blocks with LayerNorms,
//     attn.qkv/proj, mlp linear_fc1 Linear(h, i) and linear_fc2 Linear(i, h) with bias.
// The rotary embedding holds no parameters.
void qwen_tower(const std::string& kind, const VisionFields& v, Groups& out) {
  const bool q2 = kind == "qwen2_vl", q25 = kind == "qwen2_5_vl";
  const int64_t h = q2 ? v.get("embed_dim") : v.get("hidden_size"), p = v.get("patch_size");
  const int64_t i = q2 ? h * v.get("mlp_ratio") : v.get("intermediate_size");
  const std::string root = "model.visual";
  GroupBuilder e("vision.embed", root, false);
  e.param("patch_embed.proj.weight", {h, v.get("in_channels"), v.get("temporal_patch_size"), p, p}, "proj");
  if (!q2 && !q25) {
    e.param("patch_embed.proj.bias", {h}, "proj");
    e.embedding("pos_embed", v.get("num_position_embeddings"), h);
  }
  out.push_back(e.take());
  for (int64_t l = 0; l < v.get("depth"); ++l) {
    GroupBuilder g("vision.layers." + std::to_string(l), root + ".blocks." + std::to_string(l), false);
    g.norm("norm1", h, !q25);
    g.norm("norm2", h, !q25);
    g.linear("attn.qkv", 3 * h, h, true);
    g.linear("attn.proj", h, h, true);
    if (q2) {
      g.linear("mlp.fc1", i, h, true);
      g.linear("mlp.fc2", h, i, true);
    } else if (q25) {
      g.linear("mlp.gate_proj", i, h, true);
      g.linear("mlp.up_proj", i, h, true);
      g.linear("mlp.down_proj", h, i, true);
    } else {
      g.linear("mlp.linear_fc1", i, h, true);
      g.linear("mlp.linear_fc2", h, i, true);
    }
    out.push_back(g.take());
  }
}

// The Qwen mergers, which project the vision features into the language model (the projector here, though
// transformers keeps them inside model.visual). Each concatenates spatial_merge_size^2 neighbouring patches,
// m = width * spatial_merge_size^2 features, through a norm and Linear(m, m) -> GELU -> Linear(m, out), both
// with bias:
//   modeling_qwen2_vl.py PatchMerger(dim=hidden_size, context_dim=embed_dim): ln_q LayerNorm(embed_dim),
//     mlp.0 and mlp.2;
//   modeling_qwen2_5_vl.py Qwen2_5_VLPatchMerger(dim=out_hidden_size, context_dim=hidden_size): ln_q
//     Qwen2_5_VLRMSNorm(hidden_size), weight only;
//   modeling_qwen3_vl.py Qwen3VLVisionPatchMerger: merger (use_postshuffle_norm=False: norm LayerNorm(h)),
//     linear_fc1, linear_fc2; and deepstack_merger_list, one merger per deepstack_visual_indexes entry with
//     use_postshuffle_norm=True (norm LayerNorm(m)). Qwen3.5 (Qwen3_5VisionModel) has the merger alone.
void qwen_projector(const std::string& kind, const VisionFields& v, Groups& out) {
  const int64_t s = v.get("spatial_merge_size");
  const bool q2 = kind == "qwen2_vl";
  const int64_t h = q2 ? v.get("embed_dim") : v.get("hidden_size"), m = h * s * s;
  const int64_t o = q2 ? v.get("hidden_size") : v.get("out_hidden_size");
  GroupBuilder g("vision.projector", "model.visual.merger", false);
  if (kind == "qwen2_vl" || kind == "qwen2_5_vl") {
    g.norm("ln_q", h, q2);
    g.linear("mlp.0", m, m, true);
    g.linear("mlp.2", o, m, true);
    out.push_back(g.take());
    return;
  }
  g.norm("norm", h, true);
  g.linear("linear_fc1", m, m, true);
  g.linear("linear_fc2", o, m, true);
  out.push_back(g.take());
  if (kind == "qwen3_5") return;
  for (int64_t k = 0; k < v.list_size("deepstack_visual_indexes"); ++k) {
    GroupBuilder d("vision.projector.deepstack." + std::to_string(k),
                   "model.visual.deepstack_merger_list." + std::to_string(k), false);
    d.norm("norm", m, true);
    d.linear("linear_fc1", m, m, true);
    d.linear("linear_fc2", o, m, true);
    out.push_back(d.take());
  }
}

// The projectors of the SigLIP/CLIP wrappers (model.multi_modal_projector):
//   modeling_gemma3.py Gemma3MultiModalProjector: mm_input_projection_weight [vision h, text h] (a bare
//     parameter used in a matmul) and mm_soft_emb_norm, a Gemma3RMSNorm(vision h);
//   modeling_paligemma.py PaliGemmaMultiModalProjector: linear Linear(vision h, projection_dim) with bias;
//   modeling_llava.py LlavaMultiModalProjector: linear_1 Linear(vision h x the number of feature layers
//     (vision_feature_layer a list), text h), linear_2 Linear(text h, text h), with bias when
//     multimodal_projector_bias (default True). LLaVA-NeXT registers image_newline [text h] first.
void projector(const std::string& kind, const json& outer, const VisionFields& v, int64_t text_h,
               Groups& out) {
  const int64_t vh = v.get("hidden_size");
  GroupBuilder g("vision.projector", "model.multi_modal_projector", false);
  if (kind == "gemma3") {
    g.param("mm_input_projection_weight", {vh, text_h});
    g.norm("mm_soft_emb_norm", vh, false);
  } else if (kind == "paligemma") {
    g.linear("linear", v.get("projection_dim"), vh, true);
  } else {
    const json* fl = outer.contains("vision_feature_layer") ? &outer["vision_feature_layer"] : nullptr;
    const int64_t layers = fl != nullptr && fl->is_array() ? static_cast<int64_t>(fl->size()) : 1;
    const bool bias = outer.value("multimodal_projector_bias", true);
    g.linear("linear_1", text_h, vh * layers, bias);
    g.linear("linear_2", text_h, text_h, bias);
  }
  out.push_back(g.take());
  if (kind == "llava_next") {
    GroupBuilder n("vision.projector.image_newline", "model", false);
    n.param("image_newline", {text_h});
    out.insert(out.begin(), n.take());
  }
}

bool is_projector(const LayerInventory& g) {
  return g.name.rfind("vision.projector", 0) == 0;
}

}  // namespace

int64_t VisionTower::tower_params() const {
  int64_t n = 0;
  for (const auto& g : groups)
    if (!is_projector(g)) n = checked_add(n, g.numel());
  return n;
}

int64_t VisionTower::projector_params() const {
  int64_t n = 0;
  for (const auto& g : groups)
    if (is_projector(g)) n = checked_add(n, g.numel());
  return n;
}

std::optional<VisionTower> vision_tower(const json& outer, int64_t text_hidden) {
  const std::string type = outer.value("model_type", "");
  const json& wrappers = table()["wrappers"];
  if (!wrappers.contains(type)) return std::nullopt;
  const json& w = wrappers[type];
  const json empty = json::object();
  const json& given =
      outer.contains("vision_config") && outer["vision_config"].is_object() ? outer["vision_config"] : empty;
  const std::string tower = w["tower"].get<std::string>();
  const std::string given_type = given.value("model_type", tower);
  // Qwen2VLConfig, Qwen2_5_VLConfig and Qwen3VLConfig.__post_init__ rename the vision_config model_type the
  // published files carry ("qwen2_5_vl", ...) to their vision config's ("qwen2_5_vl_vision", ...).
  bool known = given_type == tower;
  for (const auto& legacy : w.value("legacy_vision_model_types", json::array()))
    known = known || legacy == given_type;
  if (!known || !table()["towers"].contains(tower)) return std::nullopt;
  const VisionFields v{given, w["vision_config"], table()["towers"][tower]};
  const std::string proj = w["projector"].get<std::string>();
  VisionTower t;
  t.tower = tower;
  if (tower == "siglip_vision_model" || tower == "clip_vision_model") {
    siglip_or_clip(v, tower == "clip_vision_model", t.groups);
    projector(proj, outer, v, text_hidden, t.groups);
  } else if (proj.rfind("qwen", 0) == 0) {
    // Qwen3.5's vision model is Qwen3-VL's without the deepstack mergers (modeling_qwen3_5.py
    // Qwen3_5VisionModel: the same patch embed, position grid, blocks and merger classes).
    qwen_tower(proj, v, t.groups);
    qwen_projector(proj, v, t.groups);
  } else {
    return std::nullopt;
  }
  for (auto& g : t.groups)
    for (auto& x : g.tensors) x.vision = true;
  // Images to patches and tokens:
  //   SigLIP (Gemma-3, PaliGemma) and CLIP (LLaVA): one (image_size / patch)^2 grid, CLIP plus its CLS
  //   embedding; Gemma-3 pools it to mm_tokens_per_image tokens (Gemma3Config default 256,
  //   Gemma3MultiModalProjector's avg pool), PaliGemma keeps every patch, LLaVA every patch but the CLS
  //   (vision_feature_select_strategy "default"). LLaVA-NeXT tiles by resolution (anyres): not modelled.
  //   The Qwen towers: dynamic resolution, spatial_merge_size^2 patches to a token.
  VisionGeometry& geo = t.geometry;
  geo.patch = v.get("patch_size");
  if (tower == "siglip_vision_model" || tower == "clip_vision_model") {
    geo.fixed_image = v.get("image_size");
    const int64_t grid = (geo.fixed_image / geo.patch) * (geo.fixed_image / geo.patch);
    geo.extra_patches = tower == "clip_vision_model" ? 1 : 0;
    geo.tokens_per_image = proj == "gemma3" ? outer.value("mm_tokens_per_image", int64_t{256}) : grid;
    geo.supported = proj != "llava_next";
  } else {
    geo.merge = v.get("spatial_merge_size");
    geo.supported = true;
  }
  return t;
}

std::optional<bool> vl_tie_word_embeddings(const json& outer, const json& text) {
  const json& wrappers = table()["wrappers"];
  const std::string type = outer.value("model_type", "");
  if (!wrappers.contains(type) || !wrappers[type].contains("tie_word_embeddings")) return std::nullopt;
  const auto flag = [](const json& j) {
    // Qwen2VLConfig, Qwen2_5_VLConfig and Qwen3VLConfig: tie_word_embeddings: bool = False.
    return j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean() &&
           j["tie_word_embeddings"].get<bool>();
  };
  const std::string rule = wrappers[type]["tie_word_embeddings"].get<std::string>();
  ZP_CHECK(rule == "outer" || rule == "outer or text_config",
           "models/data/vision_towers.json: unknown tie_word_embeddings rule '{}'", rule);
  return rule == "outer" ? flag(outer) : flag(outer) || flag(text);
}

std::optional<nlohmann::json> vl_text_config_as_family(const json& text) {
  const json& towers = table()["text_towers"];
  const std::string type = text.value("model_type", "");
  if (!towers.contains(type)) return std::nullopt;
  const json& t = towers[type];
  json out = text;
  for (const auto& k : t["ignored"]) out.erase(k.get<std::string>());
  for (const auto& [k, dflt] : t["defaults"].items())
    if (!out.contains(k) || out[k].is_null()) out[k] = dflt;
  out["model_type"] = t["read_as"];
  return out;
}

}  // namespace zeroplan::models
