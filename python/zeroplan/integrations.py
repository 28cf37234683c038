"""Check a training run before it starts (issue 30): an HF Trainer callback.

    from zeroplan.integrations import ZeroplanCallback
    trainer = Trainer(..., callbacks=[ZeroplanCallback(gpus="4xA40", strict=True)])

At ``on_train_begin`` the callback reads what the run will really use: the DeepSpeed config the
Trainer resolved (``args.hf_deepspeed_config.config``, its "auto" values filled in; else
``args.deepspeed``), the model's config, the world size and the TrainingArguments (micro-batch,
gradient accumulation, gradient checkpointing, bf16/fp16). It runs ``zeroplan.check`` on them (or,
without DeepSpeed, ``zeroplan.plan`` at ZeRO-0, what DDP holds), logs the predicted peak, step time and
first issue, and with ``strict=True`` raises ``ZeroplanRunRefused`` before the first step when the
plan does not fit or DeepSpeed would refuse the config.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Dict, Optional, Union

from ._api import ZeroplanError, check, plan
from ._records import CheckResult, PlanResult

__all__ = ["ZeroplanCallback", "ZeroplanRunRefused", "check_training_run", "detect_gpus"]

logger = logging.getLogger("zeroplan")

try:  # transformers is optional: the callback needs it, the rest of zeroplan does not
    from transformers import TrainerCallback as _Base
except ImportError:  # pragma: no cover - exercised only without transformers
    _Base = object


class ZeroplanRunRefused(ZeroplanError):
    """Raised by ``strict=True`` checks: the run would not fit, or DeepSpeed would refuse its config."""

    def __init__(self, message: str, result: Union[CheckResult, PlanResult]):
        super().__init__(message)
        self.result = result


def detect_gpus(world_size: int) -> Optional[str]:
    """``"<world>x<GPU>"`` from the local CUDA device's name matched against zeroplan's GPU profiles
    (``torch.cuda.get_device_name``: "NVIDIA A40" -> A40), or None without CUDA or a match."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        name = torch.cuda.get_device_name(0).upper()
    except Exception:
        return None
    from ._api import gpus as profiles

    best = None
    for p in profiles():
        for alias in [p["name"], *p.get("aliases", [])]:
            key = alias.upper()
            if key in name and (best is None or len(key) > len(best[0])):
                best = (key, p["name"])
    if best is None:
        return None
    nodes = max(1, world_size // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", world_size))))
    per_node = world_size // nodes
    return f"{nodes}x{per_node}x{best[1]}" if nodes > 1 else f"{world_size}x{best[1]}"


def _ds_config(args: Any) -> Optional[Dict[str, Any]]:
    """The DeepSpeed config the Trainer will hand to deepspeed.initialize, or None without DeepSpeed."""
    hf = getattr(args, "hf_deepspeed_config", None)
    if hf is not None and isinstance(getattr(hf, "config", None), dict):
        return hf.config  # resolved by the Trainer (trainer_config_process): fewer "auto" left
    ds = getattr(args, "deepspeed", None)
    if not ds:
        return None
    if isinstance(ds, dict):
        return ds
    with open(ds) as f:
        return json.load(f)


def _precision(args: Any) -> Optional[str]:
    if getattr(args, "bf16", False):
        return "bf16"
    if getattr(args, "fp16", False):
        return "fp16"
    return None


def check_training_run(args: Any, model: Any, gpus: Optional[str] = None, **knobs: Any) -> Union[CheckResult, PlanResult]:
    """The zeroplan answer for a run described by HF ``TrainingArguments`` and a model (or its config).

    ``gpus``: the cluster (``"4xA40"``); detected from CUDA and the world size when None. ``knobs``:
    more plan flags (``seq_len=4096``, ``gpu_mem="40GB"``), overriding what is read from ``args``.
    """
    world = int(getattr(args, "world_size", 1) or 1)
    gpus = gpus or detect_gpus(world)
    if gpus is None:
        raise ZeroplanError("no CUDA GPU zeroplan knows is visible; pass gpus=, e.g. ZeroplanCallback(gpus='4xA40')")
    config = getattr(model, "config", model)
    flags: Dict[str, Any] = {
        "micro_batch": getattr(args, "per_device_train_batch_size", None),
        "grad_accum": getattr(args, "gradient_accumulation_steps", None),
        "checkpointing": "full" if getattr(args, "gradient_checkpointing", False) else "none",
    }
    # Ulysses sequence parallelism through accelerate's ParallelismConfig (transformers docs
    # deepspeed_alst.md: TrainingArguments(parallelism_config=ParallelismConfig(sp_backend="deepspeed",
    # sp_size=N, ...))): the plan's --sp.
    pc = getattr(args, "parallelism_config", None)
    sp = int(getattr(pc, "sp_size", 1) or 1) if pc is not None else 1
    if sp > 1 and getattr(pc, "sp_backend", None) == "deepspeed":
        flags["sp"] = sp
    flags.update(knobs)
    ds = _ds_config(args)
    if ds is not None:
        # check reads precision and batch sizes from the config; "auto" is resolved as the HF Trainer does.
        flags.setdefault("runner", "hf")
        return check(ds, model=config, gpus=gpus, **flags)
    # No DeepSpeed: DDP holds what ZeRO-0 holds, without offload.
    prec = _precision(args)
    if prec:
        flags.setdefault("precision", prec)
    flags.update(stage=flags.get("stage", 0), offload_optimizer="none", offload_param="none")
    return plan(model=config, gpus=gpus, **flags)


def summarize(result: Union[CheckResult, PlanResult]) -> str:
    """One line: predicted peak, step time, verdict and the first issue."""
    if isinstance(result, CheckResult):
        p = result.predicted
        verdict = result.verdict
        first = result.first_issue
        where = f"{first.key}: " if first and first.key else ""
        issue = f"; first issue: {first.severity}: {where}{first.message}" if first else ""
    else:
        p = result.plans[0] if result.plans else None
        verdict = "fits" if result.recommended is not None else "does_not_fit"
        issue = "" if result.recommended is not None else f"; {result.reason}"
    if p is None:
        return f"zeroplan: {verdict} (no prediction: DeepSpeed would refuse the config){issue}"
    g = p.memory.gpu
    return (f"zeroplan: {verdict}: predicted peak {g.peak / 1e9:.1f} GB of {g.usable / 1e9:.1f} GB usable per GPU, "
            f"step {p.time.step_s:.2f} s, {p.throughput.tokens_per_s:.0f} tokens/s{issue}")


def _ok(result: Union[CheckResult, PlanResult]) -> bool:
    return result.ok if isinstance(result, CheckResult) else result.recommended is not None


class ZeroplanCallback(_Base):
    """HF ``TrainerCallback``: checks the run at ``on_train_begin`` (before the first step).

    ``gpus``: the cluster the run uses (``"4xA40"``; detected from CUDA when None). ``strict``: raise
    ``ZeroplanRunRefused`` when the run does not fit or DeepSpeed would refuse its config.
    ``knobs``: more plan flags (``seq_len=4096``). The answer is kept in ``self.result``.
    """

    def __init__(self, gpus: Optional[str] = None, strict: bool = False, **knobs: Any):
        if _Base is object:
            raise ImportError("ZeroplanCallback needs transformers (pip install transformers)")
        self.gpus = gpus
        self.strict = strict
        self.knobs = knobs
        self.result: Optional[Union[CheckResult, PlanResult]] = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is None:
            logger.warning("zeroplan: the Trainer passed no model; nothing checked")
            return control
        self.result = check_training_run(args, model, self.gpus, **self.knobs)
        line = summarize(self.result)
        if getattr(state, "is_world_process_zero", True):
            logger.warning(line) if not _ok(self.result) else logger.info(line)
        if self.strict and not _ok(self.result):
            raise ZeroplanRunRefused(line + " (ZeroplanCallback(strict=True) stopped the run before its first step)",
                                     self.result)
        return control
