#!/usr/bin/env python3
"""PyTorch reference for zeroplan's GPU validation (issue 7, docs/validation.md).

Builds the same model as the executor from the same HF config.json (transformers' LlamaForCausalLM,
randomly initialised, SDPA attention), trains it with AdamW on random tokens at a given micro-batch and
sequence length, and reports the median step time, tokens/s and peak memory
(torch.cuda.max_memory_allocated / max_memory_reserved, after warm-up steps so that lazily created
optimizer states and cuBLAS workspaces are included).

Modes:
  bf16  parameters, gradients and AdamW states all in bf16 (the issue's "bf16, SDPA, AdamW"): model
        states 2+2+4 = 8 bytes per parameter.
  amp   fp32 parameters and AdamW states with bf16 autocast: 4+4+8 = 16 bytes per parameter, the same
        total as DeepSpeed's mixed precision (2+2+12, ZeRO paper sec. 3.1), which is what zeroplan predicts.

LoRA (--lora-rank R): PEFT's get_peft_model with LoraConfig(r=R, lora_alpha=8, lora_dropout=0,
target_modules = the seven decoder linears, as zeroplan's default and PEFT's "all-linear" for a Llama),
AdamW over the adapters only -- the same model zeroplan --method lora plans and the executor runs.

Usage: python3 scripts/pytorch_baseline.py --config models/zoo/llama-2-7b.json --micro-batch 1 \
           --seq-len 4096 --mode bf16 [--checkpointing] [--lora-rank 16] [--steps 6] [--warmup 2] \
           --out result.json
"""
import argparse
import json
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="HF config.json (zeroplan's models/zoo/*.json)")
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--mode", choices=["bf16", "amp"], default="bf16")
    ap.add_argument("--checkpointing", action="store_true", help="HF gradient checkpointing (full, per layer)")
    ap.add_argument("--lora-rank", type=int, default=0, help="LoRA adapters of this rank (PEFT); 0 = full")
    ap.add_argument("--lora-adapter-dtype", choices=["peft", "model"], default="peft",
                    help="peft: PEFT's default (autocast_adapter_dtype=True keeps adapters in fp32); "
                         "model: adapters in the model's dtype, as DeepSpeed's engine casts the whole module")
    ap.add_argument("--steps", type=int, default=6, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.micro_batch < 1 or args.seq_len < 2 or args.steps < 1 or args.warmup < 0 or args.lora_rank < 0:
        ap.error("micro-batch >= 1, seq-len >= 2, steps >= 1, warmup >= 0 and lora-rank >= 0 are required")

    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    if not torch.cuda.is_available():
        print("pytorch_baseline: no CUDA device", file=sys.stderr)
        return 2
    with open(args.config) as f:
        raw = json.load(f)
    raw = {k: v for k, v in raw.items() if not k.startswith("_")}
    if raw.get("model_type") != "llama":
        print(f"pytorch_baseline: {args.config} is not a Llama config", file=sys.stderr)
        return 2
    cfg = LlamaConfig(**raw)
    cfg.use_cache = False
    cfg._attn_implementation = "sdpa"  # torch.nn.functional.scaled_dot_product_attention (flash/cuDNN kernels)

    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    param_dtype = torch.bfloat16 if args.mode == "bf16" else torch.float32
    prev = torch.get_default_dtype()
    torch.set_default_dtype(param_dtype)
    with dev:
        model = LlamaForCausalLM(cfg)  # random init (config.initializer_range), directly on the GPU
    torch.set_default_dtype(prev)
    model.train()
    if args.checkpointing:
        model.gradient_checkpointing_enable()
        if args.lora_rank > 0:
            model.enable_input_require_grads()  # HF: checkpointed blocks need an input that requires grad
    peft_version = None
    if args.lora_rank > 0:
        import peft

        peft_version = peft.__version__
        lcfg = peft.LoraConfig(r=args.lora_rank, lora_alpha=8, lora_dropout=0.0, bias="none",
                               target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                               "down_proj"])
        # autocast_adapter_dtype=False leaves the adapters in the base model's dtype (bf16 here), which is
        # what DeepSpeed's engine does to the whole module (engine.py _configure_distributed_model:
        # module.bfloat16() under bf16), so that run is the one a DeepSpeed LoRA plan describes.
        model = peft.get_peft_model(model, lcfg, autocast_adapter_dtype=args.lora_adapter_dtype == "peft")
    n_params = sum(p.numel() for p in model.parameters())
    trainable = [p for p in model.parameters() if p.requires_grad]
    n_trainable = sum(p.numel() for p in trainable)
    # fused=True: one multi-tensor kernel per step, as the executor's fused AdamW (and DeepSpeed's FusedAdam).
    # PEFT may keep the adapters in fp32 (autocast_adapter_dtype); fused AdamW takes any float dtype.
    opt = torch.optim.AdamW(trainable, lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, fused=True)
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    ids = torch.randint(0, cfg.vocab_size, (args.micro_batch, args.seq_len), device=dev, generator=gen)

    def step() -> float:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.mode == "amp"):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss.detach()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    for _ in range(args.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss = step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
        losses.append(float(loss))
    tokens = args.micro_batch * args.seq_len
    med = statistics.median(times)
    result = {
        "config": args.config,
        "mode": args.mode,
        "checkpointing": args.checkpointing,
        "micro_batch": args.micro_batch,
        "seq_len": args.seq_len,
        "parameters": n_params,
        "trainable_parameters": n_trainable,
        "lora_rank": args.lora_rank,
        "peft": peft_version,
        "adapter_dtypes": sorted({str(p.dtype) for p in trainable}),
        "lora_adapter_dtype": args.lora_adapter_dtype,
        "attn_implementation": "sdpa",
        "step_s_median": med,
        "step_s": times,
        "tokens_per_s": tokens / med,
        "loss": losses,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"{args.config} {args.mode}{' ckpt' if args.checkpointing else ''}"
          f"{f' lora r={args.lora_rank}' if args.lora_rank else ''} mb={args.micro_batch} "
          f"seq={args.seq_len}: {med*1e3:.1f} ms/step, {tokens/med:.0f} tokens/s, "
          f"max allocated {result['max_memory_allocated']/1e9:.2f} GB, reserved {result['max_memory_reserved']/1e9:.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
