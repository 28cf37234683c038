#!/usr/bin/env python3
"""Produce real DeepSpeed training logs for `zeroplan diagnose`'s fixtures (tests/diagnose/).

Runs DeepSpeed (the version installed in .venv-ds, 0.19.8 when this was written) on CPU with the gloo
backend, 2 ranks launched by torchrun, on a tiny Llama built from models/zoo/tiny-llama-micro.json
(transformers LlamaForCausalLM from a config: no download), with `wall_clock_breakdown` and the
comms logger on, for a few steps. Each scenario is one ds_config; the whole stdout+stderr of the
launcher (both ranks interleaved, exactly as a user sees it) is written to tests/diagnose/<name>.log,
trimmed to < 200 KB.

Usage (from the repository root, after scripts/ds_venv.sh):
    OMP_NUM_THREADS=1 .venv-ds/bin/python scripts/make_ds_logs.py [--only NAME] [--steps N]

Scenarios (the injected cause is what `zeroplan diagnose` must name first):
  z3_healthy         ZeRO-3, DeepSpeed defaults (overlap_comm on, prefetch 5e7, buckets 5e8)
  z2_healthy         ZeRO-2, DeepSpeed defaults with overlap_comm on
  z3_prefetch0       ZeRO-3, stage3_prefetch_bucket_size 0        -> exposed forward gathers
  z2_tiny_buckets    ZeRO-2, reduce_bucket_size 2000 elements     -> many latency-bound collectives
  z2_overlap_off     ZeRO-2, overlap_comm false                   -> exposed gradient reduction
  z2_offload         ZeRO-2, offload_optimizer cpu (DeepSpeedCPUAdam)
  z3_oom             ZeRO-3; rank 0 prints a CUDA OOM message whose text is copied from a public
                     ZeRO-3 run's log (hiyouga/LlamaFactory issue #7532, numbers kept) at step 3,
                     because a CPU run does not raise torch.OutOfMemoryError; the rest is real.
  q3_healthy, q3_prefetch0, q3_persist0 (stage3_param_persistence_threshold 0), q2_healthy,
  q2_tiny_buckets: the same knobs with DeepSpeed's logger left at 0.19's default WARNING level (no
                     configuration dump: `diagnose` reads the knobs from the comms logger's calls) on
                     models/zoo/tiny-llama-small.json.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "diagnose"
MAX_BYTES = 200 * 1024

BASE = {
    "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 1,
    "gradient_clipping": 1.0,
    "bf16": {"enabled": False},
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
    "wall_clock_breakdown": True,
    "comms_logger": {"enabled": True, "verbose": False, "prof_all": True, "debug": False},
    "steps_per_print": 1,
}


def zero(stage, **kw):
    z = {"stage": stage}
    if stage >= 2:
        z["overlap_comm"] = True
    z.update(kw)
    return z


SCENARIOS = {
    "z3_healthy": zero(3),
    "z2_healthy": zero(2),
    "z3_prefetch0": zero(3, stage3_prefetch_bucket_size=0),
    "z2_tiny_buckets": zero(2, reduce_bucket_size=2000, allgather_bucket_size=2000),
    "z2_overlap_off": zero(2, overlap_comm=False),
    "z2_offload": zero(2, offload_optimizer={"device": "cpu", "pin_memory": False}),
    "z3_oom": zero(3),
    # Logs without the configuration dump (0.19's default WARNING level) on tiny-llama-small, whose MLP
    # and embedding matrices (176,128 and 1,048,576 elements) are above stage 3's default persistence
    # threshold (1e5 elements, runtime/zero/config.py) and whose attention matrices and norms are below
    # it, so that prefetch and persistence change what the comms logger records.
    "q3_healthy": zero(3),
    "q3_prefetch0": zero(3, stage3_prefetch_bucket_size=0),
    "q3_persist0": zero(3, stage3_param_persistence_threshold=0),
    "q2_healthy": zero(2),
    "q2_tiny_buckets": zero(2, reduce_bucket_size=2000, allgather_bucket_size=2000),
}
QUIET_MODEL = "models/zoo/tiny-llama-small.json"

# The OOM line of a public ZeRO-3 run (DeepSpeed stage3.py _optimizer_step, 6 nodes x 8 A800-80GB):
# https://github.com/hiyouga/LlamaFactory/issues/7532 (see tests/diagnose/README.md). Printed by
# rank 0 only, at step 3, then the rank exits 1 as a real OOM would.
OOM_TEXT = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.39 GiB. GPU 1 has a total "
            "capacity of 79.32 GiB of which 2.40 GiB is free. Process 105400 has 76.92 GiB memory in use. Of the "
            "allocated memory 73.28 GiB is allocated by PyTorch, and 1.59 GiB is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
            "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")

WORKER = r'''
import json, os, sys, torch
import deepspeed
from deepspeed.runtime.utils import see_memory_usage
from transformers import LlamaConfig, LlamaForCausalLM
cfg_path, model_cfg_path, steps, inject_oom = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
quiet = sys.argv[5] == "1"
import logging
# DeepSpeed <= 0.16 logged at INFO by default (utils/logging.py create_logger); 0.19 defaults to WARNING,
# which hides the engine's configuration dump. Restore INFO as those versions (and most users' logs) had,
# except for the "quiet" scenarios, which keep 0.19's default: their logs carry the timer lines and the
# comms logger's summary (both printed whatever the level: utils/timer.py print_dist, comms_logging.py
# print) but no configuration dump, as a user of 0.19 sees them.
if not quiet:
    deepspeed.utils.logging.logger.setLevel(logging.INFO)
    for h in deepspeed.utils.logging.logger.handlers:
        h.setLevel(logging.INFO)
deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
ds_config = json.load(open(cfg_path))
mc = json.load(open(model_cfg_path))
mc = {k: v for k, v in mc.items() if k not in ("architectures",)}
config = LlamaConfig(**mc)
model = LlamaForCausalLM(config)
see_memory_usage("before deepspeed.initialize", force=True)
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
see_memory_usage("after deepspeed.initialize", force=True)
rank = torch.distributed.get_rank()
g = torch.Generator().manual_seed(1 + rank)
seq = 64
for step in range(steps):
    ids = torch.randint(0, config.vocab_size, (ds_config["train_micro_batch_size_per_gpu"], seq), generator=g)
    if inject_oom and step == 2 and rank == 0:
        print("Traceback (most recent call last):", file=sys.stderr, flush=True)
        print("  File \"train.py\", line 42, in <module>", file=sys.stderr, flush=True)
        print(os.environ["ZP_OOM_TEXT"], file=sys.stderr, flush=True)
        os._exit(1)
    out = engine(input_ids=ids, labels=ids)
    engine.backward(out.loss)
    engine.step()
    if rank == 0:
        print(f"{{'loss': {out.loss.item():.4f}, 'step': {step + 1}}}", flush=True)
see_memory_usage("after training", force=True)
deepspeed.comm.log_summary()
# A clean exit (without it rank 1's gloo teardown can abort: "terminate called without an active exception").
torch.distributed.barrier()
torch.distributed.destroy_process_group()
'''


def trim(text: str) -> str:
    b = text.encode()
    if len(b) <= MAX_BYTES:
        return text
    # Keep the head (configuration dump) and the tail (last steps, comms summary).
    head, tail = b[:MAX_BYTES // 2], b[-(MAX_BYTES // 2 - 200):]
    return (head.decode(errors="ignore") + "\n[... trimmed by scripts/make_ds_logs.py ...]\n" +
            tail.decode(errors="ignore"))


def run(name: str, zcfg: dict, steps: int) -> None:
    quiet = name.startswith("q")
    cfg = dict(BASE)
    cfg["zero_optimization"] = zcfg
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", ZP_OOM_TEXT=OOM_TEXT,
               TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    with tempfile.TemporaryDirectory() as d:
        cp = pathlib.Path(d) / "ds_config.json"
        cp.write_text(json.dumps(cfg, indent=2))
        wp = pathlib.Path(d) / "train.py"
        wp.write_text(WORKER)
        torchrun = pathlib.Path(sys.executable).parent / "torchrun"
        cmd = [str(torchrun), "--nproc_per_node", "2", "--master_port", str(29500 + abs(hash(name)) % 400), str(wp),
               str(cp), str(ROOT / (QUIET_MODEL if quiet else "models/zoo/tiny-llama-micro.json")), str(steps),
               "1" if name.endswith("oom") else "0", "1" if quiet else "0"]
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.log").write_text(trim(p.stdout))
    (OUT / f"{name}.ds_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    print(f"{name}: rc={p.returncode}, {len(p.stdout)} bytes", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append")
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()
    for name, z in SCENARIOS.items():
        if a.only and name not in a.only:
            continue
        run(name, z, a.steps)


if __name__ == "__main__":
    main()
