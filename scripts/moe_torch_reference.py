#!/usr/bin/env python3
"""Forward loss of a tiny MoE config (tests/data/models/tiny-mixtral: MixtralForCausalLM;
tests/data/models/tiny-qwen3-moe: Qwen3MoeForCausalLM; the dense tests/data/models/tiny-qwen3:
Qwen3ForCausalLM, for the q/k norms alone) with transformers (fp32, CPU),
from the same initial weights and tokens as the native engine (executor/engine.cpp init_value and
make_tokens, re-implemented here from their definitions), for tests/test_executor_moe.cpp.

    OMP_NUM_THREADS=1 .venv-ds/bin/python scripts/moe_torch_reference.py tiny-mixtral \
        > tests/data/models/tiny-mixtral/torch_reference.json
    OMP_NUM_THREADS=1 .venv-ds/bin/python scripts/moe_torch_reference.py tiny-qwen3-moe \
        > tests/data/models/tiny-qwen3-moe/torch_reference.json
    OMP_NUM_THREADS=1 .venv-ds/bin/python scripts/moe_torch_reference.py tiny-qwen3 \
        > tests/data/models/tiny-qwen3/torch_reference.json

The engine's step-0 loss is the mean cross-entropy over the micro-batch's B*T next-token targets
before any update; it is computed here by transformers' modules (attention, RoPE, RMSNorm,
MixtralSparseMoeBlock routing), with the engine's own token and weight generators.
"""
import json
import math
import os
import sys

import numpy as np
import torch
import transformers
from transformers import (MixtralConfig, MixtralForCausalLM, Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig,
                          Qwen3MoeForCausalLM)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
M64 = (1 << 64) - 1


def splitmix64(x):  # engine.cpp splitmix64, on numpy uint64 arrays (arithmetic wraps mod 2^64)
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(M64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def init_values(seed, init_id, name, n):
    """engine.cpp init_value: norms 1; otherwise U(-a, a), a = 0.02 sqrt(3), from a hash of
    (seed, the parameter's index in the layout, the element index)."""
    if "norm" in name:
        return np.ones(n, dtype=np.float32)
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        inner = splitmix64(np.uint64(init_id) * np.uint64(0x100000001B3) + i)
        h = splitmix64(np.uint64(seed) ^ inner)
    u = (h >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return ((2.0 * u - 1.0) * (0.02 * math.sqrt(3.0))).astype(np.float32)


def tokens(seed, V, B, T, step=0, g=0, fixed_batch=False):
    """engine.cpp make_tokens: t_{i+1} = (5 t_i + 7) mod V from a seeded start per sequence."""
    inp = np.zeros((B, T), dtype=np.int64)
    tgt = np.zeros((B, T), dtype=np.int64)
    for b in range(B):
        key = ((0 if fixed_batch else step) * 1000003 + (g * B + b)) & M64
        with np.errstate(over="ignore"):
            t = int(splitmix64(np.uint64((seed * 31 + key) & M64))) % V
        for i in range(T + 1):
            if i < T:
                inp[b, i] = t
            if i > 0:
                tgt[b, i - 1] = t
            t = (5 * t + 7) % V
    return inp, tgt


def main():
    model_name = sys.argv[1] if len(sys.argv) > 1 else "tiny-mixtral"
    cfg_path = os.path.join(ROOT, "tests/data/models", model_name, "config.json")
    raw = json.load(open(cfg_path))
    config_cls, model_cls = {"mixtral": (MixtralConfig, MixtralForCausalLM),
                             "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM),
                             "qwen3": (Qwen3Config, Qwen3ForCausalLM)}[raw["model_type"]]
    cfg = config_cls(**{k: v for k, v in raw.items() if k not in ("architectures", "model_type", "torch_dtype")})
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = model_cls(cfg).float().eval()
    seed, B, T = 1234, 2, 16  # RunConfig default seed; tests' micro_batch 2, seq_len 16
    with torch.no_grad():
        for pid, (name, p) in enumerate(model.named_parameters()):
            v = init_values(seed, pid, name, p.numel()).reshape(tuple(p.shape))
            p.copy_(torch.from_numpy(v))
    inp, tgt = tokens(seed, cfg.vocab_size, B, T)

    def loss_now():
        with torch.no_grad():
            logits = model(input_ids=torch.from_numpy(inp)).logits.double()
            return float(torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size),
                                                           torch.from_numpy(tgt).reshape(-1)))

    loss = loss_now()
    # The std-0.02 init predicts nearly uniformly (loss ~ ln 256 whatever the details); with every
    # weight but the norms x5 (std 0.1) the loss depends on routing, attention and experts alike.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.mul_(5.0)
    loss_x5 = loss_now()
    out = {
        "what": f"step-0 forward loss of {model_name} ({model_cls.__name__}), fp32, micro-batch 2 x seq 16, seed 1234, "
                "engine init/tokens",
        "command": f"OMP_NUM_THREADS=1 .venv-ds/bin/python scripts/moe_torch_reference.py {model_name} "
                   f"> tests/data/models/{model_name}/torch_reference.json",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "loss": loss,
        "loss_weights_x5": loss_x5,
        "first_tokens": inp[:, :4].tolist(),
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
