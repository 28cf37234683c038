#!/usr/bin/env python3
"""DeepSpeed's own step time and memory on one GPU, for the DeepSpeed time model (issue 24).

Why one GPU: the device tool lends one GPU. With one rank there is no network, so what DeepSpeed adds
over the same model's compute is its own host-side work: ZeRO-3's module hooks, its gather and
partition bookkeeping, the reduce/partition code of stages 1-2, BF16_Optimizer at stage 0, and the
optimizer step. A run at stage s minus the run at stage 0, same shapes, measures that overhead on a
real GPU; small micro-steps (mb 1, seq 512) expose the fixed per-micro-step costs, which is where
published DeepSpeed runs are slower than zeroplan predicts (docs/time-model.md).

Each configuration: transformers' LlamaForCausalLM from a config.json (random init on the GPU, SDPA
attention), deepspeed.initialize with bf16 and ZeRO stage s, torch AdamW ("torch_adam": true, so no
op is JIT-compiled on a 15-minute lease; DeepSpeed's default FusedAdam is one multi-tensor kernel, the
step differs by milliseconds at 1.1B), random tokens. Timed per phase (forward, engine.backward,
engine.step) with a device synchronisation after each, median over --steps after --warmup steps.
Results go to --out as JSON after every configuration, so a run cut short keeps what finished.

Usage: python3 scripts/deepspeed_step_bench.py --config scripts/gpu_models/tinyllama-1.1b.json \
           --runs "s0:4:2048 s3:1:512:ga4 s3:1:512:pt0" --out ds.json
A run is stage:micro-batch:seq-len[:option...]; options: ga<N> gradient accumulation steps,
ckpt (HF gradient checkpointing), pt0 (stage3_param_persistence_threshold 0), off (optimizer offload to
the CPU with DeepSpeedCPUAdam), fused (torch AdamW with fused=True: one multi-tensor kernel family, as
DeepSpeed's default FusedAdam, without JIT-building that op on the lease), oc (overlap_comm true, the
HF/accelerate example configs' setting at stages 1-2), L<N> (the config with N decoder layers, to
separate per-layer costs from fixed ones), liger (Liger-Kernel applied as the HF
Trainer's use_liger_kernel does; its wheel carried in .whl/), omp<N> (OMP_NUM_THREADS=N for the process, as torchrun and
accelerate set 1 per rank and DeepSpeed's --bind_cores_to_rank sets cores / ranks: DeepSpeedCPUAdam's OpenMP
loop reads it once, so every run in one process must agree; unset leaves libgomp's default, all cores), prof (after the timed steps, one more step under torch.profiler:
per phase, the number of CUDA kernels and the GPU time they took, so a phase's wall time splits into GPU
work and host time the GPU waited for). Run each configuration in its own process (gpu_check.sh does): memory
is not all returned between engines in one process, so later peaks would include earlier runs'.
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time


def parse_run(text):
    parts = text.split(":")
    if len(parts) < 3 or not parts[0].startswith("s"):
        raise ValueError(f"run '{text}' is not stage:micro:seq[:opts]")
    run = {"name": text, "stage": int(parts[0][1:]), "micro_batch": int(parts[1]), "seq_len": int(parts[2]),
           "grad_accum": 1, "checkpointing": False, "persistence_threshold": None,
           "offload_optimizer": False, "fused": False, "overlap_comm": None, "layers": None, "profile": False,
           "omp_threads": None, "liger": False}
    for o in parts[3:]:
        if o.startswith("ga"):
            run["grad_accum"] = int(o[2:])
        elif o == "ckpt":
            run["checkpointing"] = True
        elif o == "pt0":
            run["persistence_threshold"] = 0
        elif o == "off":
            run["offload_optimizer"] = True
        elif o == "prof":
            run["profile"] = True
        elif o == "fused":
            run["fused"] = True
        elif o == "liger":
            run["liger"] = True
        elif o == "oc":
            run["overlap_comm"] = True
        elif o.startswith("omp") and o[3:].isdigit():
            run["omp_threads"] = int(o[3:])
        elif o.startswith("L") and o[1:].isdigit():
            run["layers"] = int(o[1:])
        else:
            raise ValueError(f"run '{text}': unknown option '{o}'")
    return run


def profile_step(engine, ids, grad_accum, sync):
    """One more step, each phase under its own torch.profiler session: kernels launched, their summed GPU
    time (kernels on different streams may overlap, so this can exceed the wall time), memcpy/memset
    counts, and the phase's wall time under the profiler (which adds host time of its own)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    out = {}

    def phase(name, fn):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            t = time.perf_counter()
            r = fn()
            sync()
            wall = time.perf_counter() - t
        kern = n_kern = mem = 0
        launches = 0
        by_name = {}
        for e in p.events():
            if e.device_type.name == "CUDA":
                n = e.name.lower()
                us = e.time_range.elapsed_us()
                key = e.name[:140]
                c, t = by_name.get(key, (0, 0.0))
                by_name[key] = (c + 1, t + us)
                if n.startswith("memcpy") or n.startswith("memset"):
                    mem += 1
                else:
                    n_kern += 1
                    kern += us
            elif e.name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"):
                launches += 1
        rec = out.setdefault(name, {"kernels": 0, "kernel_ms": 0.0, "memcpy_memset": 0, "launch_calls": 0,
                                    "wall_ms_profiled": 0.0})
        rec["kernels"] += n_kern
        rec["kernel_ms"] += kern / 1e3
        rec["memcpy_memset"] += mem
        rec["launch_calls"] += launches
        rec["wall_ms_profiled"] += wall * 1e3
        # The kernels that take the phase's GPU time (name, launches, ms), largest first.
        top = rec.setdefault("top", {})
        for k, (c, t) in by_name.items():
            a, b = top.get(k, (0, 0.0))
            top[k] = (a + c, b + t / 1e3)
        rec["top"] = dict(sorted(top.items(), key=lambda kv: -kv[1][1])[:25])
        return r

    for _ in range(grad_accum):
        loss = phase("forward", lambda: engine(input_ids=ids, labels=ids).loss)
        phase("backward", lambda: engine.backward(loss))
        phase("step", lambda: engine.step())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--runs", required=True, help="space-separated stage:micro:seq[:opts]")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    runs = [parse_run(r) for r in args.runs.split()]
    omp = {r["omp_threads"] for r in runs}
    if len(omp) > 1:
        raise SystemExit(f"runs in one process must share omp<N> (libgomp reads OMP_NUM_THREADS once): {sorted(omp, key=str)}")
    omp = omp.pop()
    if omp is not None:
        os.environ["OMP_NUM_THREADS"] = str(omp)  # before torch and the JIT-built op load libgomp

    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    import torch
    import transformers
    import deepspeed
    from transformers import LlamaConfig, LlamaForCausalLM

    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    deepspeed.init_distributed(dist_backend="nccl" if cuda else "gloo")
    with open(args.config) as f:
        raw = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    results = {"config": args.config, "device": torch.cuda.get_device_name(0) if cuda else "cpu",
               "torch": torch.__version__, "transformers": transformers.__version__,
               "deepspeed": deepspeed.__version__, "optimizer": "torch AdamW (torch_adam)",
               "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "torch_threads": torch.get_num_threads(),
               "cpus": len(os.sched_getaffinity(0)),
               "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": []}

    def sync():
        if cuda:
            torch.cuda.synchronize()

    for run in runs:
        t_init = time.perf_counter()
        cfg = LlamaConfig(**raw)
        if run["layers"]:
            cfg.num_hidden_layers = run["layers"]
        cfg.use_cache = False
        cfg._attn_implementation = "sdpa"
        torch.manual_seed(1234)
        if run["liger"]:
            # Liger-Kernel as the HF Trainer's use_liger_kernel=True applies it: the model's class is
            # patched before it is built (RoPE, RMSNorm, SwiGLU and the fused linear cross-entropy,
            # which never materialises the b*s*V logits). Patching is global, so a liger run needs its
            # own process (gpu_check.sh gives each run one).
            from liger_kernel.transformers import apply_liger_kernel_to_llama
            apply_liger_kernel_to_llama()
            results["liger_kernel"] = __import__("importlib.metadata").metadata.version("liger-kernel")
        with dev:
            model = LlamaForCausalLM(cfg)
        if run["checkpointing"]:
            model.gradient_checkpointing_enable()
        zero = {"stage": run["stage"]}
        adam = {"lr": 1e-4, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0, "torch_adam": True}
        if run["offload_optimizer"]:
            # DeepSpeed's own CPU optimizer (DeepSpeedCPUAdam, JIT-built on first use: init_s includes
            # the build), pinned host buffers as 0.19.5+ default.
            zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
            del adam["torch_adam"]
        if run["fused"]:
            adam["fused"] = True  # passed through to torch.optim.AdamW by DeepSpeed's torch_adam path
        if run["overlap_comm"] is not None:
            zero["overlap_comm"] = run["overlap_comm"]
        if run["persistence_threshold"] is not None:
            zero["stage3_param_persistence_threshold"] = run["persistence_threshold"]
        ds_config = {
            "train_micro_batch_size_per_gpu": run["micro_batch"],
            "gradient_accumulation_steps": run["grad_accum"],
            "bf16": {"enabled": True},
            "zero_optimization": zero,
            "optimizer": {"type": "AdamW", "params": adam},
            "gradient_clipping": 1.0,
            "steps_per_print": 1000000,
            "wall_clock_breakdown": False,
        }
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
        sync()
        init_s = time.perf_counter() - t_init
        gen = torch.Generator(device=dev).manual_seed(1234)
        ids = torch.randint(0, cfg.vocab_size, (run["micro_batch"], run["seq_len"]), device=dev, generator=gen)
        fwd, bwd, opt, step_times, losses = [], [], [], [], []
        for it in range(args.warmup + args.steps):
            if it == args.warmup and cuda:
                torch.cuda.reset_peak_memory_stats()
            tf = tb = to = 0.0
            t0 = time.perf_counter()
            for _ in range(run["grad_accum"]):
                a = time.perf_counter()
                loss = engine(input_ids=ids, labels=ids).loss
                sync()
                b = time.perf_counter()
                engine.backward(loss)
                sync()
                c = time.perf_counter()
                engine.step()  # a no-op for the optimizer until the accumulation boundary
                sync()
                d = time.perf_counter()
                tf, tb, to = tf + b - a, tb + c - b, to + d - c
            total = time.perf_counter() - t0
            if it >= args.warmup:
                fwd.append(tf)
                bwd.append(tb)
                opt.append(to)
                step_times.append(total)
                losses.append(float(loss.detach()))
        prof = None
        if run["profile"]:
            prof = profile_step(engine, ids, run["grad_accum"], sync)
        tokens = run["micro_batch"] * run["seq_len"] * run["grad_accum"]
        med = statistics.median(step_times)
        rec = dict(run)
        rec.update({
            "init_s": init_s,
            "step_s_median": med,
            "step_s": step_times,
            "forward_s_median": statistics.median(fwd),
            "backward_s_median": statistics.median(bwd),
            "optimizer_s_median": statistics.median(opt),
            "tokens_per_s": tokens / med,
            "loss": losses,
            "max_memory_allocated": torch.cuda.max_memory_allocated() if cuda else None,
            "max_memory_reserved": torch.cuda.max_memory_reserved() if cuda else None,
            "profile": prof,
            "parameters": sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in model.parameters()),
        })
        results["runs"].append(rec)
        print(f"{run['name']}: step {med*1e3:.1f} ms (fwd {rec['forward_s_median']*1e3:.1f} / bwd "
              f"{rec['backward_s_median']*1e3:.1f} / step {rec['optimizer_s_median']*1e3:.1f}), "
              f"{tokens/med:.0f} tokens/s, init {init_s:.1f} s"
              + (f", max allocated {rec['max_memory_allocated']/1e9:.2f} GB" if cuda else ""), flush=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
        # Free this engine before the next (ZeRO-3 registers hooks on the module; a fresh model each run).
        engine.destroy() if hasattr(engine, "destroy") else None
        del engine, model, loss
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
