#include "models/vision_tower.h"

#include <string>

#include "common/checked.h"
#include "common/embedded_data.h"
#include "common/errors.h"

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

// One encoder layer of SigLIP and CLIP alike (modeling_siglip.py SiglipEncoderLayer, modeling_clip.py
// CLIPEncoderLayer): layer_norm1 and layer_norm2 (weight + bias), q/k/v/out_proj Linear(h, h) with bias, and
// the MLP fc1 Linear(h, i) and fc2 Linear(i, h) with bias.
int64_t encoder_layer(int64_t h, int64_t i) {
  return 2 * (2 * h) + 4 * (h * h + h) + (h * i + i) + (i * h + h);
}

// SiglipVisionTransformer: patch_embedding Conv2d(C, h, p, p) with bias, position_embedding over
// (image / p)^2 patches, the layers, post_layernorm, and with vision_use_head the attention-pooling head
// (probe [1, 1, h], nn.MultiheadAttention: in_proj 3h x h + 3h and out_proj h x h + h, a layernorm and an
// MLP).
int64_t siglip(const VisionFields& v) {
  const int64_t h = v.get("hidden_size"), i = v.get("intermediate_size"), p = v.get("patch_size");
  const int64_t side = v.get("image_size") / p;
  int64_t n = h * v.get("num_channels") * p * p + h + side * side * h;
  n += v.get("num_hidden_layers") * encoder_layer(h, i) + 2 * h;
  if (v.flag("vision_use_head")) n += h + 4 * h * h + 4 * h + 2 * h + (h * i + i) + (i * h + h);
  return n;
}

// CLIPVisionTransformer: class_embedding [h], patch_embedding Conv2d(C, h, p, p) without bias,
// position_embedding over (image / p)^2 + 1 positions, pre_layrnorm, the layers, post_layernorm.
int64_t clip(const VisionFields& v) {
  const int64_t h = v.get("hidden_size"), i = v.get("intermediate_size"), p = v.get("patch_size");
  const int64_t side = v.get("image_size") / p;
  return h + h * v.get("num_channels") * p * p + (side * side + 1) * h + 2 * h +
         v.get("num_hidden_layers") * encoder_layer(h, i) + 2 * h;
}

// Qwen2-VL's vision transformer without its merger (modeling_qwen2_vl.py
// Qwen2VisionTransformerPretrainedModel): patch_embed.proj Conv3d(in_channels, embed_dim,
// [temporal_patch_size, p, p], bias=False), and `depth` Qwen2VLVisionBlock: norm1/norm2 torch
// LayerNorm(embed_dim) (weight + bias), attn.qkv Linear(e, 3e) and attn.proj Linear(e, e) with bias, mlp
// VisionMlp fc1 Linear(e, f) and fc2 Linear(f, e) with bias, f = int(embed_dim * mlp_ratio). The rotary
// embedding holds no parameters.
int64_t qwen2_vl(const VisionFields& v) {
  const int64_t e = v.get("embed_dim"), p = v.get("patch_size"), f = e * v.get("mlp_ratio");
  return e * v.get("in_channels") * v.get("temporal_patch_size") * p * p +
         v.get("depth") * (2 * (2 * e) + (3 * e * e + 3 * e) + (e * e + e) + (e * f + f) + (f * e + e));
}

// Qwen2.5-VL's vision transformer without its merger (modeling_qwen2_5_vl.py
// Qwen2_5_VisionTransformerPretrainedModel): patch_embed.proj Conv3d(in_channels, h, [temporal_patch_size, p,
// p], bias=False), and `depth` Qwen2_5_VLVisionBlock: norm1/norm2 Qwen2_5_VLRMSNorm(h) (weight only),
// attn.qkv Linear(h, 3h) and attn.proj Linear(h, h) with bias, mlp Qwen2_5_VLMLP(bias=True): gate_proj and
// up_proj Linear(h, i), down_proj Linear(i, h), all with bias.
int64_t qwen2_5_vl(const VisionFields& v) {
  const int64_t h = v.get("hidden_size"), i = v.get("intermediate_size"), p = v.get("patch_size");
  return h * v.get("in_channels") * v.get("temporal_patch_size") * p * p +
         v.get("depth") * (2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * (h * i + i) + (i * h + h));
}

// Qwen3-VL's vision model without its mergers (modeling_qwen3_vl.py Qwen3VLVisionModel): patch_embed.proj
// Conv3d(in_channels, h, [temporal_patch_size, p, p], bias=True), pos_embed
// Embedding(num_position_embeddings, h) (the learned position grid), and `depth` Qwen3VLVisionBlock:
// norm1/norm2 nn.LayerNorm(h) (weight + bias), attn.qkv Linear(h, 3h) and attn.proj Linear(h, h) with bias,
// mlp Qwen3VLVisionMLP linear_fc1 Linear(h, i) and linear_fc2 Linear(i, h) with bias.
int64_t qwen3_vl(const VisionFields& v) {
  const int64_t h = v.get("hidden_size"), i = v.get("intermediate_size"), p = v.get("patch_size");
  return h * v.get("in_channels") * v.get("temporal_patch_size") * p * p + h +
         v.get("num_position_embeddings") * h +
         v.get("depth") * (2 * (2 * h) + (3 * h * h + 3 * h) + (h * h + h) + (h * i + i) + (i * h + h));
}

