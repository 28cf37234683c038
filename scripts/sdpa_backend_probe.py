#!/usr/bin/env python3
"""Which attention kernel PyTorch's SDPA runs by default, and how fast, as HF models call it (issue 24 item 3).

zeroplan prices HF's attn_implementation="sdpa" on the FlashAttention-2 curve (planner/data/time_model.json,
"flash3_hopper" source note). On the H100 of 2026-11-26 the cuDNN backend was 1.6-2.1x faster than the flash
backend when each was forced (docs/validation.md, "Attention kernels"); which one SDPA picks when nothing is
forced decides which curve HF users get. This probe runs F.scaled_dot_product_attention with no backend
forced, in the three ways transformers' sdpa_attention_forward calls it:
  causal  -- is_causal=True, no mask (no padding in the batch: transformers drops the all-ones mask);
  mask    -- an explicit boolean [b, 1, s, s] causal mask (a padded batch);
  none    -- no mask, not causal (encoders; for reference).
For each it records the CUDA kernels launched in forward and backward (torch.profiler), the backend they
belong to, and the median time, and writes JSON. bf16, head dim 128 and 64, 32 query heads, 8 KV heads
(enable_gqa as transformers passes it) and 32 KV heads.

Usage: python3 scripts/sdpa_backend_probe.py --out sdpa_probe.json
"""
import argparse
import json
import statistics
import sys
import time


def classify(name: str) -> str:
    n = name.lower()
    if "cudnn" in n or "fprop_sdpa" in n or "bprop_sdpa" in n or "sm90_" in n and "fmha" not in n:
        return "cudnn"
    if "flash" in n:
        return "flash"
    if "fmha" in n or "cutlass" in n and "attention" in n or "efficient" in n:
        return "efficient"
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(),
           "flags": {"flash": torch.backends.cuda.flash_sdp_enabled(),
                     "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                     "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
                     "math": torch.backends.cuda.math_sdp_enabled()},
           "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cases": []}
    for d in (128, 64):
        for s in (2048, 8192):
            for kv in (8, 32):
                for mode in ("causal", "mask", "none"):
                    h, b = 32, 1
                    torch.manual_seed(0)
                    q = torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                    k = torch.randn(b, kv, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                    v = torch.randn(b, kv, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                    mask = None
                    if mode == "mask":
                        mask = torch.ones(s, s, device=dev, dtype=torch.bool).tril()[None, None]
                    kw = {"attn_mask": mask, "is_causal": mode == "causal"}
                    if kv != h:
                        kw["enable_gqa"] = True

                    def step():
                        o = F.scaled_dot_product_attention(q, k, v, **kw)
                        o.backward(torch.ones_like(o))
                        return o

                    try:
                        step()
                        torch.cuda.synchronize()
                    except Exception as e:  # a backend refusing the case is a result too
                        res["cases"].append({"head_dim": d, "seq": s, "kv_heads": kv, "mode": mode,
                                             "error": f"{type(e).__name__}: {e}"[:300]})
                        print(f"d{d} s{s} kv{kv} {mode}: {type(e).__name__}", flush=True)
                        continue
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        step()
                        torch.cuda.synchronize()
                    kernels = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
                    backends = sorted({classify(n) for n in kernels} - {""})
                    times = []
                    for _ in range(args.iters):
                        a = torch.cuda.Event(enable_timing=True)
                        z = torch.cuda.Event(enable_timing=True)
                        a.record()
                        step()
                        z.record()
                        torch.cuda.synchronize()
                        times.append(a.elapsed_time(z) / 1e3)
                    fwd_flops = 4 * b * h * s * s * d * (0.5 if mode != "none" else 1.0)
                    t = statistics.median(times)
                    rec = {"head_dim": d, "seq": s, "kv_heads": kv, "mode": mode, "backends": backends,
                           "kernels": kernels[:12], "fwd_bwd_s_median": t,
                           "fwd_bwd_tflops": 3.5 * fwd_flops / t / 1e12}
                    res["cases"].append(rec)
                    print(f"d{d} s{s} kv{kv} {mode}: {backends} {t*1e3:.2f} ms "
                          f"{rec['fwd_bwd_tflops']:.0f} TFLOP/s", flush=True)
                    del q, k, v, mask
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
