#!/usr/bin/env python3
"""Validate ds_config files with DeepSpeed's own pydantic config classes, without torch or a GPU.

Usage: scripts/validate_with_deepspeed_pydantic.py DEEPSPEED_SRC CONFIG.json [CONFIG.json ...]
  DEEPSPEED_SRC: a DeepSpeed checkout at the version to check against (e.g. tag v0.16.9), or a
  git directory plus "@tag" (DEEPSPEED_GIT@v0.16.9) to read the files with `git show`.

It loads deepspeed/runtime/config_utils.py, runtime/zero/config.py and runtime/zero/offload_config.py
(torch and DeepSpeed's logger replaced by stubs: the classes only need them for a serializer and for
warnings) and builds DeepSpeedZeroConfig(**config["zero_optimization"]) the way
runtime/config.py get_zero_config() does. It also checks DeepSpeed's batch assertion for a world
size given by WORLD=N. Exit 1 if any config is rejected. Needs pydantic >= 2.
"""
import json
import os
import subprocess
import sys
import types


def source(src, rel):
    if "@" in src:
        git_dir, tag = src.rsplit("@", 1)
        return subprocess.check_output(["git", "-C", git_dir, "show", f"{tag}:{rel}"], text=True)
    with open(os.path.join(src, rel)) as f:
        return f.read()


def load_deepspeed_zero(src):
    torch = types.ModuleType("torch")
    torch.dtype = type("dtype", (), {})
    sys.modules["torch"] = torch
    utils = types.ModuleType("deepspeed.utils")

    class Logger:
        def warning(self, *a, **k):
            pass

        error = info = warning

    utils.logger = Logger()
    for name in ["deepspeed", "deepspeed.runtime", "deepspeed.runtime.zero"]:
        m = types.ModuleType(name)
        m.__path__ = []
        sys.modules[name] = m
    sys.modules["deepspeed.utils"] = utils
    for mod, rel in [("deepspeed.runtime.config_utils", "deepspeed/runtime/config_utils.py"),
                     ("deepspeed.runtime.zero.offload_config", "deepspeed/runtime/zero/offload_config.py"),
                     ("deepspeed.runtime.zero.config", "deepspeed/runtime/zero/config.py")]:
        m = types.ModuleType(mod)
        m.__package__ = mod.rsplit(".", 1)[0]
        sys.modules[mod] = m
        exec(compile(source(src, rel), rel, "exec"), m.__dict__)
    return sys.modules["deepspeed.runtime.zero.config"]


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    zc = load_deepspeed_zero(sys.argv[1])
    world = int(os.environ.get("WORLD", "0"))
    bad = 0
    for path in sys.argv[2:]:
        with open(path) as f:
            cfg = json.load(f)
        try:
            z = zc.get_zero_config(cfg)
            if world and all(isinstance(cfg.get(k), int) for k in
                             ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")):
                assert cfg["train_batch_size"] == (cfg["train_micro_batch_size_per_gpu"] *
                                                   cfg["gradient_accumulation_steps"] * world), "batch assertion"
            assert not (cfg.get("fp16", {}).get("enabled") is True and cfg.get("bf16", {}).get("enabled") is True)
            print(f"ok   {path}: stage {int(z.stage)}, overlap_comm {z.overlap_comm}, "
                  f"prefetch {z.prefetch_bucket_size}, persistence {z.param_persistence_threshold}")
        except Exception as e:  # pydantic.ValidationError or AssertionError
            bad += 1
            print(f"FAIL {path}: {str(e).splitlines()[0:3]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
