// Vision towers and projectors of image-text-to-text configs (models/vision_tower.h; issue 29 item 3).
// Expected counts: transformers 5.24 on the meta device (AutoModelForImageTextToText.from_config, parameters
// summed under model.vision_tower / model.multi_modal_projector / model.image_newline), run on 2026-11-27:
//   gemma3 default config:            vision_tower  92,884,224   multi_modal_projector 1,770,240
//   Gemma-3-4B's vision_config (1152, 4304, 27 layers, image 896, patch 14, no head; text hidden 2560):
//                                     vision_tower 416,866,032   multi_modal_projector 2,950,272
//   paligemma default:                vision_tower 399,497,472   multi_modal_projector 2,361,344
//   llava default:                    vision_tower 303,507,456   multi_modal_projector 20,979,712
//   llava_next default:               the same + image_newline 4,096
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/hf_config.h"
#include "models/vision_tower.h"

namespace zeroplan::models {
namespace {

using nlohmann::json;

TEST(VisionTower, DefaultsCountAsTransformersBuildsThem) {
  const auto g = count_vision_tower({{"model_type", "gemma3"}}, 2304);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->tower_params, 92'884'224);
  EXPECT_EQ(g->projector_params, 1'770'240);
  const auto p = count_vision_tower({{"model_type", "paligemma"}}, 2048);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->tower_params, 399'497'472);
  EXPECT_EQ(p->projector_params, 2'361'344);
  const auto l = count_vision_tower({{"model_type", "llava"}}, 4096);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->tower, "clip_vision_model");
  EXPECT_EQ(l->tower_params, 303'507'456);
  EXPECT_EQ(l->projector_params, 20'979'712);
  const auto n = count_vision_tower({{"model_type", "llava_next"}}, 4096);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->projector_params, 20'979'712 + 4'096);
}

TEST(VisionTower, Gemma3FourBsTower) {
  const json outer = {{"model_type", "gemma3"},
                      {"vision_config",
                       {{"hidden_size", 1152},
                        {"image_size", 896},
                        {"intermediate_size", 4304},
                        {"model_type", "siglip_vision_model"},
                        {"num_attention_heads", 16},
                        {"num_hidden_layers", 27},
                        {"patch_size", 14},
                        {"vision_use_head", false}}}};
  const auto g = count_vision_tower(outer, 2560);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->tower_params, 416'866'032);
  EXPECT_EQ(g->projector_params, 2'950'272);
}

TEST(VisionTower, UncoveredWrappersAreNotGuessed) {
  EXPECT_FALSE(count_vision_tower({{"model_type", "qwen2_5_vl"}}, 3584).has_value());
  // A gemma3 wrapper around another tower kind is not counted as SigLIP.
  EXPECT_FALSE(count_vision_tower(
                   {{"model_type", "gemma3"}, {"vision_config", {{"model_type", "clip_vision_model"}}}}, 2304)
                   .has_value());
}

TEST(VisionTower, TheModelSaysWhatItLeavesOut) {
  const json cfg = {{"model_type", "llava"},
                    {"text_config",
                     {{"model_type", "llama"},
                      {"hidden_size", 4096},
                      {"intermediate_size", 11008},
                      {"num_hidden_layers", 32},
                      {"num_attention_heads", 32},
                      {"vocab_size", 32064}}}};
  const ModelSpec m = model_from_hf_json("llava.json", cfg);
  ASSERT_FALSE(m.warnings.empty());
  bool said = false;
  for (const auto& w : m.warnings) said = said || w.find("303.5M parameters") != std::string::npos;
  EXPECT_TRUE(said) << m.warnings.front();
}

}  // namespace
}  // namespace zeroplan::models
