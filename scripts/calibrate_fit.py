#!/usr/bin/env python3
"""Calibrate and check zeroplan's time model against published training runs.

Usage:
  python3 scripts/calibrate_fit.py [path/to/zeroplan] [--fit] [--write]

Reads planner/data/calibration/runs.json, runs the real zeroplan binary on every row (--json with a
fixed ZeRO stage 3, micro-batch, checkpointing, no offload, gradient accumulation 1: FSDP full
shard is ZeRO-3's sharding) and compares its tokens/s per GPU with the measured one.
  error = predicted / measured - 1   (positive: zeroplan is optimistic)
Prints median |error|, bias (median error), share within 20%, worst, by split (fit / held_out), GPU,
sequence length and model size.

--fit   grid-searches the calibrated parameters of planner/data/time_model.json
        ("calibrated.sustained_tensor_core_factor", one per GPU architecture, and
        "calibrated.elementwise_bandwidth_factor", one for all, only with --fit-bandwidth; otherwise
        it stays 1.0) on the 'fit' rows only,
        minimising median |error| + |bias| per architecture; candidates are evaluated through the binary by
        pointing ZEROPLAN_TIME_MODEL at a temporary copy of the data file. Held-out rows never enter
        the fit.
--write with --fit: store the fitted factors and error_band (the 80th percentile of |error| over all
        rows, rounded up to a whole percent) in planner/data/time_model.json. Rebuild afterwards:
        the binary embeds the file.

--fit-network  for each DeepSpeed 'cluster' whose source does not state its inter-node network, prices
        its ds_fit rows with each candidate network (NETWORK_CANDIDATES: real products at real NIC counts)
        and prints the best (median |error| + |bias|) and the cluster's ds_held_out rows under it.
        The choice is copied into the rows by hand ("network", "nics", "network_basis": "fitted ...").

After the existing summary it also reports planner/data/calibration/deepspeed_runs.json (published
DeepSpeed ZeRO runs, issue 24 item 5): same prediction path, plus each row's stage, gradient
accumulation, offload and checkpoint implementation; errors by split (ds_fit / ds_held_out /
reference), GPU generation, stage and offload. Those rows never enter the fit above.
"""
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "planner/data/calibration/runs.json"
LONG_CONTEXT_RUNS = ROOT / "planner/data/calibration/long_context_runs.json"
DATA = ROOT / "planner/data/time_model.json"
DEEPSPEED_RUNS = ROOT / "planner/data/calibration/deepspeed_runs.json"

# Fraction of a full forward recomputed, per checkpointing label of runs.json.
RECOMPUTE_FRACTION = {"none": 0.0, "full": 1.0, "every_2nd_layer": 0.5, "half_forward": 0.5}


def find_binary(argv):
    for a in argv[1:]:
        if not a.startswith("--"):
            return a
    for p in ("build/zeroplan", "build-seed/zeroplan"):
        if (ROOT / p).is_file():
            return str(ROOT / p)
    sys.exit("calibrate_fit: no zeroplan binary (build it or pass its path)")


def run_plan(args, env):
    """One `zeroplan ... --json` run: its step time and plan (exit 1, does not fit, still prices it)."""
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    plan = json.loads(p.stdout)["plans"][0]
    return plan["time"]["step_s"], plan


# The PyTorch release a row ran, when the row does not say ("torch": "X.Y"): every row here was
# published before torch 2.11 (2026-03-23), the first release whose SDPA picks cuDNN attention on
# Hopper (planner/data/time_model.json "sdpa_backend"), so they ran SDPA's flash kernels; "2.10" stands
# for any release before 2.11 (only that distinction changes a plan).
PRE_2_11_TORCH = "2.10"


