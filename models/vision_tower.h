#pragma once
// The vision tower and projector of an image-text-to-text config (issue 29 item 3): for the wrappers in
// models/data/vision_towers.json, every parameter tensor, exactly as transformers 5.24 builds them, so the
// planner holds their model states (trainable, or frozen with --freeze vision) beside the language tower's.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.h"

namespace zeroplan::models {

struct VisionTower {
  // the vision config's model_type in transformers 5.24 ("siglip_vision_model", "clip_vision_model",
  // "qwen2_vl_vision", "qwen2_5_vl_vision", "qwen3_vl_vision", "qwen3_5_vision", "qwen3_5_moe_vision")
  std::string tower;
  // Every parameter of the tower and projector, in the order the wrapper registers them, named as
  // transformers names them ("model.visual.blocks.0.attn.qkv.weight"), each tagged `vision`. Groups:
  // "vision.embed", "vision.layers.<i>", "vision.post" (SigLIP/CLIP), and the projector's,
  // "vision.projector*": the projector, LLaVA-NeXT's image_newline, and for the Qwen models the patch mergers
  // (model.visual.merger and Qwen3-VL's model.visual.deepstack_merger_list), which transformers keeps inside
  // the vision model.
  std::vector<LayerInventory> groups;
  VisionGeometry geometry;
  int64_t tower_params() const;
  int64_t projector_params() const;
  int64_t total() const { return tower_params() + projector_params(); }
};

// `outer` is the wrapper's config.json (model_type "gemma3", "paligemma", "llava", "llava_next", "qwen2_vl",
// "qwen2_5_vl", "qwen3_vl", "qwen3_5", "qwen3_5_moe"), and `text_hidden` its language tower's hidden size.
// nullopt for a wrapper or tower the table does not cover (the caller then says the tower is not counted).
std::optional<VisionTower> vision_tower(const nlohmann::json& outer, int64_t text_hidden);

// Whether transformers 5.24 ties the language tower's lm_head to its embeddings, for the wrappers whose rule
// is not text_config's own flag (models/data/vision_towers.json "tie_word_embeddings": Qwen2-VL and
// Qwen2.5-VL tie when the outer flag or text_config's is set, Qwen3-VL on the outer flag alone); nullopt for
// the others. `text` is the text_config as given.
std::optional<bool> vl_tie_word_embeddings(const nlohmann::json& outer, const nlohmann::json& text);

// A vision-language model's text_config whose model type names a language tower built from another
// family's layers (models/data/vision_towers.json "text_towers": Qwen2_5_VLTextModel's layers are Qwen2's,
// Qwen3VLTextModel's Qwen3's), rewritten for that family's reader: model_type set to the family, fields its
// own config class defaults differently filled in, fields its attention ignores dropped. nullopt for any
// other text_config.
std::optional<nlohmann::json> vl_text_config_as_family(const nlohmann::json& text);

}  // namespace zeroplan::models
