#!/usr/bin/env python3
"""Write configs/data/ds_keys_<version>.json: every DeepSpeed config key, read from DeepSpeed itself.

Usage (the DeepSpeed to describe is whichever `import deepspeed` finds):
    DS_ACCELERATOR=cpu .venv-ds/bin/python scripts/ds_keys_dump.py configs/data
    DS_ACCELERATOR=cpu PYTHONPATH=.ds-versions/0.16.9 .venv-ds/bin/python scripts/ds_keys_dump.py configs/data
then refresh the manifest (sha256 of every table, checked by tests/test_configs_ds_keys.cpp):
    .venv-ds/bin/python scripts/ds_keys_dump.py --manifest configs/data

Nothing here is transcribed by hand. Three sources, all inside the installed packages:
 1. Plain-dict keys: deepspeed.runtime.config.DeepSpeedConfig is built from a dict that records every
    key DeepSpeed looks up (get/[]/in) and the default it passes to dict.get(key, default). Probe
    configs switch sections on so that keys read only when a section is enabled are seen too.
 2. Pydantic sections: a section whose dict is consumed by a DeepSpeedConfigModel (found by putting a
    marker key in each section and seeing which model class receives it) is described from the
    model's fields: annotation -> type, Field(gt/ge/lt/le) -> constraints, alias, json_schema_extra
    deprecated/new_param, default; nested models recurse. These reject unknown keys (extra='forbid')
    and drop "auto" values (DeepSpeedConfigModel.__init__, non-strict).
 3. The HF Trainer's "auto" keys: the string arguments of fill_match/fill_only calls and the
    hidden_size_based_keys list in transformers/integrations/deepspeed.py (parsed with ast).
Plain-dict sections ignore unknown keys (DeepSpeed never reads them).
"""
import ast
import copy
import enum
import hashlib
import inspect
import json
import os
import pathlib
import sys
import types
import typing

MARK = "__zeroplan_probe__"


