// Reading an HF config.json into a ModelSpec. Each family spells its fields its own way and has its
// own defaults for what the file leaves out; the defaults below are the ones of the family's
// PretrainedConfig subclass in transformers (configuration_<family>.py), because that is what
// from_pretrained() builds when the key is absent.
#include "models/hf_config.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "common/checked.h"
#include "common/errors.h"
#include "common/json_file.h"
#include "models/model_spec.h"
#include "models/vision_tower.h"

namespace zeroplan::models {
namespace {

using nlohmann::json;

// Sanity limits: far beyond every published model (the largest dense models have hidden 25600,
// ~150 layers, vocab 256k), so only typos and corrupted files trip them.
constexpr int64_t kMaxHidden = 1'000'000;
constexpr int64_t kMaxLayers = 10'000;
constexpr int64_t kMaxVocab = 100'000'000;
constexpr int64_t kMaxHeads = 100'000;
constexpr int64_t kMaxIntermediate = 10'000'000;
constexpr int64_t kMaxPositions = 1'000'000'000;
constexpr int64_t kMaxExperts = 100'000;

class ConfigReader {
 public:
  ConfigReader(const json& j, std::string origin) : j_(j), origin_(std::move(origin)) {}

  const std::string& origin() const { return origin_; }

  // First of `keys` present and not null.
  const json* find(std::initializer_list<const char*> keys, std::string* which = nullptr) const {
    for (const char* k : keys) {
      auto it = j_.find(k);
      if (it != j_.end() && !it->is_null()) {
        if (which) *which = k;
        return &*it;
      }
    }
    return nullptr;
  }

  // `key` is present with the value null (e.g. DeepSeek-V2-Lite's "q_lora_rank": null).
  bool is_null(const char* key) const {
    auto it = j_.find(key);
    return it != j_.end() && it->is_null();
  }

  std::optional<int64_t> opt_int(std::initializer_list<const char*> keys, int64_t max) const {
    std::string key;
    const json* v = find(keys, &key);
    if (!v) return std::nullopt;
    int64_t x = 0;
    if (v->is_number_unsigned()) {  // checked first: is_number_integer() is also true for unsigned
      const auto u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(max)) too_large(key, v->dump(), max);
      x = static_cast<int64_t>(u);
    } else if (v->is_number_integer()) {
      x = v->get<int64_t>();
    } else if (v->is_number_float()) {
      const double d = v->get<double>();
      if (!std::isfinite(d) || d != std::floor(d))
        throw_user_error("model config '{}': field '{}' must be a whole number, found {}", origin_, key,
                         v->dump());
      if (d > static_cast<double>(max)) too_large(key, v->dump(), max);
      x = static_cast<int64_t>(d);
    } else {
      throw_user_error("model config '{}': field '{}' must be a number, found {} {}", origin_, key,
                       v->type_name(), v->dump());
    }
    if (x <= 0) throw_user_error("model config '{}': field '{}' must be positive, found {}", origin_, key, x);
    if (x > max) too_large(key, std::to_string(x), max);
    return x;
  }

  int64_t req_int(std::initializer_list<const char*> keys, int64_t max) const {
    if (auto v = opt_int(keys, max)) return *v;
    std::string names;
    for (const char* k : keys) names += names.empty() ? fmt::format("'{}'", k) : fmt::format(" or '{}'", k);
    throw_user_error(
        "model config '{}' is missing required field {}; add it (see the model's config.json on the Hub)",
        origin_, names);
  }

  bool opt_bool(const char* key, bool dflt) const {
    const json* v = find({key});
    if (!v) return dflt;
    if (!v->is_boolean())
      throw_user_error("model config '{}': field '{}' must be true or false, found {} {}", origin_, key,
                       v->type_name(), v->dump());
    return v->get<bool>();
  }

  std::string opt_string(std::initializer_list<const char*> keys, const std::string& dflt) const {
    std::string key;
    const json* v = find(keys, &key);
    if (!v) return dflt;
    if (!v->is_string())
      throw_user_error("model config '{}': field '{}' must be a string, found {} {}", origin_, key,
                       v->type_name(), v->dump());
    return v->get<std::string>();
  }

  double opt_double(std::initializer_list<const char*> keys, double dflt) const {
    std::string key;
    const json* v = find(keys, &key);
    if (!v) return dflt;
    if (!v->is_number())
      throw_user_error("model config '{}': field '{}' must be a number, found {} {}", origin_, key,
                       v->type_name(), v->dump());
    return v->get<double>();
  }

 private:
  [[noreturn]] void too_large(const std::string& key, const std::string& v, int64_t max) const {
    throw_user_error("model config '{}': field '{}' = {} is beyond any real model (limit {}); check the file",
                     origin_, key, v, max);
  }
  const json& j_;
  std::string origin_;
};

// Families whose module tree is Llama's ("model.layers.N.self_attn/mlp"), possibly with fused
// projections, extra norms, q/k norms, MLA attention or MoE blocks. Each field's default is the one
// of the family's config class in transformers 5.24 (configuration_<family>.py), checked by
// tests/test_models_hf.cpp against models built from those defaults.
bool is_llama_family(const std::string& t) {
  static const char* const kTypes[] = {"llama",
                                       "mistral",
                                       "mixtral",
                                       "qwen2",
                                       "qwen3",
                                       "qwen2_moe",
                                       "qwen3_moe",
                                       "gemma",
                                       "gemma2",
                                       "gemma3_text",
                                       "phi3",
                                       "olmo2",
                                       "olmoe",
                                       "granite",
                                       "glm4",
                                       "starcoder2",
                                       "cohere",
                                       "gpt_oss",
                                       "llama4_text",
                                       "deepseek_v2",
                                       "deepseek_v3",
                                       "phi",
                                       "glm4_moe",
                                       "seed_oss",
                                       "minimax_m2",
                                       "phimoe",
                                       "olmo3",
                                       "exaone4",
                                       "smollm3",
                                       "arcee",
                                       "dots1",
                                       "ernie4_5",
                                       "hunyuan_v1_dense",
                                       "hunyuan_v1_moe",
                                       "apertus",
                                       "ernie4_5_moe",
                                       "olmo",
                                       "stablelm",
                                       "glm",
                                       "cohere2",
                                       "granite_swa",
                                       "flex_olmo",
                                       "solar_open",
                                       "exaone_moe",
                                       "mellum",
                                       "kolibri1",
                                       "sarvam_moe",
                                       "glm4_moe_lite",
                                       "minicpm3",
                                       "hy_v3",
                                       "sarvam_mla",
                                       "granitemoe",
                                       "granitemoeshared",
                                       "granitemoehybrid",
                                       "qwen3_next",
                                       "qwen3_5_text",
                                       "qwen3_5_moe_text"};
  for (const char* k : kTypes)
    if (t == k) return true;
  return false;
}

// A non-negative integer field (0 allowed: first_k_dense_replace, n_shared_experts).
std::optional<int64_t> opt_count(const ConfigReader& r, const char* key, int64_t max) {
  const json* v = r.find({key});
  if (!v) return std::nullopt;
  if (v->is_number_integer() && v->get<int64_t>() == 0) return 0;
  return r.opt_int({key}, max);
}

// A list of layer indices (mlp_only_layers, moe_layers); out-of-range indices are an error.
std::vector<int64_t> opt_layer_list(const ConfigReader& r, const char* key, int64_t layers) {
  std::vector<int64_t> out;
  const json* v = r.find({key});
  if (!v) return out;
  if (!v->is_array())
    throw_user_error("model config '{}': field '{}' must be a list of layer indices, found {}", r.origin(),
                     key, v->dump());
  for (const auto& e : *v) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= layers)
      throw_user_error("model config '{}': field '{}' holds {}, not a layer index in [0, {})", r.origin(),
                       key, e.dump(), layers);
    out.push_back(e.get<int64_t>());
  }
  return out;
}

// mlp_layer_types (ExaoneMoeConfig, MellumConfig, Glm4MoeLiteConfig, HYV3Config): one "dense" or "sparse" per
// decoder layer; true for sparse. Empty when the config has none.
std::vector<bool> opt_mlp_layer_types(const ConfigReader& r, int64_t layers) {
  std::vector<bool> out;
  const json* v = r.find({"mlp_layer_types"});
  if (!v) return out;
  if (!v->is_array() || static_cast<int64_t>(v->size()) != layers)
    throw_user_error(
        "model config '{}': field 'mlp_layer_types' must list \"dense\" or \"sparse\" for each of "
        "the {} layers, found {}",
        r.origin(), layers, v->dump());
  for (const auto& e : *v) {
    if (!e.is_string() || (e != "dense" && e != "sparse"))
      throw_user_error("model config '{}': field 'mlp_layer_types' holds {}, not \"dense\" or \"sparse\"",
                       r.origin(), e.dump());
    out.push_back(e == "sparse");
  }
  return out;
}

