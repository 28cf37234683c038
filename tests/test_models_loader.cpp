// The config.json loader: each family's field spellings and defaults, unknown architectures,
// bad files and bad values, and LoRA counts with PEFT semantics.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/errors.h"
#include "common/json_file.h"
#include "models/model_spec.h"

namespace zeroplan::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A fresh folder per test under the system temp dir.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            (std::string("zp_models_") + info->test_suite_name() + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string write(const std::string& name, const std::string& content) const {
    const auto p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

// Throws UserError whose message contains every `parts`.
template <typename F>
void expect_user_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

json llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", 4096},
          {"intermediate_size", 11008},
          {"num_attention_heads", 32},
          {"num_hidden_layers", 32},
          {"num_key_value_heads", 32},
          {"max_position_embeddings", 4096},
          {"rms_norm_eps", 1e-5},
          {"tie_word_embeddings", false},
          {"vocab_size", 32000}};
}

ModelSpec parse(const json& j) {
  return model_from_hf_config("test/config.json", j.dump());
}

TEST(Loader, UserConfigFileAndFolder) {
  TempDir dir;
  const std::string file = dir.write("llama/config.json", llama_config().dump(2));
  const auto m = load_model(file);
  EXPECT_EQ(m.name, file);
  EXPECT_EQ(m.num_parameters(), 6'738'415'616);  // same shapes as Llama-2-7B (see test_models.cpp)
  EXPECT_EQ(load_model(dir.path() + "/llama").num_parameters(), 6'738'415'616);
}

// transformers writes config.json with Python's json (allow_nan=True): Granite-4's mamba
// `time_step_limit` is `[0.0, Infinity]` in the released file (issue 29). Python reads it; so must we,
// and a token inside a string stays text. A malformed file still reports the user's own position.
TEST(Loader, PythonInfinityAndNaNTokensAreRead) {
  TempDir dir;
  std::string text = llama_config().dump(2);
  text.insert(text.rfind('}'),
              ",\n  \"time_step_limit\": [0.0, Infinity],\n  \"floor\": -Infinity,\n"
              "  \"ratio\": NaN,\n  \"note\": \"NaN and Infinity in a string\"\n");
  const auto m = load_model(dir.write("granite/config.json", text));
  EXPECT_EQ(m.num_parameters(), 6'738'415'616);
  const json j =
      read_json_file(dir.path() + "/granite/config.json", "model config", PythonJsonTokens::Accept);
  EXPECT_GT(j["time_step_limit"][1].get<double>(), 1e308);
  EXPECT_LT(j["floor"].get<double>(), -1e308);
  EXPECT_TRUE(j["ratio"].is_null());
  EXPECT_EQ(j["note"], "NaN and Infinity in a string");
  expect_user_error([&] { load_model(dir.write("bad_inf.json", "{\"a\": Infinity,\n \"b\": }")); },
                    {"not valid JSON at line 2"});
  // Elsewhere (a DeepSpeed config for `diagnose`, GPU profiles) they stay refused: DeepSpeed reads its
  // config with hjson, where `Infinity` is a quoteless string, not a number.
  const std::string ds = dir.write("ds_config.json", "{\"gradient_clipping\": Infinity}");
  expect_user_error([&] { read_json_file(ds, "DeepSpeed config"); },
                    {"DeepSpeed config", "not valid JSON at line 1, column 23",
                     "Infinity, -Infinity and NaN are not JSON"});
}

TEST(Loader, BadFiles) {
  TempDir dir;
  expect_user_error([&] { load_model(dir.path() + "/missing/config.json"); }, {"does not exist"});
  expect_user_error([&] { load_model("nonexistent_config.json"); }, {"does not exist"});
  expect_user_error([&] { load_model(dir.path()); }, {"has no config.json"});
  expect_user_error([&] { load_model(dir.write("empty.json", "")); }, {"is empty"});
  expect_user_error([&] { load_model(dir.write("blank.json", "  \n")); }, {"is empty"});
  expect_user_error([&] { load_model(dir.write("bad.json", "{\"hidden_size\": 4096,")); },
                    {"not valid JSON"});
  expect_user_error([&] { load_model(dir.write("array.json", "[1, 2]")); }, {"must be a JSON object"});
  // A directory named config.json inside the folder.
  fs::create_directories(dir.path() + "/weird/config.json");
  expect_user_error([&] { load_model(dir.path() + "/weird"); }, {"is a directory"});
}

TEST(Loader, MissingRequiredFieldNamesFieldAndFile) {
  for (const char* field :
       {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size"}) {
    json j = llama_config();
    j.erase(field);
    expect_user_error([&] { parse(j); }, {field, "test/config.json", "missing"});
  }
  TempDir dir;
  json j = llama_config();
  j.erase("intermediate_size");
  const std::string file = dir.write("config.json", j.dump());
  expect_user_error([&] { load_model(file); }, {"intermediate_size", file});
  // GPT-2 names its alternatives.
  json g = {{"model_type", "gpt2"}, {"n_layer", 2}, {"n_head", 2}, {"vocab_size", 10}, {"n_positions", 8}};
  expect_user_error([&] { parse(g); }, {"'n_embd' or 'hidden_size'"});
}

TEST(Loader, WrongTypesAndAbsurdValues) {
  auto with = [](const char* key, json v) {
    json j = llama_config();
    j[key] = std::move(v);
    return j;
  };
  expect_user_error([&] { parse(with("hidden_size", "4096")); }, {"hidden_size", "string"});
  expect_user_error([&] { parse(with("num_hidden_layers", json::array({32}))); },
                    {"num_hidden_layers", "array"});
  expect_user_error([&] { parse(with("vocab_size", 3.5)); }, {"vocab_size", "whole number"});
  expect_user_error([&] { parse(with("num_hidden_layers", 0)); }, {"num_hidden_layers", "positive"});
  expect_user_error([&] { parse(with("hidden_size", -4096)); }, {"hidden_size", "positive"});
  expect_user_error([&] { parse(with("hidden_size", 2'000'000)); }, {"hidden_size", "beyond any real model"});
  expect_user_error([&] { parse(with("num_hidden_layers", 20'000)); }, {"num_hidden_layers", "beyond"});
  expect_user_error([&] { parse(with("vocab_size", 1e9)); }, {"vocab_size", "beyond"});
  expect_user_error([&] { parse(with("vocab_size", 18446744073709551615ull)); }, {"vocab_size", "beyond"});
  expect_user_error([&] { parse(with("tie_word_embeddings", "yes")); },
                    {"tie_word_embeddings", "true or false"});
  expect_user_error([&] { parse(with("model_type", 7)); }, {"model_type", "string"});
  expect_user_error([&] { parse(with("num_attention_heads", 33)); }, {"not divisible"});
  expect_user_error([&] { parse(with("num_key_value_heads", 5)); }, {"key/value heads"});
  // A whole number written as a float is accepted (some exporters write 4096.0).
  EXPECT_EQ(parse(with("hidden_size", 4096.0)).hidden_size, 4096);
  // null means absent: num_key_value_heads null -> num_attention_heads.
  EXPECT_EQ(parse(with("num_key_value_heads", nullptr)).num_kv_heads, 32);
}

TEST(Loader, UnknownArchitectureIsAcceptedWithAWarning) {
  json j = llama_config();
  j["model_type"] = "mycorp_lm";
  j["architectures"] = {"MyCorpForCausalLM"};
  const auto m = parse(j);
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("mycorp_lm"), std::string::npos);
  EXPECT_EQ(m.architecture, "MyCorpForCausalLM");
  EXPECT_EQ(m.num_parameters(), 6'738'415'616);  // Llama-style assumptions on Llama-2-7B's shapes
  j.erase("model_type");
  EXPECT_EQ(parse(j).warnings.size(), 1u);
  EXPECT_TRUE(parse(llama_config()).warnings.empty());
}

TEST(Loader, LlamaFamilyDefaultsAndFlags) {
  json j = llama_config();
  j.erase("tie_word_embeddings");
  EXPECT_FALSE(parse(j).tie_word_embeddings);  // LlamaConfig default false
  j["tie_word_embeddings"] = true;
  // Tying removes exactly the 32000 x 4096 lm_head.
  EXPECT_EQ(parse(j).num_parameters(), 6'738'415'616 - 32000 * 4096);
  json b = llama_config();
  b["attention_bias"] = true;
  b["mlp_bias"] = true;
  // Llama attention_bias adds q,k,v,o biases (4*4096); mlp_bias adds gate,up (2*11008) and down (4096), per
  // layer.
  EXPECT_EQ(parse(b).num_parameters(), 6'738'415'616 + 32 * (4 * 4096 + 2 * 11008 + 4096));
  json g = llama_config();
  g["model_type"] = "gemma";
  g.erase("tie_word_embeddings");
  EXPECT_TRUE(parse(g).tie_word_embeddings);  // GemmaConfig default true
}

TEST(Loader, MixtureOfExpertsFields) {
  json j = llama_config();
  j["model_type"] = "mixtral";
  j["num_local_experts"] = 4;
  j["num_experts_per_tok"] = 1;
  const auto m = parse(j);
  EXPECT_EQ(m.num_experts, 4);
  EXPECT_EQ(m.experts_per_token, 1);
  // Per layer the dense MLP (3*11008*4096) becomes 4 experts plus a 4 x 4096 router.
  const int64_t dense = 6'738'415'616, mlp = 3LL * 11008 * 4096;
  EXPECT_EQ(m.num_parameters(), dense + 32 * (3 * mlp + 4 * 4096));
  EXPECT_EQ(m.active_parameters(), dense + 32 * (4 * 4096));
  j["num_experts_per_tok"] = 5;
  expect_user_error([&] { parse(j); }, {"num_experts_per_tok"});
}

TEST(Loader, UnknownFamilyWithStructuralFieldsIsRefused) {
  // An unknown model_type with MoE or MLA fields would be miscounted as a dense Llama: refused, with
  // the fields named and the safetensors folder suggested.
  json moe = llama_config();
  moe["model_type"] = "mycorp_moe";
  moe["num_experts"] = 64;
  moe["moe_intermediate_size"] = 1024;
  expect_user_error([&] { parse(moe); },
                    {"mycorp_moe", "'num_experts'", "'moe_intermediate_size'", "safetensors"});
  json mla = llama_config();
  mla["model_type"] = "mycorp_mla";
  mla["kv_lora_rank"] = 512;
  mla["q_lora_rank"] = nullptr;  // null is not a structural value, kv_lora_rank is
  expect_user_error([&] { parse(mla); }, {"'kv_lora_rank'"});
  // Layer types other than softmax attention (Qwen3-Next's linear_attention, hybrid Mamba layers).
  json hybrid = llama_config();
  hybrid["model_type"] = "mycorp_hybrid";
  hybrid["layer_types"] = {"linear_attention", "full_attention"};
  expect_user_error([&] { parse(hybrid); }, {"'layer_types'"});
  hybrid["layer_types"] = {"sliding_attention", "full_attention"};  // masks only: accepted
  EXPECT_EQ(parse(hybrid).num_parameters(), 6'738'415'616);
  // A non-SwiGLU activation in an unknown family: gated or plain MLP cannot be told from the config.
  json relu2 = llama_config();
  relu2["model_type"] = "mycorp_relu2";
  relu2["hidden_act"] = "relu2";
  expect_user_error([&] { parse(relu2); }, {"'hidden_act'"});
  // Zero / false / empty values change nothing: still a plain dense config, read with the warning.
  json plain = llama_config();
  plain["model_type"] = "mycorp_dense";
  plain["num_experts"] = 0;
  plain["use_qk_norm"] = false;
  plain["mlp_only_layers"] = json::array();
  const auto m = parse(plain);
  EXPECT_EQ(m.num_parameters(), 6'738'415'616);
  EXPECT_EQ(m.warnings.size(), 1u);
}

TEST(Loader, VisionLanguageConfigPlansItsTextTower) {
  json j = {
      {"model_type", "llava"}, {"text_config", llama_config()}, {"vision_config", {{"hidden_size", 1024}}}};
  const auto m = parse(j);
  EXPECT_EQ(m.model_type, "llama");
  EXPECT_EQ(m.text_config_of, "llava");
  EXPECT_EQ(m.num_parameters(), 6'738'415'616);
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("language tower"), std::string::npos);
  // The outer tie_word_embeddings applies when the text_config has none.
  j["text_config"].erase("tie_word_embeddings");
  j["tie_word_embeddings"] = true;
  EXPECT_EQ(parse(j).num_parameters(), 6'738'415'616 - 32000 * 4096);
}

// Qwen3-MoE layer selection by hand: 4 layers, h=64, 8 heads of 8 (head_dim given), 2 kv heads,
// dense MLP 128, experts 4 x 32 wide, 2 per token, vocab 100, untied.
TEST(Loader, QwenMoeSparseLayersByHand) {
  json j = {{"model_type", "qwen3_moe"}, {"hidden_size", 64},           {"num_hidden_layers", 4},
            {"num_attention_heads", 8},  {"num_key_value_heads", 2},    {"head_dim", 8},
            {"intermediate_size", 128},  {"moe_intermediate_size", 32}, {"num_experts", 4},
            {"num_experts_per_tok", 2},  {"vocab_size", 100},           {"decoder_sparse_step", 2},
            {"mlp_only_layers", {3}}};
  const auto m = parse(j);
  // sparse: (i+1) % 2 == 0 and i not in {3} -> only layer 1.
  EXPECT_EQ(m.num_moe_layers(), 1);
  EXPECT_TRUE(m.is_moe_layer(1));
  EXPECT_FALSE(m.is_moe_layer(3));
  const int64_t attn = 64 * 64 + 2 * 16 * 64 + 64 * 64 + 2 * 8;  // q, k+v, o, q_norm+k_norm
  const int64_t norms = 2 * 64;
  const int64_t dense_mlp = 3 * 128 * 64;
  const int64_t moe = 4 * 64 + 4 * 3 * 32 * 64;  // router + 4 experts
  const int64_t total = 2 * 100 * 64 + 64 + 4 * (attn + norms) + 3 * dense_mlp + moe;
  EXPECT_EQ(m.num_parameters(), total);
  EXPECT_EQ(m.active_parameters(), total - 2 * 3 * 32 * 64);  // 2 of 4 experts untouched
}

// DeepSeek MLA + MoE by hand: 3 layers, first_k_dense_replace 1, h=64, 4 heads, q_lora 16, kv_lora 8,
// rope 4, nope 8, v 6, dense MLP 96, 8 routed experts of 16, 2 shared (one MLP of 32), top-2.
TEST(Loader, DeepseekMlaAndMoeByHand) {
  json j = {{"model_type", "deepseek_v3"}, {"hidden_size", 64},         {"num_hidden_layers", 3},
            {"num_attention_heads", 4},    {"num_key_value_heads", 4},  {"intermediate_size", 96},
            {"vocab_size", 100},           {"q_lora_rank", 16},         {"kv_lora_rank", 8},
            {"qk_rope_head_dim", 4},       {"qk_nope_head_dim", 8},     {"v_head_dim", 6},
            {"n_routed_experts", 8},       {"num_experts_per_tok", 2},  {"n_shared_experts", 2},
            {"moe_intermediate_size", 16}, {"first_k_dense_replace", 1}};
  const auto m = parse(j);
  EXPECT_TRUE(m.mla);
  const int64_t attn = 64 * 16 + 16 + 16 * 4 * 12  // q_a_proj, q_a_layernorm, q_b_proj (nope+rope = 12)
                       + 64 * (8 + 4) + 8          // kv_a_proj_with_mqa, kv_a_layernorm
                       + 8 * 4 * (8 + 6)           // kv_b_proj
                       + 4 * 6 * 64;               // o_proj
  const int64_t norms = 2 * 64;
  const int64_t dense = 3 * 96 * 64;
  const int64_t moe = 8 * 64 + 8 * 3 * 16 * 64 + 3 * 32 * 64;  // router, routed, shared (2 x 16)
  const int64_t total = 2 * 100 * 64 + 64 + 3 * (attn + norms) + dense + 2 * moe;
  EXPECT_EQ(m.num_parameters(), total);
  EXPECT_EQ(m.active_parameters(), total - 2 * 6 * 3 * 16 * 64);
  // V2-Lite writes q_lora_rank null: one q_proj [heads * 12, h] instead of the low-rank pair.
  j["model_type"] = "deepseek_v2";
  j["q_lora_rank"] = nullptr;
  EXPECT_EQ(parse(j).num_parameters(), total - 3 * (64 * 16 + 16 + 16 * 4 * 12) + 3 * (4 * 12 * 64));
}

TEST(Loader, Gpt2Spellings) {
  // GPT-2 124M written with n_embd/n_layer/n_head/n_positions and n_inner null.
  json j = {{"model_type", "gpt2"}, {"n_embd", 768},       {"n_layer", 12},      {"n_head", 12},
            {"n_inner", nullptr},   {"n_positions", 1024}, {"vocab_size", 50257}};
  const auto m = parse(j);
  EXPECT_EQ(m.intermediate_size, 3072);
  EXPECT_EQ(m.num_parameters(), 124'439'808);  // HF openai-community/gpt2
  j["n_inner"] = 1024;
  // c_fc and mlp.c_proj shrink from 3072 to 1024 columns: 12 * (2*768*2048 + 2048) fewer.
  EXPECT_EQ(parse(j).num_parameters(), 124'439'808 - 12 * (2 * 768 * 2048 + 2048));
  json missing = j;
  missing.erase("n_positions");
  expect_user_error([&] { parse(missing); }, {"n_positions"});
}

TEST(Loader, OptSpellingsAndProjection) {
  // OPT-350m-shaped config: word_embed_proj_dim 512 != hidden 1024 (project_in/out), post-norm
  // (do_layer_norm_before false: no final norm). Hand count:
  //   embed 50272*512 + positions 2050*1024 + project_in 1024*512 + project_out 512*1024
  //   + 24 * (4*(1024^2+1024) + 2*2048 + (4096*1024+4096) + (1024*4096+1024))
  //   = 25,739,264 + 2,099,200 + 524,288 + 524,288 + 24 * 12,596,224 = 331,196,416
  json j = {{"model_type", "opt"},
            {"hidden_size", 1024},
            {"num_hidden_layers", 24},
            {"num_attention_heads", 16},
            {"ffn_dim", 4096},
            {"vocab_size", 50272},
            {"max_position_embeddings", 2048},
            {"word_embed_proj_dim", 512},
            {"do_layer_norm_before", false}};
  const auto m = parse(j);
  EXPECT_FALSE(m.final_norm);
  EXPECT_EQ(m.num_parameters(), 331'196'416);
  json missing = j;
  missing.erase("ffn_dim");
  expect_user_error([&] { parse(missing); }, {"ffn_dim"});
}

TEST(Loader, BloomSpellings) {
  // bigscience/bloom-560m shapes; model card: "559,214,592 parameters".
  json j = {{"model_type", "bloom"},
            {"n_embed", 1024},
            {"n_layer", 24},
            {"num_attention_heads", 16},
            {"vocab_size", 250880}};
  EXPECT_EQ(parse(j).num_parameters(), 559'214'592);
  json k = {{"model_type", "bloom"},
            {"hidden_size", 1024},
            {"n_layer", 24},
            {"n_head", 16},
            {"vocab_size", 250880}};
  EXPECT_EQ(parse(k).num_parameters(), 559'214'592);
  EXPECT_EQ(parse(k).position, PositionKind::Alibi);
}

TEST(Loader, FalconSpellings) {
  // The original RefinedWebModel file of Falcon-7B: n_layer/n_head, multi_query.
  json rw7 = {{"model_type", "RefinedWebModel"},
              {"hidden_size", 4544},
              {"n_layer", 32},
              {"n_head", 71},
              {"multi_query", true},
              {"parallel_attn", true},
              {"bias", false},
              {"vocab_size", 65024}};
  EXPECT_EQ(parse(rw7).num_parameters(), 6'921'720'704);  // HF tiiuae/falcon-7b
  // The original RefinedWeb file of Falcon-40B: n_head_kv implies the grouped layout.
  json rw40 = {{"model_type", "RefinedWeb"},
               {"hidden_size", 8192},
               {"n_layer", 60},
               {"n_head", 128},
               {"n_head_kv", 8},
               {"parallel_attn", true},
               {"bias", false},
               {"vocab_size", 65024}};
  EXPECT_EQ(parse(rw40).num_parameters(), load_model("falcon-40b").num_parameters());
  // multi_query false, not parallel: full qkv (3h) and a post-attention norm (2h weights + biases... 2*h).
  json plain = rw7;
  plain["model_type"] = "falcon";
  plain["multi_query"] = false;
  plain["parallel_attn"] = false;
  // qkv grows from 4544+128 to 3*4544 rows; each layer gains a post_attention_layernorm (2*4544).
  EXPECT_EQ(parse(plain).num_parameters(),
            6'921'720'704 + 32 * ((3 * 4544 - (4544 + 128)) * 4544 + 2 * 4544));
  json biased = rw7;
  biased["bias"] = true;
  // qkv (4672), dense (4544), h_to_4h (18176), 4h_to_h (4544) biases per layer.
  EXPECT_EQ(parse(biased).num_parameters(), 6'921'720'704 + 32 * (4672 + 4544 + 18176 + 4544));
}

TEST(Loader, GptNeoxSpellings) {
  // EleutherAI/pythia-160m shapes; Biderman et al. 2023 (Pythia) Table 1: 162,322,944 parameters.
  json j = {{"model_type", "gpt_neox"},        {"hidden_size", 768},        {"num_hidden_layers", 12},
            {"num_attention_heads", 12},       {"intermediate_size", 3072}, {"vocab_size", 50304},
            {"max_position_embeddings", 2048}, {"rotary_pct", 0.25},        {"use_parallel_residual", true},
            {"tie_word_embeddings", false}};
  const auto m = parse(j);
  EXPECT_EQ(m.num_parameters(), 162'322'944);
  EXPECT_DOUBLE_EQ(m.rotary_pct, 0.25);
  EXPECT_TRUE(m.parallel_attention);
}

TEST(Lora, PeftCountsForLlama2_7B) {
  const auto m = load_model("llama-2-7b");
  // PEFT print_trainable_parameters: "trainable params: 39,976,960" (r=16, all seven projections).
  const std::vector<std::string> all7 = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                         "gate_proj", "up_proj", "down_proj"};
  EXPECT_EQ(lora_trainable_parameters(m, 16, all7), 39'976'960);
  EXPECT_EQ(lora_trainable_parameters(m, 16, {}), 39'976'960);  // all-linear excludes lm_head
  EXPECT_EQ(lora_trainable_parameters(m, 16, {"all-linear"}), 39'976'960);
  // r=8 on q_proj, v_proj: 32 layers * 2 * 8 * (4096 + 4096) = 4,194,304 (PEFT's classic example).
  EXPECT_EQ(lora_trainable_parameters(m, 8, {"q_proj", "v_proj"}), 4'194'304);
  // lm_head: 8 * (4096 + 32000).
  EXPECT_EQ(lora_trainable_parameters(m, 8, {"lm_head"}), 8 * (4096 + 32000));
}

TEST(Lora, FusedAndTiedModules) {
  // GPT-2 c_attn r=8: 12 * 8 * (768 + 2304) = 294,912.
  const auto gpt2 = load_model("gpt2");
  EXPECT_EQ(lora_trainable_parameters(gpt2, 8, {"c_attn"}), 294'912);
  // c_proj matches both attn.c_proj (768x768) and mlp.c_proj (3072->768): 12*8*((768+768)+(3072+768)).
  EXPECT_EQ(lora_trainable_parameters(gpt2, 8, {"c_proj"}), 12 * 8 * (1536 + 3840));
  // Tied lm_head is still an nn.Linear(768, 50257) in GPT2LMHeadModel.
  EXPECT_EQ(lora_trainable_parameters(gpt2, 4, {"lm_head"}), 4 * (768 + 50257));
  // Embedding target: 4 * (50257 + 768).
  EXPECT_EQ(lora_trainable_parameters(gpt2, 4, {"wte"}), 4 * (50257 + 768));
  // Mixtral all-linear includes the router gate: per layer 4 attention + 8*3 experts + gate.
  const auto mix = load_model("mixtral-8x7b");
  const int64_t attn = 2 * (4096 + 4096) + 2 * (4096 + 1024), experts = 24 * (4096 + 14336), gate = 4096 + 8;
  EXPECT_EQ(lora_trainable_parameters(mix, 1, {}), 32 * (attn + experts + gate));
}

// PEFT counts on the new families' module names, by hand (r * (in + out) per targeted Linear).
TEST(Lora, MoeAndMlaModuleNames) {
  // Qwen3-30B-A3B, attention only, r=8: q 2048->4096, k/v 2048->512, o 4096->2048; 48 layers.
  EXPECT_EQ(
      lora_trainable_parameters(load_model("qwen3-30b-a3b"), 8, {"q_proj", "k_proj", "v_proj", "o_proj"}),
      48LL * 8 * ((2048 + 4096) + 2 * (2048 + 512) + (4096 + 2048)));
  // DeepSeek-V3 MLA projections, r=8: q_a 7168->1536, q_b 1536->128*192, kv_a 7168->576, kv_b 512->128*256,
  // o 128*128->7168; 61 layers.
  EXPECT_EQ(lora_trainable_parameters(load_model("deepseek-v3"), 8,
                                      {"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"}),
            61LL * 8 * ((7168 + 1536) + (1536 + 24576) + (7168 + 576) + (512 + 32768) + (16384 + 7168)));
  // gpt-oss-20b all-linear, r=16: q/k/v/o and the router (Linear 2880->32); the fused 3-D experts are
  // nn.Parameters, not Linears, so PEFT's all-linear leaves them out; 24 layers.
  EXPECT_EQ(lora_trainable_parameters(load_model("gpt-oss-20b"), 16, {}),
            24LL * 16 * ((2880 + 4096) + 2 * (2880 + 512) + (4096 + 2880) + (2880 + 32)));
}

TEST(Lora, UnknownTargetListsTheModelsModules) {
  const auto m = load_model("llama-2-7b");
  expect_user_error([&] { lora_trainable_parameters(m, 8, {"c_attn"}); }, {"c_attn", "q_proj", "down_proj"});
  expect_user_error([&] { lora_trainable_parameters(m, 0, {"q_proj"}); }, {"rank"});
  expect_user_error([&] { lora_trainable_parameters(model_from_param_count(1000), 8, {}); },
                    {"architecture"});
}

}  // namespace
}  // namespace zeroplan::models
