#pragma once
// ModelSpec: a transformer described the way HF config.json files describe it, plus the layer
// inventory (every parameter tensor with its shape) that both the planner and the executor build
// from. One loader reads the zoo (models/zoo/*.json, embedded in the binary) and users' own files.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zeroplan::models {

enum class NormKind { RMSNorm, LayerNorm };
enum class MlpKind { Gated, Plain };  // Gated: SwiGLU/GeGLU (gate, up, down); Plain: fc1 -> act -> fc2
enum class PositionKind { Rotary, Learned, Alibi };
// Which HF module tree a checkpoint uses: it decides parameter names, fused projections and which
// norms exist. Llama covers Llama/Mistral/Mixtral/Qwen2/Gemma/Gemma-2 and unknown Llama-style configs.
enum class Layout { Llama, Phi3, GPT2, OPT, Bloom, Falcon, GPTNeoX };

// One parameter tensor. `module` is the HF module name LoRA targets match against
// ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "c_attn",
// "query_key_value", "fc1", "dense", "lm_head", "embed_tokens", ...), as it appears in the
// real checkpoint's parameter names.
struct TensorSpec {
  std::string name;            // full name, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::string module;          // e.g. "q_proj"
  std::vector<int64_t> shape;  // HF nn.Linear layout: [out_features, in_features]
  bool is_linear = false;      // a weight of an nn.Linear (a LoRA target candidate; 2-D)
  bool is_bias = false;
  bool is_norm = false;
  bool is_embedding = false;
  int64_t numel() const;
};

// A group of tensors that DeepSpeed stage 3 gathers together (one nn.Module subtree): the embedding,
// each decoder layer, the final norm, the LM head.
struct LayerInventory {
  std::string name;  // "embed", "layers.0", ..., "final_norm", "lm_head"
  bool is_decoder_layer = false;
  std::vector<TensorSpec> tensors;
  int64_t numel() const;
};

struct ModelSpec {
  std::string name;                   // zoo name ("llama-2-13b") or the user's path
  std::string model_type;             // HF model_type ("llama", "gpt2", "opt", "bloom", "falcon", ...)
  std::string architecture;           // HF architectures[0] when given
  std::vector<std::string> warnings;  // e.g. unknown architecture accepted with standard fields

  // --params N: only a parameter count is known; everything architectural is absent and code that
  // needs it must say so (throw UserError naming what is needed).
  bool params_only = false;
  int64_t params_only_count = 0;

  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // == num_heads without GQA; 1 for multi-query (Falcon-7B)
  int64_t head_dim = 0;      // usually hidden/heads; Gemma-2 sets it explicitly
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;

  NormKind norm = NormKind::RMSNorm;
  MlpKind mlp = MlpKind::Gated;
  PositionKind position = PositionKind::Rotary;
  std::string activation = "silu";
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v (and o) biases
  bool qkv_bias_only = false;   // Qwen2: biases on q,k,v but not o
  bool mlp_bias = false;
  bool norm_bias = false;            // LayerNorm with bias
  bool fused_qkv = false;            // one qkv projection (GPT-2 c_attn, BLOOM/Falcon query_key_value)
  bool parallel_attention = false;   // Falcon/GPT-J style: attention and MLP read the same input
  bool extra_norms = false;          // Gemma-2: pre+post norms around attention and MLP
  bool embedding_layernorm = false;  // BLOOM: word_embeddings_layernorm
  int64_t num_experts = 0;           // MoE: num_local_experts (0 = dense)
  int64_t experts_per_token = 0;     // MoE: num_experts_per_tok

  Layout layout = Layout::Llama;
  bool fused_gate_up = false;             // Phi-3: one gate_up_proj [2*intermediate, hidden]
  bool new_decoder_architecture = false;  // Falcon-40B: grouped qkv, ln_attn + ln_mlp
  int64_t position_offset = 0;            // OPT: embed_positions has max_position_embeddings + 2 rows
  int64_t word_embed_proj_dim = 0;        // OPT: embedding width (project_in/out when != hidden)
  bool final_norm = true;                 // OPT with do_layer_norm_before=false has no final norm
  double rotary_pct = 1.0;                // GPT-NeoX: fraction of head_dim that is rotated
  double norm_eps = 0.0;                  // rms_norm_eps / layer_norm_epsilon as given (0 = not given)

  bool is_moe() const { return num_experts > 0; }
  // The layer inventory, in forward order. Throws UserError for params_only models. With tied
  // embeddings there is no "lm_head" group: the output layer reuses the embedding's tensor, which
  // is counted once (as real checkpoints and model.parameters() count it).
  std::vector<LayerInventory> inventory() const;
  // Exact parameter count (the inventory's sum; params_only_count for --params).
  int64_t num_parameters() const;
  // Parameters a token actually touches (MoE: only experts_per_token experts); for FLOPs.
  int64_t active_parameters() const;
};

// Resolves `name_or_path`: an alias ("7b", "13b", "70b"), a zoo name (case-insensitive, e.g.
// "llama-2-13b", "mistral-7b"), or a path to an HF config.json (a folder holding config.json works
// too). Throws UserError with the nearest known name for anything else.
ModelSpec load_model(const std::string& name_or_path);
// Parses an HF config.json object; `origin` names it in messages.
ModelSpec model_from_hf_config(const std::string& origin, const std::string& json_text);
// A model known only by its parameter count (--params).
ModelSpec model_from_param_count(int64_t n);

struct ZooEntry {
  std::string name;                  // "llama-2-13b"
  std::vector<std::string> aliases;  // {"13b"}
  std::string source;                // where the config.json came from (HF repo id)
  int64_t published_parameters = 0;  // published exact count, 0 where none is cited
  std::string citation;              // where published_parameters comes from
};
std::vector<ZooEntry> zoo();

// LoRA (PEFT LoraConfig semantics): every nn.Linear whose module name is in `targets` gets
// A [r, in] and B [out, r]; an nn.Embedding gets A [r, rows] and B [dim, r]. Empty targets (or
// "all-linear") = every linear layer except the output layer (PEFT's "all-linear", which excludes
// lm_head); for the zoo's models these are exactly the decoder layers' projections (with the MoE
// router gate). A target that is no module of the model is a UserError listing its linear modules.
// Returns the number of trainable LoRA parameters.
int64_t lora_trainable_parameters(const ModelSpec& m, int64_t rank, const std::vector<std::string>& targets);

}  // namespace zeroplan::models