// MoE blocks: expert counts, widths, shared experts and which layers are sparse, per family.
void read_moe(const ConfigReader& r, const std::string& type, ModelSpec& m) {
  const int64_t L = m.num_layers;
  auto all_moe = [&](bool on) { m.moe_layers.assign(static_cast<size_t>(L), on); };
  if (type == "mixtral") {
    // MixtralConfig: num_local_experts 8, num_experts_per_tok 2; experts as wide as intermediate_size.
    m.moe_style = MoeStyle::Mixtral;
    m.num_experts = r.opt_int({"num_local_experts"}, kMaxExperts).value_or(8);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(2);
    m.moe_intermediate_size = m.intermediate_size;
  } else if (type == "qwen3_next") {
    // Qwen3NextConfig (Qwen3-Next-80B-A3B): num_experts 512, num_experts_per_tok 10,
    // moe_intermediate_size 512, shared_expert_intermediate_size 512, norm_topk_prob True,
    // decoder_sparse_step 1, mlp_only_layers []. Layer i is sparse iff i is not in mlp_only_layers and
    // num_experts > 0 and (i + 1) % decoder_sparse_step == 0; Qwen3NextSparseMoeBlock is Qwen2-MoE's
    // block (gate, experts, shared_expert, shared_expert_gate Linear(h, 1)) (modeling_qwen3_next.py
    // Qwen3NextDecoderLayer, Qwen3NextSparseMoeBlock).
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts = opt_count(r, "num_experts", kMaxExperts).value_or(512);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(10);
    m.moe_intermediate_size = r.opt_int({"moe_intermediate_size"}, kMaxIntermediate).value_or(512);
    m.shared_expert_intermediate_size =
        opt_count(r, "shared_expert_intermediate_size", kMaxIntermediate).value_or(512);
    m.num_shared_experts = 1;
    m.shared_expert_gate = true;
    m.norm_topk_prob = r.opt_bool("norm_topk_prob", true);
    const int64_t step = r.opt_int({"decoder_sparse_step"}, kMaxLayers).value_or(1);
    const auto dense = opt_layer_list(r, "mlp_only_layers", L);
    all_moe(false);
    for (int64_t i = 0; i < L && m.num_experts > 0; ++i)
      m.moe_layers[static_cast<size_t>(i)] =
          std::find(dense.begin(), dense.end(), i) == dense.end() && (i + 1) % step == 0;
    if (m.num_experts == 0) {  // num_experts 0: every layer a dense Qwen3NextMLP
      m.moe_style = MoeStyle::None;
      m.experts_per_token = 0;
      m.moe_layers.clear();
    }
  } else if (type == "qwen3_5_moe_text") {
    // Qwen3_5MoeTextConfig (Qwen3.5 MoE's language model): num_experts 256, num_experts_per_tok 8,
    // moe_intermediate_size 512, shared_expert_intermediate_size 512; every Qwen3_5MoeDecoderLayer has a
    // Qwen3_5MoeSparseMoeBlock (gate, experts, shared_expert, shared_expert_gate: Qwen2-MoE's block), and
    // Qwen3_5MoeTopKRouter always renormalises the top-k weights (modeling_qwen3_5_moe.py).
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts = r.opt_int({"num_experts"}, kMaxExperts).value_or(256);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(8);
    m.moe_intermediate_size = r.opt_int({"moe_intermediate_size"}, kMaxIntermediate).value_or(512);
    m.shared_expert_intermediate_size =
        opt_count(r, "shared_expert_intermediate_size", kMaxIntermediate).value_or(512);
    m.num_shared_experts = 1;
    m.shared_expert_gate = true;
    m.norm_topk_prob = true;
  } else if (type == "qwen2_moe" || type == "qwen3_moe") {
    // Qwen2MoeConfig: num_experts 60, num_experts_per_tok 4, moe_intermediate_size 1408,
    // shared_expert_intermediate_size 5632 (+ shared_expert_gate); Qwen3MoeConfig: num_experts 128
    // (attribute_map num_experts -> num_local_experts), 8 per token, moe_intermediate_size 768, no
    // shared expert. Layer i is sparse iff i is not in mlp_only_layers and (i+1) % decoder_sparse_step
    // == 0 (modeling_qwen3_moe.py Qwen3MoeDecoderLayer).
    const bool q2 = type == "qwen2_moe";
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts = r.opt_int({"num_experts", "num_local_experts"}, kMaxExperts).value_or(q2 ? 60 : 128);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(q2 ? 4 : 8);
    m.moe_intermediate_size =
        r.opt_int({"moe_intermediate_size"}, kMaxIntermediate).value_or(q2 ? 1408 : 768);
    m.norm_topk_prob = r.opt_bool("norm_topk_prob", false);  // both configs' default False
    if (q2) {
      m.shared_expert_intermediate_size =
          opt_count(r, "shared_expert_intermediate_size", kMaxIntermediate).value_or(5632);
      m.num_shared_experts = 1;
      m.shared_expert_gate = true;
    }
    const int64_t step = r.opt_int({"decoder_sparse_step"}, kMaxLayers).value_or(1);
    const auto dense = opt_layer_list(r, "mlp_only_layers", L);
    all_moe(false);
    for (int64_t i = 0; i < L; ++i)
      m.moe_layers[static_cast<size_t>(i)] =
          std::find(dense.begin(), dense.end(), i) == dense.end() && (i + 1) % step == 0;
  } else if (type == "olmoe") {
    // OlmoeConfig: num_experts 64, num_experts_per_tok 8, experts as wide as intermediate_size.
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts = r.opt_int({"num_experts", "num_local_experts"}, kMaxExperts).value_or(64);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(8);
    m.moe_intermediate_size = m.intermediate_size;
  } else if (type == "deepseek_v2" || type == "deepseek_v3" || type == "sarvam_mla") {
    // DeepseekV2Config: n_routed_experts 64, n_shared_experts 2, moe_intermediate_size 1407,
    // first_k_dense_replace 0, num_experts_per_tok None; DeepseekV3Config: 256, 1, 2048, 3, 8.
    // SarvamMLAConfig (Sarvam-105B; configuration_sarvam_mla.py, a DeepseekV3Config subclass that
    // transformers builds as DeepseekV3ForCausalLM): n_routed_experts 128 (attribute_map also
    // num_experts; num_shared_experts for n_shared_experts), first_k_dense_replace 1, the rest DeepSeek-V3's.
    // Layer i is sparse iff i >= first_k_dense_replace (modeling_deepseek_v3.py
    // DeepseekV3DecoderLayer); the shared experts are one MLP of moe_intermediate_size *
    // n_shared_experts (DeepseekV3MoE.shared_experts).
    const bool sarvam = type == "sarvam_mla";
    const bool v3 = type == "deepseek_v3" || sarvam;
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts = r.opt_int(sarvam ? std::initializer_list<const char*>{"n_routed_experts", "num_experts",
                                                                          "num_local_experts"}
                                     : std::initializer_list<const char*>{"n_routed_experts"},
                              kMaxExperts)
                        .value_or(sarvam ? 128
                                  : v3   ? 256
                                         : 64);
    m.moe_intermediate_size =
        r.opt_int({"moe_intermediate_size"}, kMaxIntermediate).value_or(v3 ? 2048 : 1407);
    m.num_shared_experts = opt_count(r, "n_shared_experts", kMaxExperts)
                               .value_or(sarvam ? opt_count(r, "num_shared_experts", kMaxExperts).value_or(1)
                                         : v3   ? 1
                                                : 2);
    m.shared_expert_intermediate_size = checked_mul(m.moe_intermediate_size, m.num_shared_experts);
    if (auto k = r.opt_int({"num_experts_per_tok"}, kMaxExperts)) {
      m.experts_per_token = *k;
    } else {
      // DeepseekV2Config leaves num_experts_per_tok None; the routing then has no top-k. FLOPs need
      // one: 6, deepseek-ai/DeepSeek-V2's config.json value.
      m.experts_per_token = v3 ? 8 : 6;
      if (!v3)
        m.warnings.push_back(fmt::format(
            "model config '{}': num_experts_per_tok is not given; active parameters assume 6 routed experts "
            "per token (deepseek-ai/DeepSeek-V2's value)",
            r.origin()));
    }
    const int64_t first_dense = opt_count(r, "first_k_dense_replace", kMaxLayers)
                                    .value_or(sarvam ? 1
                                              : v3   ? 3
                                                     : 0);
    if (const auto freq = r.opt_int({"moe_layer_freq"}, kMaxLayers); freq && *freq != 1)
      m.warnings.push_back(
          fmt::format("model config '{}': moe_layer_freq {} is ignored, as transformers' DeepSeek model "
                      "ignores it (every "
                      "layer from first_k_dense_replace on is MoE); DeepSeek's own modeling code would make "
                      "only every {}th "
                      "layer MoE",
                      r.origin(), *freq, *freq));
    all_moe(false);
    for (int64_t i = first_dense; i < L; ++i) m.moe_layers[static_cast<size_t>(i)] = true;
    m.router_score_bias = v3;
  } else if (type == "glm4_moe" || type == "dots1" || type == "sarvam_moe") {
    // DeepSeek-V3's MoE layout: layer i is sparse iff i >= first_k_dense_replace; the block holds
    // experts, a router (a [E, h] weight with e_score_correction_bias a buffer) and one shared MLP of
    // moe_intermediate_size * n_shared_experts (modeling_glm4_moe.py Glm4MoeMoE, modeling_dots1.py
    // Dots1MoE).
    //  - Glm4MoeConfig (GLM-4.5/4.6): n_routed_experts 128 (attribute_map num_local_experts), 8 per
    //    token, moe_intermediate_size 1408, n_shared_experts 1, first_k_dense_replace 1,
    //    norm_topk_prob True. num_nextn_predict_layers (MTP) is a config field only: transformers
    //    builds no MTP layer.
    //  - Dots1Config (dots.llm1): n_routed_experts, n_shared_experts and num_experts_per_tok default to
    //    None, with which transformers builds no model, so they are required; first_k_dense_replace 0,
    //    norm_topk_prob False.
    //  - SarvamMoEConfig (Sarvam-30B; configuration_sarvam_moe.py, a Glm4MoeConfig subclass that
    //    transformers builds as Glm4MoeForCausalLM): n_routed_experts 128 (Glm4MoeConfig's; attribute_map
    //    also num_experts), num_experts_per_tok 6, moe_intermediate_size 1024, n_shared_experts 1
    //    (attribute_map num_shared_experts), first_k_dense_replace 1, norm_topk_prob True.
    const bool sarvam = type == "sarvam_moe";
    const bool glm = type == "glm4_moe" || sarvam;
    if (type == "dots1")
      for (const char* key : {"n_routed_experts", "n_shared_experts", "num_experts_per_tok"})
        if (!r.find({key}))
          throw_user_error(
              "model config '{}': dots1 needs '{}' (Dots1Config's default is None, with which transformers "
              "builds no model); give the value from the model's config.json",
              r.origin(), key);
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts =
        r.opt_int({"n_routed_experts", "num_local_experts", "num_experts"}, kMaxExperts).value_or(128);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(sarvam ? 6 : 8);
    m.moe_intermediate_size =
        glm ? r.opt_int({"moe_intermediate_size"}, kMaxIntermediate).value_or(sarvam ? 1024 : 1408)
            : r.req_int({"moe_intermediate_size"}, kMaxIntermediate);
    m.num_shared_experts = opt_count(r, "n_shared_experts", kMaxExperts)
                               .value_or(opt_count(r, "num_shared_experts", kMaxExperts).value_or(1));
    m.shared_expert_intermediate_size = checked_mul(m.moe_intermediate_size, m.num_shared_experts);
    m.norm_topk_prob = r.opt_bool("norm_topk_prob", glm);
    const int64_t first_dense = opt_count(r, "first_k_dense_replace", kMaxLayers).value_or(glm ? 1 : 0);
    all_moe(false);
    for (int64_t i = first_dense; i < L; ++i) m.moe_layers[static_cast<size_t>(i)] = true;
    m.router_score_bias = true;
  } else if (type == "ernie4_5_moe") {
    // Ernie4_5_MoeConfig (ERNIE-4.5-21B-A3B): moe_num_experts 64 (attribute_map num_experts), moe_k 6
    // (num_experts_per_tok), moe_intermediate_size 1536, moe_num_shared_experts 2 (one MLP of
    // moe_intermediate_size x that, bias=use_bias); layer i is sparse iff (i + 1) % moe_layer_interval
    // == 0 and moe_layer_start_index <= i <= moe_layer_end_index (-1: the last layer)
    // (modeling_ernie4_5_moe.py Ernie4_5_MoeDecoderLayer). The router (Ernie4_5_MoeTopKRouter) holds a
    // fp32 weight [E, h] and moe_statics.e_score_correction_bias [1, E], a frozen nn.Parameter; it
    // runs in fp32 with softmax scores, top-k on scores + bias, and always renormalises the top-k
    // weights (clamped by moe_norm_min).
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts = r.opt_int({"moe_num_experts", "num_experts"}, kMaxExperts).value_or(64);
    m.experts_per_token = r.opt_int({"moe_k", "num_experts_per_tok"}, kMaxExperts).value_or(6);
    m.moe_intermediate_size = r.opt_int({"moe_intermediate_size"}, kMaxIntermediate).value_or(1536);
    m.num_shared_experts = opt_count(r, "moe_num_shared_experts", kMaxExperts).value_or(2);
    m.shared_expert_intermediate_size = checked_mul(m.moe_intermediate_size, m.num_shared_experts);
    m.norm_topk_prob = true;
    const int64_t start = opt_count(r, "moe_layer_start_index", kMaxLayers).value_or(1);
    const int64_t end_raw = r.opt_int({"moe_layer_end_index"}, kMaxLayers).value_or(-1);
    const int64_t end = end_raw == -1 ? L - 1 : end_raw;
    const int64_t interval = r.opt_int({"moe_layer_interval"}, kMaxLayers).value_or(1);
    if (interval < 1)
      throw_user_error("model config '{}': moe_layer_interval must be at least 1", r.origin());
    all_moe(false);
    for (int64_t i = 0; i < L; ++i)
      m.moe_layers[static_cast<size_t>(i)] = (i + 1) % interval == 0 && i >= start && i <= end;
    m.router_score_bias_param = true;
  } else if (type == "granitemoehybrid") {
    // GraniteMoeHybridConfig (Granite-4.0-H): num_local_experts 8 (0 builds no block_sparse_moe: a dense
    // model whose MLP is shared_mlp alone), num_experts_per_tok 2, experts as wide as intermediate_size
    // (GraniteMoeHybridExperts), shared_intermediate_size 1024 (GraniteMoeHybridMLP, always built:
    // input_linear [2s, h], output_linear [h, s]). modeling_granitemoehybrid.py GraniteMoeHybridDecoderLayer.
    m.num_experts = opt_count(r, "num_local_experts", kMaxExperts).value_or(8);
    const int64_t shared = opt_count(r, "shared_intermediate_size", kMaxIntermediate).value_or(1024);
    if (m.num_experts == 0) {
      // The dense model: its MLP is shared_mlp, a gated MLP of shared_intermediate_size.
      m.intermediate_size = shared;
      m.moe_style = MoeStyle::None;
      m.experts_per_token = 0;
    } else {
      m.moe_style = MoeStyle::Mixtral;
      m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(2);
      m.moe_intermediate_size = m.intermediate_size;
      m.shared_expert_intermediate_size = shared;
      m.num_shared_experts = shared > 0 ? 1 : 0;
    }
  } else if (type == "granitemoe" || type == "granitemoeshared") {
    // GraniteMoeConfig / GraniteMoeSharedConfig (Granite-3 MoE): num_local_experts 8,
    // num_experts_per_tok 2; every layer's block_sparse_moe (GraniteMoeMoE: router, then experts as wide
    // as intermediate_size) is sparse. The Hub checkpoints store the experts fused already
    // (block_sparse_moe.input_linear.weight [E, 2f, h], output_linear.weight [E, h, f],
    // router.layer.weight [E, h]), which transformers renames on load (conversion_mapping.py
    // "granitemoe"). GraniteMoeSharedConfig shared_intermediate_size (default 0: none) adds
    // GraniteMoeSharedDecoderLayer.shared_mlp (input_linear [2s, h], output_linear [h, s]) beside the
    // block (modeling_granitemoeshared.py GraniteMoeSharedMLP).
    m.moe_style = MoeStyle::Mixtral;
    m.num_experts = r.opt_int({"num_local_experts"}, kMaxExperts).value_or(8);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(2);
    m.moe_intermediate_size = m.intermediate_size;
    if (type == "granitemoeshared") {
      m.shared_expert_intermediate_size =
          opt_count(r, "shared_intermediate_size", kMaxIntermediate).value_or(0);
      m.num_shared_experts = m.shared_expert_intermediate_size > 0 ? 1 : 0;
    }
  } else if (type == "flex_olmo") {
    // FlexOlmoConfig (FlexOlmo-7x7B): num_experts 7 (attribute_map num_local_experts),
    // num_experts_per_tok 5, norm_topk_prob False; every layer is a FlexOlmoSparseMoeBlock (gate, then
    // experts as wide as intermediate_size), no shared expert (modeling_flex_olmo.py).
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts = r.opt_int({"num_experts", "num_local_experts"}, kMaxExperts).value_or(7);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(5);
    m.moe_intermediate_size = m.intermediate_size;
    m.norm_topk_prob = r.opt_bool("norm_topk_prob", false);
  } else if (type == "solar_open" || type == "kolibri1") {
    // Every layer sparse, a router whose e_score_correction_bias is a buffer, and one shared-expert MLP:
    //  - SolarOpenConfig (Solar-Open-100B): n_routed_experts 128 (attribute_map num_local_experts),
    //    num_experts_per_tok 8, moe_intermediate_size 1280, n_shared_experts 1 (SolarOpenMoE.shared_experts
    //    is one SolarOpenMLP of moe_intermediate_size * n_shared_experts), norm_topk_prob True
    //    (modeling_solar_open.py SolarOpenMoE, SolarOpenTopkRouter).
    //  - Kolibri1Config: num_local_experts 384 (attribute_map num_experts), num_experts_per_tok 6,
    //    moe_intermediate_size 512, shared_expert_intermediate_size 512 (Kolibri1SparseMoeBlock's
    //    shared_experts, one Kolibri1MLP), norm_topk_prob False (modeling_kolibri1.py).
    // Neither config has an intermediate_size (no dense MLP): zeroplan takes one expert's width as the
    // model's MLP width (read_llama_family).
    const bool solar = type == "solar_open";
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts =
        r.opt_int(solar ? std::initializer_list<const char*>{"n_routed_experts", "num_local_experts"}
                        : std::initializer_list<const char*>{"num_local_experts", "num_experts"},
                  kMaxExperts)
            .value_or(solar ? 128 : 384);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(solar ? 8 : 6);
    m.moe_intermediate_size =
        r.opt_int({"moe_intermediate_size"}, kMaxIntermediate).value_or(solar ? 1280 : 512);
    if (solar) {
      m.num_shared_experts = opt_count(r, "n_shared_experts", kMaxExperts).value_or(1);
      m.shared_expert_intermediate_size = checked_mul(m.moe_intermediate_size, m.num_shared_experts);
    } else {
      m.shared_expert_intermediate_size =
          opt_count(r, "shared_expert_intermediate_size", kMaxIntermediate).value_or(512);
      m.num_shared_experts = m.shared_expert_intermediate_size > 0 ? 1 : 0;
    }
    m.norm_topk_prob = r.opt_bool("norm_topk_prob", solar);
    m.router_score_bias = true;
  } else if (type == "glm4_moe_lite") {
    // Glm4MoeLiteConfig: n_routed_experts 64 (attribute_map num_local_experts), num_experts_per_tok 4,
    // moe_intermediate_size 1536, n_shared_experts 1, norm_topk_prob True; layer i is sparse iff
    // mlp_layer_types[i] == "sparse" (default: the first layer dense, the rest sparse); the block is
    // Glm4MoeLiteMoE, GLM-4-MoE's (experts, gate with e_score_correction_bias a buffer, one shared MLP of
    // moe_intermediate_size * n_shared_experts) (modeling_glm4_moe_lite.py Glm4MoeLiteDecoderLayer).
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts = r.opt_int({"n_routed_experts", "num_local_experts"}, kMaxExperts).value_or(64);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(4);
    m.moe_intermediate_size = r.opt_int({"moe_intermediate_size"}, kMaxIntermediate).value_or(1536);
    m.num_shared_experts = opt_count(r, "n_shared_experts", kMaxExperts).value_or(1);
    m.shared_expert_intermediate_size = checked_mul(m.moe_intermediate_size, m.num_shared_experts);
    m.norm_topk_prob = r.opt_bool("norm_topk_prob", true);
    m.router_score_bias = true;
    m.moe_layers = opt_mlp_layer_types(r, L);
    if (m.moe_layers.empty()) {
      all_moe(true);
      if (L > 0) m.moe_layers[0] = false;
    }
  } else if (type == "hy_v3") {
    // HYV3Config: num_experts 192 (attribute_map num_local_experts), num_experts_per_tok 8,
    // moe_intermediate_size 1536, num_shared_experts 1 (HYV3MoE.shared_experts: one HYV3MLP of
    // moe_intermediate_size * num_shared_experts, bias=mlp_bias); layer i is sparse iff
    // mlp_layer_types[i] == "sparse" (default: the first layer dense, the rest sparse). HYV3MoE holds
    // e_score_correction_bias as a buffer of the block (modeling_hy_v3.py HYV3MoE, HYV3DecoderLayer).
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts = r.opt_int({"num_experts", "num_local_experts"}, kMaxExperts).value_or(192);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(8);
    m.moe_intermediate_size = r.opt_int({"moe_intermediate_size"}, kMaxIntermediate).value_or(1536);
    m.num_shared_experts = opt_count(r, "num_shared_experts", kMaxExperts).value_or(1);
    m.shared_expert_intermediate_size = checked_mul(m.moe_intermediate_size, m.num_shared_experts);
    m.router_score_bias = true;
    m.moe_layers = opt_mlp_layer_types(r, L);
    if (m.moe_layers.empty()) {
      all_moe(true);
      if (L > 0) m.moe_layers[0] = false;
    }
  } else if (type == "exaone_moe" || type == "mellum") {
    // Layer i is sparse iff mlp_layer_types[i] == "sparse" (ExaoneMoeDecoderLayer, MellumDecoderLayer);
    // the dense layers are an MLP of intermediate_size.
    //  - ExaoneMoeConfig (K-EXAONE): num_experts 64, num_experts_per_tok 8, moe_intermediate_size 1024,
    //    num_shared_experts 1 (ExaoneMoeSparseMoEBlock.shared_experts: one ExaoneMoeMLP of
    //    moe_intermediate_size * num_shared_experts), norm_topk_prob True; mlp_layer_types defaults to
    //    dense for i < first_k_dense_replace (default 1); the router's e_score_correction_bias is a buffer
    //    (modeling_exaone_moe.py ExaoneMoeTopkRouter).
    //  - MellumConfig: num_local_experts 64 (attribute_map num_experts), num_experts_per_tok 8,
    //    moe_intermediate_size 896, no shared expert, norm_topk_prob True; mlp_layer_types defaults to all
    //    sparse (MellumSparseMoeBlock: experts, gate). num_nextn_predict_layers (MTP) builds no module:
    //    MellumForCausalLM drops mtp.* weights on load.
    const bool exaone = type == "exaone_moe";
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts = r.opt_int(exaone ? std::initializer_list<const char*>{"num_experts", "num_local_experts"}
                                     : std::initializer_list<const char*>{"num_local_experts", "num_experts"},
                              kMaxExperts)
                        .value_or(64);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(8);
    m.moe_intermediate_size =
        r.opt_int({"moe_intermediate_size"}, kMaxIntermediate).value_or(exaone ? 1024 : 896);
    if (exaone) {
      m.num_shared_experts = opt_count(r, "num_shared_experts", kMaxExperts).value_or(1);
      m.shared_expert_intermediate_size = checked_mul(m.moe_intermediate_size, m.num_shared_experts);
      m.router_score_bias = true;
    }
    m.norm_topk_prob = r.opt_bool("norm_topk_prob", true);
    m.moe_layers = opt_mlp_layer_types(r, L);
    if (m.moe_layers.empty()) {
      const int64_t first_dense = exaone ? opt_count(r, "first_k_dense_replace", kMaxLayers).value_or(1) : 0;
      all_moe(false);
      for (int64_t i = first_dense; i < L; ++i) m.moe_layers[static_cast<size_t>(i)] = true;
    }
  } else if (type == "hunyuan_v1_moe") {
    // HunYuanMoEV1Config (Hunyuan-A13B): num_experts 1 (attribute_map num_local_experts), moe_topk 1
    // (num_experts_per_tok); every layer is a HunYuanMoEV1Moe: gate (HunYuanMoEV1Gate holding wg =
    // Linear(h, E) declared fp32), experts as wide as intermediate_size (HunYuanMoEV1Experts), and
    // shared_mlp, one HunYuanMoEV1MLP of intermediate_size; the top-k weights are always renormalised
    // (modeling_hunyuan_v1_moe.py). HunYuanMoEV1Gate would index per-layer lists of num_experts /
    // moe_topk, but HunYuanMoEV1Experts takes config.num_local_experts whole, so transformers 5.24 builds
    // no model from a list: refused by name.
    for (const char* key : {"num_experts", "moe_topk"})
      if (const json* v = r.find({key}); v != nullptr && v->is_array())
        throw_user_error(
            "model config '{}': hunyuan_v1_moe with a per-layer list for '{}' is not modelled (transformers "
            "5.24's HunYuanMoEV1Experts takes num_experts as one integer and builds no model from a list)",
            r.origin(), key);
    m.moe_style = MoeStyle::PerExpert;
    m.num_experts = r.opt_int({"num_experts", "num_local_experts"}, kMaxExperts).value_or(1);
    m.experts_per_token = r.opt_int({"moe_topk", "num_experts_per_tok"}, kMaxExperts).value_or(1);
    m.moe_intermediate_size = m.intermediate_size;
    m.num_shared_experts = 1;
    m.shared_expert_intermediate_size = m.intermediate_size;
    m.norm_topk_prob = true;
  } else if (type == "minimax_m2") {
    // MiniMaxM2Config: num_local_experts 256 (attribute_map num_experts), 8 per token; every layer
    // sparse, no shared expert; experts as wide as intermediate_size; the checkpoint keeps Mixtral's
    // names (block_sparse_moe.gate, experts.E.w1/w2/w3) that transformers renames on load; the
    // router's e_score_correction_bias is a buffer (modeling_minimax_m2.py MiniMaxM2SparseMoeBlock).
    m.moe_style = MoeStyle::Mixtral;
    m.num_experts = r.opt_int({"num_local_experts", "num_experts"}, kMaxExperts).value_or(256);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(8);
    m.moe_intermediate_size = m.intermediate_size;
    m.router_score_bias = true;
  } else if (type == "phimoe") {
    // PhimoeConfig: num_local_experts 16, experts as wide as intermediate_size (6400), every layer
    // sparse, no shared expert; the checkpoint (Phi-3.5-MoE) keeps Mixtral's block_sparse_moe names.
    // Routing is sparsemixer, which picks exactly two experts whatever num_experts_per_tok says
    // (modeling_phimoe.py sparsemixer: two hard-coded selections; checked with num_experts_per_tok 4).
    m.moe_style = MoeStyle::Mixtral;
    m.num_experts = r.opt_int({"num_local_experts"}, kMaxExperts).value_or(16);
    const int64_t k = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(2);
    if (k != 2)
      m.warnings.push_back(fmt::format(
          "model config '{}': num_experts_per_tok {} is ignored: PhiMoE's sparsemixer routes every token "
          "to exactly 2 experts (modeling_phimoe.py), so FLOPs and activations count 2",
          r.origin(), k));
    m.experts_per_token = 2;
    m.moe_intermediate_size = m.intermediate_size;
  } else if (type == "gpt_oss") {
    // GptOssConfig: num_local_experts 128, num_experts_per_tok 4 (Hub files also say
    // experts_per_token); experts as wide as intermediate_size, fused with biases; router has a bias.
    m.moe_style = MoeStyle::FusedGptOss;
    m.num_experts = r.opt_int({"num_local_experts"}, kMaxExperts).value_or(128);
    m.experts_per_token = r.opt_int({"num_experts_per_tok", "experts_per_token"}, kMaxExperts).value_or(4);
    m.moe_intermediate_size = m.intermediate_size;
    m.router_bias = true;
  } else if (type == "llama4_text") {
    // Llama4TextConfig: num_local_experts 16, num_experts_per_tok 1; routed experts and the shared
    // expert are intermediate_size wide (8192), dense layers intermediate_size_mlp (16384); MoE layers
    // are moe_layers, else every interleave_moe_layer_step-th: range(step-1, L, step).
    m.moe_style = MoeStyle::FusedLlama4;
    m.num_experts = r.opt_int({"num_local_experts"}, kMaxExperts).value_or(16);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(1);
    m.moe_intermediate_size = m.intermediate_size;
    m.shared_expert_intermediate_size = m.intermediate_size;
    m.num_shared_experts = 1;
    m.intermediate_size = r.opt_int({"intermediate_size_mlp"}, kMaxIntermediate).value_or(16384);
    all_moe(false);
    if (r.find({"moe_layers"})) {
      for (const int64_t i : opt_layer_list(r, "moe_layers", L)) m.moe_layers[static_cast<size_t>(i)] = true;
    } else {
      const int64_t step = r.opt_int({"interleave_moe_layer_step"}, kMaxLayers).value_or(1);
      for (int64_t i = step - 1; i < L; i += step) m.moe_layers[static_cast<size_t>(i)] = true;
    }
  }
  if (!m.moe_layers.empty() &&
      std::all_of(m.moe_layers.begin(), m.moe_layers.end(), [](bool b) { return b; }))
    m.moe_layers.clear();  // all sparse: the compact form
  if (m.is_moe() && !m.moe_layers.empty() &&
      std::none_of(m.moe_layers.begin(), m.moe_layers.end(), [](bool b) { return b; })) {
    // No layer is sparse (e.g. decoder_sparse_step > layers): a dense model.
    m.num_experts = m.experts_per_token = 0;
    m.moe_style = MoeStyle::None;
    m.moe_layers.clear();
  }
}