// The Qwen mergers, which project the vision features into the language model (counted as the projector,
// though transformers keeps them inside model.visual). Each concatenates spatial_merge_size^2 neighbouring
// patches, m = width * spatial_merge_size^2 features, through a norm and Linear(m, m) -> GELU -> Linear(m,
// out), both with bias.
int64_t qwen_projector(const std::string& kind, const VisionFields& v) {
  const int64_t s = v.get("spatial_merge_size");
  // modeling_qwen2_vl.py PatchMerger(dim=hidden_size, context_dim=embed_dim): ln_q LayerNorm(embed_dim).
  if (kind == "qwen2_vl") {
    const int64_t e = v.get("embed_dim"), m = e * s * s, out = v.get("hidden_size");
    return 2 * e + (m * m + m) + (m * out + out);
  }
  const int64_t h = v.get("hidden_size"), m = h * s * s, out = v.get("out_hidden_size");
  // modeling_qwen2_5_vl.py Qwen2_5_VLPatchMerger(dim=out_hidden_size, context_dim=hidden_size): ln_q
  // Qwen2_5_VLRMSNorm(hidden_size), weight only.
  if (kind == "qwen2_5_vl") return h + (m * m + m) + (m * out + out);
  // modeling_qwen3_vl.py Qwen3VLVisionPatchMerger: merger (use_postshuffle_norm=False: norm LayerNorm(h)) and
  // deepstack_merger_list, one merger per deepstack_visual_indexes entry with use_postshuffle_norm=True (norm
  // LayerNorm(m)).
  const int64_t mlp = (m * m + m) + (m * out + out);
  // Qwen3.5 (Qwen3_5VisionModel) has the merger alone: no deepstack_merger_list.
  if (kind == "qwen3_5") return 2 * h + mlp;
  return 2 * h + mlp + v.list_size("deepstack_visual_indexes") * (2 * m + mlp);
}

int64_t projector(const std::string& kind, const json& outer, const VisionFields& v, int64_t text_h) {
  const int64_t vh = v.get("hidden_size");
  // modeling_gemma3.py Gemma3MultiModalProjector: mm_input_projection_weight [vision h, text h] and
  // mm_soft_emb_norm, a Gemma3RMSNorm(vision h).
  if (kind == "gemma3") return vh * text_h + vh;
  // modeling_paligemma.py PaliGemmaMultiModalProjector: Linear(vision h, projection_dim) with bias.
  if (kind == "paligemma") {
    const int64_t d = v.get("projection_dim");
    return vh * d + d;
  }
  // modeling_llava.py LlavaMultiModalProjector: linear_1 Linear(vision h x the number of feature layers
  // (vision_feature_layer a list), text h), linear_2 Linear(text h, text h), both with bias when
  // multimodal_projector_bias (default True). LLaVA-NeXT adds image_newline [text h].
  const json* fl = outer.contains("vision_feature_layer") ? &outer["vision_feature_layer"] : nullptr;
  const int64_t layers = fl != nullptr && fl->is_array() ? static_cast<int64_t>(fl->size()) : 1;
  const bool bias = outer.value("multimodal_projector_bias", true);
  int64_t n = vh * layers * text_h + text_h * text_h + (bias ? 2 * text_h : 0);
  if (kind == "llava_next") n += text_h;
  return n;
}

}  // namespace

std::optional<VisionTowerCount> count_vision_tower(const json& outer, int64_t text_hidden) {
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
  VisionTowerCount c;
  c.tower = tower;
  if (tower == "siglip_vision_model") {
    c.tower_params = siglip(v);
  } else if (tower == "clip_vision_model") {
    c.tower_params = clip(v);
  } else if (tower == "qwen2_vl_vision") {
    c.tower_params = qwen2_vl(v);
  } else if (tower == "qwen2_5_vl_vision") {
    c.tower_params = qwen2_5_vl(v);
  } else if (tower == "qwen3_vl_vision" || tower == "qwen3_5_vision" || tower == "qwen3_5_moe_vision") {
    // Qwen3.5's vision model is Qwen3-VL's without the deepstack mergers (modeling_qwen3_5.py
    // Qwen3_5VisionModel: the same patch embed, position grid, blocks and merger classes).
    c.tower_params = qwen3_vl(v);
  } else {
    return std::nullopt;
  }
  c.projector_params =
      proj.rfind("qwen", 0) == 0 ? qwen_projector(proj, v) : projector(proj, outer, v, text_hidden);
  return c;
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
