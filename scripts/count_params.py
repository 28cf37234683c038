#!/usr/bin/env python3
"""Exact parameter counts from PyPI transformers, the reference tests/test_models_hf.cpp checks
zeroplan's inventory against.

Each model is instantiated on PyTorch's meta device (no memory, no weights:
`with torch.device("meta"): AutoModelForCausalLM.from_config(cfg)`) and its parameters are
counted as `sum(p.numel() for p in model.parameters())` (tied weights appear once there).
Two sets:
  * defaults/<model_type>: the config class's defaults (AutoConfig.for_model(model_type)); the
    config is written twice: <model_type>.json holds only model_type and the size fields zeroplan
    requires (SIZE_KEYS), so everything else (kv heads, head_dim, experts, biases, tying, ...) must
    come from zeroplan's knowledge of the class's defaults, and <model_type>.full.json holds every
    field (to_dict(), so zeroplan must read every field spelling).
  * zoo/<name>: every models/zoo/<name>.json (configs as published on the Hub).
Vision-language configs (a `text_config`) count the language tower: AutoModelForCausalLM on
config.get_text_config(), which is what zeroplan models.

Per model it records the total and a compact inventory: tensor names with the layer index
replaced by '*', each with its shape and how many layers have it. Note that transformers 5 keeps a
MoE layer's experts as fused 3-D tensors (mlp.experts.gate_up_proj [E, 2f, h]) while Hub
checkpoints store one 2-D tensor per expert; the counts are the same.

Run with the repo's venv (scripts/ds_venv.sh):
  OMP_NUM_THREADS=1 .venv-ds/bin/python scripts/count_params.py
Writes tests/data/models/param_counts.json and tests/data/models/hf_defaults/*.json.
"""
import json
import os
import platform
import re
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "data", "models")
DEFAULTS_DIR = os.path.join(OUT_DIR, "hf_defaults")
ZOO_DIR = os.path.join(ROOT, "models", "zoo")

# The families zeroplan reads (models/hf_config.cpp), plus vision-language wrappers whose
# text_config is one of them.
DEFAULT_FAMILIES = [
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "deepseek_v2",
    "deepseek_v3", "gpt_oss", "llama4_text", "gemma", "gemma2", "gemma3_text", "phi3", "olmo2",
    "olmoe", "granite", "glm4", "starcoder2", "cohere", "phi", "gpt_neox", "gpt2", "opt", "falcon", "bloom",
    "glm4_moe", "seed_oss", "minimax_m2", "phimoe", "olmo3", "exaone4", "smollm3",
    "arcee", "ernie4_5", "hunyuan_v1_dense", "ernie4_5_moe", "hunyuan_v1_moe", "apertus",
    "olmo", "stablelm", "glm", "cohere2", "granite_swa", "flex_olmo", "solar_open", "exaone_moe", "mellum",
    "kolibri1", "sarvam_moe", "glm4_moe_lite", "minicpm3", "hy_v3", "sarvam_mla",
    "granitemoe", "granitemoeshared", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "granitemoehybrid",
    # vision-language: the language tower only
    "gemma3", "llama4", "mistral3", "llava", "qwen3_5", "qwen3_5_moe",
]

# Fields zeroplan requires in every config (models/hf_config.cpp req_int); the minimal default
# configs keep only these (with the default values) and model_type.
SIZE_KEYS = {"hidden_size", "n_embd", "n_embed", "num_hidden_layers", "n_layer", "num_attention_heads",
             "n_head", "intermediate_size", "ffn_dim", "vocab_size", "n_positions", "max_position_embeddings"}


# Fields a config class leaves None although its model cannot be built without them: zeroplan requires
# them (models/hf_config.cpp), so the default set gives them, and the minimal config keeps them.
#  - HunYuanDenseV1Config.head_dim is None and HunYuanDenseV1Attention takes getattr(config, "head_dim",
#    hidden // heads), which returns the None (`self.head_dim**-0.5` then fails): the intended fallback,
#    4096 // 32 = 128.
REQUIRED_FIELDS = {"hunyuan_v1_dense": {"head_dim": 128}, "hunyuan_v1_moe": {"head_dim": 128}}


def minimal(full):
    """The size fields and model_type; for a vision-language wrapper's text_config also every field
    the wrapper sets differently from the text config class's own defaults (Mistral3Config's
    text_config is Mistral-Small-3.1-shaped, not MistralConfig's defaults), and head_dim (MistralConfig
    derives its default from the default hidden size, so the wrapper's differing value must be given)."""
    d = {k: v for k, v in full.items()
         if k in SIZE_KEYS or k == "model_type" or k in REQUIRED_FIELDS.get(full.get("model_type"), {})}
    text = full.get("text_config")
    if isinstance(text, dict):
        own = jsonable(AutoConfig.for_model(text["model_type"]).to_dict())
        d["text_config"] = {k: v for k, v in text.items()
                            if k in SIZE_KEYS or k in ("model_type", "head_dim") or (k in own and own[k] != v
                                                                       and not isinstance(v, (dict, list)))}
    return d


