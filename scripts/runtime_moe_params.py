#!/usr/bin/env python3
"""Records the runtime parameter tree of small MoE configs as transformers builds them.

transformers 5 fuses a MoE block's routed experts into 3-D parameters at runtime (the Hub checkpoints
store per-expert 2-D weights); zeroplan's models::ModelSpec::runtime_inventory() models that tree
(models/runtime_inventory.cpp) and tests/test_models_hf.cpp compares it with this file.

    .venv-ds/bin/python scripts/runtime_moe_params.py     # writes tests/data/models/runtime_moe_params.json

Each entry: the config (as zeroplan reads it: config.json fields incl. model_type), every
model.named_parameters() name with its shape (meta device, no weights), and per MoE block the module
path and its fully qualified class (what DeepSpeed's zero_optimization.leaf_module `classes` match).
"""
import json
import os

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "tests", "data", "models", "runtime_moe_params.json")

BASE = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=128, max_position_embeddings=64, tie_word_embeddings=False)
CONFIGS = {
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": dict(moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=4,
                      num_experts_per_tok=2),
    "qwen3_moe": dict(moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2, head_dim=16),
    "olmoe": dict(num_experts=4, num_experts_per_tok=2),
    "deepseek_v2": dict(moe_intermediate_size=32, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
                        first_k_dense_replace=1, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8,
                        qk_nope_head_dim=8, v_head_dim=8, n_group=1, topk_group=1),
    "deepseek_v3": dict(moe_intermediate_size=32, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
                        first_k_dense_replace=1, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8,
                        qk_nope_head_dim=8, v_head_dim=8, n_group=1, topk_group=1),
    # (pad_token_id 0: some config classes default it beyond the test vocabulary of 128)
    "flex_olmo": dict(pad_token_id=0, num_experts=4, num_experts_per_tok=2),
    "solar_open": dict(pad_token_id=0, moe_intermediate_size=32, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
                       head_dim=16, n_group=1, topk_group=1),
    "exaone_moe": dict(pad_token_id=0, moe_intermediate_size=32, num_experts=4, num_shared_experts=1, num_experts_per_tok=2,
                       first_k_dense_replace=1, n_group=1, topk_group=1),
    "mellum": dict(pad_token_id=0, moe_intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, head_dim=16),
    "kolibri1": dict(pad_token_id=0, moe_intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, head_dim=16,
                     shared_expert_intermediate_size=32),
    "sarvam_moe": dict(pad_token_id=0, moe_intermediate_size=32, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
                       first_k_dense_replace=1, head_dim=16, n_group=1, topk_group=1),
    "glm4_moe_lite": dict(pad_token_id=0, moe_intermediate_size=32, n_routed_experts=4, n_shared_experts=1,
                          num_experts_per_tok=2, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8,
                          qk_nope_head_dim=8, v_head_dim=8, n_group=1, topk_group=1),
    "hy_v3": dict(pad_token_id=0, moe_intermediate_size=32, num_experts=4, num_shared_experts=1,
                  num_experts_per_tok=2, head_dim=16, mlp_bias=True),
    "sarvam_mla": dict(pad_token_id=0, moe_intermediate_size=32, num_experts=4, num_shared_experts=1,
                       num_experts_per_tok=2, first_k_dense_replace=1, kv_lora_rank=16, qk_rope_head_dim=8,
                       qk_nope_head_dim=8, v_head_dim=8, n_group=1, topk_group=1),
    "granitemoe": dict(num_local_experts=4, num_experts_per_tok=2),
    "granitemoeshared": dict(num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=48),
    # Gated DeltaNet layer 0 (linear_attn) and gated attention layer 1 (self_attn), both MoE.
    "qwen3_next": dict(moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=4,
                       num_experts_per_tok=2, head_dim=16, layer_types=["linear_attention", "full_attention"],
                       linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                       linear_value_head_dim=16, linear_conv_kernel_dim=4),
    "qwen3_5_moe_text": dict(moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=4,
                             num_experts_per_tok=2, head_dim=16,
                             layer_types=["linear_attention", "full_attention"], linear_num_key_heads=2,
                             linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=16,
                             linear_conv_kernel_dim=4),
}


def main():
    out = {"transformers": transformers.__version__, "torch": torch.__version__, "models": {}}
    for mt, extra in CONFIGS.items():
        cfg = dict(BASE, **extra)
        c = AutoConfig.for_model(mt, **cfg)
        with torch.device("meta"):
            m = AutoModelForCausalLM.from_config(c)
        blocks = {}
        for name, mod in m.named_modules():
            # (GraniteMoe keeps its block under the checkpoint's name, block_sparse_moe)
            if (name.endswith(".mlp") or name.endswith(".block_sparse_moe")) and any(n.endswith("experts") for n, _ in mod.named_children()):
                blocks[name] = type(mod).__module__ + "." + type(mod).__name__
        out["models"][mt] = {
            "config": dict(cfg, model_type=mt),
            "parameters": [[n, list(p.shape)] for n, p in m.named_parameters()],
            "moe_blocks": blocks,
        }
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
