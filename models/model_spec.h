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
// NoPE: no position encoding at all (GraniteMoeHybridConfig position_embedding_type "nope" or None: no
// rotary_emb is built).
enum class PositionKind { Rotary, Learned, Alibi, NoPE };
// Which HF module tree a checkpoint uses: it decides parameter names, fused projections and which
// norms exist. Llama covers every "model.layers.N.self_attn / mlp" family (Llama, Mistral, Mixtral,
// Qwen2/3 and their MoE, DeepSeek-V2/V3, gpt-oss, Llama-4 text, Gemma 1-3, OLMo-2, OLMoE, Granite,
// GLM-4, Starcoder2, Cohere) and unknown Llama-style configs; the fields below pick the variant.
enum class Layout {
  Llama,
  Phi3,
  Phi,
  GPT2,
  OPT,
  Bloom,
  Falcon,
  GPTNeoX
};  // Phi: Phi-1/1.5/2 (model_type phi)
// Where a Llama-layout decoder layer has its norms (names as in the HF modeling files).
enum class NormPlacement {
  Pre,       // input_layernorm + post_attention_layernorm (Llama)
  Parallel,  // input_layernorm only; attention and MLP read the same input (Cohere)
  PostOnly,  // post_attention_layernorm + post_feedforward_layernorm (OLMo-2)
  Sandwich,  // Pre + pre_feedforward_layernorm + post_feedforward_layernorm (Gemma-2/3)
  Glm4,      // Pre + post_self_attn_layernorm + post_mlp_layernorm (GLM-4)
};
// Query/key normalisation weights inside the attention block.
enum class QkNorm {
  None,
  PerHead,     // q_norm, k_norm: RMSNorm(head_dim), shared by the heads (Qwen3, Gemma-3)
  FullWidth,   // q_norm: RMSNorm(heads*head_dim), k_norm: RMSNorm(kv_heads*head_dim) (OLMo-2, OLMoE)
  HeadMatrix,  // q_norm: LayerNorm([heads, head_dim]), k_norm: [kv_heads, head_dim] (Cohere use_qk_norm)
  PhiPerHead,  // q_layernorm, k_layernorm: nn.LayerNorm(head_dim) with bias (Phi qk_layernorm)
};
// How a MoE block's experts are stored (names as in the Hub checkpoints).
enum class MoeStyle {
  None,
  Mixtral,      // block_sparse_moe.gate, block_sparse_moe.experts.E.w1/w2/w3 (2-D per expert)
  PerExpert,    // mlp.gate, mlp.experts.E.gate_proj/up_proj/down_proj (Qwen-MoE, OLMoE, DeepSeek)
  FusedGptOss,  // mlp.router (+bias), mlp.experts.gate_up_proj [E, h, 2f] (+bias), down_proj [E, f, h]
  FusedLlama4,  // feed_forward.router, feed_forward.experts.gate_up_proj [E, h, 2f], down_proj [E, f, h]
};

// What a decoder layer mixes tokens with (Qwen3-Next's `layer_types`: "full_attention" or
// "linear_attention"; transformers 5.24 models/qwen3_next/modeling_qwen3_next.py Qwen3NextDecoderLayer
// builds self_attn or linear_attn accordingly).
enum class LayerKind {
  Attention,      // softmax attention (every family's self_attn)
  GatedDeltaNet,  // Qwen3NextGatedDeltaNet (linear_attn): in_proj_qkvz, in_proj_ba, conv1d, dt_bias,
                  // A_log, norm (gated RMSNorm of a value head), out_proj
  Mamba2,         // GraniteMoeHybridMambaLayer (mamba): in_proj, conv1d (+bias), dt_bias, A_log, D, norm
                  // (gated RMSNorm over groups), out_proj
};

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
  bool frozen = false;  // requires_grad False (ERNIE-4.5-MoE's gate.moe_statics.e_score_correction_bias)
  std::string dtype{};  // safetensors dtype ("BF16", "F32", "U8", ...) when read from a checkpoint
  // Part of a vision-language model's vision tower or projector (models/vision_tower.h): zeroplan's LoRA
  // adapters go on the language tower only, and the tower runs only on images.
  bool vision = false;
  int64_t numel() const;
};

// A group of tensors that DeepSpeed stage 3 gathers together (one nn.Module subtree): the embedding,
// each decoder layer, the final norm, the LM head.
struct LayerInventory {
  std::string name;  // "embed", "layers.0", ..., "final_norm", "lm_head"
  bool is_decoder_layer = false;
  std::vector<TensorSpec> tensors;
  int64_t numel() const;
  // Set by ModelSpec::runtime_inventory() for a decoder layer with a MoE block (empty otherwise):
  // the block's module path ("model.layers.1.mlp"), its transformers class as DeepSpeed's
  // leaf_module `classes` name it ("transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock"),
  // and the block's parameter-owning modules in the order its forward calls them.
  std::string moe_block;
  std::string moe_block_class;
  std::vector<std::string> moe_exec;
};

