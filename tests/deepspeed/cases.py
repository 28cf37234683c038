"""Configurations the DeepSpeed conformance harness records, as data.

Each case is a plain dict: the HF model config it builds (tiny, no downloads), the exact ds_config
passed to deepspeed.initialize, world size, micro-batch, sequence length, gradient accumulation,
gradient checkpointing, attention implementation and LoRA. CASES maps name -> case; the order of
CASES is the recording priority (run_matrix.py records in this order).

Model sizes: hidden 256 / intermediate 512 / vocab 2048, 2 layers, so that the decoder linears
(65,536 .. 131,072 elements) straddle DeepSpeed's stage-3 default persistence threshold
(stage3_param_persistence_threshold = 1e5 elements, deepspeed/runtime/zero/config.py) and a
50,000-element reduce bucket splits the gradients into many flushes, while a step still runs in
seconds on one CPU core.
"""
import copy

VOCAB = 2048

FAMILIES = {
    # Llama with grouped-query attention (4 query heads share 2 KV heads), untied embeddings.
    "llama-gqa": {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
                  "max_position_embeddings": 256, "tie_word_embeddings": False, "rms_norm_eps": 1e-5},
    # GPT-2: tied embeddings, biases, learned positions, Conv1D projections.
    "gpt2": {"model_type": "gpt2", "n_embd": 256, "n_layer": 2, "n_head": 4, "n_positions": 256,
             "vocab_size": VOCAB, "n_inner": 1024, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
             "tie_word_embeddings": True},
    # Qwen3-MoE: 4 experts (moe_intermediate 128), top-2, q/k norms, decoder_sparse_step 1.
    "qwen3_moe": {"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512,
                  "moe_intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "head_dim": 64, "vocab_size": VOCAB, "max_position_embeddings": 256,
                  "num_experts": 4, "num_experts_per_tok": 2, "decoder_sparse_step": 1,
                  "router_aux_loss_coef": 0.0, "tie_word_embeddings": False},
    # Llama with 4 KV heads (multi-head attention): llama-gqa with num_key_value_heads 4 (the AutoTP set's TP 4 case,
    # docs/conformance-tp.md).
    "llama-mha": {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": VOCAB,
                  "max_position_embeddings": 256, "tie_word_embeddings": False, "rms_norm_eps": 1e-5},
    # llama-gqa with tied input/output embeddings (the AutoTP set, docs/conformance-tp.md).
    "llama-tied": {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
                   "max_position_embeddings": 256, "tie_word_embeddings": True, "rms_norm_eps": 1e-5},
    # dense Qwen3: per-head q_norm / k_norm, which its HF tp_plan marks replicated_with_grad_allreduce (AutoTP)
    "qwen3": {"model_type": "qwen3", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": VOCAB,
              "max_position_embeddings": 256, "tie_word_embeddings": False, "rms_norm_eps": 1e-6},
    # Qwen2: q/k/v biases, GQA.
    "qwen2": {"model_type": "qwen2", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
              "max_position_embeddings": 256, "tie_word_embeddings": False},
    # Mistral: GQA, sliding window larger than the sequence (no effect on the bytes at s=64).
    "mistral": {"model_type": "mistral", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
                "max_position_embeddings": 256, "sliding_window": 128, "tie_word_embeddings": False},
    # Gemma-2: head_dim 64 given, tied embeddings, pre/post feed-forward norms, sliding window > seq.
    "gemma2": {"model_type": "gemma2", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": VOCAB,
               "max_position_embeddings": 256, "sliding_window": 128, "query_pre_attn_scalar": 64},
    # Phi-3: fused qkv_proj and gate_up_proj (pad/bos/eos ids moved inside the small vocabulary).
    "phi3": {"model_type": "phi3", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
             "max_position_embeddings": 256, "tie_word_embeddings": False, "pad_token_id": 0,
             "bos_token_id": 1, "eos_token_id": 2},
    # OPT: LayerNorm, ReLU fc1/fc2 with biases, learned positions (offset 2), tied embeddings, no dropout.
    "opt": {"model_type": "opt", "hidden_size": 256, "ffn_dim": 1024, "num_hidden_layers": 2,
            "num_attention_heads": 4, "vocab_size": VOCAB, "max_position_embeddings": 256,
            "word_embed_proj_dim": 256, "dropout": 0.0, "attention_dropout": 0.0},
    # DeepSeek-V3: MLA (q_lora_rank, kv_lora_rank, rope/nope head dims), first layer dense, then MoE with
    # 4 routed experts (top-2) + 1 shared expert.
    "deepseek_v3": {"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 512,
                    "moe_intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                    "num_key_value_heads": 4, "n_routed_experts": 4, "n_shared_experts": 1,
                    "num_experts_per_tok": 2, "first_k_dense_replace": 1, "q_lora_rank": 64,
                    "kv_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32, "v_head_dim": 32,
                    "n_group": 1, "topk_group": 1, "vocab_size": VOCAB, "max_position_embeddings": 256,
                    "tie_word_embeddings": False},
    # Gemma-3 text (Gemma3ForCausalLM): per-head q/k norms, four norms per layer, tied embeddings,
    # head_dim 64 given; both layers sliding (Gemma3TextConfig's default pattern makes every 6th layer
    # global) with a window larger than the sequence (no effect on the bytes at s=64).
    "gemma3": {"model_type": "gemma3_text", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": VOCAB,
               "max_position_embeddings": 256, "sliding_window": 128, "query_pre_attn_scalar": 64},
    # GLM-4.5 (glm4_moe): q/k/v biases, per-head q/k norms, partial rotary, first layer dense, then
    # 4 routed experts (top-2, sigmoid router with a correction-bias buffer) + 1 shared expert.
    "glm4_moe": {"model_type": "glm4_moe", "hidden_size": 256, "intermediate_size": 512,
                 "moe_intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "head_dim": 64, "n_routed_experts": 4, "n_shared_experts": 1,
                 "num_experts_per_tok": 2, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
                 "use_qk_norm": True, "attention_bias": True, "partial_rotary_factor": 0.5,
                 "vocab_size": VOCAB, "max_position_embeddings": 256, "tie_word_embeddings": False},
    # Seed-OSS: q/k/v biases, head_dim 64 given, residual dropout 0.1 (its default) after o_proj and
    # down_proj. attention_dropout is set to 0 (its default is 0.1): with dropout, CPU SDPA leaves its
    # flash kernel for the math path (sdp_utils_cpp.cpp check_for_dropout), which saves the scores,
    # where the CUDA flash kernel users run draws the mask inside the kernel.
    "seed_oss": {"model_type": "seed_oss", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": VOCAB,
                 "max_position_embeddings": 256, "tie_word_embeddings": False, "attention_dropout": 0.0},
    # OLMo-3: OLMo-2's post-norms and full-width q/k norms; sliding window larger than the sequence.
    "olmo3": {"model_type": "olmo3", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
              "max_position_embeddings": 256, "sliding_window": 128, "tie_word_embeddings": False,
              "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    # EXAONE-4: post-norms, per-head q/k norms, sliding window larger than the sequence.
    "exaone4": {"model_type": "exaone4", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
                "max_position_embeddings": 256, "sliding_window": 128, "tie_word_embeddings": False,
                "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    # PhiMoE: LayerNorm with biases, 4 experts with sparsemixer top-2 routing.
    "phimoe": {"model_type": "phimoe", "hidden_size": 256, "intermediate_size": 256, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
               "max_position_embeddings": 256, "num_local_experts": 4, "num_experts_per_tok": 2,
               "tie_word_embeddings": False, "router_aux_loss_coef": 0.0, "pad_token_id": 0,
               "bos_token_id": 1, "eos_token_id": 2},
    # MiniMax-M2: full-width q/k norms, head_dim 64 given, partial rotary (rotary_dim 32), 4 experts top-2.
    "minimax_m2": {"model_type": "minimax_m2", "hidden_size": 256, "intermediate_size": 128,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                   "rotary_dim": 32, "vocab_size": VOCAB, "max_position_embeddings": 256,
                   "num_local_experts": 4, "num_experts_per_tok": 2, "tie_word_embeddings": False,
                   "router_aux_loss_coef": 0.0, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    # SmolLM3: GQA, tied embeddings, NoPE on every 4th layer (no_rope_layer_interval 2 here: layer 1
    # has no rotary).
    "smollm3": {"model_type": "smollm3", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
                "max_position_embeddings": 256, "no_rope_layer_interval": 2, "pad_token_id": 0,
                "bos_token_id": 1, "eos_token_id": 2},
    # Arcee (AFM): a plain up/down MLP with relu^2.
    "arcee": {"model_type": "arcee", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
              "max_position_embeddings": 256, "tie_word_embeddings": False, "pad_token_id": 0,
              "bos_token_id": 1, "eos_token_id": 2},
    # dots.llm1 (dots1): per-head q/k norms, q/k/v/o biases, first layer dense, then 4 routed experts
    # (top-2, fp32 sigmoid router with a correction-bias buffer) + 2 shared experts.
    "dots1": {"model_type": "dots1", "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 128,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
              "n_routed_experts": 4, "n_shared_experts": 2, "num_experts_per_tok": 2,
              "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "attention_bias": True,
              "vocab_size": VOCAB, "max_position_embeddings": 256, "tie_word_embeddings": False,
              "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    # ERNIE-4.5 (dense): use_bias on every projection, head_dim 64 given, tied embeddings, interleaved
    # rotary computed in fp32.
    "ernie4_5": {"model_type": "ernie4_5", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "use_bias": True,
                 "vocab_size": VOCAB, "max_position_embeddings": 256, "pad_token_id": 0, "bos_token_id": 1,
                 "eos_token_id": 2},
    # ERNIE-4.5-MoE (ernie4_5_moe): layer 0 dense, layer 1 MoE (moe_layer_start_index 1), 4 routed experts
    # (top-2; fp32 softmax router whose correction bias is a frozen parameter) + 2 shared experts; use_bias
    # puts biases on q/k/v/o, the dense and shared MLPs and the (untied here) lm_head.
    "ernie4_5_moe": {"model_type": "ernie4_5_moe", "hidden_size": 256, "intermediate_size": 512,
                     "moe_intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                     "num_key_value_heads": 2, "moe_num_experts": 4, "moe_k": 2, "moe_num_shared_experts": 2,
                     "moe_layer_start_index": 1, "use_bias": True, "tie_word_embeddings": False,
                     "vocab_size": VOCAB, "max_position_embeddings": 256, "pad_token_id": 0, "bos_token_id": 1,
                     "eos_token_id": 2},
    # HunYuan MoE (hunyuan_v1_moe): every layer a MoE of 4 experts as wide as intermediate_size (top-2, router
    # mlp.gate.wg declared fp32) + one shared_mlp; per-head query/key layernorms after the rotary; head_dim
    # must be given.
    "hunyuan_v1_moe": {"model_type": "hunyuan_v1_moe", "hidden_size": 256, "intermediate_size": 128,
                       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                       "num_experts": 4, "moe_topk": 2, "vocab_size": VOCAB, "max_position_embeddings": 256,
                       "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    # Apertus: plain up/down MLP with xIELU (two trainable scalars per layer, Python path on CPU), per-head
    # q/k norms after the three projections, attention_layernorm / feedforward_layernorm.
    "apertus": {"model_type": "apertus", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
                "max_position_embeddings": 256, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    # HunYuan dense (hunyuan_v1_dense): per-head query/key layernorms applied after the rotary
    # embedding; head_dim must be given (the class default None builds no model).
    "hunyuan_v1_dense": {"model_type": "hunyuan_v1_dense", "hidden_size": 256, "intermediate_size": 512,
                         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                         "head_dim": 64, "vocab_size": VOCAB, "max_position_embeddings": 256,
                         "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    # Qwen3.5 (qwen3_5_text): a hybrid of one Gated DeltaNet layer (linear_attention: 2 key heads of 64, 4 value
    # heads of 32, so the key heads are repeated to the value heads, kernel 4) and one gated softmax-attention
    # layer (q_proj also yields a sigmoid output gate; per-head q/k norms, partial rotary 0.25). On CPU,
    # transformers runs its torch fallbacks (torch_chunk_gated_delta_rule, F.conv1d): no fla, no causal_conv1d.
    "qwen3_5": {"model_type": "qwen3_5_text", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                "layer_types": ["linear_attention", "full_attention"], "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 64, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                "linear_key_head_dim": 64, "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4,
                "vocab_size": VOCAB, "max_position_embeddings": 256, "tie_word_embeddings": False,
                "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
                "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    # Qwen3-Next: the same hybrid with the fused in_proj_qkvz / in_proj_ba and a torch.cat of q, k, v before
    # the convolution, and a MoE in every layer: 4 experts (moe_intermediate 128), top-2, a shared expert
    # (128) with its sigmoid gate.
    "qwen3_next": {"model_type": "qwen3_next", "hidden_size": 256, "intermediate_size": 512,
                   "num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"],
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "linear_num_key_heads": 2,
                   "linear_num_value_heads": 4, "linear_key_head_dim": 64, "linear_value_head_dim": 32,
                   "linear_conv_kernel_dim": 4, "num_experts": 4, "num_experts_per_tok": 2,
                   "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128, "decoder_sparse_step": 1,
                   "norm_topk_prob": True, "vocab_size": VOCAB, "max_position_embeddings": 256,
                   "tie_word_embeddings": False, "router_aux_loss_coef": 0.0, "pad_token_id": 0, "bos_token_id": 1,
                   "eos_token_id": 2},
    # Qwen3.5-MoE's text model (qwen3_5_moe_text): Qwen3.5's layers with Qwen3-Next's MoE block.
    "qwen3_5_moe": {"model_type": "qwen3_5_moe_text", "hidden_size": 256, "num_hidden_layers": 2,
                    "layer_types": ["linear_attention", "full_attention"], "num_attention_heads": 4,
                    "num_key_value_heads": 2, "head_dim": 64, "linear_num_key_heads": 2,
                    "linear_num_value_heads": 4, "linear_key_head_dim": 64, "linear_value_head_dim": 32,
                    "linear_conv_kernel_dim": 4, "num_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128, "vocab_size": VOCAB,
                    "max_position_embeddings": 256, "tie_word_embeddings": False, "router_aux_loss_coef": 0.0,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                        "partial_rotary_factor": 0.25},
                    "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    # Qwen2.5-VL (qwen2_5_vl, issue 29 item 3): a vision-language wrapper, built with AutoModelForImageTextToText
    # (harness.py). Its language tower is Qwen2's layers with multimodal rotary sections (mrope_section sums to
    # head_dim / 2 = 32); its vision tower two Qwen2_5_VLVisionBlocks of width 64 and the patch merger into the
    # text width. Batches are text only (no pixel_values): the tower holds model states but does not run.
    "qwen2_5_vl": {"model_type": "qwen2_5_vl", "tie_word_embeddings": False,
                   "text_config": {"model_type": "qwen2_5_vl_text", "hidden_size": 256, "intermediate_size": 512,
                                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                   "vocab_size": VOCAB, "max_position_embeddings": 256,
                                   "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
                                   "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                                       "mrope_section": [8, 12, 12]}},
                   "vision_config": {"depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 2,
                                     "out_hidden_size": 256, "fullatt_block_indexes": [1]}},
    # Granite-4.0-H (granitemoehybrid): one Mamba-2 layer (8 heads of 64 over an inner width of 512, state 32,
    # one group, kernel 4, 64-token chunks) and one attention layer, no position encoding ("nope"), a dense
    # shared_mlp (num_local_experts 0). On CPU transformers runs the torch references (the chunked scan,
    # F.conv1d): no mamba_ssm, no causal_conv1d.
    "granitemoehybrid": {"model_type": "granitemoehybrid", "hidden_size": 256, "intermediate_size": 512,
                         "shared_intermediate_size": 512, "num_local_experts": 0, "num_hidden_layers": 2,
                         "layer_types": ["mamba", "attention"], "num_attention_heads": 4, "num_key_value_heads": 2,
                         "mamba_n_heads": 8, "mamba_d_head": 64, "mamba_d_state": 32, "mamba_n_groups": 1,
                         "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 64,
                         "position_embedding_type": "nope", "vocab_size": VOCAB, "max_position_embeddings": 256,
                         "tie_word_embeddings": False, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    # The same with a MoE: 4 experts of 128 (top-2) beside a shared_mlp of 256.
    "granitemoehybrid_moe": {"model_type": "granitemoehybrid", "hidden_size": 256, "intermediate_size": 128,
                             "shared_intermediate_size": 256, "num_local_experts": 4, "num_experts_per_tok": 2,
                             "num_hidden_layers": 2, "layer_types": ["mamba", "attention"],
                             "num_attention_heads": 4, "num_key_value_heads": 2, "mamba_n_heads": 8,
                             "mamba_d_head": 64, "mamba_d_state": 32, "mamba_n_groups": 1, "mamba_d_conv": 4,
                             "mamba_expand": 2, "mamba_chunk_size": 64, "position_embedding_type": "nope",
                             "vocab_size": VOCAB, "max_position_embeddings": 256, "tie_word_embeddings": False,
                             "router_aux_loss_coef": 0.0, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    # Mixtral: 4 experts, top-2 routing.
    "mixtral": {"model_type": "mixtral", "hidden_size": 256, "intermediate_size": 256, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
                "max_position_embeddings": 256, "num_local_experts": 4, "num_experts_per_tok": 2,
                "tie_word_embeddings": False, "router_aux_loss_coef": 0.0},
}
# The same with images (make_case images_per_sample / image_size): its special token ids inside the small
# vocabulary (Qwen2_5_VLConfig's defaults, 151655 and up, are outside it); the harness draws the other tokens
# from above them.
FAMILIES["qwen2_5_vl_img"] = dict(FAMILIES["qwen2_5_vl"], image_token_id=5, video_token_id=6,
                                  vision_start_token_id=3, vision_end_token_id=4)

LORA_TARGETS = {
    "llama-gqa": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "qwen2": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "mistral": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "gpt2": ["c_attn", "c_proj", "c_fc"],
    # Every linear of both layer kinds (what PEFT's "all-linear" picks in a Qwen3.5 decoder).
    "qwen3_5": ["q_proj", "k_proj", "v_proj", "o_proj", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a",
                "out_proj", "gate_proj", "up_proj", "down_proj"],
}


def ds_config(stage, precision="bf16", zero=None, grad_accum=1, micro_batch=2, extra=None):
    """The ds_config dict for one case. Optimizer: DeepSpeed's own "AdamW" entry (FusedAdam on the
    CPU accelerator, DeepSpeedCPUAdam with offload_optimizer), as a user's config would name it."""
    cfg = {
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": grad_accum,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8,
                                                  "weight_decay": 0.0}},
        "zero_optimization": {"stage": stage},
        "gradient_clipping": 1.0,
        "steps_per_print": 1000000,
        "wall_clock_breakdown": False,
    }
    if precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif precision == "fp16":
        cfg["fp16"] = {"enabled": True, "initial_scale_power": 8, "loss_scale_window": 1000}
    if zero:
        cfg["zero_optimization"].update(zero)
    if extra:
        for k, v in extra.items():
            cfg[k] = v
    return cfg


def make_case(family="llama-gqa", stage=2, world=2, precision="bf16", zero=None, grad_accum=1, micro_batch=2,
              seq=64, gc=False, attn="sdpa", lora=False, extra=None, tag="default", save=False, sp=1,
              position_ids=False, sp_loss=None, tiled_mlp_shards=0, tp=0, freeze_vision=False,
              images_per_sample=0, image_size=None):
    """sp > 1: Ulysses sequence parallelism (ds_config "sequence_parallel_size", harness.py
    rank_main_sp_setup); seq is the global sequence, each rank gets seq/sp tokens. position_ids: pass
    explicit position ids of shape (micro_batch, seq) as an SP data collator does (SP cases always do).
    sp_loss: how the shard losses are combined over the SP group (harness.py _SPLoss; default all_reduce).
    tiled_mlp_shards > 0: DeepSpeed's TiledMLP (ulysses_sp.py) with that fixed shard count, patched into
    LlamaMLP.forward before the model is built (harness.py install_tiled_mlp); the name gets the suffix
    _tiledmlp<N> (in place of the tag "default").
    freeze_vision: a vision-language family's vision tower and projector frozen (requires_grad False) before
    deepspeed.initialize, as LLaMA-Factory's freeze_vision_tower / freeze_multi_modal_projector do.
    images_per_sample > 0: a vision-language family's batches carry that many images of image_size [h, w] pixels per
    sample (random pixel_values, image_grid_thw, their placeholder tokens from the start of each sample, labels -100
    there; harness.py vl_batch).
    tp > 0: DeepSpeed AutoTP training (ds_config "tensor_parallel": {"autotp_size": tp}, harness.py); tp 1 leaves the
    ds_config without it (a TP 1 comparison case of the AutoTP set) but records the tensor_parallel block."""
    if tiled_mlp_shards:
        tag = f"tiledmlp{tiled_mlp_shards}" if tag == "default" else f"{tag}_tiledmlp{tiled_mlp_shards}"
    name = f"{family}_s{stage}_n{world}_{precision}_{tag}"
    lora_cfg = None
    if lora:
        lora_cfg = {"r": 8, "lora_alpha": 16, "target_modules": LORA_TARGETS[family], "lora_dropout": 0.0}
    if sp > 1:
        extra = dict(extra or {}, sequence_parallel_size=sp)
    extra_keys = {}
    if sp > 1:
        extra_keys["sequence_parallel_size"] = sp
    if position_ids or sp > 1:
        extra_keys["position_ids"] = True
    if sp_loss:
        extra_keys["sp_loss"] = sp_loss
    if tiled_mlp_shards:
        extra_keys["tiled_mlp_shards"] = tiled_mlp_shards
    if tp > 1:
        extra = dict(extra or {}, tensor_parallel={"autotp_size": tp})
    if tp:
        extra_keys["autotp_size"] = tp
    if freeze_vision:
        extra_keys["freeze_vision"] = True
    if images_per_sample:
        extra_keys["images_per_sample"] = images_per_sample
        extra_keys["image_size"] = list(image_size)
    return name, dict({
        "name": name,
        "family": family,
        "hf_config": copy.deepcopy(FAMILIES[family]),
        "ds_config": ds_config(stage, precision, zero, grad_accum, micro_batch, extra),
        "world_size": world,
        "micro_batch": micro_batch,
        "seq_len": seq,
        "grad_accum": grad_accum,
        "gradient_checkpointing": gc,
        "attn_implementation": attn,
        "lora": lora_cfg,
        "save": save,
    }, **extra_keys)


def _build():
    out = []
    add = lambda **kw: out.append(make_case(**kw))
    # 1. The basics: stages 0-3 x N in {1, 2, 4}, bf16 defaults (DeepSpeed 0.19 default grad_accum_dtype).
    for world in (2, 4, 1):
        for stage in (0, 1, 2, 3):
            add(stage=stage, world=world)
    # 2. grad_accum_dtype fp32 (BF16_Optimizer path) at stages 0-2.
    for world in (2, 4, 1):
        for stage in (0, 1, 2):
            add(stage=stage, world=world, extra={"data_types": {"grad_accum_dtype": "fp32"}}, tag="gaccfp32")
    # 3. fp32 training.
    for world in (2, 4):
        for stage in (0, 1, 2, 3):
            add(stage=stage, world=world, precision="fp32")
    # 4. Bucketing and overlap knobs.
    for stage in (1, 2, 3):
        add(stage=stage, world=2, zero={"reduce_bucket_size": 50000}, tag="rbs50k")
    for stage in (1, 2):
        add(stage=stage, world=2, zero={"overlap_comm": True}, tag="overlap")
        add(stage=stage, world=2, zero={"overlap_comm": False}, tag="nooverlap")
        add(stage=stage, world=2, zero={"contiguous_gradients": False}, tag="nocontig")
        add(stage=stage, world=2, zero={"allgather_bucket_size": 50000}, tag="agbs50k")
    # DeepSpeed 0.19's stage-1/2 default (use_multi_rank_bucket_allreduce=True) all-reduces the whole
    # bucket; off, each gradient slice is reduced to its owner rank; reduce_scatter=False all-reduces.
    for world in (2, 4):
        add(stage=2, world=world, zero={"use_multi_rank_bucket_allreduce": False}, tag="nomultirank")
    add(stage=1, world=4, zero={"use_multi_rank_bucket_allreduce": False}, tag="nomultirank")
    add(stage=2, world=4, zero={"use_multi_rank_bucket_allreduce": False, "reduce_bucket_size": 50000},
        tag="nomultirank_rbs50k")
    add(stage=2, world=2, zero={"reduce_scatter": False}, tag="noreducescatter")
    add(stage=3, world=2, zero={"overlap_comm": False}, tag="nooverlap")
    add(stage=3, world=2, zero={"contiguous_gradients": False}, tag="nocontig")
    # 5. Stage-3 knobs.
    add(stage=3, world=2, zero={"stage3_param_persistence_threshold": 0}, tag="persist0")
    add(stage=3, world=4, zero={"stage3_param_persistence_threshold": 0}, tag="persist0")
    add(stage=3, world=2, zero={"stage3_prefetch_bucket_size": 0}, tag="prefetch0")
    add(stage=3, world=2, zero={"stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 0},
        tag="persist0_prefetch0")
    add(stage=3, world=2, zero={"stage3_max_live_parameters": 100000, "stage3_max_reuse_distance": 100000},
        tag="maxlive100k")
    add(stage=3, world=2, zero={"sub_group_size": 100000}, tag="subgroup100k")
    add(stage=3, world=2, zero={"stage3_param_persistence_threshold": 0, "reduce_bucket_size": 50000}, tag="persist0_rbs50k")
    add(stage=3, world=2, zero={"stage3_module_granularity_threshold": 100000}, tag="modgran100k")
    # 6. Gradient accumulation, checkpointing, attention.
    for stage in (0, 1, 2, 3):
        add(stage=stage, world=2, grad_accum=2, tag="ga2")
    for stage in (0, 2, 3):
        add(stage=stage, world=2, gc=True, tag="gc")
    for stage in (0, 2, 3):
        add(stage=stage, world=2, attn="eager", tag="eager")
    add(stage=2, world=2, attn="eager", gc=True, tag="eager_gc")
    # 7. LoRA at every stage.
    for stage in (0, 1, 2, 3):
        add(stage=stage, world=2, lora=True, tag="lora")
    add(stage=3, world=4, lora=True, tag="lora")
    add(stage=2, world=2, lora=True, gc=True, tag="lora_gc")
    # 8. Other families.
    for fam in ("gpt2", "qwen2", "mistral"):
        for stage in (0, 1, 2, 3):
            add(family=fam, stage=stage, world=2)
    for fam in ("gpt2", "qwen2"):
        add(family=fam, stage=2, world=2, lora=True, tag="lora")
    # 9. Offload (DeepSpeedCPUAdam is JIT-built on first use).
    for stage in (1, 2, 3):
        add(stage=stage, world=2, zero={"offload_optimizer": {"device": "cpu"}}, tag="offloadopt")
    add(stage=3, world=2, zero={"offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}},
        tag="offloadall")
    # 10. fp16 (only where the CPU accelerator allows it; see harness notes).
    for stage in (0, 1, 2, 3):
        add(stage=stage, world=2, precision="fp16")
    # 11. MoE.
    for stage in (0, 2):
        add(family="mixtral", stage=stage, world=2)
    # 12. More breadth: N=4 for the other families and knobs, batch/sequence scaling, leaf modules, MoE at stage 3.
    for fam in ("gpt2", "qwen2", "mistral"):
        add(family=fam, stage=3, world=4)
    add(family="gpt2", stage=1, world=4)
    add(stage=3, world=4, zero={"reduce_bucket_size": 50000}, tag="rbs50k")
    add(stage=3, world=4, grad_accum=2, tag="ga2")
    add(stage=1, world=2, gc=True, tag="gc")
    add(stage=2, world=4, lora=True, tag="lora")
    add(stage=2, world=2, precision="fp32", lora=True, tag="lora")
    add(stage=2, world=2, micro_batch=4, seq=128, tag="b4_s128")
    add(stage=3, world=2, micro_batch=4, seq=128, tag="b4_s128")
    add(stage=3, world=2, zero={"leaf_module": {"name_suffixes": ["mlp"]}}, tag="leafmlp")
    add(family="mixtral", stage=3, world=2)
    for stage in (2, 3):
        add(family="qwen3_moe", stage=stage, world=2)
    # 13. Families of issue 12's matrix not covered above.
    for fam in ("phi3", "opt"):
        for stage in (0, 1, 2, 3):
            add(family=fam, stage=stage, world=2)
    # Gemma-2 has no SDPA path in transformers 5.24 (Gemma2ForCausalLM refuses it: soft-capping).
    for stage in (0, 1, 2, 3):
        add(family="gemma2", stage=stage, world=2, attn="eager", tag="eager")
    for stage in (2, 3):
        add(family="deepseek_v3", stage=stage, world=2)
    # 2026 families (issue 29 item 2), stages 2 and 3 at N = 2.
    for fam in ("glm4_moe", "seed_oss", "olmo3", "exaone4", "phimoe", "minimax_m2", "smollm3", "arcee", "dots1",
                "ernie4_5", "hunyuan_v1_dense", "ernie4_5_moe", "hunyuan_v1_moe", "apertus"):
        for stage in (2, 3):
            add(family=fam, stage=stage, world=2)
    # Qwen3.5's hybrid (Gated DeltaNet + gated attention) at 128 tokens (two of the torch fallback's 64-token
    # chunks) and at 100 (padded to 128 inside the chunked rule), stages 2 and 3; with checkpointing at stage 2.
    for stage in (2, 3):
        add(family="qwen3_5", stage=stage, world=2, seq=128, tag="s128")
    add(family="qwen3_5", stage=2, world=2, seq=100, tag="s100")
    add(family="qwen3_5", stage=2, world=2, seq=128, gc=True, tag="s128_gc")
    for fam in ("qwen3_next", "qwen3_5_moe"):
        for stage in (2, 3):
            add(family=fam, stage=stage, world=2, seq=128, tag="s128")
    for stage in (2, 3):
        add(family="qwen3_5", stage=stage, world=2, seq=128, lora=True, tag="s128_lora")
    # Granite-4.0-H's Mamba-2 hybrid (issue 29), dense and MoE, at 128 tokens (two 64-token chunks) and at 100.
    for fam in ("granitemoehybrid", "granitemoehybrid_moe"):
        for stage in (2, 3):
            add(family=fam, stage=stage, world=2, seq=128, tag="s128")
    add(family="granitemoehybrid", stage=2, world=2, seq=100, tag="s100")
    add(family="granitemoehybrid", stage=2, world=2, seq=128, gc=True, tag="s128_gc")
    # A vision-language model (Qwen2.5-VL) on text-only batches, its tower trained and frozen, stages 1-3.
    for stage in (1, 2, 3):
        add(family="qwen2_5_vl", stage=stage, world=2, tag="text")
        add(family="qwen2_5_vl", stage=stage, world=2, freeze_vision=True, tag="text_freezevision")
    # ... and with images through the frozen tower: one 56 x 56 image per sample (a 4 x 4 patch grid, 4 tokens
    # after the 2 x 2 merge), stages 2 and 3; two images of 112 x 56 at stage 3
    for stage in (2, 3):
        add(family="qwen2_5_vl_img", stage=stage, world=2, freeze_vision=True, images_per_sample=1,
            image_size=(56, 56), tag="img1_freezevision")
    add(family="qwen2_5_vl_img", stage=3, world=2, freeze_vision=True, images_per_sample=2, image_size=(112, 56),
        tag="img2_freezevision")
    # every parameter gathered (the tiny tower's are all below the default persistence threshold, 1e5), with and
    # without images: the tower's forward fetches
    persist0 = {"stage3_param_persistence_threshold": 0}
    add(family="qwen2_5_vl_img", stage=3, world=2, zero=persist0, freeze_vision=True, images_per_sample=1,
        image_size=(56, 56), tag="img1_freezevision_persist0")
    add(family="qwen2_5_vl", stage=3, world=2, zero=persist0, freeze_vision=True, tag="text_freezevision_persist0")
    # 14. ZeRO-3 leaf modules on HF MoE blocks (leaf_module_config.py DEFAULT_LEAF_MODULE_CLASSES makes
    # Mixtral's/Qwen2-MoE's/Qwen3-MoE's sparse blocks leaves by default; `classes: []` turns that off,
    # z3_leaf_module.py apply_zero_leaf_module_config), N = 1/2/4; DeepSeek-V3's MoE (not a default
    # class) made a leaf by class name. Gemma-3 text at stages 0-3.
    no_leaf = {"leaf_module": {"classes": []}}
    for fam in ("qwen3_moe", "mixtral"):
        add(family=fam, stage=3, world=2, zero=no_leaf, tag="leafoff")
    add(family="qwen3_moe", stage=3, world=4)
    add(family="qwen3_moe", stage=3, world=4, zero=no_leaf, tag="leafoff")
    add(family="qwen3_moe", stage=3, world=1)
    add(family="deepseek_v3", stage=3, world=2, tag="leafon", zero={"leaf_module": {
        "classes": ["transformers.models.deepseek_v3.modeling_deepseek_v3.DeepseekV3MoE"]}})
    for stage in (0, 1, 2, 3):
        add(family="gemma3", stage=stage, world=2)
    # Where leaf and non-leaf differ in the collectives: per-module fetches (no prefetch, nothing
    # persistent: a leaf block is one gather, a non-leaf one a gather per child module) and a small
    # reduce bucket (a leaf's gradients are reduced from its full backward hook in parameter order,
    # stage3.py create_reduce_and_remove_grad_hooks).
    p0 = {"stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 0}
    for fam in ("qwen3_moe", "mixtral"):
        add(family=fam, stage=3, world=2, zero=p0, tag="persist0_prefetch0")
        add(family=fam, stage=3, world=2, zero=dict(p0, **no_leaf), tag="persist0_prefetch0_leafoff")
    add(family="qwen3_moe", stage=3, world=2, zero={"reduce_bucket_size": 50000}, tag="rbs50k")
    add(family="qwen3_moe", stage=3, world=2, zero=dict({"reduce_bucket_size": 50000}, **no_leaf),
        tag="rbs50k_leafoff")
    # 16. Issue 23: reductions where a gradient is larger than the bucket (extra_large_param_to_reduce)
    # and straddles a partition boundary (average_tensor cuts it into one slice per owner;
    # allreduce_and_scatter flushes when the running numel exceeds the bucket), at 4 ranks; stage 1
    # with overlap_comm, which reduces from the gradient hooks in backward order. (A 0-element bucket is
    # refused: runtime/zero/config.py reduce_bucket_size Field(gt=0); tests/deepspeed_configs records it.)
    for stage in (1, 2):
        add(stage=stage, world=4, zero={"reduce_bucket_size": 50000}, tag="rbs50k")
    add(stage=1, world=4, zero={"overlap_comm": True, "reduce_bucket_size": 50000}, tag="overlap_rbs50k")
    # 15. DeepSpeed AutoEP expert parallelism (ds_config "expert_parallel", module_inject/auto_ep*.py:
    # the HF MoE block replaced by AutoEPMoELayer, experts split over autoep_size ranks, the expert
    # parameters in their own expert-data-parallel ZeRO group, all_to_all_single dispatch/combine).
    # use_grouped_mm off: torch._grouped_mm is a CUDA kernel; the per-expert loop runs on CPU.
    for fam in ("qwen3_moe", "mixtral"):
        for stage in (1, 2, 3):
            for world in (2, 4):
                add(family=fam, stage=stage, world=world, tag="autoep2",
                    extra={"expert_parallel": {"enabled": True, "autoep_size": 2, "use_grouped_mm": False}})
    # 16. zero_optimization.memory_efficient_linear false: stage 3 keeps torch's F.linear (no
    # zero3_linear_wrap), so frozen linears do not save their inputs (planner/memory_model.cpp).
    add(stage=3, world=2, lora=True, zero={"memory_efficient_linear": False}, tag="lora_nomel")
    add(stage=3, world=2, zero={"memory_efficient_linear": False}, tag="nomel")
    add(stage=3, world=2, gc=True, zero={"memory_efficient_linear": False}, tag="nomel_gc")
    # Parameters released after each module's forward (small max-live / reuse distance): does torch's
    # own linear keep the gathered weights alive through its saved W^T views?
    add(stage=3, world=2, zero={"stage3_max_live_parameters": 100000, "stage3_max_reuse_distance": 100000,
                                "memory_efficient_linear": False}, tag="maxlive100k_nomel")
    # 17. 16-bit master weights and gradients (issue 28 item 2; DeepSpeed >= 0.18.3,
    # bf16.bf16_master_weights_and_grads / bf16_optimizer_states, runtime/base_optimizer.py
    # _configure_master_weights): with the optimizer states in bf16 too (on the device), and with fp32
    # states, which DeepSpeed allows only with ZeRO-Offload and DeepSpeedCPUAdam.
    bf16m = {"enabled": True, "bf16_master_weights_and_grads": True}
    for stage in (1, 2, 3):
        add(stage=stage, world=2, extra={"bf16": dict(bf16m, bf16_optimizer_states=True)}, tag="bf16master_bf16opt")
    for stage in (2, 3):
        add(stage=stage, world=2, zero={"offload_optimizer": {"device": "cpu"}}, extra={"bf16": bf16m},
            tag="bf16master_offloadopt")
    add(stage=2, world=4, extra={"bf16": dict(bf16m, bf16_optimizer_states=True)}, tag="bf16master_bf16opt")
    # 18. The checkpoint save (issue 28 item 4): save_checkpoint's files and save_16bit_model's, with
    # rank 0's peak during each (harness.py), stages 0-3 on 2 ranks; stage 3 gathers the 16-bit model
    # (stage3_gather_16bit_weights_on_model_save true) or not.
    for stage in (0, 1, 2):
        add(stage=stage, world=2, save=True, tag="save")
    add(stage=3, world=2, save=True, zero={"stage3_gather_16bit_weights_on_model_save": True}, tag="save")
    add(stage=3, world=2, save=True, tag="save_nogather")
    return out


def _build_sp():
    """Ulysses sequence parallelism (DeepSpeed ALST, deepspeed/runtime/sequence_parallel/ulysses_sp.py), recorded
    into tests/deepspeed/fixtures-sp/<ds>/ (run_matrix.py --set sp; docs/conformance-sp.md). Not in ORDER: the
    default run_matrix.py / scripts/ds_conformance.sh set is unchanged.
    4 ranks, micro-batch 2, global sequence 64: SP 2 x DP 2 and SP 4 x DP 1 at ZeRO 0-3; SP 2 with the ZeRO
    gradient reduction in bf16 (seq_parallel_communication_data_type, default fp32); and, for comparison,
    SP 1 on 4 ranks with the per-rank token count of SP 2 (32) and SP 4 (16), explicit position ids; the
    Trainer's all_gather loss combination at ZeRO 2."""
    out = []
    add = lambda **kw: out.append(make_case(**kw))
    for sp in (2, 4):
        for stage in (0, 1, 2, 3):
            add(stage=stage, world=4, sp=sp, tag=f"sp{sp}")
    for stage in (0, 1, 2, 3):
        add(stage=stage, world=4, sp=2, extra={"seq_parallel_communication_data_type": "bf16"}, tag="sp2_commbf16")
    for seq in (32, 16):
        for stage in (0, 1, 2, 3):
            add(stage=stage, world=4, seq=seq, position_ids=True, tag=f"seq{seq}pos")
    # the loss combined as transformers' Trainer does (torch.distributed.nn.functional.all_gather)
    for sp in (2, 4):
        add(stage=2, world=4, sp=sp, sp_loss="all_gather", tag=f"sp{sp}_agloss")
    return out


def _build_tiled():
    """DeepSpeed's TiledMLP (deepspeed/runtime/sequence_parallel/ulysses_sp.py class TiledMLP) applied as the ALST
    recipe does (the TiledMLP docstring: LlamaMLP.forward monkey-patched before the model is built, compute_params
    = down/gate/up weights), with a fixed shard count (the docstring's ceil(seqlen/hidden) is 1 at seq 64 /
    hidden 256). Recorded into tests/deepspeed/fixtures-tiled/<ds>/ (run_matrix.py --set tiled;
    docs/conformance-tiled.md). Not in ORDER. The untiled baselines are the llama-gqa_s{2,3}_n2_bf16_{default,gc}
    fixtures of tests/deepspeed/fixtures/<ds>/ and llama-gqa_s2_n4_bf16_sp2 of fixtures-sp/<ds>/."""
    out = []
    add = lambda **kw: out.append(make_case(**kw))
    for stage in (2, 3):
        add(stage=stage, world=2, tiled_mlp_shards=4)
    for stage in (2, 3):
        add(stage=stage, world=2, gc=True, tag="gc", tiled_mlp_shards=4)
    add(stage=2, world=2, tiled_mlp_shards=2)
    add(stage=3, world=2, tiled_mlp_shards=2)
    add(stage=2, world=4, sp=2, tag="sp2", tiled_mlp_shards=4)
    return out


def _build_tp():
    """DeepSpeed AutoTP training (ds_config "tensor_parallel": {"autotp_size": N}; runtime/engine.py
    _configure_tensor_parallel, module_inject/auto_tp.py, module_inject/layers.py), recorded into
    tests/deepspeed/fixtures-tp/<ds>/ (run_matrix.py --set tp; docs/conformance-tp.md). Not in ORDER. bf16,
    micro-batch 2, seq 64; TP groups of consecutive ranks, DP over the rest (utils/groups.py _init_tp_mesh_device).
    The tp1 cases are the TP 1 comparisons for the families the default set does not have at 4 ranks."""
    out = []
    add = lambda **kw: out.append(make_case(**kw))
    # 1. llama-gqa (4 heads, 2 KV heads), TP 2 x DP 2, ZeRO 0-3
    for stage in (0, 1, 2, 3):
        add(stage=stage, world=4, tp=2, tag="tp2")
    # 2. TP 4 > 2 KV heads
    for stage in (1, 2):
        add(stage=stage, world=4, tp=4, tag="tp4")
    # 3. 4 KV heads: TP 4 x DP 1 and TP 2 x DP 2, and TP 1 for comparison
    for tp in (4, 2):
        for stage in (1, 2):
            add(family="llama-mha", stage=stage, world=4, tp=tp, tag=f"tp{tp}")
    for stage in (1, 2):
        add(family="llama-mha", stage=stage, world=4, tp=1, tag="tp1")
    # 4. qwen2 (q/k/v biases)
    for stage in (1, 2):
        add(family="qwen2", stage=stage, world=4, tp=2, tag="tp2")
    # 5. tied embeddings, and TP 1 for comparison
    add(family="llama-tied", stage=2, world=4, tp=2, tag="tp2")
    add(family="llama-tied", stage=2, world=4, tp=1, tag="tp1")
    # 6. gradient checkpointing; gradient accumulation 2
    add(stage=2, world=4, tp=2, gc=True, tag="tp2_gc")
    add(stage=2, world=4, tp=2, grad_accum=2, tag="tp2_ga2")
    # 7. TP 2 on 2 ranks (DP 1)
    add(stage=1, world=2, tp=2, tag="tp2")
    # 8. fp32, for the loss check without bf16 rounding (TP 1: fixtures/<ds>/llama-gqa_s2_n4_fp32_default)
    add(stage=2, world=4, precision="fp32", tp=2, tag="tp2")
    # 9. dense Qwen3 (per-head q/k norms with a TP-group gradient all-reduce), and TP 1 for comparison
    add(family="qwen3", stage=2, world=4, tp=2, tag="tp2")
    add(family="qwen3", stage=2, world=4, tp=1, tag="tp1")
    return out


def _build_hpz():
    """ZeRO++ hierarchical partitioning (hpZ, ds_config zero_optimization.zero_hpz_partition_size = H), recorded into
    tests/deepspeed/fixtures-hpz/<ds>/ (run_matrix.py --set hpz; docs/conformance-hpz.md). Not in ORDER. llama-gqa,
    bf16, micro-batch 2, seq 64, 4 ranks. What DeepSpeed 0.19.8 does with H > 1 (stage 3 only):
    - utils/groups.py _create_zero_param_parallel_group(H): groups of H consecutive ranks ({0,1}, {2,3} at H 2),
      built by runtime/zero/stage3.py DeepSpeedZeroOptimizer_Stage3.__init__ (_set_zero_group_parallelism) or
      partition_parameters.py Init.__init__; _ensure_divisibility(world, min(H, world)) refuses an H that does
      not divide the world size.
    - runtime/zero/partition_parameters.py Init._partition: every time a parameter is partitioned (released),
      _partition_param_sec first keeps a second copy, param.ds_secondary_tensor: 1/H of the (aligned) parameter,
      in the parameter's dtype, beside the usual 1/world ds_tensor.
    - all_gather_coalesced (use_secondary_tensor): a parameter with a secondary tensor is gathered from it over the
      intra group (zero_param_process_group, H ranks), the others over the whole partition group.
    - runtime/zero/stage3.py invalidate_secondary_tensor (from _post_step after each optimizer step, and
      checkpoint_event_epilogue) drops them: the first gather after a step is from the primary partitions.
    - Stage 1/2 (stage_1_and_2.py) never reads the key.
    The no-hpZ baselines are fixtures/<ds>/llama-gqa_s3_n4_bf16_{default,ga2,persist0} and
    llama-gqa_s3_n4_fp32_default, llama-gqa_s2_n4_bf16_default; the hpz1_* cases here are the no-hpZ comparisons
    (zero_hpz_partition_size 1, its default) for configurations the default set does not have at 4 ranks.
    Every case records each collective's group_ranks and micro-step, and an `hpz` block (harness.py hpz_block)."""
    out = []

    def add(**kw):
        name, case = make_case(**kw)
        case["record_hpz"] = True
        out.append((name, case))

    def hz(h, **more):
        return dict({"zero_hpz_partition_size": h}, **more)

    add(stage=3, world=4, zero=hz(2), tag="hpz2")
    add(stage=3, world=4, zero=hz(2), grad_accum=2, tag="hpz2_ga2")
    add(stage=3, world=4, zero=hz(2), gc=True, tag="hpz2_gc")
    add(stage=3, world=4, zero=hz(4), tag="hpz4")
    add(stage=3, world=4, zero=hz(2, stage3_param_persistence_threshold=0), tag="hpz2_persist0")
    add(stage=3, world=4, precision="fp32", zero=hz(2), tag="hpz2")
    # stage 2: the key is accepted and ignored (baseline fixtures/<ds>/llama-gqa_s2_n4_bf16_default)
    add(stage=2, world=4, zero=hz(2), tag="hpz2")
    # with ZeRO-Offload of the parameters / of the optimizer
    add(stage=3, world=4, zero=hz(2, offload_param={"device": "cpu"}), tag="hpz2_offloadparam")
    add(stage=3, world=4, zero=hz(2, offload_optimizer={"device": "cpu"}), tag="hpz2_offloadopt")
    # H not dividing the world size
    add(stage=3, world=4, zero=hz(3), tag="hpz3")
    # the other two ZeRO++ parts (qwZ, qgZ), alone and all three together
    add(stage=3, world=4, zero={"zero_quantized_weights": True}, tag="qw")
    add(stage=3, world=4, zero={"zero_quantized_gradients": True}, tag="qg")
    add(stage=3, world=4, zero=hz(2, zero_quantized_weights=True, zero_quantized_gradients=True), tag="zeropp")
    # parameters released after each module (small max-live / reuse distance): the backward re-gathers them,
    # from the secondary partition; hpz1: the same without hpZ
    ml = {"stage3_max_live_parameters": 100000, "stage3_max_reuse_distance": 100000}
    add(stage=3, world=4, zero=hz(2, **ml), tag="hpz2_maxlive100k")
    add(stage=3, world=4, zero=hz(1, **ml), tag="hpz1_maxlive100k")
    add(stage=3, world=4, zero=hz(2, **ml), grad_accum=2, tag="hpz2_maxlive100k_ga2")
    add(stage=3, world=4, zero=hz(1, **ml), grad_accum=2, tag="hpz1_maxlive100k_ga2")
    # no-hpZ comparisons for the configurations the default set has only at 2 ranks
    add(stage=3, world=4, zero=hz(1), gc=True, tag="hpz1_gc")
    add(stage=3, world=4, zero=hz(1, offload_param={"device": "cpu"}), tag="hpz1_offloadparam")
    add(stage=3, world=4, zero=hz(1, offload_optimizer={"device": "cpu"}), tag="hpz1_offloadopt")
    # beside Ulysses SP 2 (SP x DP is the ZeRO group; hpZ's blocks of consecutive global ranks) and AutoTP 2
    # (TP at stage 3); the no-hpZ baselines are fixtures-sp/<ds>/llama-gqa_s3_n4_bf16_sp2 and
    # fixtures-tp/<ds>/llama-gqa_s3_n4_bf16_tp2 where recorded
    add(stage=3, world=4, sp=2, zero=hz(2), tag="hpz2_sp2")
    add(stage=3, world=4, tp=2, zero=hz(2), tag="hpz2_tp2")
    add(stage=3, world=4, tp=2, zero=hz(1), tag="hpz1_tp2")
    return out


def _build_muon():
    """DeepSpeed's Muon (ds_config optimizer.type "muon": runtime/zero/muon/muon_optimizer.py MuonWithAuxAdam),
    recorded into tests/deepspeed/fixtures-muon/<ds>/ (run_matrix.py --set muon). Not in ORDER. deepspeed.initialize
    tags each parameter (deepspeed/__init__.py set_optimizer_flags): use_muon when its layer shape has >= 2
    dimensions and its name contains neither "embed" nor "lm_head"; the others go to the auxiliary Adam (FusedAdam on
    the CPU accelerator). Stage 1/2 fold Muon into the gradient partition (stage_1_and_2.py get_flat_partition);
    stage 3 refuses reduce_scatter true (stage3.py); BF16_Optimizer (stage 0, bf16) needs fp32 gradient
    accumulation (bf16_optimizer.py)."""
    out = []
    muon = {"optimizer": {"type": "muon", "params": {"lr": 0.02, "momentum": 0.95, "weight_decay": 0.0}}}

    def add(**kw):
        name, case = make_case(extra=muon, **kw)
        out.append((name, case))

    add(stage=1, world=2, tag="muon")
    add(stage=2, world=2, tag="muon")
    add(stage=2, world=4, tag="muon")
    add(stage=2, world=2, precision="fp32", tag="muon")
    add(stage=2, world=2, grad_accum=2, tag="muon_ga2")
    add(stage=2, world=2, zero={"offload_optimizer": {"device": "cpu"}}, tag="muon_offloadopt")
    add(stage=3, world=2, tag="muon")  # reduce_scatter defaults to true: refused
    add(stage=3, world=2, zero={"reduce_scatter": False}, tag="muon_rsoff")
    add(stage=0, world=2, tag="muon")  # BF16_Optimizer with the default bf16 accumulation: refused
    return out


def _build_zenflow():
    """ZenFlow (ds_config zero_optimization.zenflow: runtime/zenflow/zenflow_config.py ZenFlowConfig), recorded into
    tests/deepspeed/fixtures-zenflow/<ds>/ (run_matrix.py --set zenflow; docs/conformance-zenflow.md). Not in ORDER.
    llama-gqa, bf16, micro-batch 2, seq 64. What DeepSpeed 0.19.8 does with it:
    - runtime/engine.py: the stage 1/2 optimizer becomes ZenFlowZeroOptimizer (zenflow_stage_1_and_2.py), stage 3
      ZenFlowZeroOptimizerStage3 (engine_stage3.py); the CPU optimizer is ZenFlowCPUAdam;
    - runtime/zenflow/engine.py configure_zenflow: gradient_accumulation_steps is replaced by update_interval;
    - zenflow_stage_1_and_2.py _configure_zenflow: "Zenflow must be used with cpu offload".
    The cases cover the plain ZeRO-Offload baselines' configurations (fixtures/<ds>/llama-gqa_s{1,2}_n2_bf16_offloadopt)
    with ZenFlow on, fixed and "auto" intervals, its own `offload`, and the refusals."""
    out = []

    def add(zf, zero=None, **kw):
        z = dict({"offload_optimizer": {"device": "cpu"}, "zenflow": zf}, **(zero or {}))
        name, case = make_case(world=2, zero=z, **kw)
        out.append((name, case))

    fixed = {"topk_ratio": 0.1, "select_strategy": "step", "select_interval": 2, "update_interval": 2,
             "full_warm_up_rounds": 0, "overlap_step": False}
    add(fixed, stage=2, tag="zenflow")
    add(fixed, stage=1, tag="zenflow")
    add(dict(fixed, overlap_step=True), stage=2, tag="zenflow_overlap")
    add({"topk_ratio": 0.05}, stage=2, tag="zenflow_auto")
    add(dict(fixed, offload=True), stage=2, zero={"overlap_comm": True}, tag="zenflow_offload")
    add(fixed, stage=3, tag="zenflow")
    add(fixed, stage=2, grad_accum=4, tag="zenflow_ga4")
    # refused: without offload_optimizer; a select interval under the update interval
    name, case = make_case(stage=2, world=2, zero={"zenflow": fixed}, tag="zenflow_nooffload")
    out.append((name, case))
    add(dict(fixed, select_interval=1, update_interval=2), stage=2, tag="zenflow_select1")
    # "auto" strategy with a fixed select interval (configure_zenflow raises Warning), and the converse
    add({"select_strategy": "auto", "select_interval": 2}, stage=2, tag="zenflow_autoint")
    add({"select_strategy": "step", "select_interval": "auto"}, stage=2, tag="zenflow_stepauto")
    # transformers 5.24's Mixtral keeps its experts fused in 3-D parameters ([E, 2f, h]; _process_selected_fp32_groups_grad
    # unpacks `num_row, num_col = param.shape`)
    add(fixed, stage=2, family="mixtral", tag="zenflow")
    return out


_built = _build()
_built_sp = _build_sp()
_built_tiled = _build_tiled()
_built_tp = _build_tp()
_built_hpz = _build_hpz()
_built_muon = _build_muon()
_built_zenflow = _build_zenflow()
CASES = dict(_built + _built_sp + _built_tiled + _built_tp + _built_hpz + _built_muon + _built_zenflow)
assert len(CASES) == len(_built) + len(_built_sp) + len(_built_tiled) + len(_built_tp) + len(_built_hpz) + \
    len(_built_muon) + len(_built_zenflow), "duplicate case names"
ORDER = [n for n, _ in _built]
SP_ORDER = [n for n, _ in _built_sp]
TILED_ORDER = [n for n, _ in _built_tiled]
TP_ORDER = [n for n, _ in _built_tp]
HPZ_ORDER = [n for n, _ in _built_hpz]
MUON_ORDER = [n for n, _ in _built_muon]
ZENFLOW_ORDER = [n for n, _ in _built_zenflow]
