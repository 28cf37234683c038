#!/usr/bin/env python3
"""Measure the host time DeepSpeed ZeRO-3 adds per module pass (issue 24 item 1: "ZeRO-3's module hooks
and fetch bookkeeping per module and per parameter"), with DeepSpeed 0.19.8 on one CPU rank.

What runs: a tiny Llama (transformers' LlamaForCausalLM: hidden 64, 8 and 32 layers, micro-batch 1 x 16 tokens)
so that the kernels are microseconds and the difference between two engines is host time. The same
model and batch run a forward + backward under
  - ZeRO stage 0 (no parameter hooks), and
  - ZeRO stage 3 with stage3_param_persistence_threshold 0 (every parameter is fetched, released and
    its gradient reduce-scattered, as the large parameters of a real model are), and
  - ZeRO stage 3 with the default threshold (the tiny parameters stay persistent: hooks run, no fetch).
Module passes are counted with forward pre-hooks on every submodule in the stage-0 run (a backward
pass per forward pass: DeepSpeed's PreBackwardFunction / PostBackwardFunctionModule fire once per
module call, parameter_offload.py). Per-pass host time = (stage-3 time - stage-0 time) / passes, where
passes = forward calls + backward calls; the figure is the slope between the 8- and 32-layer models,
so per-micro-step costs (the engine's forward/backward wrappers, the end-of-backward reduction) drop out
and are reported on their own. Each fetch is one collective on a world of one (gloo): its
launch cost is in the figure, as an NCCL launch is on a GPU. Median of --steps micro-steps after
--warmup (stage 3 records its trace in the first step). Run one process per engine (zero.Init and
the linear override are process-global). Prints one JSON object.

Usage: .venv-ds/bin/python scripts/measure_zero3_hooks.py [--steps 30]
"""
import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

LAYER_COUNTS = (8, 32)  # two depths: the slope between them is per module pass, free of per-step costs


def child(kind, layers, steps, warmup, port):
    import torch
    import transformers
    import deepspeed
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False)
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                                   max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg)
    model.config.use_cache = False
    model.train()
    zero = {"stage": 0}
    if kind == "stage3_fetch":
        zero = {"stage": 3, "stage3_param_persistence_threshold": 0}
    elif kind == "stage3_persistent":
        zero = {"stage": 3}
    ds = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
          "zero_optimization": zero, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}},
          "steps_per_print": 10**9}
    calls = [0]
    if kind == "stage0":
        for m in model.modules():
            m.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    engine, _, _, _ = deepspeed.initialize(model=model, config=ds, model_parameters=list(model.parameters()))
    ids = torch.randint(0, cfg.vocab_size, (1, 16), generator=torch.Generator().manual_seed(1))
    times = []
    for i in range(warmup + steps):
        calls[0] = 0
        t0 = time.perf_counter()
        loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        t1 = time.perf_counter()
        engine.step()
        if i >= warmup:
            times.append(t1 - t0)
    times.sort()
    return {"kind": kind, "median_fwd_bwd_s": times[len(times) // 2], "min_fwd_bwd_s": times[0],
            "forward_module_calls": calls[0] if kind == "stage0" else None,
            "modules": sum(1 for _ in model.modules()), "parameters": sum(1 for _ in model.parameters())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--child")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--port", type=int, default=29611)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.layers, a.steps, a.warmup, a.port)))
        return
    out = {}
    i = 0
    for layers in LAYER_COUNTS:
        for kind in ("stage0", "stage3_fetch", "stage3_persistent"):
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kind, "--layers", str(layers),
                                "--steps", str(a.steps), "--warmup", str(a.warmup), "--port", str(a.port + i)],
                               capture_output=True, text=True, timeout=900)
            i += 1
            if p.returncode != 0:
                sys.exit(f"{kind} x {layers}: exit {p.returncode}\n{p.stderr[-3000:]}")
            out[f"{kind}_L{layers}"] = json.loads(p.stdout.strip().splitlines()[-1])
    lo, hi = LAYER_COUNTS
    passes = {L: 2 * out[f"stage0_L{L}"]["forward_module_calls"] for L in LAYER_COUNTS}

    def extra(kind, L):  # stage-3 time beyond stage 0's for the same model and batch
        return out[f"{kind}_L{L}"]["median_fwd_bwd_s"] - out[f"stage0_L{L}"]["median_fwd_bwd_s"]

    import deepspeed
    import torch
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    res = {"cpu": cpu, "deepspeed": deepspeed.__version__, "torch": torch.__version__.split("+")[0],
           "module_passes_per_micro_step": passes, "runs": out}
    for kind in ("stage3_fetch", "stage3_persistent"):
        res[f"us_per_pass_{kind}"] = 1e6 * (extra(kind, hi) - extra(kind, lo)) / (passes[hi] - passes[lo])
        res[f"us_fixed_per_micro_step_{kind}"] = 1e6 * extra(kind, lo) - res[f"us_per_pass_{kind}"] * passes[lo]
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
