#!/usr/bin/env python3
"""Attention kernel throughput on the GPU at hand, against the curves zeroplan prices attention with.

planner/data/time_model.json prices attention on Hopper with FlashAttention-2 bars read from the
FlashAttention-3 paper (Shah et al. 2024, arXiv:2407.08608, Figs. 5-6: H100 SXM5, bf16, head dim 128,
batch x seqlen = 16k tokens, hidden 2048 = 16 heads), up to 16k and flat beyond. This script measures
the same setup with the kernels HF's attn_implementation='sdpa' reaches through PyTorch, each backend
forced (torch.nn.attention.sdpa_kernel): FLASH_ATTENTION (FlashAttention-2 in PyTorch) and
CUDNN_ATTENTION (cuDNN's fused attention), and extends it to 64k (batch 1 from 16k on), which the
long-context issue (27) needs.

FLOPs as the FlashAttention papers count them: forward 4 b h s^2 d, halved when causal; backward 2.5x
the forward. Time: CUDA events, median of --iters after --warmup. A backend that refuses a shape is
recorded with its error instead of a number.

Usage: python3 scripts/attention_bench.py --out attention.json [--head-dim 128] [--seqs 512,...,65536]
"""
import argparse
import json
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--head-dims", default="128,64")
    ap.add_argument("--seqs", default="512,1024,2048,4096,8192,16384,32768,65536")
    ap.add_argument("--tokens", type=int, default=16384, help="batch x seqlen (FA3 paper: 16k)")
    ap.add_argument("--hidden", type=int, default=2048, help="heads = hidden / head dim (FA3 paper: 2048)")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not torch.cuda.is_available():
        print("attention_bench: no CUDA device", file=sys.stderr)
        return 2
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "tokens": args.tokens, "hidden": args.hidden,
           "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": []}

    def timed(fn):
        for _ in range(args.warmup):
            fn()
        ts = []
        for _ in range(args.iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) / 1e3)
        return statistics.median(ts)

    for d in [int(x) for x in args.head_dims.split(",")]:
        h = args.hidden // d
        for s in [int(x) for x in args.seqs.split(",")]:
            b = max(1, args.tokens // s)
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            do = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
            for causal in (True, False):
                fwd_flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
                for name, be in backends.items():
                    row = {"backend": name, "head_dim": d, "heads": h, "batch": b, "seq": s, "causal": causal}
                    try:
                        with sdpa_kernel(be):
                            def f():
                                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                            def fb():
                                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                                o.backward(do)

                            tf = timed(f)
                            tfb = timed(fb)
                        tb = max(tfb - tf, 1e-9)
                        row.update({"fwd_s": tf, "fwd_bwd_s": tfb, "fwd_tflops": fwd_flops / tf / 1e12,
                                    "bwd_tflops": 2.5 * fwd_flops / tb / 1e12})
                        print(f"{name:5s} d={d} s={s:6d} b={b:2d} causal={int(causal)}: fwd {row['fwd_tflops']:6.1f}"
                              f" bwd {row['bwd_tflops']:6.1f} TFLOP/s", flush=True)
                    except Exception as e:  # a backend that refuses the shape: recorded, not fatal
                        row["error"] = str(e).splitlines()[0][:200]
                        print(f"{name:5s} d={d} s={s}: {row['error']}", flush=True)
                    res["rows"].append(row)
                    q.grad = k.grad = v.grad = None
            del q, k, v, do
            torch.cuda.empty_cache()
            with open(args.out, "w") as f:
                json.dump(res, f, indent=2)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
