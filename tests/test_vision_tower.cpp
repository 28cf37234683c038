// Vision towers and projectors of image-text-to-text configs (models/vision_tower.h; issue 29 item 3).
// Expected counts: transformers 5.24 on the meta device (AutoModelForImageTextToText.from_config, parameters
// summed under model.vision_tower / model.multi_modal_projector / model.image_newline), run on 2026-11-27:
//   gemma3 default config:            vision_tower  92,884,224   multi_modal_projector 1,770,240
//   Gemma-3-4B's vision_config (1152, 4304, 27 layers, image 896, patch 14, no head; text hidden 2560):
//                                     vision_tower 416,866,032   multi_modal_projector 2,950,272
//   paligemma default:                vision_tower 399,497,472   multi_modal_projector 2,361,344
//   llava default:                    vision_tower 303,507,456   multi_modal_projector 20,979,712
//   llava_next default:               the same + image_newline 4,096
// The Qwen vision-language models: transformers 5.24.0 (torch 2.15.0) on the meta device, counted by
//   OMP_NUM_THREADS=1 .venv-ds/bin/python scripts/count_vision_params.py tests/data/models/vlm/*.json
//       default:qwen2_vl default:qwen2_5_vl default:qwen3_vl    (one command line)
// run on 2026-11-28 (tower: model.visual less its mergers; projector: model.visual.merger and
// model.visual.deepstack_merger_list; text: model.language_model and lm_head, tied weights once):
//                             total           text            tower         projector
//   Qwen2.5-VL-3B-Instruct    3,754,622,976   3,085,938,688   631,975,680    36,708,608
//   Qwen2.5-VL-7B-Instruct    8,292,166,656   7,615,616,512   631,975,680    44,574,464
//   Qwen3-VL-2B-Instruct      2,127,532,032   1,720,574,976   306,242,560   100,714,496
//   Qwen3-VL-8B-Instruct      8,767,123,696   8,190,735,360   415,891,440   160,496,896
//   qwen2_vl_2b_shaped        2,208,985,600   1,543,714,304   631,183,360    34,087,936
//   qwen2_vl default         73,381,962,752  72,706,203,648   631,183,360    44,575,744
//   qwen2_5_vl default       75,789,228,800  72,706,203,648 2,826,102,528   256,922,624
//   qwen3_vl default         12,616,410,352  12,049,461,248   415,891,440   151,057,664
// Which flag ties the embeddings: the Qwen2.5-VL-7B and Qwen3-VL-8B files with the outer
// tie_word_embeddings and text_config's set apart, counted by the same script (text part):
//   Qwen2.5-VL-7B outer true, text false: 7,070,619,136   outer false, text true: 7,070,619,136
//   Qwen3-VL-8B   outer true, text false: 7,568,405,504   outer false, text true: 8,190,735,360
// Qwen3.5 (Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration), the same script and day on
// tests/data/models/hf_defaults/qwen3_5.json and qwen3_5_moe.json (the config classes' defaults) and on
// copies with the two tie flags set apart:
//                             total           text            tower         projector
//   qwen3_5 defaults          9,407,453,936   8,953,803,264   415,891,440    37,759,232
//     outer true, text false  8,390,335,216   7,936,684,544
//     outer false, text true  9,407,453,936   8,953,803,264
//   qwen3_5_moe defaults     35,114,261,360  34,660,610,688   415,891,440    37,759,232
//     outer true, text false 34,605,702,000  34,152,051,328
//     outer false, text true 35,114,261,360  34,660,610,688
// Tensor by tensor: tests/data/models/vlm/tensors.json, written by the same script with --tensors (its
// docstring has the command) on 2026-11-28: every tower and projector tensor in registration order.
// The config.json files (tests/data/models/vlm/, README.md there) are the models' published ones, but for
// qwen2_vl_2b_shaped.json (Qwen2-VL-2B-Instruct's fields as remembered, not checked against the Hub file).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "models/hf_config.h"
#include "models/model_spec.h"
#include "models/vision_tower.h"

