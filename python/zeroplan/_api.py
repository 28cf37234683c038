"""zeroplan's Python API: the CLI's commands, in-process (issue 30).

Every function turns its arguments into the command line the CLI would get, runs it through the same
C++ code the ``zeroplan`` program runs (``zeroplan._core.run``, cli/app.h) and builds typed records
from the JSON the CLI prints with ``--json``. So flag validation, messages, numbers and JSON are the
CLI's own; see docs/python.md.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import ExitStack
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _core
from ._records import CheckResult, DiagnoseResult, PlanResult

__all__ = [
    "ZeroplanError",
    "ZeroplanInternalError",
    "plan",
    "check",
    "diagnose",
    "models",
    "gpus",
    "run_json",
    "knob_args",
]

ModelLike = Union[str, os.PathLike, Mapping[str, Any], Any]


class ZeroplanError(ValueError):
    """A user error: the one-line message the CLI prints after ``zeroplan: error:`` (exit code 2)."""


class ZeroplanInternalError(RuntimeError):
    """A bug in zeroplan (the CLI's exit code 3); please report it with the arguments."""


def _value(v: Any) -> str:
    """A flag's value as the CLI reads it (bools are flags without a value: knob_args)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))  # 4.0 -> "4": the CLI's counts are integers
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)  # e.g. lora_targets=["q_proj", "v_proj"]
    return str(v)


def knob_args(knobs: Mapping[str, Any]) -> List[str]:
    """``micro_batch=4, explain=True, stage=None`` -> ``["--micro-batch", "4", "--explain"]``.

    Names are the CLI's long flags with ``_`` for ``-`` (``zeroplan --help``); ``None`` and ``False``
    leave a flag out. An unknown name reaches the CLI's parser and gets its message.
    """
    args: List[str] = []
    for name, v in knobs.items():
        if v is None or v is False:
            continue
        flag = "--" + name.replace("_", "-")
        if v is True:
            args.append(flag)
        else:
            args += [flag, _value(v)]
    return args


def run_json(args: Sequence[str]) -> Tuple[int, Any]:
    """Runs ``zeroplan ARGS... --json`` in-process: (exit code, parsed JSON).

    Raises ZeroplanError for the CLI's user errors (exit 2) and ZeroplanInternalError for exit 3.
    """
    code, out, error = _core.run([str(a) for a in args] + ["--json"])
    if code == 2:
        raise ZeroplanError(error)
    if code >= 3:
        raise ZeroplanInternalError(error)
    return code, json.loads(out)


# ---- models -----------------------------------------------------------------------------------------


def _config_dict(model: Any) -> Optional[Tuple[Dict[str, Any], str]]:
    """An HF config (dict, ``PretrainedConfig``, or a model with ``.config``) -> (dict, name)."""
    if isinstance(model, Mapping):
        d = dict(model)
    else:
        cfg = getattr(model, "config", None)
        if cfg is not None and hasattr(cfg, "to_dict") and not hasattr(model, "to_dict"):
            model = cfg  # a PreTrainedModel: its config
        if not hasattr(model, "to_dict"):
            return None
        d = model.to_dict()
    name = d.get("_name_or_path") or d.get("name_or_path") or d.get("model_type") or "hf-config"
    return d, str(name)


_ZOO_SOURCES: Optional[Dict[str, str]] = None


def _zoo_by_source() -> Dict[str, str]:
    """Hub repo id (lower case) -> zoo name, from ``zeroplan models --json``."""
    global _ZOO_SOURCES
    if _ZOO_SOURCES is None:
        _, rows = run_json(["models"])
        _ZOO_SOURCES = {r["source"].lower(): r["name"] for r in rows if r.get("source")}
    return _ZOO_SOURCES


def _hub_config(model_id: str) -> Dict[str, Any]:
    """A Hub model id that is not in the zoo: its config.json through transformers (cache or Hub)."""
    try:
        from transformers import AutoConfig  # optional dependency
    except ImportError:
        raise ZeroplanError(
            f"unknown model '{model_id}': it is not in the zoo (`zeroplan models`); install transformers to "
            "read its config from the Hub, or pass its config (a dict, a PretrainedConfig or a config.json path)"
        ) from None
    try:
        return AutoConfig.from_pretrained(model_id).to_dict()
    except Exception as e:  # network, gated repo, unknown id: one clear message
        raise ZeroplanError(f"cannot read the config of '{model_id}' through transformers: {e}") from None


class _ModelArg:
    """Turns the ``model`` argument into ``--model VALUE`` (a temporary config.json for HF configs)."""

    def __init__(self, model: ModelLike, stack: ExitStack):
        self.display_name: Optional[str] = None  # replaces the temporary path in the answer
        self.path: Optional[str] = None
        if model is None:
            self.value = None
            return
        if isinstance(model, os.PathLike):
            model = os.fspath(model)
        if isinstance(model, str):
            self.value = model
            if "/" in model and not os.path.exists(model) and not model.lower().endswith(".json"):
                # "meta-llama/Llama-2-7b-hf": the zoo's own copy when it has one, else the Hub's.
                zoo = _zoo_by_source().get(model.lower())
                if zoo:
                    self.value = zoo
                else:
                    self._write(_hub_config(model), model, stack)
            return
        got = _config_dict(model)
        if got is None:
            raise ZeroplanError(
                f"model must be a zoo name, a config.json path, a Hub id, a dict or a transformers config, "
                f"not {type(model).__name__}"
            )
        self._write(got[0], got[1], stack)

    def _write(self, config: Dict[str, Any], name: str, stack: ExitStack) -> None:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="zeroplan-"))
        self.path = os.path.join(tmp, "config.json")
        with open(self.path, "w") as f:
            json.dump(config, f, default=str)
        self.value = self.path
        self.display_name = name

    def fix_names(self, answer: Dict[str, Any]) -> None:
        m = answer.get("model")
        if self.path and isinstance(m, dict) and m.get("name") == self.path:
            m["name"] = self.display_name


def _model_args(model: Optional[_ModelArg], gpus: Any) -> List[str]:
    args: List[str] = []
    if model is not None and model.value is not None:
        args += ["--model", model.value]
    if gpus is not None:
        args += ["--gpus", os.fspath(gpus) if isinstance(gpus, os.PathLike) else str(gpus)]
    return args


# ---- commands ---------------------------------------------------------------------------------------


def plan(model: ModelLike = None, gpus: Any = None, **knobs: Any) -> PlanResult:
    """``zeroplan --model MODEL --gpus GPUS [knobs]``: search the ZeRO configurations.

    ``model``: a zoo name or alias (``"13b"``), a config.json path or model folder, a Hub id, an HF
    config dict, a ``transformers.PretrainedConfig`` or a model with ``.config``. ``gpus``: ``"4xA40"``,
    ``"2x8xH100"`` or a GPU profile JSON path. ``knobs``: any plan flag, ``_`` for ``-``
    (``stage=3, micro_batch=4, global_batch=512, method="lora", emit="ds_config.json"``).
    Returns the answer of ``--json`` (``.recommended`` is None when nothing fits; that is no error).
    """
    with ExitStack() as stack:
        m = _ModelArg(model, stack)
        _, answer = run_json(_model_args(m, gpus) + knob_args(knobs))
        m.fix_names(answer)
    return PlanResult.from_dict(answer)


def _json_safe(value: Any) -> Any:
    """A config dict as strict JSON: accelerate sets ``steps_per_print = float("inf")`` ("this will
    stop deepspeed from logging", accelerate/utils/dataclasses.py, DeepSpeedPlugin), which json.dump
    would write as the non-JSON token ``Infinity``; the largest int64 means the same to DeepSpeed
    (``steps % steps_per_print`` is never 0)."""
    if isinstance(value, float) and value == float("inf"):
        return 2**63 - 1
    if isinstance(value, Mapping):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def check(config: Union[str, os.PathLike, Mapping[str, Any]], model: ModelLike = None, gpus: Any = None,
          **knobs: Any) -> CheckResult:
    """``zeroplan check CONFIG --model MODEL --gpus GPUS [knobs]``: judge an existing DeepSpeed config.

    ``config``: a ds_config.json path or the config as a dict. Knobs include ``micro_batch``,
    ``checkpointing``, ``runner`` ("hf", "deepspeed", "accelerate") and ``deepspeed_version``.
    ``.ok`` is the CLI's exit code 0 (DeepSpeed accepts it and it fits).
    """
    with ExitStack() as stack:
        if isinstance(config, Mapping):
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="zeroplan-"))
            path = os.path.join(tmp, "ds_config.json")
            with open(path, "w") as f:
                json.dump(_json_safe(dict(config)), f)
        else:
            path = os.fspath(config)
        m = _ModelArg(model, stack)
        _, answer = run_json(["check", path] + _model_args(m, gpus) + knob_args(knobs))
        m.fix_names(answer)
        if isinstance(config, Mapping) and answer.get("config_path") == path:
            answer["config_path"] = "<dict>"
    return CheckResult.from_dict(answer)


def diagnose(log: Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]], model: ModelLike = None,
             gpus: Any = None, config: Optional[Union[str, os.PathLike]] = None, **knobs: Any) -> DiagnoseResult:
    """``zeroplan diagnose LOG... [--config C] [--model M --gpus G]``: why a real run is slow or OOM."""
    logs = [log] if isinstance(log, (str, os.PathLike)) else list(log)
    with ExitStack() as stack:
        m = _ModelArg(model, stack)
        args = ["diagnose"] + [os.fspath(p) for p in logs]
        if config is not None:
            args += ["--config", os.fspath(config)]
        _, answer = run_json(args + _model_args(m, gpus) + knob_args(knobs))
    return DiagnoseResult.from_dict(answer)


def models() -> List[Dict[str, Any]]:
    """The model zoo (``zeroplan models --json``)."""
    return run_json(["models"])[1]


def gpus() -> List[Dict[str, Any]]:
    """The built-in GPU profiles (``zeroplan gpus --json``)."""
    return run_json(["gpus"])[1]