// Qwen3-Next's token mixers (configuration_qwen3_next.py Qwen3NextConfig): layer_types, one
// "linear_attention" (Gated DeltaNet) or "full_attention" per layer; without it, __post_init__ makes
// layer i full attention iff (i + 1) % full_attention_interval == 0 (default 4: every fourth layer).
// The Gated DeltaNet's sizes: linear_conv_kernel_dim 4, linear_key_head_dim 128, linear_value_head_dim
// 128, linear_num_key_heads 16, linear_num_value_heads 32. Any other layer type builds no token mixer
// at all in Qwen3NextDecoderLayer and Qwen3_5MoeDecoderLayer (neither branch), and an attention layer in
// Qwen3_5DecoderLayer (its `else`): refused for all three rather than guessed at. Qwen3_5TextConfig and
// Qwen3_5MoeTextConfig have the same fields and defaults (configuration_qwen3_5*.py).
// GraniteMoeHybridConfig's layers (configuration_granitemoehybrid.py): layer_types (attribute_map
// layers_block_type), "linear_attention" for a Mamba-2 layer and "full_attention" for softmax attention; the
// published files' "mamba" and "attention" are the same two (transformers 5.24 maps them on load; checked by
// building both spellings); default: every layer Mamba-2. The Mamba-2 sizes: mamba_n_heads 128,
// mamba_d_head "auto" (= mamba_expand x hidden / heads), mamba_d_state 256, mamba_n_groups 1, mamba_d_conv
// 4, mamba_expand 2, mamba_chunk_size 256, mamba_conv_bias True, mamba_proj_bias False;
// position_embedding_type None or "nope" builds no rotary embedding (GraniteMoeHybridModel: rotary_emb only
// for "rope").
void read_mamba2(const ConfigReader& r, ModelSpec& m) {
  const int64_t L = m.num_layers;
  m.layer_kinds.assign(static_cast<size_t>(L), LayerKind::Mamba2);
  if (const json* v = r.find({"layer_types", "layers_block_type"}); v != nullptr && !v->is_null()) {
    if (!v->is_array() || static_cast<int64_t>(v->size()) != L)
      throw_user_error("model config '{}': field 'layer_types' must name each of the {} layers, found {}",
                       r.origin(), L, v->dump());
    for (int64_t i = 0; i < L; ++i) {
      const json& e = (*v)[static_cast<size_t>(i)];
      if (e == "full_attention" || e == "attention")
        m.layer_kinds[static_cast<size_t>(i)] = LayerKind::Attention;
      else if (e != "linear_attention" && e != "mamba")
        throw_user_error(
            "model config '{}': layer_types[{}] is {}; GraniteMoeHybridDecoderLayer builds a Mamba-2 layer "
            "for "
            "\"linear_attention\" (\"mamba\") and attention otherwise, and zeroplan reads only those "
            "spellings",
            r.origin(), i, e.dump());
    }
  }
  m.mamba_n_heads = r.opt_int({"mamba_n_heads"}, kMaxHeads).value_or(128);
  m.mamba_d_state = r.opt_int({"mamba_d_state"}, kMaxHidden).value_or(256);
  m.mamba_n_groups = r.opt_int({"mamba_n_groups"}, kMaxHeads).value_or(1);
  m.mamba_d_conv = r.opt_int({"mamba_d_conv"}, kMaxHidden).value_or(4);
  m.mamba_chunk_size = r.opt_int({"mamba_chunk_size"}, kMaxPositions).value_or(256);
  const int64_t expand = r.opt_int({"mamba_expand"}, kMaxHeads).value_or(2);
  m.mamba_intermediate = checked_mul(expand, m.hidden_size);
  const json* dh = r.find({"mamba_d_head"});
  m.mamba_d_head = dh == nullptr || dh->is_null() || dh->is_string()
                       ? m.mamba_intermediate / m.mamba_n_heads
                       : r.opt_int({"mamba_d_head"}, kMaxHidden).value();
  // GraniteMoeHybridConfig.validate_architecture.
  if (m.mamba_d_head * m.mamba_n_heads != m.mamba_intermediate)
    throw_user_error(
        "model config '{}': mamba_d_head {} x mamba_n_heads {} must equal mamba_expand x hidden_size = {}",
        r.origin(), m.mamba_d_head, m.mamba_n_heads, m.mamba_intermediate);
  if (m.mamba_n_heads % m.mamba_n_groups != 0)
    throw_user_error("model config '{}': mamba_n_groups {} must divide mamba_n_heads {}", r.origin(),
                     m.mamba_n_groups, m.mamba_n_heads);
  m.mamba_conv_bias = r.opt_bool("mamba_conv_bias", true);
  m.mamba_proj_bias = r.opt_bool("mamba_proj_bias", false);
  const std::string pos = r.opt_string({"position_embedding_type"}, "");
  if (pos != "rope") m.position = PositionKind::NoPE;
}