// A vision tower's image arithmetic (models/vision_tower.cpp): patches of `patch` pixels; `fixed_image` > 0
// for towers that take one square size (SigLIP, CLIP: the processor resizes), 0 for the Qwen towers' dynamic
// resolution (the image rounded to multiples of patch x merge, Qwen2VLImageProcessor smart_resize);
// `merge` x `merge` patches make one token (the Qwen mergers; 1 otherwise); `tokens_per_image` fixed for
// the SigLIP/CLIP wrappers; `extra_patches` the CLS token CLIP adds. `supported` false where images are
// not modelled (LLaVA-NeXT's any-resolution tiling).
struct VisionGeometry {
  int64_t patch = 0, merge = 1, fixed_image = 0, tokens_per_image = 0, extra_patches = 0;
  bool supported = false;
  // Patches the tower runs for one image of h x w pixels, and the tokens it yields in the text.
  int64_t patches(int64_t h, int64_t w) const;
  int64_t tokens(int64_t h, int64_t w) const;
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
  // The KV heads attention runs with: num_kv_heads, or num_heads when the config gives none (multi-head
  // attention; transformers' `num_key_value_heads` defaults to `num_attention_heads`).
  int64_t kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  // The width of one head: head_dim, or hidden_size / num_heads when the config gives none (transformers'
  // default `head_dim = hidden_size // num_attention_heads`).
  int64_t head_width() const {
    return head_dim > 0 ? head_dim : hidden_size / (num_heads > 0 ? num_heads : int64_t{1});
  }
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
  // The norms hold a weight (and a bias with norm_bias). False: OLMo-1's OlmoLayerNorm, a LayerNorm with
  // no learnable weight or bias (transformers 5.24 models/olmo/modeling_olmo.py OlmoLayerNorm).
  bool norm_params = true;
  bool fused_qkv = false;            // one qkv projection (GPT-2 c_attn, BLOOM/Falcon query_key_value)
  bool parallel_attention = false;   // Falcon/GPT-J style: attention and MLP read the same input
  bool extra_norms = false;          // Gemma-2: pre+post norms around attention and MLP
  bool embedding_layernorm = false;  // BLOOM: word_embeddings_layernorm
  int64_t num_experts = 0;           // MoE: routed experts per MoE layer (0 = dense)
  int64_t experts_per_token = 0;     // MoE: routed experts each token goes to (top-k)

  // MoE details. `intermediate_size` is the dense MLP's width (dense layers of a MoE model too).
  MoeStyle moe_style = MoeStyle::None;
  int64_t moe_intermediate_size = 0;  // one routed expert's width (Mixtral, OLMoE: intermediate_size)
  int64_t num_shared_experts = 0;     // experts every token goes to (DeepSeek n_shared_experts; 1 for
                                      // Qwen2-MoE's and Llama-4's shared_expert)
  int64_t shared_expert_intermediate_size = 0;  // width of the one shared-expert MLP holding them all
  bool shared_expert_gate = false;              // Qwen2-MoE: mlp.shared_expert_gate Linear(h, 1)
  bool router_bias = false;                     // gpt-oss: mlp.router has a bias
  // Qwen2/3-MoE norm_topk_prob (Qwen2MoeConfig / Qwen3MoeConfig default False): the top-k routing
  // weights are divided by their sum; Mixtral always does so (MixtralTopKRouter), whatever this says.
  bool norm_topk_prob = false;
  bool router_score_bias_param = false;  // ERNIE-4.5-MoE: the router's e_score_correction_bias [1, E]
                                         // is a frozen nn.Parameter (requires_grad False), not a buffer
  bool router_score_bias = false;        // DeepSeek-V3 gate.e_score_correction_bias: a buffer, not a
                                         // parameter (no gradient, not in model.parameters())
  std::vector<bool> moe_layers;          // per decoder layer: MoE or dense MLP (empty: all MoE if is_moe())