def step_time(z, row, ckpt, env):
    model = row["model"]
    if model.endswith(".json"):
        model = str(ROOT / model)
    gpus = f"{row['nodes']}x{row['gpus_per_node']}x{row['gpu']}" if row["nodes"] > 1 else \
        f"{row['gpus_per_node']}x{row['gpu']}"
    if row["parallelism"].startswith("HSDP"):
        gpus = f"{row['gpus_per_node']}x{row['gpu']}"  # shard group = one node
    # Optional row fields (defaults: the FSDP rows): "stage" (DDP = 0, torch ZeroRedundancyOptimizer =
    # 1), "grad_accum", "precision", "attention" (eager for HF models without SDPA at the time).
    args = [z, "--model", model, "--gpus", gpus, "--seq-len", str(row["seq_len"]),
            "--stage", str(row.get("stage", 3)), "--micro-batch", str(row["micro_batch"]),
            "--grad-accum", str(row.get("grad_accum", 1)), "--checkpointing", ckpt,
            "--precision", row.get("precision", "bf16"), "--attention", row.get("attention", "flash"),
            "--torch-version", row.get("torch", PRE_2_11_TORCH), "--offload-optimizer", "none", "--json"]
    if row.get("stage", 3) == 3:
        args[-1:-1] = ["--offload-param", "none"]
    # PyTorch FSDP runs torch's own F.linear (no DeepSpeed zero3_linear_wrap: no separate bias add, and
    # a non-reentrant checkpoint's recompute skips the MLP output GEMM, op_model.cpp); fms-fsdp and
    # torchtitan wrap blocks with checkpoint_wrapper's default CheckpointImpl.NO_REENTRANT.
    if "FSDP" in row["parallelism"]:
        args[-1:-1] = ["--memory-efficient-linear", "off"]
    return run_plan(args, env)


def predict(z, row, env, step=None):
    """Tokens/s per GPU for a row: the step time with the row's recompute fraction between the
    no-checkpointing and full-checkpointing plans. `step` prices one plan (default step_time)."""
    step = step or step_time
    frac = RECOMPUTE_FRACTION[row["checkpointing"]]
    t_none, plan = step(z, row, "none", env) if frac < 1 else (None, None)
    t_full = None
    if frac > 0:
        t_full, plan_full = step(z, row, "full", env)
        plan = plan if plan is not None else plan_full
    t = t_none if frac == 0 else t_full if frac == 1 else t_none + frac * (t_full - t_none)
    tokens = row["micro_batch"] * row.get("grad_accum", 1) * row["seq_len"]
    return tokens / t, plan


SIZE_BUCKETS = ("125M-1B", "1-3B", "3-10B", "10-40B", ">=40B")


def size_bucket(model_params):
    b = model_params / 1e9
    return "125M-1B" if b < 1 else "1-3B" if b < 3 else "3-10B" if b < 10 else "10-40B" if b < 40 else ">=40B"


def summarize(label, errs):
    if not errs:
        return f"  {label:<22} (none)"
    label = label if len(label) <= 22 else label[:60] + "\n  " + " " * 22
    a = [abs(e) for e in errs]
    return (f"  {label:<22} n={len(errs):>3}  median|err| {statistics.median(a)*100:5.1f}%  "
            f"bias {statistics.median(errs)*100:+6.1f}%  within20% {sum(x <= 0.2 for x in a)/len(a)*100:5.1f}%  "
            f"worst {max(errs, key=abs)*100:+6.1f}%")


def evaluate(z, rows, env):
    out = []
    for row in rows:
        pred, plan = predict(z, row, env)
        out.append((row, pred, pred / row["measured_tokens_per_s_per_gpu"] - 1, plan))
    return out


def data_with(factors, bw=None):
    d = json.loads(DATA.read_text())
    d["calibrated"]["sustained_tensor_core_factor"].update(factors)
    if bw is not None:
        d["calibrated"]["elementwise_bandwidth_factor"] = bw
    return d


