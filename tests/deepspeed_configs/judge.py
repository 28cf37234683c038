#!/usr/bin/env python3
"""Real DeepSpeed as the judge of ds_config files: records, per config and runner, whether the real
stack accepts it (deepspeed.initialize + one training step) or the exact error, and the values it
resolved. tests/test_configs_conformance.cpp compares `zeroplan check` with every record.

    DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 .venv-ds/bin/python tests/deepspeed_configs/judge.py \
        [--runners deepspeed,hf] [--only NAME ...]

Reads tests/deepspeed_configs/configs/*.json (the files exactly as found or written; DeepSpeed loads a
config path with hjson, so non-strict JSON is judged too) and writes
tests/deepspeed_configs/records_<deepspeed version>.json. Re-run it after installing another
DeepSpeed (PYTHONPATH=.ds-versions/<v>) to record that version.

Set-up, the same for every config: one rank (world size 1, gloo, CPU accelerator), the zoo's
tiny-llama-micro (hidden 64, 2 layers, built from models/zoo/tiny-llama-micro.json: no download),
sequence length 16, one optimizer step of `gradient_accumulation_steps` micro-batches.
 - deepspeed runner: deepspeed.initialize(model, model_parameters, config=<path>). A config without an
   "optimizer" section gets a client optimizer, as a training script passes one: torch.optim.AdamW,
   or DeepSpeedCPUAdam when the optimizer is offloaded (DeepSpeed refuses a torch optimizer with
   offload unless zero_force_ds_cpu_optimizer is false).
 - hf runner: transformers Trainer(TrainingArguments(deepspeed=<path>, max_steps=1)), with the
   TrainingArguments a script matching the file would pass: per_device_train_batch_size,
   gradient_accumulation_steps, bf16/fp16, learning_rate, weight_decay, adam betas/epsilon,
   warmup_steps, max_grad_norm equal to the file's fixed values, TrainingArguments' defaults where the
   file says "auto" or nothing. max_steps is 1, so a fixed scheduler total_num_steps other than 1
   cannot match (recorded as the Trainer's refusal).
CPU-only adjustments (none changes a config decision): the CPU accelerator's is_fp16_supported() is
forced True (mkldnn fp16 is missing on many CPUs; GPUs support fp16), and so is transformers'
bf16/fp16 GPU check in TrainingArguments; NVMe offload needs the async_io
op (libaio), so on a machine without it NVMe configs record DeepSpeed's own refusal of the op.
"""
import argparse
import contextlib
import glob
import io
import json
import os
import pathlib
import sys
import tempfile
import traceback

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": os.environ.get("ZP_JUDGE_PORT", "29531")})

HERE = pathlib.Path(__file__).resolve().parent
SEQ = 16
HIDDEN = 64


def load_hjson(path):
    import hjson
    return hjson.load(open(path), object_pairs_hook=dict)