void read_gated_delta_net(const ConfigReader& r, ModelSpec& m) {
  const int64_t L = m.num_layers;
  m.layer_kinds.assign(static_cast<size_t>(L), LayerKind::Attention);
  if (const json* v = r.find({"layer_types"})) {
    if (!v->is_array() || static_cast<int64_t>(v->size()) != L)
      throw_user_error(
          "model config '{}': field 'layer_types' must list \"linear_attention\" or \"full_attention\" for "
          "each of the {} layers, found {}",
          r.origin(), L, v->dump());
    for (int64_t i = 0; i < L; ++i) {
      const json& e = (*v)[static_cast<size_t>(i)];
      if (e == "linear_attention") {
        m.layer_kinds[static_cast<size_t>(i)] = LayerKind::GatedDeltaNet;
      } else if (e != "full_attention") {
        throw_user_error(
            "model config '{}': layer_types[{}] is {}; zeroplan reads only \"linear_attention\" and "
            "\"full_attention\" layers (modeling_qwen3_next.py Qwen3NextDecoderLayer builds no token mixer "
            "for "
            "any other type)",
            r.origin(), i, e.dump());
      }
    }
  } else {
    const int64_t interval = r.opt_int({"full_attention_interval"}, kMaxLayers).value_or(4);
    for (int64_t i = 0; i < L; ++i)
      if ((i + 1) % interval != 0) m.layer_kinds[static_cast<size_t>(i)] = LayerKind::GatedDeltaNet;
  }
  m.linear_conv_kernel_dim = r.opt_int({"linear_conv_kernel_dim"}, kMaxHidden).value_or(4);
  m.linear_key_head_dim = r.opt_int({"linear_key_head_dim"}, kMaxHidden).value_or(128);
  m.linear_value_head_dim = r.opt_int({"linear_value_head_dim"}, kMaxHidden).value_or(128);
  m.linear_num_key_heads = r.opt_int({"linear_num_key_heads"}, kMaxHeads).value_or(16);
  m.linear_num_value_heads = r.opt_int({"linear_num_value_heads"}, kMaxHeads).value_or(32);
  // fix_query_key_value_ordering views the projections per key head: the value heads must group evenly.
  if (m.linear_num_value_heads % m.linear_num_key_heads != 0)
    throw_user_error("model config '{}': {} linear value heads cannot be grouped over {} linear key heads",
                     r.origin(), m.linear_num_value_heads, m.linear_num_key_heads);
  if (std::none_of(m.layer_kinds.begin(), m.layer_kinds.end(),
                   [](LayerKind k) { return k != LayerKind::Attention; }))
    m.layer_kinds.clear();  // all softmax attention: the compact form
}

