#!/usr/bin/env python3
"""Exact parameter counts of vision-language models from PyPI transformers, the reference
tests/test_vision_tower.cpp checks zeroplan's vision-tower, projector and language-tower counts against.

Each config.json given is read as from_pretrained reads it (CONFIG_MAPPING[model_type].from_dict) and built
with `AutoModelForImageTextToText.from_config` on PyTorch's meta device (no
memory, no weights) and its parameters are summed by name (`model.named_parameters()`, tied weights once):
  total      every parameter
  text       model.language_model.* and lm_head.* (the language tower zeroplan plans)
  tower      the vision encoder without its projector: model.vision_tower.*, or for the Qwen models
             model.visual.* less the patch mergers
  projector  model.multi_modal_projector.* and model.image_newline; for the Qwen models the patch mergers
             model.visual.merger.* and model.visual.deepstack_merger_list.* (Qwen3-VL)
Anything else is printed as `other` (none for the models counted so far).

Run with the repo's venv (scripts/ds_venv.sh, or any venv with the pinned torch and transformers):
  OMP_NUM_THREADS=1 .venv-ds/bin/python scripts/count_vision_params.py tests/data/models/vlm/*.json \
      default:qwen2_vl default:qwen2_5_vl default:qwen3_vl
(default:<model_type> counts the config class's defaults.)

With --tensors OUT.json it also writes every tower and projector tensor of each config, in registration order,
as tests/data/models/vlm/tensors.json holds them: the name with each layer index replaced by `*`, the shape, and
how many tensors share them (the reference tests/test_vision_tower.cpp checks zeroplan's vision inventory
against, tensor by tensor and in order):
  OMP_NUM_THREADS=1 .venv-ds/bin/python scripts/count_vision_params.py --tensors tests/data/models/vlm/tensors.json \
      default:gemma3 default:paligemma default:llava default:llava_next default:qwen2_vl default:qwen2_5_vl \
      default:qwen3_vl default:qwen3_5 tests/data/models/vlm/*_instruct.json
"""
import json
import re
import sys

import torch
import transformers
from transformers import AutoModelForImageTextToText
from transformers.models.auto.configuration_auto import CONFIG_MAPPING


def part(name):
    if name.startswith(("model.language_model.", "lm_head.")):
        return "text"
    if name.startswith(("model.visual.merger.", "model.visual.deepstack_merger_list.",
                        "model.multi_modal_projector.")) or name == "model.image_newline":
        return "projector"
    if name.startswith(("model.visual.", "model.vision_tower.")):
        return "tower"
    return "other"


def count(path):
    if path.startswith("default:"):  # the config class's defaults: default:qwen2_5_vl
        d = {"model_type": path[len("default:"):]}
    else:
        with open(path) as f:
            d = json.load(f)
    # The path from_pretrained takes for a config.json: the class of its model_type, from_dict.
    cfg = CONFIG_MAPPING[d["model_type"]].from_dict(d)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(cfg)
    sums = {"total": 0, "text": 0, "tower": 0, "projector": 0, "other": 0}
    tensors = []  # [pattern, shape, count] in registration order; consecutive layers share an entry
    for name, p in model.named_parameters():
        sums["total"] += p.numel()
        sums[part(name)] += p.numel()
        if part(name) in ("tower", "projector"):
            key = [re.sub(r"\.\d+\.", ".*.", name), list(p.shape)]
            seen = next((t for t in tensors if t[:2] == key), None)
            if seen is None:
                tensors.append(key + [1])
            else:
                seen[2] += 1
    return type(model).__name__, sums, tensors


def main():
    args = sys.argv[1:]
    out = None
    if args[:1] == ["--tensors"]:
        out, args = args[1], args[2:]
    print(f"# transformers {transformers.__version__}, torch {torch.__version__}")
    written = {"_comment": "Vision tower and projector tensors of AutoModelForImageTextToText on the meta device, in "
                           "registration order (scripts/count_vision_params.py --tensors): [name with layer indices "
                           "as *, shape, tensors]. Checked by tests/test_vision_tower.cpp.",
               "versions": {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]},
               "models": {}}
    for path in args:
        cls, s, tensors = count(path)
        print(f"{path}: {cls} " + " ".join(f"{k}={v:,}" for k, v in s.items()))
        written["models"][path] = {"class": cls, "tower": s["tower"], "projector": s["projector"],
                                   "tensors": tensors}
    if out:
        with open(out, "w") as f:
            json.dump(written, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