namespace zeroplan::models {
namespace {

using nlohmann::json;

TEST(VisionTower, DefaultsCountAsTransformersBuildsThem) {
  const auto g = vision_tower({{"model_type", "gemma3"}}, 2304);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->tower_params(), 92'884'224);
  EXPECT_EQ(g->projector_params(), 1'770'240);
  const auto p = vision_tower({{"model_type", "paligemma"}}, 2048);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->tower_params(), 399'497'472);
  EXPECT_EQ(p->projector_params(), 2'361'344);
  const auto l = vision_tower({{"model_type", "llava"}}, 4096);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->tower, "clip_vision_model");
  EXPECT_EQ(l->tower_params(), 303'507'456);
  EXPECT_EQ(l->projector_params(), 20'979'712);
  const auto n = vision_tower({{"model_type", "llava_next"}}, 4096);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->projector_params(), 20'979'712 + 4'096);
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
  const auto g = vision_tower(outer, 2560);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->tower_params(), 416'866'032);
  EXPECT_EQ(g->projector_params(), 2'950'272);
}

TEST(VisionTower, UncoveredWrappersAreNotGuessed) {
  // Qwen3-VL-MoE's vision model is Qwen3-VL's, but its MoE text tower is not read yet: not counted.
  EXPECT_FALSE(vision_tower({{"model_type", "qwen3_vl_moe"}}, 2048).has_value());
  // A gemma3 wrapper around another tower kind is not counted as SigLIP.
  EXPECT_FALSE(
      vision_tower({{"model_type", "gemma3"}, {"vision_config", {{"model_type", "clip_vision_model"}}}}, 2304)
          .has_value());
  EXPECT_FALSE(
      vision_tower({{"model_type", "qwen2_5_vl"}, {"vision_config", {{"model_type", "siglip_vision_model"}}}},
                   2048)
          .has_value());
}

TEST(VisionTower, QwenDefaultsCountAsTransformersBuildsThem) {
  // The text hidden size does not enter the Qwen mergers (their width is the vision config's).
  const auto q2 = vision_tower({{"model_type", "qwen2_vl"}}, 8192);
  ASSERT_TRUE(q2.has_value());
  EXPECT_EQ(q2->tower, "qwen2_vl_vision");
  EXPECT_EQ(q2->tower_params(), 631'183'360);
  EXPECT_EQ(q2->projector_params(), 44'575'744);
  const auto q25 = vision_tower({{"model_type", "qwen2_5_vl"}}, 8192);
  ASSERT_TRUE(q25.has_value());
  EXPECT_EQ(q25->tower, "qwen2_5_vl_vision");
  EXPECT_EQ(q25->tower_params(), 2'826'102'528);
  EXPECT_EQ(q25->projector_params(), 256'922'624);
  const auto q3 = vision_tower({{"model_type", "qwen3_vl"}}, 4096);
  ASSERT_TRUE(q3.has_value());
  EXPECT_EQ(q3->tower, "qwen3_vl_vision");
  EXPECT_EQ(q3->tower_params(), 415'891'440);
  EXPECT_EQ(q3->projector_params(), 151'057'664);
}

struct PublishedVlm {
  const char* file;  // under tests/data/models/vlm/
  const char* read_as;
  int64_t text, tower, projector;
};

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  return nlohmann::json::parse(f);
}