void read_llama_family(const ConfigReader& r, const std::string& type, ModelSpec& m) {
  m.layout = type == "phi3" ? Layout::Phi3 : type == "phi" ? Layout::Phi : Layout::Llama;
  m.hidden_size = r.req_int({"hidden_size"}, kMaxHidden);
  m.num_layers = r.req_int({"num_hidden_layers"}, kMaxLayers);
  m.num_heads = r.req_int({"num_attention_heads"}, kMaxHeads);
  // SolarOpenConfig and Kolibri1Config have no intermediate_size: every layer is MoE. zeroplan takes one
  // routed expert's width (moe_intermediate_size: SolarOpenConfig 1280, Kolibri1Config 512) as the
  // model's MLP width, as for Mixtral-style models whose experts are intermediate_size wide.
  // Qwen3_5MoeTextConfig likewise (moe_intermediate_size 512).
  if (type == "solar_open" || type == "kolibri1" || type == "qwen3_5_moe_text")
    m.intermediate_size = r.opt_int({"intermediate_size", "moe_intermediate_size"}, kMaxIntermediate)
                              .value_or(type == "solar_open" ? 1280 : 512);
  else
    m.intermediate_size = r.req_int({"intermediate_size"}, kMaxIntermediate);
  m.vocab_size = r.req_int({"vocab_size"}, kMaxVocab);
  // num_key_value_heads defaults: MistralConfig/MixtralConfig 8, Qwen3MoeConfig 4, Gemma2Config/
  // Gemma3TextConfig 4, Glm4Config 2, Starcoder2Config 2, GptOssConfig 8, Llama4TextConfig 8; the
  // others (and LlamaConfig's None) = num_attention_heads.
  int64_t dflt_kv = m.num_heads;
  // SeedOssConfig 8, MiniMaxM2Config 8, PhimoeConfig 8, Exaone4Config 32 (no None fallback).
  if (type == "mistral" || type == "mixtral" || type == "gpt_oss" || type == "llama4_text" ||
      type == "glm4_moe" || type == "seed_oss" || type == "minimax_m2" || type == "phimoe")
    dflt_kv = 8;
  if (type == "exaone4") dflt_kv = 32;
  if (type == "ernie4_5") dflt_kv = 2;      // Ernie4_5Config num_key_value_heads 2
  if (type == "ernie4_5_moe") dflt_kv = 4;  // Ernie4_5_MoeConfig num_key_value_heads 4
  if (type == "qwen3_moe" || type == "gemma2" || type == "gemma3_text" || type == "smollm3") dflt_kv = 4;
  // Qwen3NextConfig and Qwen3_5MoeTextConfig 2; Qwen3_5TextConfig 4.
  if (type == "glm4" || type == "starcoder2" || type == "qwen3_next" || type == "qwen3_5_moe_text")
    dflt_kv = 2;
  if (type == "qwen3_5_text") dflt_kv = 4;
  // GlmConfig 2; GraniteSWAConfig 4; SolarOpenConfig 8; MellumConfig 4; Kolibri1Config 4; SarvamMoEConfig
  // 4; ExaoneMoeConfig 32; StableLmConfig 32; OlmoConfig, FlexOlmoConfig and Cohere2Config None (=
  // num_attention_heads).
  if (type == "glm") dflt_kv = 2;
  if (type == "granite_swa" || type == "mellum" || type == "kolibri1" || type == "sarvam_moe") dflt_kv = 4;
  if (type == "solar_open" || type == "hy_v3") dflt_kv = 8;  // HYV3Config num_key_value_heads 8
  if (type == "exaone_moe" || type == "stablelm") dflt_kv = 32;
  if (type == "minicpm3") dflt_kv = 40;       // MiniCPM3Config num_key_value_heads 40
  if (type == "glm4_moe_lite") dflt_kv = 20;  // Glm4MoeLiteConfig num_key_value_heads 20
  m.num_kv_heads = r.opt_int({"num_key_value_heads"}, kMaxHeads).value_or(std::min(dflt_kv, m.num_heads));
  // head_dim defaults: GemmaConfig/Gemma2Config/Gemma3TextConfig 256, Qwen3Config 128,
  // Glm4Config 128, Llama4TextConfig 128, GptOssConfig 64; the others hidden/heads.
  int64_t dflt_head_dim = 0;
  if (type == "gemma" || type == "gemma2" || type == "gemma3_text") dflt_head_dim = 256;
  if (type == "qwen3" || type == "glm4" || type == "llama4_text") dflt_head_dim = 128;
  if (type == "gpt_oss") dflt_head_dim = 64;
  // Qwen3NextConfig, Qwen3_5TextConfig and Qwen3_5MoeTextConfig head_dim 256.
  if (type == "qwen3_next" || type == "qwen3_5_text" || type == "qwen3_5_moe_text") dflt_head_dim = 256;
  // Glm4MoeConfig has no head_dim field: Glm4MoeAttention takes getattr(config, "head_dim",
  // hidden_size // num_attention_heads), a floor (the class defaults 4096 / 96 give 42).
  // Ernie4_5_MoeConfig has no head_dim field either (Ernie4_5_MoeAttention: the same getattr).
  if (type == "glm4_moe" || type == "dots1" || type == "ernie4_5_moe")
    dflt_head_dim = m.hidden_size / m.num_heads;
  // SeedOssConfig head_dim 128 (None: hidden / heads); MiniMaxM2Config head_dim 128.
  // Ernie4_5Config head_dim 128 (None: hidden / heads).
  if (((type == "seed_oss" || type == "ernie4_5") && !r.is_null("head_dim")) || type == "minimax_m2")
    dflt_head_dim = 128;
  // GlmConfig head_dim 128 (None: hidden / heads); SolarOpenConfig, MellumConfig, Kolibri1Config 128;
  // SarvamMoEConfig 64. ExaoneMoeConfig, FlexOlmoConfig, OlmoConfig, GraniteSWAConfig have no head_dim
  // field (their attention's getattr falls back to hidden / heads).
  if ((type == "glm" && !r.is_null("head_dim")) || type == "solar_open" || type == "mellum" ||
      type == "kolibri1")
    dflt_head_dim = 128;
  if (type == "sarvam_moe") dflt_head_dim = 64;
  if (type == "hy_v3") dflt_head_dim = 128;  // HYV3Config head_dim 128
  // HunYuanDenseV1Config.head_dim defaults to None, and HunYuanDenseV1Attention's getattr(config,
  // "head_dim", hidden // heads) then returns None: transformers builds no model without it.
  // HunYuanMoEV1Config and HunYuanMoEV1Attention alike.
  if ((type == "hunyuan_v1_dense" || type == "hunyuan_v1_moe") &&
      (!r.find({"head_dim"}) || r.is_null("head_dim")))
    throw_user_error(
        "model config '{}': {} needs 'head_dim' ({}'s default is None, with which transformers builds no "
        "model); give the value from the model's config.json",
        r.origin(), type, type == "hunyuan_v1_dense" ? "HunYuanDenseV1Config" : "HunYuanMoEV1Config");
  m.head_dim = r.opt_int({"head_dim"}, kMaxHidden).value_or(dflt_head_dim);
  // StableLmAttention takes hidden_size // num_attention_heads and reads no head_dim. (Cohere2Config's
  // __post_init__ sets head_dim = hidden // heads, but a head_dim the file gives is set after it, as a
  // PreTrainedConfig kwarg, and Cohere2Attention uses that: read as given.)
  if (type == "stablelm") m.head_dim = m.hidden_size / m.num_heads;
  // max_position_embeddings defaults of LlamaConfig (2048), MistralConfig/MixtralConfig (4096*32),
  // Qwen2Config (32768), GemmaConfig/Gemma2Config (8192), Phi3Config (4096). Rotary: no parameters.
  int64_t dflt_pos = 2048;
  if (type == "mistral" || type == "mixtral") dflt_pos = 4096 * 32;
  if (type.rfind("qwen", 0) == 0) dflt_pos = 32768;
  if (type == "gemma" || type == "gemma2") dflt_pos = 8192;
  if (type == "phi3" || type == "olmoe") dflt_pos = 4096;
  if (type == "glm4_moe" || type == "phimoe") dflt_pos = 131072;
  if (type == "seed_oss") dflt_pos = 524288;
  if (type == "smollm3") dflt_pos = 32768;
  if (type == "ernie4_5" || type == "ernie4_5_moe") dflt_pos = 131072;
  if (type == "arcee") dflt_pos = 4096;
  if (type == "apertus") dflt_pos = 65536;
  if (type == "minimax_m2") dflt_pos = 196608;
  // Glm4MoeLiteConfig 202752, MiniCPM3Config 32768.
  if (type == "glm4_moe_lite") dflt_pos = 202752;
  if (type == "minicpm3") dflt_pos = 32768;
  if (type == "hy_v3") dflt_pos = 131072;  // HYV3Config
  // StableLmConfig 4096, GlmConfig 131072, Cohere2Config 8192, GraniteSWAConfig 8192, FlexOlmoConfig 4096,
  // SolarOpenConfig 131072, ExaoneMoeConfig 2048, MellumConfig 131072, Kolibri1Config 262144,
  // SarvamMoEConfig 131072 (OlmoConfig 2048, LlamaConfig's).
  if (type == "stablelm" || type == "flex_olmo") dflt_pos = 4096;
  if (type == "glm" || type == "solar_open" || type == "mellum" || type == "sarvam_moe") dflt_pos = 131072;
  if (type == "cohere2" || type == "granite_swa") dflt_pos = 8192;
  if (type == "kolibri1") dflt_pos = 262144;
  m.max_position_embeddings = r.opt_int({"max_position_embeddings"}, kMaxPositions).value_or(dflt_pos);
  m.norm = NormKind::RMSNorm;
  m.norm_eps = r.opt_double({"rms_norm_eps", "norm_epsilon", "layer_norm_eps"}, 0.0);
  m.mlp = MlpKind::Gated;
  m.position = PositionKind::Rotary;
  // Tied by default: GemmaConfig, Gemma2Config, Gemma3TextConfig, Starcoder2Config, CohereConfig,
  // SmolLM3Config.
  const bool tie_default = type == "gemma" || type == "gemma2" || type == "gemma3_text" ||
                           type == "starcoder2" || type == "cohere" || type == "smollm3" ||
                           type == "ernie4_5" || type == "ernie4_5_moe" ||
                           // Cohere2Config and GraniteSWAConfig tie_word_embeddings True.
                           type == "cohere2" || type == "granite_swa" ||
                           // MiniCPM3Config tie_word_embeddings True.
                           type == "minicpm3";
  m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", tie_default);
  m.activation =
      r.opt_string({"hidden_activation", "hidden_act"},
                   type.rfind("gemma", 0) == 0 || type == "starcoder2" ? "gelu_pytorch_tanh" : "silu");
  // Attention biases. Qwen2Attention: q/k/v Linear(bias=True), o_proj bias=False; Qwen2MoeConfig
  // qkv_bias (default True) with o_proj bias=False; Glm4Attention: q/k/v bias=attention_bias
  // (Glm4Config default True), o_proj bias=False; GptOssConfig attention_bias default True (q/k/v/o);
  // Starcoder2Config use_bias default True (q/k/v/o and c_fc/c_proj).
  if (type == "qwen2") {
    m.qkv_bias_only = true;
  } else if (type == "qwen2_moe") {
    m.qkv_bias_only = r.opt_bool("qkv_bias", true);
  } else if (type == "glm4") {
    m.qkv_bias_only = r.opt_bool("attention_bias", true);
  } else if (type == "glm4_moe") {
    // Glm4MoeAttention: q/k/v bias=attention_bias (Glm4MoeConfig default False; GLM-4.5's files set
    // it true), o_proj bias=False.
    m.qkv_bias_only = r.opt_bool("attention_bias", false);
  } else if (type == "sarvam_moe") {
    // Built as Glm4MoeAttention: q/k/v bias=attention_bias (SarvamMoEConfig attribute_map use_qkv_bias;
    // Glm4MoeConfig's default False), o_proj bias=False.
    m.qkv_bias_only =
        r.find({"attention_bias"}) ? r.opt_bool("attention_bias", false) : r.opt_bool("use_qkv_bias", false);
  } else if (type == "glm") {
    // GlmAttention: q/k/v bias=attention_bias (GlmConfig default True), o_proj bias=False.
    m.qkv_bias_only = r.opt_bool("attention_bias", true);
  } else if (type == "solar_open") {
    // SolarOpenAttention: q/k/v bias=attention_bias (SolarOpenConfig default False), o_proj bias=False.
    m.qkv_bias_only = r.opt_bool("attention_bias", false);
  } else if (type == "stablelm") {
    // StableLmAttention: q/k/v bias=use_qkv_bias (StableLmConfig default False), o_proj bias=False.
    m.qkv_bias_only = r.opt_bool("use_qkv_bias", false);
  } else if (type == "exaone_moe" || type == "kolibri1") {
    // ExaoneMoeAttention and Kolibri1Attention: q/k/v/o always bias=False (no attention_bias field).
    m.attention_bias = false;
  } else if (type == "starcoder2") {
    m.attention_bias = m.mlp_bias = r.opt_bool("use_bias", true);
  } else if (type == "ernie4_5") {
    // Ernie4_5Config use_bias (default False): a bias on q/k/v/o and gate/up/down alike; lm_head none.
    m.attention_bias = m.mlp_bias = r.opt_bool("use_bias", false);
  } else if (type == "ernie4_5_moe") {
    // Ernie4_5_MoeConfig use_bias (default False): q/k/v/o, the dense and shared-expert MLPs and the
    // lm_head (Ernie4_5_MoeForCausalLM: nn.Linear(..., bias=config.use_bias)); the routed experts none.
    m.attention_bias = m.mlp_bias = m.lm_head_bias = r.opt_bool("use_bias", false);
  } else if (type == "seed_oss") {
    // SeedOssAttention: q/k/v bias=attention_bias (default True), o_proj bias=attention_out_bias
    // (default False).
    const bool qkv = r.opt_bool("attention_bias", true), out = r.opt_bool("attention_out_bias", false);
    if (out && !qkv)
      throw_user_error(
          "model config '{}': attention_out_bias without attention_bias (a bias on o_proj alone) is not "
          "modelled",
          r.origin());
    m.attention_bias = qkv && out;
    m.qkv_bias_only = qkv && !out;
  } else {
    m.attention_bias = r.opt_bool("attention_bias", type == "gpt_oss");
  }
  if (type != "starcoder2" && type != "ernie4_5" && type != "ernie4_5_moe")
    m.mlp_bias = r.opt_bool("mlp_bias", false);
  m.fused_qkv = type == "phi3";
  // GlmMLP (GLM-4-9B, model_type glm): gate_up_proj [2 * intermediate, hidden] as GLM-4's.
  m.fused_gate_up = type == "phi3" || type == "glm4" || type == "glm";

  // Norm placement and q/k norms (modeling_<family>.py DecoderLayer / Attention __init__).
  if (type == "gemma2" || type == "gemma3_text") m.norm_placement = NormPlacement::Sandwich;
  // Gemma2Config: attn_logit_softcapping 50.0, final_logit_softcapping 30.0 (None disables);
  // Gemma3TextConfig defaults both to None (configuration_gemma2.py / configuration_gemma3.py).
  if (type == "gemma2" || type == "gemma3_text") {
    const double dflt = type == "gemma2" ? 50.0 : 0.0;
    m.attn_logit_softcapping =
        r.is_null("attn_logit_softcapping") ? 0.0 : r.opt_double({"attn_logit_softcapping"}, dflt);
    m.final_logit_softcapping =
        r.is_null("final_logit_softcapping")
            ? 0.0
            : r.opt_double({"final_logit_softcapping"}, type == "gemma2" ? 30.0 : 0.0);
  }
  if (type == "glm4") m.norm_placement = NormPlacement::Glm4;
  // Olmo3 and EXAONE-4 keep OLMo-2's post-norms (post_attention_layernorm and
  // post_feedforward_layernorm on the sub-layer outputs, no input norm).
  // FlexOlmoDecoderLayer likewise (post_attention_layernorm, post_feedforward_layernorm).
  if (type == "olmo2" || type == "olmo3" || type == "exaone4" || type == "flex_olmo")
    m.norm_placement = NormPlacement::PostOnly;
  // Kolibri1DecoderLayer: input_layernorm, post_attention_layernorm, post_self_attn_layernorm,
  // post_mlp_layernorm, GLM-4's four norms.
  if (type == "kolibri1") m.norm_placement = NormPlacement::Glm4;
  m.extra_norms = m.norm_placement == NormPlacement::Sandwich || m.norm_placement == NormPlacement::Glm4;
  if (type == "qwen3" || type == "qwen3_moe" || type == "gemma3_text") m.qk_norm = QkNorm::PerHead;
  // Full-width q/k norms ([heads * head_dim] before the per-head reshape): OLMo-2/3, OLMoE, MiniMax-M2
  // (built whatever use_qk_norm says: modeling_minimax_m2.py); per head ([head_dim]): EXAONE-4.
  // FlexOlmoAttention: q_norm RMSNorm(heads * head_dim), k_norm RMSNorm(kv_heads * head_dim), always.
  if (type == "olmo2" || type == "olmoe" || type == "olmo3" || type == "minimax_m2" || type == "flex_olmo")
    m.qk_norm = QkNorm::FullWidth;
  // ExaoneMoeAttention, MellumAttention and Kolibri1Attention: q_norm/k_norm = RMSNorm(head_dim), always.
  // HYV3Attention likewise.
  if (type == "exaone_moe" || type == "mellum" || type == "kolibri1" || type == "hy_v3")
    m.qk_norm = QkNorm::PerHead;
  // Dots1Attention: q_norm/k_norm = Dots1RMSNorm(head_dim), always built.
  if (type == "exaone4" || type == "dots1") m.qk_norm = QkNorm::PerHead;
  // HunYuanDenseV1Attention: query_layernorm/key_layernorm = RMSNorm(head_dim), always built, applied
  // after the rotary embedding (same saved bytes as a norm before it: the norm saves its input either
  // way, and SDPA the normalised q/k).
  if (type == "hunyuan_v1_dense" || type == "hunyuan_v1_moe") m.qk_norm = QkNorm::PerHead;
  // Qwen3NextAttention: q_norm/k_norm = Qwen3NextRMSNorm(head_dim), always; q_proj twice as wide (the
  // output gate). Its other layers are Gated DeltaNets (read_gated_delta_net). Qwen3.5's text models
  // (Qwen3_5Attention, Qwen3_5MoeAttention) are the same attention and the same layer pattern, with the
  // Gated DeltaNet's projections split (models/inventory.cpp gated_delta_net).
  if (type == "qwen3_next" || type == "qwen3_5_text" || type == "qwen3_5_moe_text") {
    m.qk_norm = QkNorm::PerHead;
    m.gated_attention = true;
    read_gated_delta_net(r, m);
  }
  if (type == "granitemoehybrid") read_mamba2(r, m);
  // Glm4MoeAttention: use_qk_norm (default False) adds q_norm/k_norm = Glm4MoeRMSNorm(head_dim).
  if (type == "glm4_moe" && r.opt_bool("use_qk_norm", false)) m.qk_norm = QkNorm::PerHead;
  // SarvamMoEConfig use_qk_norm default True (the same Glm4MoeAttention q_norm/k_norm).
  if (type == "sarvam_moe" && r.opt_bool("use_qk_norm", true)) m.qk_norm = QkNorm::PerHead;
  if (type == "starcoder2") {
    // Starcoder2: nn.LayerNorm (bias) everywhere, plain MLP c_fc -> gelu -> c_proj.
    m.norm = NormKind::LayerNorm;
    m.norm_bias = true;
    m.mlp = MlpKind::Plain;
    m.mlp_c_names = true;
  }
  if (type == "cohere") {
    // CohereLayerNorm: weight only (bias=False); one input_layernorm feeds attention and MLP
    // (CohereDecoderLayer: parallel residual); use_qk_norm (default False) adds q_norm/k_norm of
    // shape [heads, head_dim] / [kv_heads, head_dim].
    m.norm = NormKind::LayerNorm;
    m.norm_placement = NormPlacement::Parallel;
    m.parallel_attention = true;
    if (r.opt_bool("use_qk_norm", false)) m.qk_norm = QkNorm::HeadMatrix;
  }
  if (type == "cohere2") {
    // Cohere2 (Command R7B / A): Cohere2LayerNorm weight only (bias=False), one input_layernorm feeding
    // attention and MLP in parallel (Cohere2DecoderLayer); no q/k norm; q/k/v/o bias=attention_bias
    // (Cohere2Config default False) (modeling_cohere2.py).
    m.norm = NormKind::LayerNorm;
    m.norm_placement = NormPlacement::Parallel;
    m.parallel_attention = true;
  }
  if (type == "olmo") {
    // OLMo-1 (modeling_olmo.py OlmoLayerNorm): input_layernorm, post_attention_layernorm and the final norm
    // are LayerNorms with no learnable weight or bias; q/k/v/o bias=attention_bias (OlmoConfig default
    // False); clip_qkv clamps activations, no parameters.
    m.norm = NormKind::LayerNorm;
    m.norm_params = false;
  }
  if (type == "stablelm") {
    // StableLmDecoderLayer / StableLmModel (modeling_stablelm.py): nn.LayerNorm (weight and bias) for the
    // input, post-attention and final norms; use_parallel_residual (StableLmConfig default False) drops
    // post_attention_layernorm and feeds attention and MLP the same input. qk_layernorm (default False)
    // adds StableLmLayerNormPerHead, one nn.LayerNorm(head_dim) per head (q_layernorm.norms.<i>), which
    // zeroplan does not model: refused by name.
    m.norm = NormKind::LayerNorm;
    m.norm_bias = true;
    if (r.opt_bool("qk_layernorm", false))
      throw_user_error(
          "model config '{}': stablelm with qk_layernorm true is not modelled (StableLmLayerNormPerHead "
          "keeps "
          "one LayerNorm per attention head, q_layernorm.norms.<i>)",
          r.origin());
    if (r.opt_bool("use_parallel_residual", false)) {
      m.norm_placement = NormPlacement::Parallel;
      m.parallel_attention = true;
    }
  }
  // gpt-oss and GraniteSWAAttention (modeling_granite_swa.py): sinks, one learned logit per head, always.
  m.attention_sinks = type == "gpt_oss" || type == "granite_swa";
  if (type == "seed_oss") {
    // SeedOssConfig attention_dropout 0.1 and residual_dropout 0.1: dropout on the attention
    // probabilities, on o_proj's output and on down_proj's output (modeling_seed_oss.py).
    m.attn_dropout = r.opt_double({"attention_dropout"}, 0.1);
    m.resid_dropout = r.opt_double({"residual_dropout"}, 0.1);
    m.embd_dropout = 0.0;
  }
  if (type == "apertus") {
    // ApertusMLP (Apertus-8B/70B): a plain up_proj -> act_fn -> down_proj with hidden_act "xielu"
    // (transformers activations.py XIELUActivation: two trainable scalars alpha_p and alpha_n, shape
    // [1], and the buffers beta and eps); per-head q_norm/k_norm after all three projections; the
    // layer's norms are attention_layernorm and feedforward_layernorm (modeling_apertus.py).
    m.mlp = MlpKind::Plain;
    m.activation = r.opt_string({"hidden_act"}, "xielu");
    m.qk_norm = QkNorm::PerHead;
  }
  if (type == "arcee") {
    // ArceeMLP (AFM-4.5B): a plain up_proj -> act_fn -> down_proj, ArceeConfig hidden_act "relu2"
    // (ReLUSquaredActivation: relu, then torch.square), no gate.
    m.mlp = MlpKind::Plain;
    m.activation = r.opt_string({"hidden_act"}, "relu2");
  }
  if (type == "phimoe") {
    // PhimoeDecoderLayer / PhimoeModel: nn.LayerNorm (weight and bias, eps = rms_norm_eps) for the
    // input, post-attention and final norms; lm_head_bias (default False) adds lm_head.bias.
    m.norm = NormKind::LayerNorm;
    m.norm_bias = true;
    m.lm_head_bias = r.opt_bool("lm_head_bias", false);
  }
  if (type == "phi") {
    // PhiConfig / modeling_phi.py: nn.LayerNorm (bias) input_layernorm feeding attention and MLP in
    // parallel, q/k/v/dense and fc1/fc2 with biases, final_layernorm, lm_head with a bias; qk_layernorm
    // (default False) adds LayerNorm(head_dim) on q and k.
    m.norm = NormKind::LayerNorm;
    m.norm_bias = true;
    m.norm_placement = NormPlacement::Parallel;
    m.parallel_attention = true;
    m.attention_bias = m.mlp_bias = m.lm_head_bias = true;
    m.mlp = MlpKind::Plain;
    m.activation = r.opt_string({"hidden_act"}, "gelu_new");
    if (r.opt_bool("qk_layernorm", false)) m.qk_norm = QkNorm::PhiPerHead;
  }

  // MLA (modeling_deepseek_v3.py DeepseekV3Attention; DeepseekV2/V3Config defaults identical).
  // Glm4MoeLiteAttention is DeepseekV3Attention (Glm4MoeLiteConfig: q_lora_rank 768, kv_lora_rank 512,
  // qk_rope_head_dim 64, qk_nope_head_dim 192, v_head_dim 256); MiniCPM3Attention builds
  // DeepseekV2Attention's modules (MiniCPM3Config: q_lora_rank 768, kv_lora_rank 256, qk_rope_head_dim 32,
  // qk_nope_head_dim 64, v_head_dim None = hidden_size // num_attention_heads) (modular_minicpm3.py).
  // SarvamMLAConfig: q_lora_rank None (a plain q_proj) unless given; the rest DeepseekV3Config's.
  if (type == "deepseek_v2" || type == "deepseek_v3" || type == "glm4_moe_lite" || type == "minicpm3" ||
      type == "sarvam_mla") {
    const bool lite = type == "glm4_moe_lite", cpm = type == "minicpm3";
    m.mla = true;
    // q_lora_rank null (DeepSeek-V2-Lite) means a plain q_proj; absent means the default 1536.
    m.q_lora_rank = r.is_null("q_lora_rank") || (type == "sarvam_mla" && !r.find({"q_lora_rank"}))
                        ? 0
                        : r.opt_int({"q_lora_rank"}, kMaxHidden).value_or(lite || cpm ? 768 : 1536);
    m.kv_lora_rank = r.opt_int({"kv_lora_rank"}, kMaxHidden).value_or(cpm ? 256 : 512);
    // Glm4MoeLiteConfig attribute_map: head_dim -> qk_rope_head_dim.
    m.qk_rope_head_dim = r.opt_int(lite ? std::initializer_list<const char*>{"qk_rope_head_dim", "head_dim"}
                                        : std::initializer_list<const char*>{"qk_rope_head_dim"},
                                   kMaxHidden)
                             .value_or(cpm ? 32 : 64);
    m.qk_nope_head_dim = r.opt_int({"qk_nope_head_dim"}, kMaxHidden).value_or(lite ? 192 : cpm ? 64 : 128);
    m.v_head_dim = r.opt_int({"v_head_dim"}, kMaxHidden)
                       .value_or(lite  ? 256
                                 : cpm ? m.hidden_size / m.num_heads
                                       : 128);
    m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;  // the query/key head width
  }

  read_moe(r, type, m);
}