def tiny_model():
    """models/zoo/tiny-llama-micro.json (hidden 64, 2 layers), the model tests/test_configs_conformance.cpp
    gives `check`, so "auto" sizes filled from hidden_size agree."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = json.loads((HERE.parent.parent / "models" / "zoo" / "tiny-llama-micro.json").read_text())
    cfg.pop("architectures", None)
    return LlamaForCausalLM(LlamaConfig(**cfg))


def plain(v):
    if isinstance(v, bool) or v is None or isinstance(v, (int, float, str)):
        return v
    if hasattr(v, "value"):
        return plain(v.value)
    return str(v)


def resolved(engine):
    import deepspeed
    r = {
        "train_batch_size": engine.train_batch_size(),
        "train_micro_batch_size_per_gpu": engine.train_micro_batch_size_per_gpu(),
        "gradient_accumulation_steps": engine.gradient_accumulation_steps(),
        "zero_stage": int(engine.zero_optimization_stage()),
        "precision": "bf16" if engine.bfloat16_enabled() else "fp16" if engine.fp16_enabled() else "fp32",
        "optimizer_wrapper": type(engine.optimizer).__name__ if engine.optimizer is not None else None,
        "gradient_clipping": engine.gradient_clipping(),
    }
    zc = engine._config.zero_config
    st = r["zero_stage"]
    oo, op = zc.offload_optimizer, zc.offload_param
    r["offload_optimizer"] = plain(oo.device) if oo is not None else "none"
    r["offload_param"] = plain(op.device) if (op is not None and st == 3) else "none"
    if st >= 1:
        r.update({"reduce_bucket_size": int(zc.reduce_bucket_size), "allgather_bucket_size":
                  int(zc.allgather_bucket_size), "overlap_comm": bool(zc.overlap_comm),
                  "contiguous_gradients": bool(zc.contiguous_gradients)})
    if st == 3:
        r.update({"stage3_prefetch_bucket_size": int(zc.prefetch_bucket_size),
                  "stage3_param_persistence_threshold": int(zc.param_persistence_threshold),
                  "stage3_max_live_parameters": int(zc.max_live_parameters),
                  "sub_group_size": int(zc.sub_group_size)})
    if r["offload_optimizer"] != "none" or r["offload_param"] != "none":
        sec = oo if r["offload_optimizer"] != "none" else op
        r["pin_memory"] = bool(sec.pin_memory)
    return r


def batch(mb):
    import torch
    ids = torch.randint(0, 256, (mb, SEQ))
    return ids


def error_text(e):
    msg = f"{type(e).__name__}: {e}".strip()
    lines = [l.strip() for l in msg.splitlines() if l.strip() and "errors.pydantic.dev" not in l]
    return " | ".join(lines[:4])[:500] if lines else type(e).__name__


def run_deepspeed(path, cfg):
    import torch
    import deepspeed
    model = tiny_model()
    kwargs = {}
    zo = cfg.get("zero_optimization") if isinstance(cfg.get("zero_optimization"), dict) else {}
    off = zo.get("offload_optimizer") if isinstance(zo.get("offload_optimizer"), dict) else {}
    offloaded = off.get("device") in ("cpu", "nvme") or zo.get("cpu_offload") is True
    client = None
    if not (isinstance(cfg.get("optimizer"), dict) and "type" in cfg["optimizer"]):
        if offloaded:
            from deepspeed.ops.adam import DeepSpeedCPUAdam
            kwargs["optimizer"] = DeepSpeedCPUAdam(model.parameters(), lr=1e-4)
            client = "DeepSpeedCPUAdam"
        else:
            kwargs["optimizer"] = torch.optim.AdamW(model.parameters(), lr=1e-4)
            client = "torch.optim.AdamW"
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=str(path),
                                           **kwargs)
    res = resolved(engine)
    res["client_optimizer"] = client
    for _ in range(engine.gradient_accumulation_steps()):
        ids = batch(engine.train_micro_batch_size_per_gpu()).to(engine.device)
        loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        engine.step()
    res["loss_finite"] = bool(torch.isfinite(loss.detach().float()).item())
    engine.destroy() if hasattr(engine, "destroy") else None
    return res


def fixed(v):
    return v if (isinstance(v, (int, float)) and not isinstance(v, bool)) else None


def run_hf(path, cfg):
    import json as _json
    import torch
    from transformers import Trainer, TrainingArguments
    _json.load(open(path))  # the HF Trainer reads the file with json.load (integrations/deepspeed.py)
    opt = cfg.get("optimizer", {}).get("params", {}) if isinstance(cfg.get("optimizer"), dict) else {}
    bf16 = cfg.get("bf16", cfg.get("bfloat16", {})) if isinstance(cfg.get("bf16", cfg.get("bfloat16", {})), dict) else {}
    fp16 = cfg.get("fp16", {}) if isinstance(cfg.get("fp16"), dict) else {}
    args = dict(output_dir=tempfile.mkdtemp(prefix="zp-judge-"), deepspeed=str(path), max_steps=1, report_to=[],
                save_strategy="no", logging_strategy="no", use_cpu=False, disable_tqdm=True,
                dataloader_num_workers=0)
    mb, ga = fixed(cfg.get("train_micro_batch_size_per_gpu")), fixed(cfg.get("gradient_accumulation_steps"))
    tb = fixed(cfg.get("train_batch_size"))
    if mb is None and tb is not None:
        mb = max(1, int(tb) // int(ga or 1))  # world size 1
    if ga is None and tb is not None and mb is not None:
        ga = max(1, int(tb) // int(mb))
    if mb is not None:
        args["per_device_train_batch_size"] = int(mb)
    if ga is not None:
        args["gradient_accumulation_steps"] = int(ga)
    if bf16.get("enabled") is True:
        args["bf16"] = True
    if fp16.get("enabled") is True:
        args["fp16"] = True
    if fixed(opt.get("lr")) is not None:
        args["learning_rate"] = float(opt["lr"])
    if fixed(opt.get("weight_decay")) is not None:
        args["weight_decay"] = float(opt["weight_decay"])
    if fixed(opt.get("eps")) is not None:
        args["adam_epsilon"] = float(opt["eps"])
    if isinstance(opt.get("betas"), list) and len(opt["betas"]) == 2 and all(fixed(b) is not None for b in opt["betas"]):
        args["adam_beta1"], args["adam_beta2"] = float(opt["betas"][0]), float(opt["betas"][1])
    sched = cfg.get("scheduler", {}).get("params", {}) if isinstance(cfg.get("scheduler"), dict) else {}
    if fixed(sched.get("warmup_num_steps")) is not None:
        args["warmup_steps"] = int(sched["warmup_num_steps"])
    if fixed(sched.get("warmup_max_lr")) is not None and "learning_rate" not in args:
        args["learning_rate"] = float(sched["warmup_max_lr"])
    if fixed(cfg.get("gradient_clipping")) is not None:
        args["max_grad_norm"] = float(cfg["gradient_clipping"])
    targs = TrainingArguments(**args)
    model = tiny_model()
    n = targs.per_device_train_batch_size * targs.gradient_accumulation_steps

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return max(n, 1)

        def __getitem__(self, i):
            ids = torch.randint(0, 256, (SEQ, ))
            return {"input_ids": ids, "labels": ids}

    trainer = Trainer(model=model, args=targs, train_dataset=DS())
    out = trainer.train()
    engine = trainer.model_wrapped
    res = resolved(engine)
    res["training_args"] = {k: v for k, v in args.items() if k not in ("output_dir", "deepspeed", "report_to",
                                                                       "save_strategy", "logging_strategy",
                                                                       "use_cpu", "disable_tqdm",
                                                                       "dataloader_num_workers", "max_steps")}
    res["loss_finite"] = bool(out.training_loss == out.training_loss)
    try:
        from transformers.integrations.deepspeed import unset_hf_deepspeed_config
        unset_hf_deepspeed_config()
    except Exception:
        pass
    return res


def judge_one(path, runner):
    try:
        cfg = load_hjson(path)
    except Exception as e:
        return {"accepted": False, "error": "not parseable by hjson: " + error_text(e), "stage_reached": "load"}
    if not isinstance(cfg, dict):
        return {"accepted": False, "error": "not a JSON object", "stage_reached": "load"}
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            res = run_deepspeed(path, cfg) if runner == "deepspeed" else run_hf(path, cfg)
        return {"accepted": True, "resolved": res}
    except BaseException as e:  # noqa: BLE001 - DeepSpeed raises AssertionError, ValueError, pydantic errors...
        if isinstance(e, KeyboardInterrupt):
            raise
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{pathlib.Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(tb)
                      if "site-packages" in f.filename), "")
        return {"accepted": False, "error": error_text(e), "raised_at": where}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runners", default="deepspeed,hf")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--out")
    a = ap.parse_args()
    import logging
    import deepspeed
    import transformers
    from deepspeed.accelerator import get_accelerator
    acc = get_accelerator()
    type(acc).is_fp16_supported = lambda self: True  # see the module docstring
    # TrainingArguments refuses bf16/fp16 without a GPU ("Your setup doesn't support bf16/gpu"); a GPU
    # run passes this check, so the judge does too (training_args.py __post_init__).
    import transformers.training_args as ta
    ta.is_torch_bf16_gpu_available = lambda *a, **k: True
    if hasattr(ta, "is_torch_fp16_available_on_device"):
        ta.is_torch_fp16_available_on_device = lambda *a, **k: True
    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False)
    for name in ("DeepSpeed", "deepspeed", "transformers", "torch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    transformers.logging.set_verbosity_error()
    version = deepspeed.__version__.split("+")[0]
    out = pathlib.Path(a.out) if a.out else HERE / f"records_{version}.json"
    records = json.loads(out.read_text()) if out.exists() else {}
    records.setdefault("about", "Written by tests/deepspeed_configs/judge.py; see its docstring for the set-up.")
    records["deepspeed_version"] = version
    records["transformers_version"] = transformers.__version__
    import torch
    records["torch_version"] = torch.__version__
    records["world_size"] = 1
    records["model"] = {"zoo": "tiny-llama-micro", "hidden_size": HIDDEN, "seq": SEQ}
    recs = records.setdefault("records", {})
    files = sorted(glob.glob(str(HERE / "configs" / "*.json")))
    for f in files:
        name = pathlib.Path(f).stem
        if a.only and name not in a.only:
            continue
        for runner in a.runners.split(","):
            r = judge_one(pathlib.Path(f), runner)
            recs.setdefault(name, {})[runner] = r
            print(f"{name:50s} {runner:9s} {'ok ' if r['accepted'] else 'ERR'} {'' if r['accepted'] else r['error'][:150]}",
                  file=sys.stderr, flush=True)
        out.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
