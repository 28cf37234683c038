#!/usr/bin/env python3
"""Measure DeepSpeedCPUAdam (DeepSpeed 0.19.8, csrc/adam/cpu_adam_impl.cpp, built for this CPU) on
this machine: parameters updated per second for 1..N OpenMP threads (issue 24 item 1).

Run with the pinned DeepSpeed stack (scripts/ds_venv.sh):
    .venv-ds/bin/python scripts/measure_cpu_adam.py [--params 50e6] [--repeats 5]

Each thread count runs in its own process with OMP_NUM_THREADS set, because that is how a launcher
sets it (torchrun: 1 per rank unless set, torch/distributed/run.py; DeepSpeed's --bind_cores_to_rank:
cores / ranks, deepspeed/launcher/launch.py) and libgomp reads it once at start. The optimizer state
is what ZeRO-1/2 offload hands CPU Adam (stage_1_and_2.py with offload_optimizer=cpu): fp32 master,
fp32 gradient, fp32 m and v. Bytes per parameter: reads param, grad, m, v (16 B) and writes param,
m, v (12 B) = 28 B, from the Step_AVX loop in csrc/includes/cpu_adam.h. Prints one JSON object.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def worker(numel, repeats):
    import torch
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(numel, dtype=torch.float32))
    p.grad = torch.randn(numel, dtype=torch.float32)
    opt = DeepSpeedCPUAdam([p], lr=1e-4, adamw_mode=True)
    opt.step()  # first step: state allocation and the JIT-built op's first call, not timed
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {"threads": int(os.environ.get("OMP_NUM_THREADS", "0")), "numel": numel,
            "median_s": times[len(times) // 2], "min_s": times[0]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", type=float, default=50e6)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=str, default="")
    ap.add_argument("--worker", action="store_true")
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(int(a.params), a.repeats)))
        return
    ncpu = os.cpu_count() or 1
    threads = [int(t) for t in a.threads.split(",")] if a.threads else list(range(1, ncpu + 1))
    rows = []
    for t in threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(t))
        p = subprocess.run([sys.executable, __file__, "--worker", "--params", str(a.params),
                            "--repeats", str(a.repeats)], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            sys.exit(f"measure_cpu_adam: worker with {t} threads failed:\n{p.stderr[-2000:]}")
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["params_per_s"] = r["numel"] / r["median_s"]
        r["GBps_at_28_bytes_per_param"] = r["params_per_s"] * 28 / 1e9
        rows.append(r)
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            fl = next((l for l in f if l.startswith("flags")), "")
        flags = "avx512f" if " avx512f" in fl else "avx2" if " avx2" in fl else "none"
    except OSError:
        pass
    import deepspeed
    import torch
    print(json.dumps({"cpu": cpu, "simd": flags, "logical_cpus": ncpu, "deepspeed": deepspeed.__version__,
                      "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