def dump_compact(obj, indent=0):
    """json.dumps(indent=2), but lists of scalars, lists of scalar lists and scalar-only objects inside
    lists stay on one line each (the hand layout of planner/data/time_model.json)."""
    pad, inner = " " * indent, " " * (indent + 2)
    scalar = lambda v: not isinstance(v, (list, dict))
    flat = lambda v: scalar(v) or (isinstance(v, list) and all(scalar(x) for x in v))
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{inner}{json.dumps(k)}: {dump_compact(v, indent + 2)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        if all(flat(x) for x in obj):
            return json.dumps(obj)
        if all(isinstance(x, dict) and all(scalar(v) for v in x.values()) for x in obj):
            return "[\n" + ",\n".join(inner + json.dumps(x) for x in obj) + "\n" + pad + "]"
        return "[\n" + ",\n".join(inner + dump_compact(x, indent + 2) for x in obj) + "\n" + pad + "]"
    return json.dumps(obj)


def arch_of(gpu, data):
    return data["attention"]["architecture"].get(gpu, data["attention"]["default_architecture"])


def score(errs):
    med = statistics.median(abs(e) for e in errs)
    bias = statistics.median(errs)
    # Objective: median |error| plus |bias|, so the fit cannot buy a lower spread with a systematic
    # over- or under-prediction.
    return med + abs(bias), med, bias


def fit(z, rows):
    """Joint grid search: one element-wise bandwidth factor for all GPUs, and per architecture the
    sustained tensor-core factor (given the bandwidth factor, architectures are independent)."""
    data = json.loads(DATA.read_text())
    fit_rows = [r for r in rows if r["split"] == "fit"]
    archs = sorted({arch_of(r["gpu"], data) for r in fit_rows})
    best = None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "time_model.json"
        env = dict(os.environ, ZEROPLAN_TIME_MODEL=str(path))
        # The element-wise bandwidth factor stays at 1.0 (STREAM copy) unless --fit-bandwidth: a
        # joint fit drives it to 0.45 with the Ampere tensor-core factor at its 1.0 bound, i.e. it
        # then absorbs unmodelled overhead of small models instead of measuring bandwidth, and it
        # raises the GEMM-bound predictions of large models (docs/time-model.md).
        grid = range(40, 101, 5) if "--fit-bandwidth" in sys.argv else [100]
        for bw_i in grid:
            bw = bw_i / 100
            factors, total, errs_all = {}, 0.0, []
            for arch in archs:
                arows = [r for r in fit_rows if arch_of(r["gpu"], data) == arch]
                cands = []
                for i in range(50, 101, 2):
                    f = i / 100
                    path.write_text(json.dumps(data_with({arch: f}, bw)))
                    errs = [e for _, _, e, _ in evaluate(z, arows, env)]
                    cands.append((score(errs)[0], f, errs))
                cands.sort(key=lambda c: c[0])
                factors[arch] = cands[0][1]
                errs_all += cands[0][2]
            s = score(errs_all)
            print(f"  bandwidth factor {bw:.2f}: {factors}  median |err| {s[1]*100:.1f}%  bias {s[2]*100:+.1f}%")
            if best is None or s[0] < best[0]:
                best = (s[0], bw, factors)
    print(f"fit: elementwise_bandwidth_factor {best[1]:.2f}, sustained_tensor_core_factor {best[2]}")
    return best[2], best[1]


# ---- DeepSpeed runs (deepspeed_runs.json, issue 24 item 5): reported after the summary, never fitted ----

def ds_step_time(z, row, ckpt, env):
    """step_time() for a deepspeed_runs.json row: the same CLI path, plus the row's offload devices and
    checkpoint implementation (DeepSpeed rows run DeepSpeed's zero3_linear_wrap, so no
    --memory-efficient-linear off)."""
    model = row["model"]
    if model.endswith(".json"):
        model = str(ROOT / model)
    gpus = f"{row['nodes']}x{row['gpus_per_node']}x{row['gpu']}" if row["nodes"] > 1 else \
        f"{row['gpus_per_node']}x{row['gpu']}"
    stage = row.get("stage", 3)
    args = [z, "--model", model, "--gpus", gpus, "--seq-len", str(row["seq_len"]),
            "--stage", str(stage), "--micro-batch", str(row["micro_batch"]),
            "--grad-accum", str(row.get("grad_accum", 1)), "--checkpointing", ckpt,
            "--precision", row.get("precision", "bf16"), "--attention", row.get("attention", "flash"),
            "--torch-version", row.get("torch", PRE_2_11_TORCH),
            "--offload-optimizer", row.get("offload_optimizer", "none")]
    if stage == 3:
        args += ["--offload-param", row.get("offload_param", "none")]
    if "checkpoint_impl" in row:
        args += ["--checkpoint-impl", row["checkpoint_impl"]]
    # The inter-node network where the row carries one (a source's statement, or a fit over the
    # cluster's ds_fit rows, "network_basis" says which); otherwise zeroplan's default for the GPU.
    if row.get("network") and row["nodes"] > 1:
        args += ["--network", row["network"]]
    if row.get("nics") and row["nodes"] > 1:
        args += ["--nics", str(row["nics"])]
    # Optional: LoRA ("method": "lora", "lora_rank"), the kernels the script ran ("kernels", --kernels).
    if row.get("method"):
        args += ["--method", row["method"]]
    if row.get("lora_rank"):
        args += ["--lora-rank", str(row["lora_rank"])]
    if row.get("kernels"):
        args += ["--kernels", row["kernels"]]
    # "zero_optimization": the source's own ZeRO knobs (bucket and prefetch sizes the plan CLI has no flag
    # for): priced by `zeroplan check` on a ds_config with them, the plan's other flags alike.
    if row.get("zero_optimization"):
        return ds_check_step(z, row, args, env)
    args.append("--json")
    return run_plan(args, env)


def ds_check_step(z, row, plan_args, env):
    """A row with its own zero_optimization knobs: `zeroplan check` on a ds_config holding them, its
    micro-batch, accumulation, bf16 and AdamW (the plan's flags carried over where check takes them)."""
    cfg = {"train_micro_batch_size_per_gpu": row["micro_batch"],
           "gradient_accumulation_steps": row.get("grad_accum", 1),
           "bf16": {"enabled": row.get("precision", "bf16") == "bf16"},
           "fp16": {"enabled": row.get("precision", "bf16") == "fp16"},
           "gradient_clipping": 1.0,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
           "zero_optimization": dict(row["zero_optimization"], stage=row.get("stage", 3))}
    keep = {"--model", "--gpus", "--seq-len", "--checkpointing", "--attention", "--torch-version",
            "--checkpoint-impl", "--network", "--nics", "--kernels", "--method", "--lora-rank"}
    rest = []
    for i in range(1, len(plan_args) - 1, 2):
        if plan_args[i] in keep:
            rest += [plan_args[i], plan_args[i + 1]]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg, f)
    try:
        p = subprocess.run([z, "check", f.name] + rest + ["--json"], capture_output=True, text=True, env=env,
                           timeout=120)
    finally:
        os.unlink(f.name)
    out = json.loads(p.stdout)
    if out.get("predicted") is None:
        raise RuntimeError(f"check {row['id']}: no prediction: {p.stderr.strip()} {out.get('errors')}")
    return out["predicted"]["time"]["step_s"], out["predicted"]


