// Reading an HF config.json into a ModelSpec. Each family spells its fields its own way and has its
// own defaults for what the file leaves out; the defaults below are the ones of the family's
// PretrainedConfig subclass in transformers (configuration_<family>.py), because that is what
// from_pretrained() builds when the key is absent.
#include "models/hf_config.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "common/checked.h"
#include "common/errors.h"
#include "common/json_file.h"
#include "models/model_spec.h"

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

// Families whose module tree is Llama's (possibly with fused projections or extra norms).
bool is_llama_family(const std::string& t) {
  return t == "llama" || t == "mistral" || t == "mixtral" || t == "qwen2" || t == "gemma" || t == "gemma2" ||
         t == "phi3";
}

void read_llama_family(const ConfigReader& r, const std::string& type, ModelSpec& m) {
  m.layout = type == "phi3" ? Layout::Phi3 : Layout::Llama;
  m.hidden_size = r.req_int({"hidden_size"}, kMaxHidden);
  m.num_layers = r.req_int({"num_hidden_layers"}, kMaxLayers);
  m.num_heads = r.req_int({"num_attention_heads"}, kMaxHeads);
  m.intermediate_size = r.req_int({"intermediate_size"}, kMaxIntermediate);
  m.vocab_size = r.req_int({"vocab_size"}, kMaxVocab);
  m.num_kv_heads = r.opt_int({"num_key_value_heads"}, kMaxHeads).value_or(m.num_heads);
  if (auto hd = r.opt_int({"head_dim"}, kMaxHidden)) m.head_dim = *hd;
  // max_position_embeddings defaults of LlamaConfig (2048), MistralConfig/MixtralConfig (4096*32),
  // Qwen2Config (32768), GemmaConfig/Gemma2Config (8192), Phi3Config (4096).
  int64_t dflt_pos = 2048;
  if (type == "mistral" || type == "mixtral") dflt_pos = 4096 * 32;
  if (type == "qwen2") dflt_pos = 32768;
  if (type == "gemma" || type == "gemma2") dflt_pos = 8192;
  if (type == "phi3") dflt_pos = 4096;
  m.max_position_embeddings = r.opt_int({"max_position_embeddings"}, kMaxPositions).value_or(dflt_pos);
  m.norm = NormKind::RMSNorm;
  m.norm_eps = r.opt_double({"rms_norm_eps"}, 0.0);
  m.mlp = MlpKind::Gated;
  m.position = PositionKind::Rotary;
  // Gemma and Gemma-2 tie by default (GemmaConfig tie_word_embeddings=True); the others don't.
  const bool tie_default = type == "gemma" || type == "gemma2";
  m.tie_word_embeddings = r.opt_bool("tie_word_embeddings", tie_default);
  m.activation = r.opt_string({"hidden_activation", "hidden_act"},
                              type.rfind("gemma", 0) == 0 ? "gelu_pytorch_tanh" : "silu");
  // Qwen2Attention: q/k/v Linear(bias=True), o_proj bias=False (modeling_qwen2.py).
  m.qkv_bias_only = type == "qwen2";
  m.attention_bias = !m.qkv_bias_only && r.opt_bool("attention_bias", false);
  m.mlp_bias = r.opt_bool("mlp_bias", false);
  m.extra_norms = type == "gemma2";
  m.fused_qkv = m.fused_gate_up = type == "phi3";
  // MoE: Mixtral spells it num_local_experts / num_experts_per_tok (MixtralConfig defaults 8 / 2).
  if (type == "mixtral") {
    m.num_experts = r.opt_int({"num_local_experts"}, kMaxExperts).value_or(8);
    m.experts_per_token = r.opt_int({"num_experts_per_tok"}, kMaxExperts).value_or(2);
  } else if (auto e = r.opt_int({"num_local_experts"}, kMaxExperts)) {
    m.num_experts = *e;
    m.experts_per_token = r.req_int({"num_experts_per_tok"}, kMaxExperts);
  }
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

}  // namespace

ModelSpec model_from_hf_config(const std::string& origin, const std::string& json_text) {
  return model_from_hf_json(origin, parse_json_text(json_text, origin, "model config"));
}

ModelSpec model_from_hf_json(const std::string& origin, const nlohmann::json& j) {
  const ConfigReader r(j, origin);
  ModelSpec m;
  m.name = origin;
  m.model_type = r.opt_string({"model_type"}, "");
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
    // Not a family we model: accept it when it has Llama's standard fields, and say what we assumed.
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
