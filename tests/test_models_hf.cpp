// zeroplan's parameter counts against transformers' own: tests/data/models/param_counts.json was
// written by scripts/count_params.py, which instantiates each model with PyPI transformers (version
// recorded in the file) on the meta device and sums p.numel() over model.parameters(). Every family's
// config-class defaults (twice: a minimal file with only the size fields, so zeroplan's defaults
// are tested, and the full serialised config) and every zoo config must agree exactly, tensor by
// tensor where the names are the same in both (dense models).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "common/errors.h"
#include "models/hf_config.h"
#include "models/model_spec.h"

namespace zeroplan::models {
namespace {

const std::string kSource = ZEROPLAN_SOURCE_DIR;

const nlohmann::json& counts() {
  static const nlohmann::json j = [] {
    std::ifstream f(kSource + "/tests/data/models/param_counts.json");
    EXPECT_TRUE(f.good());
    return nlohmann::json::parse(f);
  }();
  return j;
}

std::vector<std::string> keys() {
  std::vector<std::string> out;
  for (const auto& [k, v] : counts().at("models").items()) out.push_back(k);
  return out;
}

// "model.layers.*.mlp.gate_proj.weight 11008x4096" -> layers having it, as the script writes it.
// Two documented naming differences between zeroplan's inventory (checkpoint conventions) and the
// transformers 5 module: GPT-2's Conv1D weights are stored [in, out] (zeroplan writes nn.Linear's
// [out, in], models/README.md), and GPT-NeoX's checkpoints call the head embed_out where
// transformers 5's GPTNeoXForCausalLM calls it lm_head.
std::map<std::string, int64_t> pattern_counts(const ModelSpec& m) {
  static const std::regex layer_index(R"(\.\d+\.)");
  std::map<std::string, int64_t> out;
  for (const auto& l : m.inventory())
    for (const auto& t : l.tensors) {
      auto dims = t.shape;
      if (m.layout == Layout::GPT2 && t.is_linear) std::swap(dims[0], dims[1]);
      std::string name = t.name;
      if (m.layout == Layout::GPTNeoX && name == "embed_out.weight") name = "lm_head.weight";
      std::string shape;
      for (const int64_t d : dims) shape += (shape.empty() ? "" : "x") + std::to_string(d);
      out[std::regex_replace(name, layer_index, ".*.") + " " + shape] += 1;
    }
  return out;
}

std::map<std::string, int64_t> pattern_counts(const nlohmann::json& tensors) {
  std::map<std::string, int64_t> out;
  for (const auto& t : tensors) {
    std::string shape;
    for (const auto& d : t.at("shape"))
      shape += (shape.empty() ? "" : "x") + std::to_string(d.get<int64_t>());
    out[t.at("name").get<std::string>() + " " + shape] += t.at("count").get<int64_t>();
  }
  return out;
}

int64_t expert_params(const nlohmann::json& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors) {
    if (t.at("name").get<std::string>().find(".experts.") == std::string::npos) continue;
    int64_t e = t.at("count").get<int64_t>();
    for (const auto& d : t.at("shape")) e *= d.get<int64_t>();
    n += e;
  }
  return n;
}

int64_t expert_params(const ModelSpec& m) {
  int64_t n = 0;
  for (const auto& l : m.inventory())
    for (const auto& t : l.tensors)
      if (t.name.find(".experts.") != std::string::npos) n += t.numel();
  return n;
}

ModelSpec load(const std::string& key, const nlohmann::json& entry) {
  if (key.rfind("zoo/", 0) == 0) return load_model(key.substr(4));
  return load_model(kSource + "/" + entry.at("config").get<std::string>());
}

class TransformersCount : public ::testing::TestWithParam<std::string> {};

TEST_P(TransformersCount, TotalIsExact) {
  const auto& entry = counts().at("models").at(GetParam());
  const ModelSpec m = load(GetParam(), entry);
  EXPECT_EQ(m.num_parameters(), entry.at("total").get<int64_t>()) << entry.at("class");
}

TEST_P(TransformersCount, FullConfigGivesTheSameCount) {
  if (GetParam().rfind("defaults/", 0) != 0) GTEST_SKIP() << "zoo files are the Hub's own";
  const auto& entry = counts().at("models").at(GetParam());
  std::string path = kSource + "/" + entry.at("config").get<std::string>();
  path = path.substr(0, path.size() - 5) + ".full.json";
  EXPECT_EQ(load_model(path).num_parameters(), entry.at("total").get<int64_t>());
}

// Dense models: the same tensor names and shapes as transformers. MoE models: transformers 5 fuses
// the experts into 3-D tensors where the Hub checkpoints (and zeroplan) keep one per expert, so the
// routed-expert total and everything outside the experts are compared instead.
TEST_P(TransformersCount, TensorsMatch) {
  const auto& entry = counts().at("models").at(GetParam());
  const ModelSpec m = load(GetParam(), entry);
  auto ours = pattern_counts(m);
  auto theirs = pattern_counts(entry.at("tensors"));
  // GraniteMoE's checkpoints store the experts fused already; transformers 5.24 renames them on load
  // (conversion_mapping.py "granitemoe": block_sparse_moe.input_linear.weight -> experts.gate_up_proj,
  // output_linear.weight -> experts.down_proj, router.layer.weight -> router.weight): compared tensor by
  // tensor after those renamings. GraniteMoeHybrid takes the same mapping (conversion_mapping.py
  // "granitemoehybrid": "granitemoe").
  if (m.model_type == "granitemoe" || m.model_type == "granitemoeshared" ||
      m.model_type == "granitemoehybrid") {
    decltype(ours) renamed;
    for (const auto& [k, v] : ours) {
      std::string name = k;
      for (const auto& [from, to] :
           {std::pair<std::string, std::string>{"block_sparse_moe.input_linear.weight",
                                                "block_sparse_moe.experts.gate_up_proj"},
            {"block_sparse_moe.output_linear.weight", "block_sparse_moe.experts.down_proj"},
            {"block_sparse_moe.router.layer.weight", "block_sparse_moe.router.weight"}})
        if (const auto at = name.find(from); at != std::string::npos) name.replace(at, from.size(), to);
      renamed[name] = v;
    }
    EXPECT_EQ(renamed, theirs);
    return;
  }
  if (m.is_moe()) {
    EXPECT_EQ(expert_params(m), expert_params(entry.at("tensors")));
    // Mixtral's checkpoint names (block_sparse_moe.*) differ from transformers 5's (mlp.*).
    if (m.moe_style == MoeStyle::Mixtral) return;
    std::erase_if(ours, [](const auto& p) { return p.first.find(".experts.") != std::string::npos; });
    std::erase_if(theirs, [](const auto& p) { return p.first.find(".experts.") != std::string::npos; });
    // ERNIE-4.5-MoE's checkpoints keep the correction bias at mlp.moe_statics; transformers 5.24 moves it
    // under the router on load (conversion_mapping.py:
    // WeightRenaming("mlp.moe_statics.e_score_correction_bias",
    // "mlp.gate.moe_statics.e_score_correction_bias")).
    if (m.router_score_bias_param) {
      decltype(ours) renamed;
      for (const auto& [k, v] : ours) {
        std::string name = k;
        const std::string from = "mlp.moe_statics.", to = "mlp.gate.moe_statics.";
        if (const auto at = name.find(from); at != std::string::npos) name.replace(at, from.size(), to);
        renamed[name] = v;
      }
      ours = std::move(renamed);
    }
  }
  EXPECT_EQ(ours, theirs);
}

INSTANTIATE_TEST_SUITE_P(Hf, TransformersCount, ::testing::ValuesIn(keys()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// GLM-4.5 (355B-A32B) as a shape: hidden 5120, 96 heads / 8 KV heads of 128, 92 layers of which the
// first 3 dense (12288 wide) and 89 MoE (160 routed experts of 1536, one shared of 1536, top-8), q/k
// norms, q/k/v biases, vocab 151552, untied. Source of the shape: THUDM's slime
// scripts/models/glm4.5-355B-A32B.sh (the Megatron arguments it converts the Hub checkpoint with).
// Expected: transformers 5.24's Glm4MoeForCausalLM built from these fields on the meta device,
// sum(p.numel()) = 352,797,814,784 (the published "355B" adds the MTP layer transformers does not
// build).
TEST(TransformersCountByHand, Glm45ShapeIsExact) {
  const nlohmann::json j = {{"model_type", "glm4_moe"},
                            {"hidden_size", 5120},
                            {"num_attention_heads", 96},
                            {"num_key_value_heads", 8},
                            {"head_dim", 128},
                            {"num_hidden_layers", 92},
                            {"first_k_dense_replace", 3},
                            {"intermediate_size", 12288},
                            {"moe_intermediate_size", 1536},
                            {"n_routed_experts", 160},
                            {"n_shared_experts", 1},
                            {"num_experts_per_tok", 8},
                            {"use_qk_norm", true},
                            {"attention_bias", true},
                            {"vocab_size", 151552},
                            {"tie_word_embeddings", false},
                            {"num_nextn_predict_layers", 1},
                            {"max_position_embeddings", 131072}};
  const ModelSpec m = model_from_hf_json("glm-4.5-shape", j);
  EXPECT_EQ(m.num_parameters(), 352797814784);
  EXPECT_EQ(m.num_experts, 160);
  EXPECT_EQ(m.qk_norm, QkNorm::PerHead);
}

// Dots1Config leaves n_routed_experts, n_shared_experts and num_experts_per_tok None, with which
// transformers 5.24 builds no model (AutoModelForCausalLM.from_config fails on the default config):
// zeroplan asks for them rather than guess.
TEST(TransformersCountByHand, Dots1WithoutExpertCountsIsRefusedByName) {
  nlohmann::json j = {{"model_type", "dots1"},  {"hidden_size", 256},       {"num_attention_heads", 4},
                      {"num_hidden_layers", 2}, {"intermediate_size", 512}, {"moe_intermediate_size", 128},
                      {"vocab_size", 2048},     {"n_shared_experts", 1},    {"num_experts_per_tok", 2}};
  try {
    (void)model_from_hf_json("dots1-config", j);
    ADD_FAILURE() << "expected a refusal";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("n_routed_experts"), std::string::npos) << e.what();
  }
  j["n_routed_experts"] = 4;
  EXPECT_EQ(model_from_hf_json("dots1-config", j).num_experts, 4);
}

// HunYuanDenseV1Config.head_dim defaults to None and HunYuanDenseV1Attention's getattr(config, "head_dim",
// hidden // heads) returns that None (transformers 5.24 then fails on `self.head_dim**-0.5`): zeroplan asks
// for it. Given, the per-head query/key layernorms are counted under their own names (the defaults set
// above checks them tensor by tensor).
TEST(TransformersCountByHand, HunyuanWithoutHeadDimIsRefusedByName) {
  nlohmann::json j = {{"model_type", "hunyuan_v1_dense"}, {"hidden_size", 256},
                      {"num_attention_heads", 4},         {"num_hidden_layers", 2},
                      {"intermediate_size", 512},         {"vocab_size", 2048}};
  auto expect_refused = [](const nlohmann::json& cfg) {
    try {
      (void)model_from_hf_json("hunyuan-config", cfg);
      ADD_FAILURE() << "expected a refusal for " << cfg.dump();
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
    }
  };
  expect_refused(j);  // no head_dim
  j["head_dim"] = nullptr;
  expect_refused(j);  // head_dim: null, as HunYuanDenseV1Config.to_dict() writes it
  j["head_dim"] = 64;
  const ModelSpec m = model_from_hf_json("hunyuan-config", j);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.qk_norm, QkNorm::PerHead);
}

// HunYuan-MoE: head_dim required as for the dense model; per-layer lists of num_experts / moe_topk are
// refused by name (transformers 5.24's HunYuanMoEV1Experts takes num_experts as one integer).
TEST(TransformersCountByHand, HunyuanMoeNeedsHeadDimAndRefusesPerLayerLists) {
  nlohmann::json j = {{"model_type", "hunyuan_v1_moe"},
                      {"hidden_size", 256},
                      {"num_attention_heads", 4},
                      {"num_hidden_layers", 2},
                      {"intermediate_size", 128},
                      {"vocab_size", 2048},
                      {"num_experts", 4},
                      {"moe_topk", 2}};
  auto expect_refused = [](const nlohmann::json& cfg, const std::string& says) {
    try {
      (void)model_from_hf_json("hunyuan-moe-config", cfg);
      ADD_FAILURE() << "expected a refusal for " << cfg.dump();
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect_refused(j, "head_dim");
  j["head_dim"] = 64;
  const ModelSpec m = model_from_hf_json("hunyuan-moe-config", j);
  EXPECT_EQ(m.num_experts, 4);
  EXPECT_EQ(m.experts_per_token, 2);
  EXPECT_EQ(m.moe_intermediate_size, 128);  // experts as wide as intermediate_size
  EXPECT_EQ(m.shared_expert_intermediate_size, 128);
  j["num_experts"] = {4, 4};
  expect_refused(j, "'num_experts'");
  j["num_experts"] = 4;
  j["moe_topk"] = {2, 2};
  expect_refused(j, "'moe_topk'");
}

// Families added for issue 29 (transformers 5.24), on small shapes; each expected total is
// AutoModelForCausalLM.from_config(AutoConfig.for_model(type, **fields)) on the meta device, sum(p.numel()).
nlohmann::json small(const std::string& type) {
  return {{"model_type", type},       {"hidden_size", 256},       {"num_hidden_layers", 4},
          {"num_attention_heads", 4}, {"num_key_value_heads", 4}, {"intermediate_size", 512},
          {"vocab_size", 1024}};
}

// StableLM: use_parallel_residual drops post_attention_layernorm, use_qkv_bias adds q/k/v (not o) biases:
// 3,151,360 in transformers; qk_layernorm (one LayerNorm per head) is refused by name.
TEST(TransformersCountByHand, StableLmVariants) {
  nlohmann::json j = small("stablelm");
  j["use_parallel_residual"] = true;
  j["use_qkv_bias"] = true;
  EXPECT_EQ(model_from_hf_json("stablelm-config", j).num_parameters(), 3151360);
  j["qk_layernorm"] = true;
  try {
    (void)model_from_hf_json("stablelm-config", j);
    ADD_FAILURE() << "expected a refusal";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("qk_layernorm"), std::string::npos) << e.what();
  }
}

// EXAONE-MoE: mlp_layer_types decides which layers are sparse (over first_k_dense_replace): 3,250,944.
TEST(TransformersCountByHand, ExaoneMoeFollowsMlpLayerTypes) {
  nlohmann::json j = small("exaone_moe");
  j["moe_intermediate_size"] = 64;
  j["num_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j["mlp_layer_types"] = {"sparse", "dense", "sparse", "dense"};
  const ModelSpec m = model_from_hf_json("exaone-moe-config", j);
  EXPECT_EQ(m.num_parameters(), 3250944);
  EXPECT_EQ(m.num_moe_layers(), 2);
  EXPECT_TRUE(m.is_moe_layer(0));
  EXPECT_FALSE(m.is_moe_layer(1));
  j["mlp_layer_types"] = {"sparse", "dense"};
  EXPECT_THROW((void)model_from_hf_json("exaone-moe-config", j), UserError);
}

// Sarvam-MoE's own spellings (SarvamMoEConfig attribute_map: num_experts, num_shared_experts, use_qkv_bias):
// 3,452,672 in transformers (built as Glm4MoeForCausalLM).
TEST(TransformersCountByHand, SarvamMoeAliases) {
  nlohmann::json j = small("sarvam_moe");
  j["head_dim"] = 64;
  j["moe_intermediate_size"] = 64;
  j["num_experts"] = 8;
  j["num_shared_experts"] = 2;
  j["use_qkv_bias"] = true;
  j["num_experts_per_tok"] = 2;
  const ModelSpec m = model_from_hf_json("sarvam-config", j);
  EXPECT_EQ(m.num_parameters(), 3452672);
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.shared_expert_intermediate_size, 128);
  EXPECT_TRUE(m.qkv_bias_only);
}

// Cohere2Config.__post_init__ sets head_dim = hidden // heads, but a head_dim given in the file is set after
// it and Cohere2Attention uses it: 2,360,576 with head_dim 32 given (2,884,864 without, head_dim 64);
// StableLmAttention ignores head_dim: 3,150,336 either way.
TEST(TransformersCountByHand, HeadDimReadOrIgnoredAsTransformersDoes) {
  nlohmann::json j = small("cohere2");
  EXPECT_EQ(model_from_hf_json("cohere2-config", j).num_parameters(), 2884864);
  j["head_dim"] = 32;
  EXPECT_EQ(model_from_hf_json("cohere2-config", j).num_parameters(), 2360576);
  nlohmann::json k = small("stablelm");
  EXPECT_EQ(model_from_hf_json("stablelm-config", k).num_parameters(), 3150336);
  k["head_dim"] = 32;
  EXPECT_EQ(model_from_hf_json("stablelm-config", k).num_parameters(), 3150336);
}

// Qwen3-Next's layer patterns and sizes beyond the class defaults. Expected totals: transformers 5.24
// AutoModelForCausalLM.from_config on the meta device, sum(p.numel()), for these fields (hidden 64, 6
// layers, 4 heads / 2 KV heads of 16, GDN 2 key heads x 8 and 4 value heads x 16, kernel 4, 4 experts of
// 32, top-2, shared expert 48, vocab 128) plus each case's own:
//   full_attention_interval 3, decoder_sparse_step 2, mlp_only_layers [3]  253,024
//   explicit layer_types (full, linear, linear, full, linear, full), tied     308,712
//   num_experts 0 (every layer a dense Qwen3NextMLP)                           220,504
//   attention_bias, linear_conv_kernel_dim 2, linear_num_value_heads 8         378,560
TEST(TransformersCountByHand, Qwen3NextLayerPatterns) {
  const nlohmann::json base = {{"model_type", "qwen3_next"},
                               {"hidden_size", 64},
                               {"intermediate_size", 96},
                               {"num_hidden_layers", 6},
                               {"num_attention_heads", 4},
                               {"num_key_value_heads", 2},
                               {"vocab_size", 128},
                               {"max_position_embeddings", 64},
                               {"head_dim", 16},
                               {"moe_intermediate_size", 32},
                               {"shared_expert_intermediate_size", 48},
                               {"num_experts", 4},
                               {"num_experts_per_tok", 2},
                               {"linear_num_key_heads", 2},
                               {"linear_num_value_heads", 4},
                               {"linear_key_head_dim", 8},
                               {"linear_value_head_dim", 16},
                               {"linear_conv_kernel_dim", 4}};
  auto with = [&](const nlohmann::json& extra) {
    nlohmann::json j = base;
    for (const auto& [k, v] : extra.items()) j[k] = v;
    return model_from_hf_json("qwen3-next-small", j);
  };
  const ModelSpec a =
      with({{"full_attention_interval", 3}, {"decoder_sparse_step", 2}, {"mlp_only_layers", {3}}});
  EXPECT_EQ(a.num_parameters(), 253024);
  EXPECT_EQ(a.num_moe_layers(), 2);  // layers 1 and 5 (3 is in mlp_only_layers)
  EXPECT_EQ(a.layer_kind(2), LayerKind::Attention);
  EXPECT_EQ(a.layer_kind(3), LayerKind::GatedDeltaNet);
  const ModelSpec b = with({{"layer_types",
                             {"full_attention", "linear_attention", "linear_attention", "full_attention",
                              "linear_attention", "full_attention"}},
                            {"tie_word_embeddings", true}});
  EXPECT_EQ(b.num_parameters(), 308712);
  EXPECT_EQ(b.layer_kind(0), LayerKind::Attention);
  const ModelSpec c = with({{"num_experts", 0}});
  EXPECT_EQ(c.num_parameters(), 220504);
  EXPECT_FALSE(c.is_moe());
  EXPECT_EQ(with({{"attention_bias", true}, {"linear_conv_kernel_dim", 2}, {"linear_num_value_heads", 8}})
                .num_parameters(),
            378560);
  // Any other layer type builds no token mixer in Qwen3NextDecoderLayer: refused, not guessed.
  EXPECT_THROW((void)with({{"layer_types",
                            {"full_attention", "mamba", "linear_attention", "full_attention",
                             "linear_attention", "full_attention"}}}),
               UserError);
  EXPECT_THROW((void)with({{"layer_types", {"full_attention"}}}), UserError);  // not one per layer
}

// Qwen3.5's text models: the Gated DeltaNet with split projections (in_proj_qkv, in_proj_z, in_proj_b,
// in_proj_a). Expected totals: transformers 5.24 on the meta device for hidden 64, 4 layers, 4 heads / 2
// KV heads of 16, GDN 2 key heads x 8 and 4 value heads x 16, kernel 4, vocab 128, plus:
//   qwen3_5_text, intermediate 96, full_attention_interval 2, tied                          145,840
//   qwen3_5_moe_text, 4 experts of 32, top-2, shared 48, layer_types (linear, full, full, linear)  216,752
TEST(TransformersCountByHand, Qwen35TextModels) {
  const nlohmann::json base = {
      {"hidden_size", 64},        {"num_hidden_layers", 4},      {"num_attention_heads", 4},
      {"num_key_value_heads", 2}, {"vocab_size", 128},           {"max_position_embeddings", 64},
      {"head_dim", 16},           {"linear_num_key_heads", 2},   {"linear_num_value_heads", 4},
      {"linear_key_head_dim", 8}, {"linear_value_head_dim", 16}, {"linear_conv_kernel_dim", 4}};
  nlohmann::json dense = base;
  dense["model_type"] = "qwen3_5_text";
  dense["intermediate_size"] = 96;
  dense["full_attention_interval"] = 2;
  dense["tie_word_embeddings"] = true;
  const ModelSpec d = model_from_hf_json("qwen3.5-small", dense);
  EXPECT_EQ(d.num_parameters(), 145840);
  EXPECT_EQ(d.layer_kind(0), LayerKind::GatedDeltaNet);
  EXPECT_EQ(d.layer_kind(1), LayerKind::Attention);
  nlohmann::json moe = base;
  moe["model_type"] = "qwen3_5_moe_text";
  moe["moe_intermediate_size"] = 32;
  moe["shared_expert_intermediate_size"] = 48;
  moe["num_experts"] = 4;
  moe["num_experts_per_tok"] = 2;
  moe["layer_types"] = {"linear_attention", "full_attention", "full_attention", "linear_attention"};
  const ModelSpec e = model_from_hf_json("qwen3.5-moe-small", moe);
  EXPECT_EQ(e.num_parameters(), 216752);
  EXPECT_EQ(e.num_moe_layers(), 4);
  EXPECT_TRUE(e.norm_topk_prob);  // Qwen3_5MoeTopKRouter always renormalises
}

// The MoE routing of the new families at their config classes' defaults (tests/data/models/hf_defaults):
// routed experts, top-k, shared-expert width, sparse layers and whether the router's correction bias is
// a buffer (not counted), as the configuration_<family>.py classes set them.
TEST(TransformersCountByHand, NewMoeFamiliesRouting) {
  struct Want {
    const char* type;
    int64_t experts, top_k, shared_width, moe_layers;
    bool score_bias_buffer;
  };
  const Want wants[] = {
      {"flex_olmo", 7, 5, 0, 32, false},         // FlexOlmoConfig: 7 experts, top-5, 32 layers all sparse
      {"solar_open", 128, 8, 1280, 48, true},    // SolarOpenConfig: 128, top-8, 1 shared x 1280, 48 layers
      {"exaone_moe", 64, 8, 1024, 31, true},     // ExaoneMoeConfig: 64, top-8, 1 x 1024, first layer dense
      {"mellum", 64, 8, 0, 28, false},           // MellumConfig: 64, top-8, 28 layers all sparse
      {"kolibri1", 384, 6, 512, 50, true},       // Kolibri1Config: 384, top-6, shared 512, 50 layers
      {"sarvam_moe", 128, 6, 1024, 18, true},    // SarvamMoEConfig: 128, top-6, 1 x 1024, first of 19 dense
      {"glm4_moe_lite", 64, 4, 1536, 46, true},  // Glm4MoeLiteConfig: 64, top-4, 1 x 1536, first of 47 dense
      {"hy_v3", 192, 8, 1536, 79, true},         // HYV3Config: 192, top-8, 1 x 1536, first of 80 dense
      {"sarvam_mla", 128, 8, 2048, 31, true},    // SarvamMLAConfig: 128, top-8, 1 x 2048, first of 32 dense
      {"granitemoe", 8, 2, 0, 32, false},        // GraniteMoeConfig: 8 experts, top-2, all 32 layers sparse
      {"qwen3_next", 512, 10, 512, 48, false},   // Qwen3NextConfig: 512, top-10, shared 512, all 48 sparse
      {"qwen3_5_moe_text", 256, 8, 512, 40, false},  // Qwen3_5MoeTextConfig: 256, top-8, shared 512, 40
  };
  for (const Want& w : wants) {
    const ModelSpec m = load_model(kSource + "/tests/data/models/hf_defaults/" + w.type + ".json");
    EXPECT_EQ(m.num_experts, w.experts) << w.type;
    EXPECT_EQ(m.experts_per_token, w.top_k) << w.type;
    EXPECT_EQ(m.shared_expert_intermediate_size, w.shared_width) << w.type;
    EXPECT_EQ(m.num_moe_layers(), w.moe_layers) << w.type;
    EXPECT_EQ(m.router_score_bias, w.score_bias_buffer) << w.type;
    EXPECT_LT(m.active_parameters(), m.num_parameters()) << w.type;
    bool named = false;
    for (const auto& l : m.runtime_inventory())
      if (!l.moe_block_class.empty()) named = true;
    EXPECT_TRUE(named) << w.type << ": no DeepSpeed leaf class for its MoE block";
  }
}

// Families a Llama-style reading of the standard fields would miscount (transformers 5.24's counts of the
// class defaults differ from it, or transformers builds none) are refused naming what differs;
// HyperCLOVA X without use_post_norm is Llama's layer (3,148,032 in transformers, with the warning).
TEST(TransformersCountByHand, MiscountedFamiliesAreRefusedByName) {
  for (const char* type : {"diffllama", "hrm_text", "modernbert-decoder", "phi4_multimodal",
                           "gemma4_unified_text", "cohere_compass_text", "hyperclovax"}) {
    try {
      (void)model_from_hf_json("cfg", small(type));
      ADD_FAILURE() << "expected a refusal for " << type;
    } catch (const UserError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(type), std::string::npos) << msg;
      EXPECT_NE(msg.find("would miscount"), std::string::npos) << msg;
    }
  }
  nlohmann::json j = small("hyperclovax");
  j["head_dim"] = 64;
  j["use_post_norm"] = false;
  const ModelSpec m = model_from_hf_json("hyperclovax-config", j);
  EXPECT_EQ(m.num_parameters(), 3148032);
  EXPECT_FALSE(m.warnings.empty());
}

TEST(TransformersData, RecordsTheVersionsUsed) {
  const auto& v = counts().at("versions");
  EXPECT_FALSE(v.at("transformers").get<std::string>().empty());
  EXPECT_FALSE(v.at("torch").get<std::string>().empty());
}

}  // namespace
}  // namespace zeroplan::models