// The published config.json files, read the way `zeroplan --model <file>` reads them: the language tower
// (ModelSpec, what zeroplan plans) and the vision tower and projector (counted, not planned), each against
// transformers' own count.
TEST(VisionTower, PublishedQwenConfigsCountAsTransformersBuildsThem) {
  const PublishedVlm models[] = {
      // Qwen2.5-VL-3B-Instruct: text fields at the top level (no text_config), tie_word_embeddings true.
      {"qwen2_5_vl_3b_instruct.json", "qwen2", 3'085'938'688, 631'975'680, 36'708'608},
      // Qwen2.5-VL-7B-Instruct: a text_config (model_type qwen2_5_vl_text), untied.
      {"qwen2_5_vl_7b_instruct.json", "qwen2", 7'615'616'512, 631'975'680, 44'574'464},
      // Qwen3-VL-2B-Instruct: tied; three deepstack mergers.
      {"qwen3_vl_2b_instruct.json", "qwen3", 1'720'574'976, 306'242'560, 100'714'496},
      {"qwen3_vl_8b_instruct.json", "qwen3", 8'190'735'360, 415'891'440, 160'496'896},
      // Qwen2-VL's layout (embed_dim, mlp_ratio, LayerNorms) with top-level text fields, tied.
      {"qwen2_vl_2b_shaped.json", "qwen2", 1'543'714'304, 631'183'360, 34'087'936},
  };
  for (const auto& e : models) {
    SCOPED_TRACE(e.file);
    const std::string path = std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/vlm/" + e.file;
    const ModelSpec m = load_model(path);
    EXPECT_EQ(m.model_type, e.read_as);
    EXPECT_EQ(m.num_parameters(), e.text);
    const auto vt = vision_tower(read_json(path), m.hidden_size);
    ASSERT_TRUE(vt.has_value());
    EXPECT_EQ(vt->tower_params(), e.tower);
    EXPECT_EQ(vt->projector_params(), e.projector);
    // The output says what the plan leaves out, with the tower's count.
    bool said = false;
    for (const auto& w : m.warnings)
      said = said || w.find(fmt::format("{:.1f}M parameters", static_cast<double>(e.tower) / 1e6)) !=
                         std::string::npos;
    EXPECT_TRUE(said) << (m.warnings.empty() ? std::string("no warning") : m.warnings.front());
  }
}

// Qwen2_5_VLConfig ties when either flag is set; Qwen3VLConfig on the outer flag alone.
TEST(VisionTower, QwenTieRulesAreTheWrappers) {
  struct Case {
    const char* file;
    bool outer, text;
    int64_t expected;
  };
  const Case cases[] = {
      {"qwen2_5_vl_7b_instruct.json", true, false, 7'070'619'136},
      {"qwen2_5_vl_7b_instruct.json", false, true, 7'070'619'136},
      {"qwen3_vl_8b_instruct.json", true, false, 7'568'405'504},
      {"qwen3_vl_8b_instruct.json", false, true, 8'190'735'360},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(fmt::format("{} outer {} text {}", c.file, c.outer, c.text));
    nlohmann::json j = read_json(std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/vlm/" + c.file);
    j["tie_word_embeddings"] = c.outer;
    j["text_config"]["tie_word_embeddings"] = c.text;
    EXPECT_EQ(model_from_hf_json(c.file, j).num_parameters(), c.expected);
  }
}

// Qwen3.5's vision model is Qwen3-VL's without the deepstack mergers; its wrappers tie on the outer flag
// alone.
TEST(VisionTower, Qwen35TowersAndTieRule) {
  struct Case {
    const char* file;
    int64_t text_untied, text_tied;
  };
  for (const Case& c : {Case{"qwen3_5.json", 8'953'803'264, 7'936'684'544},
                        Case{"qwen3_5_moe.json", 34'660'610'688, 34'152'051'328}}) {
    SCOPED_TRACE(c.file);
    const std::string path = std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/hf_defaults/" + c.file;
    const nlohmann::json j = read_json(path);
    const ModelSpec m = load_model(path);
    EXPECT_EQ(m.num_parameters(), c.text_untied);
    const auto vt = vision_tower(j, m.hidden_size);
    ASSERT_TRUE(vt.has_value());
    EXPECT_EQ(vt->tower_params(), 415'891'440);
    EXPECT_EQ(vt->projector_params(), 37'759'232);
    for (const bool outer : {true, false}) {
      nlohmann::json k = j;
      k["tie_word_embeddings"] = outer;
      k["text_config"]["tie_word_embeddings"] = !outer;
      EXPECT_EQ(model_from_hf_json(c.file, k).num_parameters(), outer ? c.text_tied : c.text_untied) << outer;
    }
  }
}

TEST(VisionTower, QwenTextTowersTakeTheirOwnClassDefaults) {
  // Qwen3VLTextConfig num_key_value_heads defaults to 32 (Qwen3Config's reading would take the 16 heads).
  const nlohmann::json text = {{"model_type", "qwen3_vl_text"}, {"hidden_size", 2048},
                               {"num_attention_heads", 16},     {"num_hidden_layers", 2},
                               {"intermediate_size", 4096},     {"vocab_size", 1000}};
  const auto as = vl_text_config_as_family(text);
  ASSERT_TRUE(as.has_value());
  EXPECT_EQ((*as)["model_type"], "qwen3");
  EXPECT_EQ((*as)["num_key_value_heads"], 32);
  EXPECT_EQ((*as)["head_dim"], 128);
  // Qwen2_5_VLAttention takes hidden_size / num_attention_heads whatever head_dim says.
  const auto q25 = vl_text_config_as_family({{"model_type", "qwen2_5_vl_text"}, {"head_dim", 64}});
  ASSERT_TRUE(q25.has_value());
  EXPECT_FALSE(q25->contains("head_dim"));
  EXPECT_EQ((*q25)["num_key_value_heads"], 8);
  EXPECT_FALSE(vl_text_config_as_family({{"model_type", "qwen3"}}).has_value());
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

// Every tensor of the tower and projector, its name, shape and registration order, as transformers 5.24
// builds them (tests/data/models/vlm/tensors.json): what the planner partitions, freezes and trains.
TEST(VisionTower, TensorsAreTransformersOwnInRegistrationOrder) {
  const json ref = read_json(std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/vlm/tensors.json");
  static const std::regex layer_index(R"(\.\d+\.)");
  ASSERT_GE(ref.at("models").size(), 12u);
  for (const auto& [key, entry] : ref.at("models").items()) {
    SCOPED_TRACE(key);
    // "default:<model_type>": the config class's defaults, whose language towers are 2304 wide (Gemma-3),
    // 2048 (PaliGemma), 4096 (LLaVA, LLaVA-NeXT) (the counts above); the Qwen mergers' output width is
    // the vision config's. A published file: read as `zeroplan --model <file>` reads it.
    std::vector<LayerInventory> groups;
    if (key.rfind("default:", 0) == 0) {
      const std::string type = key.substr(8);
      const int64_t text_h = type == "gemma3" ? 2304 : type == "paligemma" ? 2048 : 4096;
      const auto vt = vision_tower({{"model_type", type}}, text_h);
      ASSERT_TRUE(vt.has_value());
      groups = vt->groups;
    } else {
      groups = model_from_hf_json(key, read_json(std::string(ZEROPLAN_SOURCE_DIR) + "/" + key)).vision_groups;
    }
    ASSERT_FALSE(groups.empty());
    json ours = json::array();  // the script's form: [pattern, shape, count], first occurrence first
    int64_t total = 0;
    for (const auto& g : groups)
      for (const auto& t : g.tensors) {
        EXPECT_TRUE(t.vision) << t.name;
        total += t.numel();
        const json k = {std::regex_replace(t.name, layer_index, ".*."), t.shape};
        auto it = std::find_if(ours.begin(), ours.end(),
                               [&](const json& e) { return e[0] == k[0] && e[1] == k[1]; });
        if (it == ours.end())
          ours.push_back({k[0], k[1], 1});
        else
          (*it)[2] = (*it)[2].get<int64_t>() + 1;
      }
    EXPECT_EQ(ours, entry.at("tensors"));
    EXPECT_EQ(total, entry.at("tower").get<int64_t>() + entry.at("projector").get<int64_t>());
  }
}

// Images to patches and tokens (VisionGeometry), by hand:
//   Qwen2.5-VL (patch 14, 2 x 2 merge; Qwen2VLImageProcessor smart_resize rounds each side to a multiple of
//   28): 448 x 448 -> 32 x 32 = 1,024 patches, 256 tokens; 500 x 300 -> 504 x 308 -> 36 x 22 = 792 patches,
//   198 tokens.
//   Gemma-3-4B (SigLIP at 896 / 14): 64 x 64 = 4,096 patches pooled to mm_tokens_per_image 256.
//   LLaVA default (CLIP at 336 / 14): 24 x 24 + CLS = 577 patches, 576 tokens.
TEST(VisionTower, ImagesBecomePatchesAndTokens) {
  const auto q = vision_tower({{"model_type", "qwen2_5_vl"}}, 8192);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->geometry.patches(448, 448), 1024);
  EXPECT_EQ(q->geometry.tokens(448, 448), 256);
  EXPECT_EQ(q->geometry.patches(500, 300), 792);
  EXPECT_EQ(q->geometry.tokens(500, 300), 198);
  const ModelSpec g = load_model("gemma-3-4b");
  EXPECT_EQ(g.vision_geometry.patches(896, 896), 4096);
  EXPECT_EQ(g.vision_geometry.tokens(896, 896), 256);
  const auto l = vision_tower({{"model_type", "llava"}}, 4096);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->geometry.patches(336, 336), 577);
  EXPECT_EQ(l->geometry.tokens(336, 336), 576);
  EXPECT_TRUE(l->geometry.supported);
  EXPECT_FALSE(vision_tower({{"model_type", "llava_next"}}, 4096)->geometry.supported);
}

}  // namespace
}  // namespace zeroplan::models