def ds_evaluate(z, rows, env):
    out = []
    for row in rows:
        pred, plan = predict(z, row, env, step=ds_step_time)
        out.append((row, pred, pred / row["measured_tokens_per_s_per_gpu"] - 1, plan))
    return out


# Inter-node networks --fit-network tries for a cluster whose source does not state its network: each a
# real product (hwprofiles/links) at the GPU's usual NIC count, none a continuous knob.
NETWORK_CANDIDATES = [("ib-ndr-400", 8), ("ib-ndr-400", 4), ("ib-hdr-200", 8), ("ib-hdr-200", 4),
                      ("roce-400", 8), ("roce-200", 8), ("ib-edr-100", 8)]


def fit_network(z, rows, env):
    """For each 'cluster' (rows sharing one unstated network), price its ds_fit rows with every
    candidate network and print median |error| and bias; the smallest median |error| + |bias| is the
    cluster's fitted network. ds_held_out rows never enter the choice; they are printed after it."""
    clusters = {}
    for r in rows:
        if r["split"] in ("ds_fit", "ds_held_out") and r.get("cluster") and r["nodes"] > 1:
            clusters.setdefault(r["cluster"], []).append(r)
    for name, rs in sorted(clusters.items()):
        fit_rows = [r for r in rs if r["split"] == "ds_fit"]
        held = [r for r in rs if r["split"] == "ds_held_out"]
        print(f"\ncluster {name}: {len(fit_rows)} ds_fit rows, {len(held)} ds_held_out rows")
        scores = []
        for net, nics in NETWORK_CANDIDATES:
            trial = [dict(r, network=net, nics=nics) for r in fit_rows]
            errs = [e for _, _, e, _ in ds_evaluate(z, trial, env)]
            med = statistics.median(abs(e) for e in errs)
            bias = statistics.median(errs)
            scores.append((med + abs(bias), net, nics))
            print(f"  {nics} x {net:<12} ds_fit median|err| {med*100:5.1f}%  bias {bias*100:+6.1f}%")
        _, net, nics = min(scores)
        held_errs = [e for _, _, e, _ in ds_evaluate(z, [dict(r, network=net, nics=nics) for r in held], env)]
        print(f"  fitted: {nics} x {net}; ds_held_out with it: " + summarize("", held_errs).strip())


