// Parameter counts of the zoo against published figures, the MoE active count, and the layer
// inventory's structure (GQA/MQA, tying, biases, fused projections, HF names). Every expected value
// below is a published count (source in the comment) or a hand computation written out in full.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <set>
#include <string>

#include "common/errors.h"
#include "models/model_spec.h"

namespace zeroplan::models {
namespace {

struct Published {
  const char* model;
  int64_t parameters;
};

std::ostream& operator<<(std::ostream& os, const Published& p) {
  return os << p.model;
}

class PublishedCount : public ::testing::TestWithParam<Published> {};

TEST_P(PublishedCount, InventorySumsToThePublishedFigure) {
  const auto& p = GetParam();
  EXPECT_EQ(load_model(p.model).num_parameters(), p.parameters);
}

// HF = Hugging Face Hub safetensors metadata (parameter_count) of the repo in models/zoo/_index.json.
INSTANTIATE_TEST_SUITE_P(
    Zoo, PublishedCount,
    ::testing::Values(
        // PEFT print_trainable_parameters, Llama-2-7B r=16 all-linear: "all params: 6,778,392,576"
        // minus "trainable params: 39,976,960"; also HF meta-llama/Llama-2-7b-hf.
        Published{"llama-2-7b", 6'738'415'616},
        Published{"llama-2-13b", 13'015'864'320},  // HF meta-llama/Llama-2-13b-hf
        Published{"llama-2-70b", 68'976'648'192},  // HF meta-llama/Llama-2-70b-hf
        Published{"llama-3.1-8b", 8'030'261'248},  // HF meta-llama/Llama-3.1-8B
        // Hand: 2*128256*8192 + 80*(2*8192^2 + 2*1024*8192 + 3*28672*8192 + 2*8192) + 8192
        //     = 2,101,346,304 + 80*855,654,400 + 8,192 (Hub: "70.6B")
        Published{"llama-3.1-70b", 70'553'706'496},
        // Hand: 2*128256*16384 + 126*(2*16384^2 + 2*1024*16384 + 3*53248*16384 + 2*16384) + 16384
        //     = 4,202,692,608 + 126*3,187,703,808 + 16,384 (Hub: "406B")
        Published{"llama-3.1-405b", 405'853'388'800},
        Published{"mistral-7b", 7'241'732'096},     // HF mistralai/Mistral-7B-v0.1
        Published{"mixtral-8x7b", 46'702'792'704},  // HF mistralai/Mixtral-8x7B-v0.1 ("46.7B total")
        Published{"qwen2.5-7b", 7'615'616'512},     // HF Qwen/Qwen2.5-7B-Instruct (card: 7.61B)
        Published{"qwen2.5-14b", 14'770'033'664},   // HF Qwen/Qwen2.5-14B (card: 14.7B)
        Published{"qwen2.5-32b", 32'763'876'352},   // HF Qwen/Qwen2.5-32B-Instruct (card: 32.5B)
        Published{"qwen2.5-72b", 72'706'203'648},   // HF Qwen/Qwen2.5-72B-Instruct (card: 72.7B)
        // Hand: 256000*3584 + 42*(4096*3584*2 + 2*2048*3584 + 3*14336*3584 + 4*3584) + 3584
        //     = 917,504,000 + 42*198,195,200 + 3,584 (Hub: "9.24B")
        Published{"gemma-2-9b", 9'241'705'984},
        // Hand: 256000*4608 + 46*(4096*4608*2 + 2*2048*4608 + 3*36864*4608 + 4*4608) + 4608
        //     = 1,179,648,000 + 46*566,249,472 + 4,608 (Hub: "27.2B")
        Published{"gemma-2-27b", 27'227'128'320},
        Published{"phi-3-mini", 3'821'079'552},  // HF microsoft/Phi-3.5-mini-instruct (same shapes)
        Published{"gpt2", 124'439'808},          // HF openai-community/gpt2 ("124M")
        // Hand: 50257*1600 + 1024*1600 + 48*(4*1600 + 1600*4800+4800 + 1600^2+1600 + 2*(1600*6400)+6400+1600)
        //     + 2*1600 = 80,411,200 + 1,638,400 + 48*30,740,800 + 3,200 (Hub: "1.56B")
        Published{"gpt2-xl", 1'557'611'200},
        // DeepSpeedExamples DeepSpeed-Chat (step 1 default facebook/opt-1.3b):
        // "[pre-LoRA] num params: 1,315,758,080"
        Published{"opt-1.3b", 1'315'758'080},
        Published{"bloom", 176'247'271'424},    // bigscience/bloom model card: 176,247,271,424
        Published{"falcon-7b", 6'921'720'704},  // HF tiiuae/falcon-7b
        // Hand: 65024*8192 + 60*((128+16)*64*8192 + 8192^2 + 2*32768*8192 + 4*8192) + 2*8192
        //     = 532,676,608 + 60*679,510,016 + 16,384 (card: "40B")
        Published{"falcon-40b", 41'303'293'952}));

// OPT-13B/30B/66B: no exact published count found; hand computation from OPTForCausalLM's tensors
// (tied lm_head): V*h + (2048+2)*h + L*(4*(h*h+h) + 2*2h + (f*h+f) + (h*f+h)) + 2h.
int64_t opt_hand_count(int64_t h, int64_t f, int64_t layers) {
  const int64_t v = 50272, pos = 2048 + 2;
  return v * h + pos * h + layers * (4 * (h * h + h) + 4 * h + (f * h + f) + (h * f + h)) + 2 * h;
}

TEST(ModelCounts, OptFamilyMatchesHandComputation) {
  EXPECT_EQ(load_model("opt-13b").num_parameters(), opt_hand_count(5120, 20480, 40));
  EXPECT_EQ(load_model("opt-30b").num_parameters(), opt_hand_count(7168, 28672, 48));
  EXPECT_EQ(load_model("opt-66b").num_parameters(), opt_hand_count(9216, 36864, 64));
  // Same formula reproduces the cited OPT-1.3B figure, so the formula itself is checked.
  EXPECT_EQ(opt_hand_count(2048, 8192, 24), 1'315'758'080);
}

TEST(ModelCounts, Gpt3ShapeFromThePaper) {
  // Brown et al. 2020 Table 2.1: 96 layers, d_model 12288, n_ctx 2048, GPT-2 vocab 50257.
  // Hand: 50257*12288 + 2048*12288 + 96*(12*12288^2 + 13*12288) + 2*12288 = 174,604,259,328 ("175B").
  const auto m = load_model("gpt3-175b");
  EXPECT_EQ(m.num_layers, 96);
  EXPECT_EQ(m.hidden_size, 12288);
  EXPECT_EQ(m.num_heads, 96);
  EXPECT_EQ(m.intermediate_size, 4 * 12288);
  EXPECT_EQ(m.max_position_embeddings, 2048);
  EXPECT_EQ(m.num_parameters(), 174'604'259'328);
}

TEST(ModelCounts, TinyCiModels) {
  // tiny-llama-micro: h 64, 2 layers, 4 heads (head_dim 16), 2 kv heads (kv dim 32), I 172, V 256.
  // Per layer: q 64*64 + k 32*64 + v 32*64 + o 64*64 + 3*172*64 + 2*64 = 45,440.
  // Total: 2*256*64 (untied) + 2*45,440 + 64 = 123,712.
  const auto micro = load_model("tiny-llama-micro");
  EXPECT_EQ(micro.num_parameters(), 123'712);
  EXPECT_EQ(micro.head_dim, 16);
  EXPECT_EQ(micro.num_kv_heads, 2);
  EXPECT_EQ(micro.max_position_embeddings, 512);
  EXPECT_FALSE(micro.tie_word_embeddings);
  // tiny-llama-small: h 256, 4 layers, 8 heads (32), 4 kv heads (128), I 688, V 4096.
  // Per layer: 2*256*256 + 2*128*256 + 3*688*256 + 2*256 = 131,072 + 65,536 + 528,384 + 512 = 725,504.
  // Total: 2*4096*256 + 4*725,504 + 256 = 2,097,152 + 2,902,016 + 256 = 4,999,424.
  const auto small = load_model("tiny-llama-small");
  EXPECT_EQ(small.num_parameters(), 4'999'424);
  EXPECT_EQ(small.max_position_embeddings, 2048);
  EXPECT_NEAR(small.norm_eps, 1e-5, 1e-12);
}

TEST(ModelCounts, MixtralActiveParameters) {
  const auto m = load_model("mixtral-8x7b");
  ASSERT_TRUE(m.is_moe());
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.experts_per_token, 2);
  // Hand: total minus 6 unused experts per layer, each 3*14336*4096 = 176,160,768 parameters:
  // 46,702,792,704 - 32*6*176,160,768 = 12,879,925,248.
  EXPECT_EQ(m.active_parameters(), 12'879'925'248);
  // Mistral AI, "Mixtral of experts" (Dec 2023): "12.9B parameters per token".
  EXPECT_NEAR(static_cast<double>(m.active_parameters()), 12.9e9, 0.05e9);
  // Dense models: active == total.
  const auto d = load_model("llama-2-7b");
  EXPECT_EQ(d.active_parameters(), d.num_parameters());
}

const TensorSpec* find_tensor(const std::vector<LayerInventory>& inv, const std::string& name) {
  for (const auto& l : inv)
    for (const auto& t : l.tensors)
      if (t.name == name) return &t;
  return nullptr;
}

bool has_group(const std::vector<LayerInventory>& inv, const std::string& name) {
  return std::any_of(inv.begin(), inv.end(), [&](const LayerInventory& l) { return l.name == name; });
}

TEST(Inventory, GroupedQueryAttentionShrinksKeyAndValue) {
  const auto m = load_model("llama-2-70b");
  EXPECT_EQ(m.num_heads, 64);
  EXPECT_EQ(m.num_kv_heads, 8);
  const auto inv = m.inventory();
  const auto* k = find_tensor(inv, "model.layers.0.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{8 * 128, 8192}));
  const auto* q = find_tensor(inv, "model.layers.79.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{8192, 8192}));
  // Llama-2-7B has no GQA.
  EXPECT_EQ(load_model("7b").num_kv_heads, 32);
}

TEST(Inventory, FalconMultiQueryAndGroupedLayouts) {
  const auto f7 = load_model("falcon-7b");
  EXPECT_EQ(f7.num_kv_heads, 1);
  EXPECT_EQ(f7.head_dim, 64);
  const auto inv7 = f7.inventory();
  const auto* qkv = find_tensor(inv7, "transformer.h.0.self_attention.query_key_value.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->shape, (std::vector<int64_t>{4544 + 2 * 64, 4544}));  // one shared k and v head
  EXPECT_NE(find_tensor(inv7, "transformer.h.0.input_layernorm.bias"), nullptr);
  EXPECT_EQ(find_tensor(inv7, "transformer.h.0.post_attention_layernorm.weight"), nullptr);  // parallel_attn
  EXPECT_EQ(find_tensor(inv7, "transformer.h.0.self_attention.dense.bias"), nullptr);        // bias: false

  const auto f40 = load_model("falcon-40b");
  EXPECT_TRUE(f40.new_decoder_architecture);
  EXPECT_EQ(f40.num_kv_heads, 8);
  const auto inv40 = f40.inventory();
  const auto* qkv40 = find_tensor(inv40, "transformer.h.0.self_attention.query_key_value.weight");
  ASSERT_NE(qkv40, nullptr);
  EXPECT_EQ(qkv40->shape, (std::vector<int64_t>{(128 + 2 * 8) * 64, 8192}));
  EXPECT_NE(find_tensor(inv40, "transformer.h.0.ln_attn.weight"), nullptr);
  EXPECT_NE(find_tensor(inv40, "transformer.h.0.ln_mlp.weight"), nullptr);
}

TEST(Inventory, TiedEmbeddingsAreCountedOnce) {
  const auto gpt2 = load_model("gpt2");
  EXPECT_TRUE(gpt2.tie_word_embeddings);
  EXPECT_FALSE(has_group(gpt2.inventory(), "lm_head"));
  const auto gemma = load_model("gemma-2-9b");
  EXPECT_TRUE(gemma.tie_word_embeddings);  // Gemma2Config default, absent from the file
  EXPECT_FALSE(has_group(gemma.inventory(), "lm_head"));
  const auto llama = load_model("llama-2-7b");
  EXPECT_FALSE(llama.tie_word_embeddings);
  const auto inv = llama.inventory();
  ASSERT_TRUE(has_group(inv, "lm_head"));
  EXPECT_EQ(inv.back().tensors.at(0).name, "lm_head.weight");
  EXPECT_EQ(inv.back().tensors.at(0).shape, (std::vector<int64_t>{32000, 4096}));
  EXPECT_EQ(load_model("falcon-7b").tie_word_embeddings, true);
  EXPECT_EQ(load_model("bloom").tie_word_embeddings, true);
  EXPECT_EQ(load_model("opt-1.3b").tie_word_embeddings, true);
}

TEST(Inventory, BiasesFollowTheCheckpoints) {
  const auto inv = load_model("qwen2.5-7b").inventory();
  // Qwen2: q/k/v have biases, o_proj doesn't.
  EXPECT_NE(find_tensor(inv, "model.layers.0.self_attn.q_proj.bias"), nullptr);
  EXPECT_NE(find_tensor(inv, "model.layers.0.self_attn.k_proj.bias"), nullptr);
  EXPECT_NE(find_tensor(inv, "model.layers.0.self_attn.v_proj.bias"), nullptr);
  EXPECT_EQ(find_tensor(inv, "model.layers.0.self_attn.o_proj.bias"), nullptr);
  EXPECT_EQ(find_tensor(inv, "model.layers.0.mlp.up_proj.bias"), nullptr);
  const auto llama = load_model("llama-2-7b").inventory();
  EXPECT_EQ(find_tensor(llama, "model.layers.0.self_attn.q_proj.bias"), nullptr);
  const auto gpt2 = load_model("gpt2").inventory();
  EXPECT_NE(find_tensor(gpt2, "transformer.h.0.attn.c_attn.bias"), nullptr);
  EXPECT_NE(find_tensor(gpt2, "transformer.h.11.mlp.c_proj.bias"), nullptr);
  EXPECT_NE(find_tensor(gpt2, "transformer.ln_f.bias"), nullptr);
  const auto bloom = load_model("bloom").inventory();
  EXPECT_NE(find_tensor(bloom, "transformer.h.0.mlp.dense_4h_to_h.bias"), nullptr);
  EXPECT_NE(find_tensor(bloom, "transformer.word_embeddings_layernorm.bias"), nullptr);
}

TEST(Inventory, NormsAndPositions) {
  const auto llama = load_model("llama-2-7b");
  EXPECT_EQ(llama.norm, NormKind::RMSNorm);
  EXPECT_EQ(llama.position, PositionKind::Rotary);
  EXPECT_EQ(llama.mlp, MlpKind::Gated);
  const auto gpt2 = load_model("gpt2");
  EXPECT_EQ(gpt2.norm, NormKind::LayerNorm);
  EXPECT_EQ(gpt2.position, PositionKind::Learned);
  EXPECT_EQ(gpt2.mlp, MlpKind::Plain);
  EXPECT_EQ(load_model("bloom").position, PositionKind::Alibi);
  // OPT's learned positions have 2 extra rows (OPTLearnedPositionalEmbedding offset).
  const auto opt = load_model("opt-1.3b");
  EXPECT_EQ(opt.position_offset, 2);
  const auto opt_inv = opt.inventory();
  const auto* pos = find_tensor(opt_inv, "model.decoder.embed_positions.weight");
  ASSERT_NE(pos, nullptr);
  EXPECT_EQ(pos->shape, (std::vector<int64_t>{2050, 2048}));
  // Gemma-2: four norms per layer.
  const auto g = load_model("gemma-2-27b");
  EXPECT_EQ(g.head_dim, 128);  // explicit head_dim: 32 heads * 128 != hidden 4608
  const auto ginv = g.inventory();
  for (const char* n : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                        "post_feedforward_layernorm"})
    EXPECT_NE(find_tensor(ginv, std::string("model.layers.0.") + n + ".weight"), nullptr) << n;
}

TEST(Inventory, HfModuleNamesPerFamily) {
  struct Case {
    const char* model;
    const char* tensor;
    const char* module;
  };
  for (const Case& c : {
           Case{"llama-2-7b", "model.layers.0.mlp.gate_proj.weight", "gate_proj"},
           Case{"llama-2-7b", "model.embed_tokens.weight", "embed_tokens"},
           Case{"gpt2", "transformer.h.0.attn.c_attn.weight", "c_attn"},
           Case{"gpt2", "transformer.h.0.mlp.c_fc.weight", "c_fc"},
           Case{"opt-1.3b", "model.decoder.layers.0.self_attn.out_proj.weight", "out_proj"},
           Case{"opt-1.3b", "model.decoder.layers.23.fc2.weight", "fc2"},
           Case{"bloom", "transformer.h.69.self_attention.query_key_value.weight", "query_key_value"},
           Case{"falcon-7b", "transformer.h.0.mlp.dense_h_to_4h.weight", "dense_h_to_4h"},
           Case{"mixtral-8x7b", "model.layers.0.block_sparse_moe.experts.7.w2.weight", "w2"},
           Case{"mixtral-8x7b", "model.layers.31.block_sparse_moe.gate.weight", "gate"},
           Case{"phi-3-mini", "model.layers.0.self_attn.qkv_proj.weight", "qkv_proj"},
           Case{"phi-3-mini", "model.layers.0.mlp.gate_up_proj.weight", "gate_up_proj"},
       }) {
    const auto inv = load_model(c.model).inventory();
    const auto* t = find_tensor(inv, c.tensor);
    ASSERT_NE(t, nullptr) << c.model << " " << c.tensor;
    EXPECT_EQ(t->module, c.module);
    EXPECT_TRUE(t->is_linear || t->is_embedding);
  }
  // Mixtral's router is [experts, hidden]; w2 is [hidden, intermediate].
  const auto inv = load_model("mixtral-8x7b").inventory();
  EXPECT_EQ(find_tensor(inv, "model.layers.0.block_sparse_moe.gate.weight")->shape,
            (std::vector<int64_t>{8, 4096}));
  EXPECT_EQ(find_tensor(inv, "model.layers.0.block_sparse_moe.experts.0.w2.weight")->shape,
            (std::vector<int64_t>{4096, 14336}));
}

TEST(Inventory, GroupsAreEmbedLayersFinalNormHead) {
  const auto m = load_model("llama-2-13b");
  const auto inv = m.inventory();
  ASSERT_EQ(inv.size(), 40u + 3u);
  EXPECT_EQ(inv.front().name, "embed");
  EXPECT_EQ(inv[1].name, "layers.0");
  EXPECT_TRUE(inv[1].is_decoder_layer);
  EXPECT_EQ(inv[40].name, "layers.39");
  EXPECT_EQ(inv[41].name, "final_norm");
  EXPECT_FALSE(inv[41].is_decoder_layer);
  EXPECT_EQ(inv[42].name, "lm_head");
  // Every tensor of a decoder layer: 2 norms + 7 projections.
  EXPECT_EQ(inv[1].tensors.size(), 9u);
}

TEST(Zoo, EveryModelLoadsAndHasMetadata) {
  const auto entries = zoo();
  std::set<std::string> names, aliases;
  for (const auto& e : entries) {
    SCOPED_TRACE(e.name);
    EXPECT_FALSE(e.source.empty());
    names.insert(e.name);
    const auto m = load_model(e.name);
    EXPECT_GT(m.num_parameters(), 0);
    // Vision-language zoo files (Gemma-3 4B+, Llama-4) carry exactly one note: only the text tower is planned.
    if (m.text_config_of.empty()) {
      EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
    } else {
      ASSERT_EQ(m.warnings.size(), 1u);
      EXPECT_NE(m.warnings[0].find("language tower"), std::string::npos);
    }
    for (const auto& a : e.aliases) {
      EXPECT_TRUE(aliases.insert(a).second) << "duplicate alias " << a;
      EXPECT_TRUE(std::none_of(a.begin(), a.end(),
                               [](char c) { return std::isupper(static_cast<unsigned char>(c)); }));
      EXPECT_EQ(load_model(a).name, e.name);
    }
    // The index's published count, where given, is the inventory's count.
    if (e.published_parameters > 0) {
      EXPECT_FALSE(e.citation.empty());
      EXPECT_EQ(m.num_parameters(), e.published_parameters);
    }
  }
  for (const char* required : {"llama-2-7b",   "llama-2-13b",      "llama-2-70b",
                               "llama-3.1-8b", "llama-3.1-70b",    "llama-3.1-405b",
                               "mistral-7b",   "mixtral-8x7b",     "qwen2.5-7b",
                               "qwen2.5-14b",  "qwen2.5-32b",      "qwen2.5-72b",
                               "gemma-2-9b",   "gemma-2-27b",      "phi-3-mini",
                               "gpt2",         "gpt2-xl",          "opt-1.3b",
                               "opt-13b",      "opt-30b",          "opt-66b",
                               "bloom",        "falcon-7b",        "falcon-40b",
                               "gpt3-175b",    "tiny-llama-micro", "tiny-llama-small"})
    EXPECT_TRUE(names.count(required)) << required;
  EXPECT_EQ(names.count("_index"), 0u);
}

TEST(Zoo, AliasesAndCaseInsensitiveNames) {
  EXPECT_EQ(load_model("7b").name, "llama-2-7b");
  EXPECT_EQ(load_model("13b").name, "llama-2-13b");
  EXPECT_EQ(load_model("70b").name, "llama-2-70b");
  EXPECT_EQ(load_model("LLaMA-2-13B").name, "llama-2-13b");
  EXPECT_EQ(load_model("Mistral").name, "mistral-7b");
  EXPECT_EQ(load_model("gpt2-small").name, "gpt2");
  EXPECT_EQ(load_model("llama2-7b").name, "llama-2-7b");
}

TEST(Zoo, UnknownNameSuggestsTheNearest) {
  try {
    load_model("llama-2-7");
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'llama-2-7b'"), std::string::npos) << e.what();
  }
  try {
    load_model("qwerty-uiop-model");
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model 'qwerty-uiop-model'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_model(""), UserError);
}

TEST(ParamsOnly, CountWithoutArchitecture) {
  const auto m = model_from_param_count(7'000'000'000);
  EXPECT_TRUE(m.params_only);
  EXPECT_EQ(m.num_parameters(), 7'000'000'000);
  EXPECT_EQ(m.active_parameters(), 7'000'000'000);
  try {
    (void)m.inventory();
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("architecture"), std::string::npos) << e.what();
  }
  EXPECT_THROW(model_from_param_count(0), UserError);
  EXPECT_THROW(model_from_param_count(-5), UserError);
}

}  // namespace
}  // namespace zeroplan::models

namespace zeroplan::models {
namespace {

// Active parameters per token (ModelSpec::active_parameters: everything but the (E-k)/E routed
// experts a token skips, embeddings included) against the figures the model authors publish, to the
// precision they publish. Published figures are rounded or truncated to their last digit (Qwen3-30B-A3B's
// "3.3B" for 3.353B, DeepSeek-V3's "37B" for 37.55B), so ours must lie in [published - unit/2,
// published + unit).
void expect_rounded(int64_t ours, double published, double unit) {
  const double x = static_cast<double>(ours);
  EXPECT_GE(x, published - unit / 2) << ours << " vs " << published;
  EXPECT_LT(x, published + unit) << ours << " vs " << published;
}

TEST(ActiveParameters, MatchThePublishedActiveCounts) {
  // Mixtral of Experts (Jiang et al. 2024): "47B total, 13B active"; Mistral's announcement: 12.9B.
  expect_rounded(load_model("mixtral-8x7b").active_parameters(), 12.9e9, 0.1e9);
  // Qwen3-30B-A3B model card: 30.5B total, 3.3B activated.
  const auto q = load_model("qwen3-30b-a3b");
  expect_rounded(q.num_parameters(), 30.5e9, 0.1e9);
  expect_rounded(q.active_parameters(), 3.3e9, 0.1e9);
  // Qwen3-235B-A22B model card: 235B total, 22B activated.
  expect_rounded(load_model("qwen3-235b-a22b").active_parameters(), 22e9, 1e9);
  // DeepSeek-V3 technical report: 671B total, 37B activated per token.
  const auto d = load_model("deepseek-v3");
  expect_rounded(d.num_parameters(), 671e9, 1e9);
  expect_rounded(d.active_parameters(), 37e9, 1e9);
  EXPECT_EQ(d.num_moe_layers(), 61 - 3);  // first_k_dense_replace 3
  // Llama 4 model cards: 17B active for Scout (16 experts) and Maverick (128 experts, every 2nd layer).
  expect_rounded(load_model("llama-4-scout-17b-16e").active_parameters(), 17e9, 1e9);
  const auto mav = load_model("llama-4-maverick-17b-128e");
  expect_rounded(mav.active_parameters(), 17e9, 1e9);
  EXPECT_EQ(mav.num_moe_layers(), 24);
  // gpt-oss model card: 20.91B total / 3.61B active, 116.83B / 5.13B. OpenAI counts the input embedding
  // (a lookup, vocab 201088 x 2880) as not active; ours includes it, so subtract it for the comparison.
  const int64_t oss_embed = 201088LL * 2880;
  const auto o20 = load_model("gpt-oss-20b"), o120 = load_model("gpt-oss-120b");
  expect_rounded(o20.num_parameters(), 20.91e9, 0.01e9);
  expect_rounded(o20.active_parameters() - oss_embed, 3.61e9, 0.01e9);
  expect_rounded(o120.num_parameters(), 116.83e9, 0.01e9);
  expect_rounded(o120.active_parameters() - oss_embed, 5.13e9, 0.01e9);
  // Dense models: active == total.
  const auto l = load_model("llama-3.2-1b");
  EXPECT_EQ(l.active_parameters(), l.num_parameters());
}

}  // namespace
}  // namespace zeroplan::models