# Older Hub spellings of model_type that transformers maps to a current class.
TYPE_ALIASES = {"RefinedWeb": "falcon", "RefinedWebModel": "falcon"}


def compact_inventory(model):
    """{pattern: {"shape": [...], "count": n}} keyed by name-with-'*' + shape."""
    inv = {}
    for name, p in model.named_parameters():
        pattern = re.sub(r"\.\d+\.", ".*.", name)
        key = pattern + " " + "x".join(str(d) for d in p.shape)
        e = inv.setdefault(key, {"name": pattern, "shape": list(p.shape), "count": 0})
        e["count"] += 1
    return sorted(inv.values(), key=lambda e: (e["name"], e["shape"]))


def count(cfg):
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(text)
    total = sum(p.numel() for p in model.parameters())
    return {
        "class": type(model).__name__,
        "total": total,
        "tensors": compact_inventory(model),
    }


def jsonable(d):
    return json.loads(json.dumps(d, default=lambda o: None))


def write_safetensors_fixture(out):
    """A tiny Llama (2 layers, hidden 16, tied=False) saved with save_pretrained in bf16: the
    config.json + model.safetensors that tests/test_models_safetensors.cpp reads headers from. Real
    weights (CPU, a few KB) because safetensors writes data, not just shapes."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=16, intermediate_size=40, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, vocab_size=48, max_position_embeddings=64)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    d = os.path.join(OUT_DIR, "tiny-llama-safetensors")
    model.save_pretrained(d, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(d, extra)):
            os.remove(os.path.join(d, extra))
    import safetensors
    r = {"class": type(model).__name__, "total": sum(p.numel() for p in model.parameters()),
         "tensors": compact_inventory(model), "config": "tests/data/models/tiny-llama-safetensors/config.json",
         "safetensors": safetensors.__version__}
    out["models"]["safetensors/tiny-llama"] = r
    print(f"safetensors/tiny-llama {r['class']:32s} {r['total']:>16,}", flush=True)


def main():
    os.makedirs(DEFAULTS_DIR, exist_ok=True)
    out = {
        "_comment": "Generated by scripts/count_params.py: exact parameter counts of transformers models "
        "instantiated on the meta device (sum of p.numel() over model.parameters()). Do not edit by hand.",
        "versions": {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
        "models": {},
    }
    only = set(sys.argv[1:])
    for mt in DEFAULT_FAMILIES:
        if only and mt not in only:
            continue
        cfg = AutoConfig.for_model(mt, **REQUIRED_FIELDS.get(mt, {}))
        full = jsonable(cfg.to_dict())
        full["model_type"] = mt
        for suffix, d in (("", minimal(full)), (".full", full)):
            with open(os.path.join(DEFAULTS_DIR, f"{mt}{suffix}.json"), "w") as f:
                json.dump(d, f, indent=1, sort_keys=True)
                f.write("\n")
        r = count(cfg)
        r["config"] = f"tests/data/models/hf_defaults/{mt}.json"
        out["models"][f"defaults/{mt}"] = r
        print(f"defaults/{mt:14s} {r['class']:32s} {r['total']:>16,}", flush=True)

    for fn in sorted(os.listdir(ZOO_DIR)):
        if fn.startswith("_") or not fn.endswith(".json"):
            continue
        name = fn[:-5]
        if only and name not in only:
            continue
        with open(os.path.join(ZOO_DIR, fn)) as f:
            d = json.load(f)
        mt = TYPE_ALIASES.get(d.get("model_type"), d.get("model_type"))
        d = {k: v for k, v in d.items() if k != "model_type"}
        cfg = CONFIG_MAPPING[mt](**d)
        r = count(cfg)
        r["config"] = f"models/zoo/{fn}"
        out["models"][f"zoo/{name}"] = r
        print(f"zoo/{name:20s} {r['class']:32s} {r['total']:>16,}", flush=True)

    if not only or "safetensors" in only:
        write_safetensors_fixture(out)

    path = os.path.join(OUT_DIR, "param_counts.json")
    if only and os.path.exists(path):  # partial run: merge into the existing file
        with open(path) as f:
            old = json.load(f)
        old["models"].update(out["models"])
        old["versions"] = out["versions"]
        out = old
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