def manifest(outdir):
    out = pathlib.Path(outdir)
    entries = {}
    for p in sorted(q for q in out.glob("ds_keys_*.json") if q.name != "ds_keys_manifest.json"):
        entries[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    text = json.dumps({"about": "sha256 of each table as scripts/ds_keys_dump.py wrote it; "
                                "tests/test_configs_ds_keys.cpp recomputes them over the shipped files",
                       "files": entries}, indent=1, sort_keys=True) + "\n"
    (out / "ds_keys_manifest.json").write_text(text)
    print(f"wrote {out / 'ds_keys_manifest.json'} ({len(entries)} tables)")


class Recorder:
    def __init__(self):
        self.reads = {}  # dotted path -> {"default": ..., "has_default": bool}

    def note(self, path, default=None, has_default=False):
        r = self.reads.setdefault(path, {"has_default": False})
        if has_default and not r["has_default"]:
            r["default"] = default
            r["has_default"] = True


class Keys:
    """keys() view that records membership tests."""

    def __init__(self, d):
        self.d = d

    def __contains__(self, k):
        self.d._rec.note(self.d._join(k))
        return dict.__contains__(self.d, k)

    def __iter__(self):
        return iter(list(dict.keys(self.d)))

    def __len__(self):
        return dict.__len__(self.d)


class TrackingDict(dict):
    def __init__(self, data, rec, prefix=""):
        super().__init__()
        self._rec = rec
        self._prefix = prefix
        for k, v in data.items():
            dict.__setitem__(self, k, TrackingDict(v, rec, self._join(k)) if isinstance(v, dict) else v)

    def _join(self, k):
        return f"{self._prefix}.{k}" if self._prefix else str(k)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def get(self, k, default=None):
        self._rec.note(self._join(k), default, True)
        return dict.get(self, k, default)

    def __getitem__(self, k):
        self._rec.note(self._join(k))
        return dict.__getitem__(self, k)

    def __contains__(self, k):
        self._rec.note(self._join(k))
        return dict.__contains__(self, k)

    def keys(self):
        return Keys(self)

    def pop(self, k, *default):
        self._rec.note(self._join(k), default[0] if default else None, bool(default))
        return dict.pop(self, k, *default)

    def setdefault(self, k, default=None):
        self._rec.note(self._join(k), default, True)
        return dict.setdefault(self, k, default)


def jsonable(v):
    if isinstance(v, enum.Enum):
        return jsonable(v.value)
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else str(v)
    if isinstance(v, pathlib.PurePath):
        return str(v)
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if hasattr(v, "model_dump"):
        return jsonable(v.model_dump())
    return repr(v)


def json_type_of_value(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, (list, tuple)):
        return "array"
    return "any"


def describe_annotation(ann, base_model):
    """(types, nullable, one_of, model_class) for a pydantic annotation."""
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return describe_annotation(typing.get_args(ann)[0], base_model)
    if origin in (typing.Union, types.UnionType):
        out_t, nullable, one_of, model = [], False, None, None
        for a in typing.get_args(ann):
            if a is type(None):
                nullable = True
                continue
            t, n, o, m = describe_annotation(a, base_model)
            nullable |= n
            for x in t:
                if x not in out_t:
                    out_t.append(x)
            if o is not None:
                one_of = (one_of or []) + o
            model = model or m
        return out_t, nullable, one_of, model
    if origin is typing.Literal:
        vals = [jsonable(a) for a in typing.get_args(ann)]
        return sorted({json_type_of_value(v) for v in vals}), False, vals, None
    if origin in (list, tuple, set, typing.List, typing.Tuple):
        return ["array"], False, None, None
    if origin in (dict, typing.Dict):
        return ["object"], False, None, None
    if inspect.isclass(ann):
        if issubclass(ann, base_model):
            return ["object"], False, None, ann
        if issubclass(ann, enum.Enum):
            vals = [jsonable(m.value) for m in ann]
            return sorted({json_type_of_value(v) for v in vals}), False, vals, None
        if issubclass(ann, bool):
            return ["bool"], False, None, None
        if issubclass(ann, int):
            return ["int"], False, None, None
        if issubclass(ann, float):
            return ["number"], False, None, None
        if issubclass(ann, str):
            return ["string"], False, None, None
        if issubclass(ann, pathlib.PurePath):
            return ["path"], False, None, None
        if issubclass(ann, dict):
            return ["object"], False, None, None
        if issubclass(ann, (list, tuple)):
            return ["array"], False, None, None
    if ann is typing.Any:
        return ["any"], False, None, None
    return ["any"], False, None, None


def v1_fields(cls):
    """pydantic v1 (DeepSpeed <= 0.14 via deepspeed.pydantic_v1): (name, annotation, alias, default,
    constraints, extra) per field."""
    for name, f in cls.__fields__.items():
        fi = f.field_info
        cons = {c: getattr(fi, c) for c in ("gt", "ge", "lt", "le") if getattr(fi, c, None) is not None}
        ann = f.outer_type_
        if f.allow_none:
            ann = typing.Optional[ann]
        default = f.default if not f.required else None
        if f.default_factory is not None:
            try:
                default = f.default_factory()
            except Exception:
                default = None
        yield name, ann, (f.alias if f.alias != name else None), default, cons, dict(fi.extra)


def v2_fields(cls):
    for name, f in cls.model_fields.items():
        cons = {}
        for m in f.metadata:
            for c in ("gt", "ge", "lt", "le"):
                if hasattr(m, c) and getattr(m, c) is not None:
                    cons[c] = getattr(m, c)
        try:
            d = f.get_default(call_default_factory=True)
        except Exception:  # a default factory that needs context
            d = None
        extra_s = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
        yield name, f.annotation, f.alias, d, cons, extra_s


def describe_model(cls, base_model, source_prefix):
    """A schema node for a pydantic DeepSpeedConfigModel class."""
    v2 = hasattr(cls, "model_config") and hasattr(cls, "model_fields")
    extra = cls.model_config.get("extra", "ignore") if v2 else str(getattr(cls.Config, "extra", "ignore"))
    extra = getattr(extra, "value", extra)
    node = {
        "type": "object",
        "pydantic": True,
        "drops_auto": True,
        "unknown_keys": "rejected" if extra == "forbid" else "ignored",
        "model": f"{cls.__module__}.{cls.__qualname__}",
        "keys": {},
    }
    validators = []
    decs = getattr(cls, "__pydantic_decorators__", None)
    if decs is not None:
        for group in ("model_validators", "field_validators", "validators", "root_validators"):
            validators += sorted(getattr(decs, group, {}).keys())
    if validators:
        node["validators"] = validators
    for name, ann, alias, d, cons, extra_s in (v2_fields(cls) if v2 else v1_fields(cls)):
        t, nullable, one_of, model = describe_annotation(ann, base_model)
        key = alias or name
        child = {"type": t[0] if len(t) == 1 else t}
        if nullable:
            child["nullable"] = True
        if one_of is not None:
            child["one_of"] = one_of
        for c, v in cons.items():
            child[c] = jsonable(v)
        if not (d is None and not nullable):
            child["default"] = jsonable(d)
        if extra_s.get("deprecated"):
            dep = {}
            if extra_s.get("new_param"):
                dep["new_param"] = extra_s["new_param"]
                dep["maps_value"] = "new_param_fn" in extra_s
            if extra_s.get("deprecated_msg"):
                dep["message"] = extra_s["deprecated_msg"]
            dep["sets_new_param"] = bool(extra_s.get("new_param")) and extra_s.get("set_new_param", True)
            child["deprecated"] = dep
        child["source"] = f"{source_prefix}{cls.__qualname__}.{name}"
        if model is not None:
            sub = describe_model(model, base_model, source_prefix)
            sub.update({k: v for k, v in child.items() if k not in ("type", )})
            sub["type"] = child["type"]
            child = sub
        node["keys"][key] = child
        if alias and alias != name:
            node["keys"][name] = {"alias_of": key, "source": child["source"]}
    return node


def hf_auto_keys():
    try:
        import transformers
        from transformers.integrations import deepspeed as hfds
    except Exception as e:  # transformers is optional
        return None, None, f"transformers not importable: {e}"
    src = inspect.getsource(hfds.HfTrainerDeepSpeedConfig)
    tree = ast.parse(src)
    keys, hidden = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("fill_match",
                                                                                            "fill_only"):
            if n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
                keys.add(n.args[0].value)
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "hidden_size_based_keys"
                                             for t in n.targets):
            for e in n.value.elts:
                if isinstance(e, ast.Constant):
                    hidden.add(e.value)
    return sorted(keys | hidden), transformers.__version__, None


