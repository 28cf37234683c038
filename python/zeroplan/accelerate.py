"""The same check for an accelerate script (issue 30):

    from zeroplan.accelerate import check_accelerator
    model, opt, dl = accelerator.prepare(model, opt, dl)   # or before prepare()
    check_accelerator(accelerator, model, gpus="4xA40", micro_batch=8, strict=True)

It reads the DeepSpeed config of ``accelerator.state.deepspeed_plugin`` (its ``deepspeed_config``,
"auto" resolved as accelerate does through the ``accelerate`` runner), the model's config and
``accelerator.num_processes``, and runs ``zeroplan.check`` (or ``zeroplan.plan`` at ZeRO-0 without
DeepSpeed).
"""

from __future__ import annotations

from typing import Any, Optional, Union

from ._api import ZeroplanError, check, plan
from ._records import CheckResult, PlanResult
from .integrations import ZeroplanRunRefused, _ok, detect_gpus, logger, summarize

__all__ = ["check_accelerator"]


def check_accelerator(accelerator: Any, model: Any, gpus: Optional[str] = None, strict: bool = False,
                      **knobs: Any) -> Union[CheckResult, PlanResult]:
    world = int(getattr(accelerator, "num_processes", 1) or 1)
    gpus = gpus or detect_gpus(world)
    if gpus is None:
        raise ZeroplanError("no CUDA GPU zeroplan knows is visible; pass gpus=, e.g. gpus='4xA40'")
    # accelerate wraps models (DDP, DeepSpeedEngine): the HF config sits on the inner module.
    inner = getattr(model, "module", model)
    config = getattr(inner, "config", inner)
    plugin = getattr(getattr(accelerator, "state", None), "deepspeed_plugin", None)
    ds = getattr(plugin, "deepspeed_config", None) if plugin is not None else None
    if ds:
        knobs.setdefault("runner", "accelerate")
        result: Union[CheckResult, PlanResult] = check(ds, model=config, gpus=gpus, **knobs)
    else:
        mp = str(getattr(accelerator, "mixed_precision", "") or "")
        if mp in ("bf16", "fp16"):
            knobs.setdefault("precision", mp)
        knobs.update(stage=knobs.get("stage", 0), offload_optimizer="none", offload_param="none")
        result = plan(model=config, gpus=gpus, **knobs)
    line = summarize(result)
    (logger.info if _ok(result) else logger.warning)(line)
    if strict and not _ok(result):
        raise ZeroplanRunRefused(line + " (check_accelerator(strict=True))", result)
    return result