void read_gpt2(const ConfigReader& r, ModelSpec& m) {
  // GPT2Config attribute_map: hidden_size=n_embd, num_hidden_layers=n_layer,
  // num_attention_heads=n_head, max_position_embeddings=n_positions; n_inner None means 4*n_embd.
  m.layout = Layout::GPT2;
  m.hidden_size = r.req_int({"n_embd", "hidden_size"}, kMaxHidden);
  m.num_layers = r.req_int({"n_layer", "num_hidden_layers"}, kMaxLayers);
  m.num_heads = r.req_int({"n_head", "num_attention_heads"}, kMaxHeads);
  m.vocab_size = r.req_int({"vocab_size"}, kMaxVocab);
  m.max_position_embeddings = r.req_int({"n_positions", "max_position_embeddings"}, kMaxPositions);
  m.intermediate_size = r.opt_int({"n_inner"}, kMaxIntermediate).value_or(checked_mul(4, m.hidden_size));
  m.num_kv_heads = m.num_heads;
  m.norm = NormKind::LayerNorm;
  m.norm_bias = true;
  m.norm_eps = r.opt_double({"layer_norm_epsilon"}, 1e-5);
  m.mlp = MlpKind::Plain;
  m.position = PositionKind::Learned;
  m.activation = r.opt_string({"activation_function"}, "gelu_new");
  m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", true);
  m.attention_bias = m.mlp_bias = true;  // Conv1D always has a bias
  // GPT2Config defaults resid_pdrop = embd_pdrop = attn_pdrop = 0.1 (configuration_gpt2.py).
  m.resid_dropout = r.opt_double({"resid_pdrop"}, 0.1);
  m.attn_dropout = r.opt_double({"attn_pdrop"}, 0.1);
  m.embd_dropout = r.opt_double({"embd_pdrop"}, 0.1);
  m.fused_qkv = true;
}