namespace zeroplan::models {
namespace {

// ERNIE-4.5-MoE builds its router's correction bias with requires_grad False: the harness's recording
// of DeepSpeed 0.19.8 (tests/deepspeed/fixtures/0.19.8/ernie4_5_moe_s2_n2_bf16_default.json, "model")
// counts 2,432,772 parameters of which 2,432,768 train (one [1, 4] bias in the one MoE layer).
TEST(Ernie45Moe, FrozenCorrectionBiasIsNotTrained) {
  std::ifstream in(std::string(ZEROPLAN_SOURCE_DIR) +
                   "/tests/deepspeed/fixtures/0.19.8/ernie4_5_moe_s2_n2_bf16_default.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json fx = nlohmann::json::parse(in);
  const std::string path = ::testing::TempDir() + "ernie4_5_moe_tiny.json";
  std::ofstream(path) << fx.at("model").at("hf_config").dump();
  const ModelSpec m = load_model(path);
  EXPECT_EQ(m.num_parameters(), fx.at("model").at("parameters").get<int64_t>());
  EXPECT_EQ(m.num_parameters() - m.num_frozen_parameters(),
            fx.at("model").at("trainable_parameters").get<int64_t>());
  EXPECT_EQ(m.num_frozen_parameters(), 4);
}

}  // namespace
}  // namespace zeroplan::models
