#include "models/vision_tower.h"

#include <string>

#include "common/checked.h"
#include "common/embedded_data.h"
#include "common/errors.h"

namespace zeroplan::models {
namespace {

using nlohmann::json;

const json& table() {
  static const json t = [] {
    for (const auto& f : embedded_files())
      if (f.path == "models/data/vision_towers.json") return json::parse(f.content);
    ZP_CHECK(false, "embedded models/data/vision_towers.json missing; re-run cmake");
    return json();
  }();
  return t;
}

// A field of the vision config, else the wrapper's default for it, else the tower class's default.
struct VisionFields {
  const json& given;
  const json& wrapper;
  const json& tower;
  int64_t get(const char* k) const {
    for (const json* j : {&given, &wrapper, &tower})
      if (j->contains(k) && (*j)[k].is_number_integer()) return (*j)[k].get<int64_t>();
    throw_user_error("vision_config: field '{}' is missing and has no default", k);
  }
  bool flag(const char* k) const {
    for (const json* j : {&given, &wrapper, &tower})
      if (j->contains(k) && (*j)[k].is_boolean()) return (*j)[k].get<bool>();
    return false;
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
  const std::string tower = given.value("model_type", w["tower"].get<std::string>());
  if (tower != w["tower"].get<std::string>() || !table()["towers"].contains(tower)) return std::nullopt;
  const VisionFields v{given, w["vision_config"], table()["towers"][tower]};
  VisionTowerCount c;
  c.tower = tower;
  c.tower_params = tower == "siglip_vision_model" ? siglip(v) : clip(v);
  c.projector_params = projector(w["projector"].get<std::string>(), outer, v, text_hidden);
  return c;
}

}  // namespace zeroplan::models
