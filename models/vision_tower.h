#pragma once
// The vision tower and projector of an image-text-to-text config, counted (issue 29 item 3, first step):
// zeroplan plans the language tower; for the wrappers in models/data/vision_towers.json it also says how
// many parameters the tower and projector hold, exactly as transformers 5.24 builds them, so the output
// never passes a text-only count off as the model's. Their memory and time are not modelled yet.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace zeroplan::models {

struct VisionTowerCount {
  std::string tower;  // the vision config's model_type ("siglip_vision_model", "clip_vision_model")
  int64_t tower_params = 0;
  int64_t projector_params = 0;  // the projector, and LLaVA-NeXT's image_newline
  int64_t total() const { return tower_params + projector_params; }
};

// `outer` is the wrapper's config.json (model_type "gemma3", "paligemma", "llava", "llava_next"), and
// `text_hidden` its language tower's hidden size. nullopt for a wrapper or tower the table does not
// cover (the caller then says the tower is not counted).
std::optional<VisionTowerCount> count_vision_tower(const nlohmann::json& outer, int64_t text_hidden);

}  // namespace zeroplan::models