void read_opt(const ConfigReader& r, ModelSpec& m) {
  m.layout = Layout::OPT;
  m.hidden_size = r.req_int({"hidden_size"}, kMaxHidden);
  m.num_layers = r.req_int({"num_hidden_layers"}, kMaxLayers);
  m.num_heads = r.req_int({"num_attention_heads"}, kMaxHeads);
  m.intermediate_size = r.req_int({"ffn_dim"}, kMaxIntermediate);
  m.vocab_size = r.req_int({"vocab_size"}, kMaxVocab);
  m.max_position_embeddings = r.req_int({"max_position_embeddings"}, kMaxPositions);
  m.word_embed_proj_dim = r.opt_int({"word_embed_proj_dim"}, kMaxHidden).value_or(m.hidden_size);
  m.num_kv_heads = m.num_heads;
  // OPTLearnedPositionalEmbedding: "OPT is set up so that if padding_idx is specified then offset
  // the embedding ids by 2" -> num_embeddings + 2 rows (modeling_opt.py).
  m.position_offset = 2;
  m.position = PositionKind::Learned;
  m.norm = NormKind::LayerNorm;
  m.norm_bias = true;
  m.mlp = MlpKind::Plain;
  m.activation = r.opt_string({"activation_function"}, "relu");
  // OPTConfig: dropout 0.1, attention_dropout 0.0 (configuration_opt.py); OPTDecoderLayer applies
  // `dropout` after the attention and after fc2, OPTDecoder none to the embeddings (modeling_opt.py).
  m.resid_dropout = r.opt_double({"dropout"}, 0.1);
  m.attn_dropout = r.opt_double({"attention_dropout"}, 0.0);
  m.embd_dropout = 0.0;
  m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", true);
  m.attention_bias = m.mlp_bias = r.opt_bool("enable_bias", true);
  // OPTDecoder keeps final_layer_norm only when do_layer_norm_before and not _remove_final_layer_norm
  // (OPT-350m has do_layer_norm_before=false).
  m.final_norm = r.opt_bool("do_layer_norm_before", true) && !r.opt_bool("_remove_final_layer_norm", false);
}

void read_bloom(const ConfigReader& r, ModelSpec& m) {
  // BloomConfig: attribute_map num_hidden_layers=n_layer, num_attention_heads=n_head; the kwarg
  // n_embed (older files) overrides hidden_size; the MLP is 4*hidden; ALiBi, no position table.
  m.layout = Layout::Bloom;
  m.hidden_size = r.req_int({"n_embed", "hidden_size"}, kMaxHidden);
  m.num_layers = r.req_int({"n_layer", "num_hidden_layers"}, kMaxLayers);
  m.num_heads = r.req_int({"n_head", "num_attention_heads"}, kMaxHeads);
  m.vocab_size = r.req_int({"vocab_size"}, kMaxVocab);
  m.intermediate_size = checked_mul(4, m.hidden_size);
  m.num_kv_heads = m.num_heads;
  m.max_position_embeddings = 0;  // ALiBi: no learned limit
  m.position = PositionKind::Alibi;
  m.norm = NormKind::LayerNorm;
  m.norm_bias = true;
  m.norm_eps = r.opt_double({"layer_norm_epsilon"}, 1e-5);
  m.mlp = MlpKind::Plain;
  m.activation = "gelu";
  m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", true);
  m.attention_bias = m.mlp_bias = true;
  m.fused_qkv = true;
  m.embedding_layernorm = true;
}

void read_falcon(const ConfigReader& r, ModelSpec& m) {
  // FalconConfig (and the older RefinedWeb/RefinedWebModel files): hidden_size (n_embed),
  // num_hidden_layers (n_layer), num_attention_heads (n_head), num_kv_heads (n_head_kv),
  // multi_query default true, parallel_attn default true, bias default false, alibi default false,
  // new_decoder_architecture default false, ffn_hidden_size default 4*hidden.
  m.layout = Layout::Falcon;
  m.hidden_size = r.req_int({"hidden_size", "n_embed"}, kMaxHidden);
  m.num_layers = r.req_int({"num_hidden_layers", "n_layer"}, kMaxLayers);
  m.num_heads = r.req_int({"num_attention_heads", "n_head"}, kMaxHeads);
  m.vocab_size = r.req_int({"vocab_size"}, kMaxVocab);
  m.intermediate_size =
      r.opt_int({"ffn_hidden_size"}, kMaxIntermediate).value_or(checked_mul(4, m.hidden_size));
  const auto kv = r.opt_int({"num_kv_heads", "n_head_kv"}, kMaxHeads);
  // RefinedWeb (40B) files predate the flag: n_head_kv there means the grouped layout.
  m.new_decoder_architecture = r.opt_bool("new_decoder_architecture", false) ||
                               (r.opt_string({"model_type"}, "") == "RefinedWeb" && kv.has_value());
  if (m.new_decoder_architecture)
    m.num_kv_heads = kv.value_or(m.num_heads);
  else
    m.num_kv_heads = r.opt_bool("multi_query", true) ? 1 : m.num_heads;
  m.parallel_attention = r.opt_bool("parallel_attn", true);
  m.attention_bias = m.mlp_bias = r.opt_bool("bias", false);
  m.position = r.opt_bool("alibi", false) ? PositionKind::Alibi : PositionKind::Rotary;
  // FalconConfig hidden_dropout and attention_dropout, both default 0.0 (configuration_falcon.py):
  // FalconDecoderLayer applies dropout_add(..., config.hidden_dropout), FalconModel no embedding
  // dropout; with p = 0 ATen's dropout returns its input (no kernel, no mask).
  m.resid_dropout = r.opt_double({"hidden_dropout"}, 0.0);
  m.attn_dropout = r.opt_double({"attention_dropout"}, 0.0);
  m.embd_dropout = 0.0;
  m.max_position_embeddings = r.opt_int({"max_position_embeddings"}, kMaxPositions).value_or(2048);
  m.norm = NormKind::LayerNorm;
  m.norm_bias = true;
  m.norm_eps = r.opt_double({"layer_norm_epsilon"}, 1e-5);
  m.mlp = MlpKind::Plain;
  m.activation = "gelu";
  m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", true);
  m.fused_qkv = true;
}

void read_gpt_neox(const ConfigReader& r, ModelSpec& m) {
  // GPTNeoXConfig defaults: rotary_pct 0.25, use_parallel_residual true, attention_bias true,
  // tie_word_embeddings false, max_position_embeddings 2048.
  m.layout = Layout::GPTNeoX;
  m.hidden_size = r.req_int({"hidden_size"}, kMaxHidden);
  m.num_layers = r.req_int({"num_hidden_layers"}, kMaxLayers);
  m.num_heads = r.req_int({"num_attention_heads"}, kMaxHeads);
  m.intermediate_size = r.req_int({"intermediate_size"}, kMaxIntermediate);
  m.vocab_size = r.req_int({"vocab_size"}, kMaxVocab);
  m.max_position_embeddings = r.opt_int({"max_position_embeddings"}, kMaxPositions).value_or(2048);
  m.num_kv_heads = m.num_heads;
  m.rotary_pct = r.opt_double({"rotary_pct", "partial_rotary_factor"}, 0.25);
  m.parallel_attention = r.opt_bool("use_parallel_residual", true);
  m.attention_bias = r.opt_bool("attention_bias", true);
  m.mlp_bias = true;
  m.position = PositionKind::Rotary;
  m.norm = NormKind::LayerNorm;
  m.norm_bias = true;
  m.norm_eps = r.opt_double({"layer_norm_eps"}, 1e-5);
  m.mlp = MlpKind::Plain;
  m.activation = r.opt_string({"hidden_act"}, "gelu");
  m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", false);
  m.fused_qkv = true;
}

void check_shapes(const ConfigReader& r, ModelSpec& m) {
  if (m.head_dim == 0) {
    if (m.hidden_size % m.num_heads != 0)
      throw_user_error(
          "model config '{}': hidden size {} is not divisible by {} attention heads; fix the file or give "
          "head_dim",
          r.origin(), m.hidden_size, m.num_heads);
    m.head_dim = m.hidden_size / m.num_heads;
  }
  if (m.num_kv_heads > m.num_heads || m.num_heads % m.num_kv_heads != 0)
    throw_user_error("model config '{}': {} attention heads cannot be grouped over {} key/value heads",
                     r.origin(), m.num_heads, m.num_kv_heads);
  if (m.is_moe() && (m.experts_per_token > m.num_experts))
    throw_user_error("model config '{}': num_experts_per_tok {} exceeds num_local_experts {}", r.origin(),
                     m.experts_per_token, m.num_experts);
  // The whole model must be countable in 64 bits (e.g. vocab 1e8 x hidden 1e6 x layers 1e4 is not).
  (void)m.num_parameters();
}