  // Per decoder layer: its token mixer (empty: every layer softmax attention).
  std::vector<LayerKind> layer_kinds;
  // Gated DeltaNet layers (Qwen3NextConfig linear_*; the same names in every GDN family's config):
  // key/value heads and their widths, and the depthwise causal convolution's kernel length.
  int64_t linear_num_key_heads = 0, linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0, linear_value_head_dim = 0, linear_conv_kernel_dim = 0;
  // Mamba-2 layers (GraniteMoeHybridConfig mamba_*): heads of mamba_d_head, the SSM state size, B/C
  // groups, the convolution's kernel, the chunk of the chunked scan, the inner width (mamba_expand x
  // hidden), and whether the convolution and the projections carry biases.
  int64_t mamba_n_heads = 0, mamba_d_head = 0, mamba_d_state = 0, mamba_n_groups = 1;
  int64_t mamba_d_conv = 4, mamba_chunk_size = 256, mamba_intermediate = 0;
  bool mamba_conv_bias = true, mamba_proj_bias = false;
  int64_t mamba_conv_dim() const { return mamba_intermediate + 2 * mamba_n_groups * mamba_d_state; }
  // Qwen3-Next's gated attention: q_proj produces the queries and as many sigmoid output-gate values
  // (Linear(h, heads * head_dim * 2), Qwen3NextAttention.forward: `attn_output * sigmoid(gate)`).
  bool gated_attention = false;
  LayerKind layer_kind(int64_t i) const {
    return layer_kinds.empty() ? LayerKind::Attention : layer_kinds[static_cast<size_t>(i)];
  }
  // Some decoder layer is not softmax attention (a Gated DeltaNet or a Mamba-2 layer).
  bool has_linear_attention() const;
  // The decoder layers of one kind.
  int64_t layers_of_kind(LayerKind k) const;

  // Multi-head latent attention (DeepSeek-V2/V3): q_lora_rank 0 means a plain q_proj.
  bool mla = false;
  int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_rope_head_dim = 0, qk_nope_head_dim = 0, v_head_dim = 0;

  NormPlacement norm_placement = NormPlacement::Pre;
  QkNorm qk_norm = QkNorm::None;
  bool attention_sinks = false;  // gpt-oss: self_attn.sinks, one learned logit per head
  bool mlp_c_names = false;      // Starcoder2: plain MLP named mlp.c_fc / mlp.c_proj
  bool lm_head_bias = false;     // Phi-1/2: lm_head Linear(bias=True)
  // The lm_head's output rows when they differ from vocab_size: one AutoTP rank's vocabulary shard
  // (planner/tensor_parallel.h). 0 = vocab_size.
  int64_t lm_head_rows = 0;
  std::string text_config_of;    // vision-language wrapper whose text_config this is ("gemma3", ...)
  // The wrapper's vision tower and projector, every tensor in the wrapper's registration order (models/
  // vision_tower.h), for the wrappers zeroplan counts; empty otherwise. Not part of inventory(), which is
  // the language tower the counts per family are checked on: the planner adds these (planner/vision.h).
  std::vector<LayerInventory> vision_groups;
  std::string vision_tower;  // the tower's model type ("siglip_vision_model", "qwen2_5_vl_vision", ...)
  // How images become patches and tokens (models/vision_tower.h VisionGeometry).
  VisionGeometry vision_geometry;
  int64_t vision_parameters() const;

  Layout layout = Layout::Llama;
  bool fused_gate_up = false;             // Phi-3: one gate_up_proj [2*intermediate, hidden]
  bool new_decoder_architecture = false;  // Falcon-40B: grouped qkv, ln_attn + ln_mlp
  int64_t position_offset = 0;            // OPT: embed_positions has max_position_embeddings + 2 rows
  int64_t word_embed_proj_dim = 0;        // OPT: embedding width (project_in/out when != hidden)
  bool final_norm = true;                 // OPT with do_layer_norm_before=false has no final norm
  double rotary_pct = 1.0;                // GPT-NeoX: fraction of head_dim that is rotated
  double norm_eps = 0.0;                  // rms_norm_eps / layer_norm_epsilon as given (0 = not given)
  // Dropout probabilities as the config gives them (GPT-2 resid_pdrop/attn_pdrop/embd_pdrop, OPT
  // dropout/attention_dropout); -1 = the config names none, and the planner keeps Korthikanti's
  // GPT-style assumption (dropout after attention, MLP and embedding) for LayerNorm + plain-MLP layers.
  // A probability of 0 saves no mask (ATen Dropout.cpp dropout/_dropout_impl return the input).
  double resid_dropout = -1.0, attn_dropout = -1.0, embd_dropout = -1.0;
  // Gemma-2 tanh soft-capping (Gemma2Config attn_logit_softcapping / final_logit_softcapping; 0 = none).
  double attn_logit_softcapping = 0.0, final_logit_softcapping = 0.0;