def gpu_generation(gpu):
    g = gpu.upper()
    if g.startswith(("B200", "B300", "GB200", "RTX5090")):
        return "Blackwell"
    if g.startswith(("H100", "H200", "H800", "H20", "GH200")):
        return "Hopper"
    if g.startswith(("A100", "A800", "A40", "A10", "RTX-A6000", "RTX3090")):
        return "Ampere"
    if g.startswith("V100"):
        return "Volta"
    return "other"


def ds_offload_label(row):
    o, p = row.get("offload_optimizer", "none"), row.get("offload_param", "none")
    return "none" if o == "none" and p == "none" else f"opt:{o} param:{p}"


def ds_report(ds_res):
    print(f"\nDeepSpeed runs ({DEEPSPEED_RUNS.relative_to(ROOT)}; the model's parameters never fitted to them, a "
          f"cluster's unstated network may be (network_basis); error = predicted/measured - 1):")
    print(f"{'run':<40} {'gpu':<10} {'st':>2} {'mb':>2} {'acc':>3} {'seq':>5} {'offload':<20} "
          f"{'measured':>9} {'predicted':>9} {'error':>7} {'split':<11}")
    for row, pred, err, plan in ds_res:
        print(f"{row['id']:<40} {row['gpu']:<10} {row.get('stage', 3):>2} {row['micro_batch']:>2} "
              f"{row.get('grad_accum', 1):>3} {row['seq_len']:>5} {ds_offload_label(row):<20} "
              f"{row['measured_tokens_per_s_per_gpu']:>9.0f} {pred:>9.0f} {err*100:>+6.1f}% {row['split']:<11}")
    groups = {}
    for row, pred, err, plan in ds_res:
        groups.setdefault(f"split={row['split']}", []).append(err)
        if row["split"] == "reference":
            continue
        groups.setdefault("all (ds_fit+ds_held_out)", []).append(err)
        groups.setdefault(f"gen={gpu_generation(row['gpu'])}", []).append(err)
        groups.setdefault(f"stage={row.get('stage', 3)}", []).append(err)
        groups.setdefault(f"offload={'yes' if ds_offload_label(row) != 'none' else 'no'}", []).append(err)
    # The same breakdowns over the reference rows, apart (ambiguous configurations).
    for row, pred, err, plan in ds_res:
        if row["split"] != "reference":
            continue
        groups.setdefault(f"ref gen={gpu_generation(row['gpu'])}", []).append(err)
        groups.setdefault(f"ref stage={row.get('stage', 3)}", []).append(err)
        groups.setdefault(f"ref offload={'yes' if ds_offload_label(row) != 'none' else 'no'}", []).append(err)
    print("\nDeepSpeed summary (error = predicted/measured - 1; 'all' and the gen/stage/offload groups: ds_fit + ds_held_out;"
          " 'ref ...': reference rows only):")
    order = ["all (ds_fit+ds_held_out)"] + sorted(k for k in groups if k.startswith("split=")) + \
        sorted(k for k in groups if k.split("=")[0] in ("gen", "stage", "offload")) + \
        sorted(k for k in groups if k.startswith("ref "))
    for k in order:
        if k in groups:
            print(summarize(k, groups[k]))
    for label, sel in (("ds_fit+ds_held_out", lambda r: r["split"] != "reference"),
                       ("reference", lambda r: r["split"] == "reference")):
        worst = sorted((x for x in ds_res if sel(x[0])), key=lambda x: -abs(x[2]))[:4]
        print(f"  largest |error| ({label}): " + ", ".join(f"{r['id']} {e*100:+.1f}%" for r, _, e, _ in worst))