def probe_configs():
    base = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}
    out = [dict(base)]
    for sec, body in [
        ("fp16", {"enabled": True}),
        ("bf16", {"enabled": True}),
        ("activation_checkpointing", {"partition_activations": True}),
        ("flops_profiler", {"enabled": True}),
        ("autotuning", {"enabled": True}),
        ("comms_logger", {"enabled": True}),
        ("tensorboard", {"enabled": True}),
        ("wandb", {"enabled": True}),
        ("csv_monitor", {"enabled": True}),
        ("optimizer", {"type": "AdamW", "params": {}}),
        ("scheduler", {"type": "WarmupLR", "params": {}}),
        ("checkpoint", {}),
        ("data_types", {}),
        ("aio", {}),
        ("pipeline", {}),
        ("data_efficiency", {"enabled": True}),
        ("curriculum_learning", {"enabled": True}),
        ("compression_training", {}),
        ("elasticity", {"enabled": False}),
        ("torch_autocast", {"enabled": True}),
        ("zero_optimization", {"stage": 3}),
        ("amp", {"enabled": True}),
        ("sparse_attention", {"mode": "fixed"}),
    ]:
        c = dict(base)
        c[sec] = body
        out.append(c)
    return out


def build_config(DeepSpeedConfig, cfg, rec):
    td = TrackingDict(copy.deepcopy(cfg), rec)
    try:
        DeepSpeedConfig(td)
        return None
    except Exception as e:  # probes may trip a section's own checks; the reads before it count
        return f"{type(e).__name__}: {e}"


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--manifest":
        manifest(sys.argv[2])
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    outdir = pathlib.Path(sys.argv[1])
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import logging
    import deepspeed
    import pydantic
    from deepspeed.runtime.config import DeepSpeedConfig
    from deepspeed.runtime.config_utils import DeepSpeedConfigModel
    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    version = deepspeed.__version__.split("+")[0]

    # 1. Plain-dict reads.
    rec = Recorder()
    probe_errors = {}
    for i, cfg in enumerate(probe_configs()):
        err = build_config(DeepSpeedConfig, cfg, rec)
        if err:
            probe_errors[",".join(k for k in cfg if k not in ("train_micro_batch_size_per_gpu",
                                                              "gradient_accumulation_steps")) or "base"] = err[:300]

    # 2. Which model consumes each top-level section: a marker key, and DeepSpeedConfigModel.__init__
    # patched to note the class that receives it.
    seen = {}
    orig_init = DeepSpeedConfigModel.__init__

    def hooked(self, strict=False, **data):
        if MARK in data:
            seen.setdefault(data[MARK], type(self))
        return orig_init(self, strict, **data)

    DeepSpeedConfigModel.__init__ = hooked
    top_sections = sorted({p.split(".")[0] for p in rec.reads})
    for sec in top_sections:
        cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, sec: {MARK: sec}}
        build_config(DeepSpeedConfig, cfg, Recorder())
    DeepSpeedConfigModel.__init__ = orig_init

    root = {"type": "object", "unknown_keys": "ignored",
            "source": "deepspeed/runtime/config.py DeepSpeedConfig._initialize_params (keys it reads)",
            "keys": {}}

    def ensure(path):
        node = root
        for part in path.split("."):
            node.setdefault("keys", {})
            node.setdefault("unknown_keys", "ignored")
            node["type"] = "object"
            node = node["keys"].setdefault(part, {})
        return node

    for path in sorted(rec.reads):
        top = path.split(".")[0]
        if top in seen or MARK in path:
            continue
        r = rec.reads[path]
        n = ensure(path)
        if r["has_default"]:
            d = jsonable(r["default"])
            n["default"] = d
            if "type" not in n:
                n["type"] = json_type_of_value(d) if d is not None and d != {} else "any"
                if d is None:
                    n["nullable"] = True
                if isinstance(d, dict):
                    n["type"] = "object"
                    n.setdefault("unknown_keys", "ignored")
        else:
            n.setdefault("type", "any")
        # An int default means DeepSpeed treats the key as a number; a float written there works too.
        if n.get("type") == "int":
            n["type"] = "number"
            n["integral_default"] = True
        n.setdefault("source", "deepspeed/runtime/config.py DeepSpeedConfig (dict.get)")
    for sec, cls in sorted(seen.items()):
        node = describe_model(cls, DeepSpeedConfigModel, "")
        node["source"] = f"{cls.__module__}.{cls.__qualname__} (receives \"{sec}\")"
        root["keys"][sec] = node
    # optimizer/scheduler params go to the optimizer's constructor: opaque here.
    for sec in ("optimizer", "scheduler"):
        p = root["keys"].get(sec, {}).get("keys", {}).get("params")
        if p is not None:
            p.pop("keys", None)
            p["type"] = "object"
            p["unknown_keys"] = "opaque"

    # Keys removed with an error (newer versions).
    import deepspeed.runtime.config as dsc
    removed = {}
    for name, prefix in (("_REMOVED_TOP_LEVEL_CONFIG_KEYS", ""), ("_REMOVED_ZERO_CONFIG_KEYS", "zero_optimization.")):
        for k, msg in getattr(dsc, name, {}).items():
            removed[prefix + k] = msg

    # 3. HF Trainer "auto" keys.
    hf_keys, tf_version, hf_err = hf_auto_keys()
    for k in hf_keys or []:
        node = root
        ok = True
        for part in k.split("."):
            node = node.get("keys", {}).get(part)
            if node is None:
                ok = False
                break
        if ok:
            node["hf_auto"] = True

    table = {
        "about": "DeepSpeed config keys as DeepSpeed " + version + " reads them, written by scripts/ds_keys_dump.py (do not "
                 "edit by hand). Node fields: type, nullable, default, gt/ge/lt/le (pydantic Field constraints), "
                 "one_of (enum/Literal values), pydantic (the section is a DeepSpeedConfigModel: lax coercion, "
                 "\"auto\" dropped, unknown keys rejected), unknown_keys (rejected|ignored|opaque), alias_of, "
                 "deprecated (new_param, maps_value, sets_new_param, message), hf_auto (transformers fills "
                 "\"auto\" here), validators (model/field validator names), source.",
        "generated_by": "scripts/ds_keys_dump.py",
        "deepspeed_version": version,
        "pydantic_version": pydantic.VERSION,
        "pydantic_api": "v2" if hasattr(DeepSpeedConfigModel, "model_fields") else "v1",
        "transformers_version": tf_version,
        "hf_auto_keys": hf_keys,
        "removed_keys": removed,
        "probe_errors": probe_errors,
        "root": root,
    }
    if hf_err:
        table["hf_auto_error"] = hf_err
    out = outdir / f"ds_keys_{version}.json"
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}: {sum(1 for _ in walk(root))} keys, sections via pydantic: {sorted(seen)}")


def walk(node, prefix=""):
    for k, v in node.get("keys", {}).items():
        p = f"{prefix}.{k}" if prefix else k
        yield p
        yield from walk(v, p)


if __name__ == "__main__":
    main()
