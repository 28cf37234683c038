#!/usr/bin/env python3
"""Records the weight-GEMM FLOPs DeepSpeed's training step really executes (forward, and backward
including the activation-checkpointing recompute), so CI can check the planner's operator table
(planner/op_model.cpp) against them without Python: tests/test_gemm_flops_conformance.cpp.

What is counted: every aten.mm and aten.addmm (2*m*n*k FLOPs each), and the forward's aten.add_
launches (DeepSpeed's zero3_linear_wrap adds a [b, s, in] input's bias in place), seen by a
TorchDispatchMode, i.e. below autograd, after nn.Linear / GPT-2 Conv1D / DeepSpeed's LinearFunctionForZeroStage3 have been
decomposed into the kernels they launch. The attention core (SDPA on CPU is one fused op; eager
attention multiplies 4-D tensors with bmm) and embedding gradients are not mm/addmm and are not
counted. One micro-step of one rank (world size 1, gloo, DS_ACCELERATOR=cpu), after one warm-up
step (stage 3 records its module trace in the first).

Cases (tests/deepspeed/cases.py families, 2 layers, hidden 256, micro-batch 2 x 64 tokens): the
checkpoint recompute under ZeRO-2 and ZeRO-3 (zero3_linear_wrap, and with memory_efficient_linear
false), reentrant vs non-reentrant, and the layer layouts whose MLP output is or is not the layer's
last saved tensor. No MoE case: transformers 5's experts run through its experts interface
(grouped_mm / batched_mm), not aten.mm, so this counter would not see them.

Usage: .venv-ds/bin/python tests/deepspeed/gemm_flops.py [--out PATH] [--case NAME]
"""
import argparse
import copy
import json
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import FAMILIES, LORA_TARGETS, ds_config  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "fixtures-gemm-flops", "0.19.8", "gemm_flops.json")


def case(family, stage, gc=True, reentrant=False, mel=True, lora=None, attn="sdpa"):
    zero = {} if mel else {"memory_efficient_linear": False}
    name = f"{family}_s{stage}" + ("_gc" if gc else "") + ("_reentrant" if reentrant else "") + \
        ("" if mel else "_nomel") + (f"_lora{'-'.join(lora)}" if lora else "")
    return {"name": name, "family": family, "hf_config": copy.deepcopy(FAMILIES[family]),
            "ds_config": ds_config(stage, "bf16", zero), "micro_batch": 2, "seq_len": 64,
            "gradient_checkpointing": gc, "use_reentrant": reentrant, "attn_implementation": attn,
            "lora": {"r": 8, "lora_alpha": 16, "target_modules": lora, "lora_dropout": 0.0} if lora else None}


CASES = [
    case("llama-gqa", 2, gc=False),
    case("llama-gqa", 2),
    case("llama-gqa", 2, reentrant=True),
    case("llama-gqa", 3),
    case("llama-gqa", 3, mel=False),
    case("llama-gqa", 2, lora=LORA_TARGETS["llama-gqa"]),
    case("llama-gqa", 2, lora=["q_proj", "v_proj"]),
    case("opt", 2),
    case("gpt2", 2),
    case("gemma2", 2, attn="eager"),  # Gemma2 declares _supports_sdpa = False
    case("qwen2", 2, gc=False),  # q/k/v biases: fused into addmm by torch's linear
    case("qwen2", 3, gc=False),  # ... added by zero3_linear_wrap's `output += bias`
]


class GemmCounter:
    """TorchDispatchMode counting mm/addmm FLOPs (2*m*n*k) and launches."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode
        import torch
        counter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if func is torch.ops.aten.add_.Tensor:
                    counter.add_inplace += 1
                if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
                    a, b = (args[0], args[1]) if func is torch.ops.aten.mm.default else (args[1], args[2])
                    m, k = a.shape
                    n = b.shape[1]
                    counter.flops += 2 * m * n * k
                    counter.launches += 1
                return func(*args, **kwargs)

        self.mode = Mode()
        self.flops = 0
        self.launches = 0
        self.add_inplace = 0  # aten.add_ (zero3_linear_wrap's `output += bias`)


def run(c):
    import torch
    import deepspeed
    import transformers
    os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": os.environ.get("ZP_PORT", "29533")})
    if not torch.distributed.is_initialized():
        deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False)
    torch.manual_seed(1234)
    hf = dict(c["hf_config"])
    model_type = hf.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, **hf)
    cfg = dict(c["ds_config"])
    # Built outside zero.Init, as tests/deepspeed/harness.py does: DeepSpeed 0.19.8's initialize wraps a
    # stage-3 model with zero.Init(module=...), which installs zero3_linear_wrap too
    # (partition_parameters.py Init.__init__ -> _enable_mem_efficient_linear, unless
    # memory_efficient_linear is false). (`with zero.Init()` around from_config fails under torch 2.15's
    # dynamo polyfills here.)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=c["attn_implementation"])
    model.config.use_cache = False
    if c["gradient_checkpointing"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": c["use_reentrant"]})
    if c["lora"]:
        from harness import apply_lora
        model = apply_lora(model, c["lora"], c["gradient_checkpointing"])
    model.train()
    engine, _, _, _ = deepspeed.initialize(model=model, config=cfg,
                                           model_parameters=[p for p in model.parameters() if p.requires_grad])
    g = torch.Generator().manual_seed(100)
    ids = torch.randint(0, config.vocab_size, (c["micro_batch"], c["seq_len"]), generator=g)
    out = {}
    for step in range(2):
        fwd, bwd = GemmCounter(), GemmCounter()
        with fwd.mode:
            loss = engine(input_ids=ids, labels=ids).loss
        with bwd.mode:
            engine.backward(loss)
        engine.step()
        out = {"forward_gemm_flops": fwd.flops, "forward_gemm_launches": fwd.launches,
               "forward_add_inplace_launches": fwd.add_inplace,
               "backward_gemm_flops": bwd.flops, "backward_gemm_launches": bwd.launches}
    rec = {k: c[k] for k in ("name", "hf_config", "ds_config", "micro_batch", "seq_len", "gradient_checkpointing",
                             "use_reentrant", "attn_implementation", "lora")}
    rec["measured"] = out
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--case")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:  # one case per process: DeepSpeed's zero.Init and linear override are process-global
        c = next(x for x in CASES if x["name"] == a.child)
        print(json.dumps(run(c)))
        return
    import subprocess
    import deepspeed
    import torch
    import transformers
    import peft
    results = []
    for i, c in enumerate(CASES):
        if a.case and c["name"] != a.case:
            continue
        env = dict(os.environ, ZP_PORT=str(29533 + i))
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", c["name"]], capture_output=True,
                           text=True, env=env, timeout=900)
        if p.returncode != 0:
            sys.exit(f"{c['name']}: exit {p.returncode}\n{p.stderr[-3000:]}")
        rec = json.loads(p.stdout.strip().splitlines()[-1])
        print(c["name"], rec["measured"], file=sys.stderr)
        results.append(rec)
    doc = {"about": "Weight-GEMM FLOPs (aten.mm + aten.addmm, 2*m*n*k) of one measured micro-step of one rank "
                    "under DeepSpeed on CPU: forward, and backward including the checkpoint recompute. Recorded by "
                    "tests/deepspeed/gemm_flops.py; checked by tests/test_gemm_flops_conformance.cpp.",
           "recorded_with": {"deepspeed": deepspeed.__version__, "torch": torch.__version__.split("+")[0],
                             "transformers": transformers.__version__, "peft": peft.__version__},
           "cases": results}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {a.out}: {len(results)} cases", file=sys.stderr)


if __name__ == "__main__":
    main()