def main():
    z = find_binary(sys.argv)
    rows = json.loads(RUNS.read_text())["runs"]
    # Long-context rows (ids 'lc-', issue 13 item 5) live in their own file, same row format.
    if LONG_CONTEXT_RUNS.is_file():
        rows += json.loads(LONG_CONTEXT_RUNS.read_text())["runs"]
    env = dict(os.environ)
    tmpfile = None
    if "--fit" in sys.argv:
        factors, bw = fit(z, rows)
        tmpfile = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(data_with(factors, bw), tmpfile)
        tmpfile.close()
        env["ZEROPLAN_TIME_MODEL"] = tmpfile.name
    res = evaluate(z, rows, env)
    # DeepSpeed rows (issue 24 item 5): predicted with the same environment, printed after everything else.
    ds_res = ds_evaluate(z, json.loads(DEEPSPEED_RUNS.read_text())["runs"], env) \
        if DEEPSPEED_RUNS.is_file() else None
    print(f"{'run':<26} {'gpu':<10} {'seq':>6} {'ckpt':<16} {'measured':>9} {'predicted':>9} {'error':>7} {'MFU':>5}")
    for row, pred, err, plan in res:
        print(f"{row['id']:<26} {row['gpu']:<10} {row['seq_len']:>6} {row['checkpointing']:<16} "
              f"{row['measured_tokens_per_s_per_gpu']:>9.0f} {pred:>9.0f} {err*100:>+6.1f}% "
              f"{plan['throughput']['mfu']:>5.2f}")
    print("\nsummary (error = predicted/measured - 1):")
    # 'reference' rows (implementations zeroplan does not model: Megatron-LM's and flash-attn's fused
    # kernels) are printed and summarised on their own line only; every other group is fit + held_out.
    groups = {}
    for row, pred, err, plan in res:
        groups.setdefault(f"split={row['split']}", []).append(err)
        if row["split"] == "reference":
            groups.setdefault(f"reference {row.get('framework', '?')[:40]}", []).append(err)
            continue
        for k in ("gpu", "seq"):
            key = f"{k}={row['seq_len'] if k == 'seq' else row[k]}"
            groups.setdefault(key, []).append(err)
        groups.setdefault("all", []).append(err)
    res_all, res = res, [x for x in res if x[0]["split"] != "reference"]
    for k in sorted(groups):
        print(summarize(k, groups[k]))
    sizes = {}
    model_params = {}
    for row, pred, err, plan in res:
        m = row["model"]
        if m not in model_params:
            mp = m if not m.endswith(".json") else str(ROOT / m)
            out = subprocess.run([z, "--model", mp, "--gpus", "1xA100-80GB", "--stage", "3", "--micro-batch", "1",
                                  "--offload-optimizer", "none", "--offload-param", "none", "--checkpointing", "full",
                                  "--json"], capture_output=True, text=True, env=env).stdout
            model_params[m] = json.loads(out)["model"]["parameters"] if out else 0
        sizes.setdefault(size_bucket(model_params[m]), []).append(err)
    for k in SIZE_BUCKETS:
        if k in sizes:
            print(summarize(f"size {k}", sizes[k]))
    if "--write" in sys.argv and tmpfile is not None:
        # The band printed with every prediction: the 80th percentile of |error| over all rows
        # (fit and held-out), rounded up to a whole percent -- four predictions in five fall inside.
        errs = sorted(abs(e) for _, _, e, _ in res)
        band = math.ceil(errs[min(len(errs) - 1, math.ceil(0.8 * len(errs)) - 1)] * 100) / 100
        d = json.loads(Path(tmpfile.name).read_text())
        text = DATA.read_text()
        cur = json.loads(text)
        cur["calibrated"]["sustained_tensor_core_factor"] = d["calibrated"]["sustained_tensor_core_factor"]
        cur["calibrated"]["elementwise_bandwidth_factor"] = d["calibrated"]["elementwise_bandwidth_factor"]
        cur["calibrated"]["error_band"] = band
        DATA.write_text(dump_compact(cur) + "\n")
        print(f"wrote {DATA.relative_to(ROOT)}: factors {cur['calibrated']['sustained_tensor_core_factor']}, "
              f"error_band {band}")
    if tmpfile is not None:
        os.unlink(tmpfile.name)
    if ds_res is not None:
        ds_report(ds_res)
        # Sensitivity: the same rows with zeroplan's default network for their GPU (rows whose
        # network was fitted, not stated, lose it), so the fitted input is never hidden.
        fitted = [r for r, _, _, _ in ds_res if r["split"] != "reference" and
                  str(r.get("network_basis", "")).startswith("fitted")]
        if fitted:
            base = [dict(r, network=None, nics=None) for r in fitted]
            print(summarize("default network",
                            [e for _, _, e, _ in ds_evaluate(z, base, env)]) +
                  f"  ({len(fitted)} rows whose network is fitted, priced instead with the GPU's default)")
    if "--fit-network" in sys.argv and DEEPSPEED_RUNS.is_file():
        fit_network(z, json.loads(DEEPSPEED_RUNS.read_text())["runs"], env)


if __name__ == "__main__":
    main()