// Fields that change the module tree of the families that use them: a config of a family zeroplan
// does not model carrying any of them (with a non-zero, non-empty value) would be silently miscounted
// as a dense Llama, so it is refused instead.
constexpr const char* kStructuralFields[] = {
    // MoE
    "num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "experts_per_token",
    "moe_intermediate_size", "n_shared_experts", "shared_expert_intermediate_size", "moe_layer_freq",
    "first_k_dense_replace", "decoder_sparse_step", "mlp_only_layers", "moe_layers",
    "interleave_moe_layer_step", "num_shared_experts", "moe_num_experts",
    // MLA
    "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
    // other module-tree changes: q/k norms, parallel blocks, state-space/linear-attention layers
    "use_qk_norm", "qk_layernorm", "parallel_attn", "use_parallel_residual", "ssm_state_size",
    "mamba_d_state", "linear_num_value_heads", "attn_layer_period", "hybrid_override_pattern",
    "layers_block_type", "num_nextn_predict_layers", "linear_conv_kernel_dim", "linear_key_head_dim",
    "mamba_n_heads", "conv_L_cache", "full_attn_idxs", "altup_num_inputs", "laurel_rank",
    "hidden_size_per_layer_input", "num_kv_shared_layers", "attn_type_list", "block_types",
    "cross_attention_layers"};

std::vector<std::string> structural_fields_present(const json& j) {
  std::vector<std::string> out;
  // A gated (SwiGLU) MLP is what a Llama-style reading assumes; an unknown family with another
  // activation (Nemotron/Arcee relu2, Apertus xielu, GELU MLPs) most likely has a plain up/down MLP, a
  // third fewer MLP parameters, which the config cannot tell.
  if (auto it = j.find("hidden_act"); it != j.end() && it->is_string() && *it != "silu" && *it != "swish")
    out.push_back("hidden_act");
  // layer_types naming anything but softmax attention layers (linear_attention, mamba, conv) changes the
  // tree; full/sliding/chunked attention only changes masks.
  if (auto it = j.find("layer_types"); it != j.end() && it->is_array())
    for (const auto& t : *it)
      if (t.is_string() && t != "full_attention" && t != "sliding_attention" && t != "chunked_attention" &&
          t != "attention") {
        out.push_back("layer_types");
        break;
      }
  for (const char* k : kStructuralFields) {
    auto it = j.find(k);
    if (it == j.end() || it->is_null()) continue;
    if ((it->is_number() && it->get<double>() == 0) || (it->is_boolean() && !it->get<bool>()) ||
        (it->is_array() && it->empty()))
      continue;
    out.push_back(k);
  }
  return out;
}

// Families transformers 5.24 builds as causal LMs from configs with only Llama's standard fields, whose
// module tree a Llama-style reading would count wrongly (checked against AutoModelForCausalLM on the
// meta device from each config class's defaults): what differs, or nothing when `type` is not one of
// them (or the config turns the difference off).
std::optional<std::string> unmodelled_family(const std::string& type, const ConfigReader& r) {
  if (type == "diffllama")
    return "DiffLlamaAttention adds four learned vectors per layer (lambda_q1, lambda_k1, lambda_q2, "
           "lambda_k2, "
           "head_dim each) to Llama's attention (models/diffllama/modeling_diffllama.py)";
  if (type == "hrm_text")
    return "HrmTextModel runs two stacks of layers over H_cycles x L_cycles, so num_hidden_layers counts "
           "layer "
           "applications, not stored layers (models/hrm_text/modeling_hrm_text.py)";
  if (type == "modernbert-decoder")
    return "ModernBertDecoderForCausalLM has ModernBERT's module tree (LayerNorms, fused Wi/Wo MLP, a "
           "prediction head), not Llama's (models/modernbert_decoder/modeling_modernbert_decoder.py)";
  if (type == "phi4_multimodal")
    return "Phi4MultimodalForCausalLM builds its image and audio encoders (model.embed_tokens_extend) inside "
           "the language model (models/phi4_multimodal/modeling_phi4_multimodal.py)";
  if (type == "gemma4_unified_text" || type == "gemma4_unified")
    return "Gemma4UnifiedForCausalLM's layers are Gemma's, not Llama's (q_norm/k_norm on each head, "
           "pre_feedforward_layernorm and post_feedforward_layernorm around the MLP) "
           "(models/gemma4_unified/modeling_gemma4_unified.py)";
  if (type == "cohere_compass_text")
    return "its language model is built inside CohereCompassForConditionalGeneration, and transformers 5.24 "
           "builds no CohereCompassForCausalLM from CohereCompassTextConfig's defaults, so no count could be "
           "checked (models/cohere_compass/modeling_cohere_compass.py)";
  // HyperCLOVAXConfig use_post_norm default True: HyperCLOVAXDecoderLayer adds post_norm1 and post_norm2,
  // RMSNorms on each sub-layer's output (models/hyperclovax/modeling_hyperclovax.py); without it the layer
  // is Llama's (residual/embedding multipliers hold no parameters).
  if (type == "hyperclovax" && r.opt_bool("use_post_norm", true))
    return "use_post_norm (HyperCLOVAXConfig default True) adds post_norm1 and post_norm2 to every layer "
           "(models/hyperclovax/modeling_hyperclovax.py)";
  return std::nullopt;
}

}  // namespace

ModelSpec model_from_hf_config(const std::string& origin, const std::string& json_text) {
  return model_from_hf_json(origin,
                            parse_json_text(json_text, origin, "model config", PythonJsonTokens::Accept));
}

ModelSpec model_from_hf_json(const std::string& origin, const nlohmann::json& j, bool with_checkpoint) {
  if (!j.is_object())
    throw_user_error("model config '{}' must be a JSON object, found {}", origin, j.type_name());
  const ConfigReader r(j, origin);
  const std::string outer_type = r.opt_string({"model_type"}, "");
  // Vision-language configs (Gemma-3, Llama-4, Mistral-3, LLaVA, ...): the language tower is the
  // text_config, a config of one of the families below. zeroplan plans that tower.
  const json* tc = r.find({"text_config"});
  // Qwen2-VL and Qwen2.5-VL files saved before the text_config split (Qwen2.5-VL-3B-Instruct's) keep the
  // language tower's fields at the top level: Qwen2VLConfig / Qwen2_5_VLConfig.__post_init__ (transformers
  // 5.24 configuration_qwen2_vl.py / configuration_qwen2_5_vl.py) then builds text_config from those keys.
  json top_level_text;
  if ((outer_type == "qwen2_vl" || outer_type == "qwen2_5_vl") && (tc == nullptr || tc->is_null())) {
    top_level_text = j;
    top_level_text.erase("vision_config");
    top_level_text["model_type"] = outer_type + "_text";
    tc = &top_level_text;
  }
  if (tc && tc->is_object() && !is_llama_family(outer_type)) {
    // Text towers built from another family's layers (Qwen2_5_VLTextModel: Qwen2's; Qwen3VLTextModel:
    // Qwen3's) are read as that family, with their own config class's defaults (models/vision_tower.h).
    json text = vl_text_config_as_family(*tc).value_or(*tc);
    // text_config files inherit tie_word_embeddings from the outer config when they omit it
    // (PreTrainedConfig.get_text_config returns the sub-config; the outer flag decides the tie in
    // *ForConditionalGeneration). The Qwen wrappers' own rules: models/vision_tower.h.
    if (const std::optional<bool> tie = vl_tie_word_embeddings(j, *tc))
      text["tie_word_embeddings"] = *tie;
    else if (!text.contains("tie_word_embeddings") && j.contains("tie_word_embeddings"))
      text["tie_word_embeddings"] = j["tie_word_embeddings"];
    ModelSpec m = model_from_hf_json(origin + " (text_config)", text, with_checkpoint);
    m.name = origin;
    m.text_config_of = outer_type;
    // The tower and projector, where models/data/vision_towers.json knows the wrapper
    // (models/vision_tower.h): the planner holds their model states beside the language tower's
    // (planner/vision.h).
    std::optional<VisionTower> vt = vision_tower(j, m.hidden_size);
    if (vt) {
      const int64_t tower = vt->tower_params(), projector = vt->projector_params();
      m.vision_tower = vt->tower;
      m.vision_geometry = vt->geometry;
      m.vision_groups = std::move(vt->groups);
      m.warnings.push_back(fmt::format(
          "model config '{}': a vision-language model ('{}'); the vision tower ({}, {:.1f}M parameters) and "
          "projector ({:.1f}M) are planned as model states beside the language tower ('{}'), trained unless "
          "--freeze vision (LLaMA-Factory freezes both by default); images run through a frozen tower with "
          "--images-per-sample (its forward GEMMs and stage-3 gathers; it saves nothing), a trained tower is "
          "planned on text only",
          origin, outer_type, m.vision_tower, static_cast<double>(tower) / 1e6,
          static_cast<double>(projector) / 1e6, m.model_type));
    } else {
      m.warnings.push_back(
          fmt::format("model config '{}': a vision-language model ('{}'); zeroplan plans its language tower "
                      "(text_config, '{}') only: the vision encoder and projector are not counted",
                      origin, outer_type, m.model_type));
    }
    return m;
  }
  ModelSpec m;
  m.name = origin;
  m.model_type = outer_type;
  if (const json* a = r.find({"architectures"}); a && a->is_array() && !a->empty() && (*a)[0].is_string())
    m.architecture = (*a)[0].get<std::string>();

  const std::string& t = m.model_type;
  if (is_llama_family(t)) {
    read_llama_family(r, t, m);
  } else if (t == "gpt2") {
    read_gpt2(r, m);
  } else if (t == "opt") {
    read_opt(r, m);
  } else if (t == "bloom") {
    read_bloom(r, m);
  } else if (t == "falcon" || t == "RefinedWeb" || t == "RefinedWebModel") {
    read_falcon(r, m);
  } else if (t == "gpt_neox") {
    read_gpt_neox(r, m);
  } else {
    if (const auto why = unmodelled_family(t, r)) {
      if (!with_checkpoint)
        throw_user_error(
            "model config '{}': model_type '{}' is not a family zeroplan models, and a Llama-style reading "
            "of "
            "its fields would miscount it: {}. Give --model the folder of the checkpoint (config.json with "
            "its *.safetensors files) for an exact tensor inventory",
            origin, t, *why);
      m.warnings.push_back(fmt::format(
          "model config '{}': model_type '{}' is not a family zeroplan models ({}): parameter counts come "
          "from "
          "the safetensors headers; activations and FLOPs from the config's standard fields as a dense "
          "Llama-style decoder (approximate)",
          origin, t, *why));
    }
    const auto fields = structural_fields_present(j);
    if (!fields.empty() && with_checkpoint) {
      m.warnings.push_back(
          fmt::format("model config '{}': model_type '{}' with fields zeroplan does not model ({} in all, "
                      "e.g. '{}'): parameter "
                      "counts come from the safetensors headers; activations and FLOPs from the config's "
                      "standard fields as a "
                      "dense Llama-style decoder (approximate)",
                      origin, t, fields.size(), fields.front()));
    } else if (!fields.empty()) {
      std::string names;
      for (const auto& f : fields) names += (names.empty() ? "'" : ", '") + f + "'";
      throw_user_error(
          "model config '{}': {} is not a family zeroplan models, and it has fields that change the module "
          "tree "
          "({}: mixture-of-experts, latent attention or other structure); zeroplan will not guess its "
          "parameter "
          "count. Give --model the folder of the checkpoint (config.json with its *.safetensors files) for "
          "an exact "
          "tensor inventory",
          origin, t.empty() ? std::string("a config without model_type") : fmt::format("model_type '{}'", t),
          names);
    }
    // A plain dense config: accept it when it has Llama's standard fields, and say what we assumed.
    read_llama_family(r, "llama", m);
    m.warnings.push_back(fmt::format(
        "model config '{}': {} is not a family zeroplan models; assumed a Llama-style decoder from its "
        "standard "
        "fields (RMSNorm, gated MLP, rotary positions, biases only where attention_bias/mlp_bias say, untied "
        "embeddings unless tie_word_embeddings says so); parameter counts may differ from the real model",
        origin, t.empty() ? std::string("no model_type given, so it") : fmt::format("model_type '{}'", t)));
  }
  check_shapes(r, m);
  return m;
}

}  // namespace zeroplan::models