  // --model DIR with *.safetensors: the checkpoint's own tensors (headers only), which inventory()
  // then returns instead of the one derived from the config's fields. Quantized checkpoints keep their
  // stored dtypes and element counts (packed 4-bit blocks count as the U8 elements they are stored as).
  std::vector<LayerInventory> checkpoint_tensors;
  std::string checkpoint_dir;
  int64_t checkpoint_bytes = 0;  // sum of the tensors' stored bytes (data_offsets)
  bool from_checkpoint() const { return !checkpoint_tensors.empty(); }

  bool is_moe() const { return num_experts > 0; }
  // Decoder layer i has a routed-expert block (MoE models with dense layers: DeepSeek's first
  // first_k_dense_replace layers, Qwen-MoE's mlp_only_layers, Llama-4 Maverick's interleaving).
  bool is_moe_layer(int64_t i) const {
    return is_moe() && (moe_layers.empty() || moe_layers[static_cast<size_t>(i)]);
  }
  int64_t num_moe_layers() const;
  // Width of the MLP activations one token produces in a MoE layer: experts_per_token routed experts
  // of moe_intermediate_size plus the shared experts' MLP; intermediate_size for dense models.
  int64_t active_mlp_width() const {
    if (!is_moe()) return intermediate_size;
    return experts_per_token * (moe_intermediate_size > 0 ? moe_intermediate_size : intermediate_size) +
           shared_expert_intermediate_size;
  }
  // The first decoder layer with routed experts (0 for dense models).
  int64_t first_moe_layer() const {
    for (int64_t i = 0; i < num_layers; ++i)
      if (is_moe_layer(i)) return i;
    return 0;
  }
  // The layer inventory, in forward order. Throws UserError for params_only models. With tied
  // embeddings there is no "lm_head" group: the output layer reuses the embedding's tensor, which
  // is counted once (as real checkpoints and model.parameters() count it).
  std::vector<LayerInventory> inventory() const;
  // The parameters as transformers 5 builds the model at runtime (model.named_parameters(), in that
  // order within a MoE block): the same tensors as inventory() except that a MoE block's routed experts
  // are FUSED into 3-D tensors (experts.gate_up_proj [E, 2f, h], experts.down_proj [E, h, f]) where the
  // Hub checkpoints store per-expert 2-D weights (models/runtime_inventory.cpp cites the modeling
  // files). Same parameter count. What DeepSpeed partitions, persists and gathers at stage 3; LoRA
  // targets and safetensors keep inventory()'s checkpoint names.
  std::vector<LayerInventory> runtime_inventory() const;
  // Exact parameter count (the inventory's sum; params_only_count for --params).
  int64_t num_parameters() const;
  // Parameters the model itself builds with requires_grad False (ERNIE-4.5-MoE's correction biases):
  // full fine-tuning trains num_parameters() minus these.
  int64_t num_frozen_parameters() const;
  // Parameters a token actually touches, for FLOPs: everything except the routed experts it is not
  // sent to, i.e. total - sum over MoE layers of (E - k)/E of that layer's routed-expert parameters.
  // Attention, dense layers, norms, routers, shared experts and the embeddings and head all count
  // (the convention of Mixtral's "12.9B active" and Qwen3-30B-A3B's "3.3B activated").
  int64_t active_parameters() const;
};

// Resolves `name_or_path`: an alias ("7b", "13b", "70b"), a zoo name (case-insensitive, e.g.
// "llama-2-13b", "mistral-7b"), or a path to an HF config.json (a folder holding config.json works
// too; a folder that also holds *.safetensors files gets the checkpoint's exact tensor inventory,
// see read_safetensors_folder). Throws UserError with the nearest known name for anything else.
ModelSpec load_model(const std::string& name_or_path);
// Parses an HF config.json object; `origin` names it in messages.
ModelSpec model_from_hf_config(const std::string& origin, const std::string& json_text);
// Reads the JSON header of every *.safetensors file in `dir` (8-byte little-endian header length,
// then the JSON; no tensor data is read) into `m.checkpoint_tensors`, grouped like inventory():
// "embed", "layers.<i>", "final_norm", "lm_head" (anything else goes to "other"). When `m` was read
// from the folder's config.json, every disagreement between the two is added to m.warnings.
void read_safetensors_folder(const std::string& dir, ModelSpec& m);
// A routed expert's tensor (not a shared expert's): "...experts.<e>..." per expert, the fused
// "...experts.gate_up_proj" [E, ...], or GraniteMoe's fused checkpoint tensors
// "...block_sparse_moe.input_linear.weight" / "output_linear.weight" (transformers 5.24
// conversion_mapping.py renames them to experts.gate_up_proj / experts.down_proj).
bool is_routed_expert_tensor(const std::string& name);
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
