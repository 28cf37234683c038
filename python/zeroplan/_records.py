"""Typed views of zeroplan's JSON contract (docs/python.md).

Each class mirrors one object of the CLI's ``--json`` output field by field (same names), so that
``Record.from_dict(d).to_dict() == d`` holds for every answer the CLI prints: keys a record does not
model are kept in ``extra``, and optional keys the CLI omitted stay omitted.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = [
    "Record",
    "GpuMemory",
    "HostMemory",
    "Memory",
    "StepTime",
    "Collective",
    "Communication",
    "Throughput",
    "ZeroKnobs",
    "Plan",
    "Model",
    "Cluster",
    "PlanResult",
    "Issue",
    "KnobEffect",
    "CheckResult",
    "Cause",
    "DiagnoseResult",
]


def _unwrap_optional(tp: Any) -> Any:
    if typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _convert(tp: Any, value: Any) -> Any:
    """JSON value -> the annotated type (nested records and lists of records); others as they are."""
    if value is None:
        return None
    tp = _unwrap_optional(tp)
    if isinstance(tp, type) and issubclass(tp, Record) and isinstance(value, dict):
        return tp.from_dict(value)
    if typing.get_origin(tp) in (list, List) and isinstance(value, list):
        (inner,) = typing.get_args(tp) or (Any,)
        return [_convert(inner, v) for v in value]
    return copy.deepcopy(value)


def _unconvert(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_unconvert(v) for v in value]
    return copy.deepcopy(value)


_FIELDS: Dict[type, Dict[str, Any]] = {}  # per record class: field name -> resolved type


@dataclass
class Record:
    """Base of every typed answer: ``from_dict`` / ``to_dict`` round-trip the CLI's JSON exactly."""

    extra: Dict[str, Any] = field(default_factory=dict, repr=False, kw_only=True)
    _absent: frozenset = field(default=frozenset(), repr=False, compare=False, kw_only=True)

    @classmethod
    def _fields(cls) -> Dict[str, Any]:
        cached = _FIELDS.get(cls)
        if cached is None:
            hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
            cached = {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name not in ("extra", "_absent")}
            _FIELDS[cls] = cached
        return cached

    @classmethod
    def from_dict(cls, d: Dict[str, Any]):
        if not isinstance(d, dict):
            raise TypeError(f"{cls.__name__}.from_dict needs a dict, got {type(d).__name__}")
        known = cls._fields()
        kwargs = {name: _convert(tp, d.get(name)) for name, tp in known.items()}
        absent = frozenset(name for name in known if name not in d)
        extra = {k: copy.deepcopy(v) for k, v in d.items() if k not in known}
        return cls(**kwargs, extra=extra, _absent=absent)

    def to_dict(self) -> Dict[str, Any]:
        """The object exactly as the CLI prints it with ``--json``."""
        out = {}
        for name in self._fields():
            if name in self._absent:
                continue
            out[name] = _unconvert(getattr(self, name))
        out.update(copy.deepcopy(self.extra))
        return out


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


@dataclass
class GpuMemory(Record):
    """Bytes per GPU at the peak (GB = 1e9 bytes), by category."""

    parameters: int = 0
    gradients: int = 0
    optimizer_states: int = 0
    model_states: int = 0
    activations: int = 0
    buffers: int = 0
    overhead: int = 0
    peak: int = 0
    peak_phase: str = ""
    capacity: int = 0
    usable: int = 0


@dataclass
class HostMemory(Record):
    per_node: int = 0
    pinned_per_node: int = 0
    load_per_node: int = 0
    capacity_per_node: int = 0


@dataclass
class Memory(Record):
    gpu: GpuMemory = field(default_factory=GpuMemory)
    cpu: HostMemory = field(default_factory=HostMemory)


@dataclass
class StepTime(Record):
    """Seconds per optimizer step; ``error_band`` is the calibration's relative band (docs/time-model.md)."""

    step_s: float = 0.0
    compute_s: float = 0.0
    communication_s: float = 0.0
    exposed_communication_s: float = 0.0
    offload_s: float = 0.0
    hook_overhead_s: float = 0.0
    hook_host_s: float = 0.0
    hooked_module_calls: int = 0
    overlap_slowdown_s: float = 0.0
    kernels_per_step: int = 0
    error_band: float = 0.0


@dataclass
class Collective(Record):
    name: str = ""
    kind: str = ""
    # the process group: "zero" (ZeRO's own, world / tp ranks), "hpz" (ZeRO++ hpZ's secondary gathers),
    # "tensor_parallel", "sequence_parallel", "expert_parallel"; group_size its ranks
    group: str = "zero"
    group_size: int = 0
    calls_per_step: int = 0
    message_bytes: int = 0
    bytes_per_rank: int = 0
    time_s: float = 0.0
    exposed_s: float = 0.0


@dataclass
class Communication(Record):
    bytes_per_rank_per_step: int = 0
    collectives: List[Collective] = field(default_factory=list)


@dataclass
class Throughput(Record):
    tokens_per_s: float = 0.0
    tokens_per_s_per_gpu: float = 0.0
    mfu: float = 0.0
    hfu: float = 0.0


@dataclass
class ZeroKnobs(Record):
    reduce_bucket_size: int = 0
    allgather_bucket_size: int = 0
    overlap_comm: bool = False
    contiguous_gradients: bool = False
    stage3_prefetch_bucket_size: int = 0
    stage3_param_persistence_threshold: int = 0
    stage3_max_live_parameters: int = 0
    sub_group_size: int = 0
    bf16_master_weights_and_grads: bool = False
    bf16_optimizer_states: bool = False


@dataclass
class Plan(Record):
    """One evaluated configuration: the PLAN object of the JSON contract (cli/plan_json.cpp)."""

    zero_stage: int = 0
    expert_parallel_size: int = 1
    # Ulysses sequence_parallel_size (--sp) and the data-parallel ranks global_batch counts (GPUs / sp)
    sequence_parallel_size: int = 1
    # DeepSpeed AutoTP tensor_parallel.autotp_size (--tp); global_batch then counts GPUs / (sp x tp) ranks
    tensor_parallel_size: int = 1
    data_parallel_size: int = 0
    # the ranks ZeRO partitions dense parameters over (data-parallel x sequence-parallel)
    zero_group_size: int = 0
    # ZeRO++ zero_hpz_partition_size (--hpz): the ranks each parameter's secondary copy is split over; 1 = none
    hpz_partition_size: int = 1
    # ZeRO++ qwZ / qgZ in force (--qwz, --qgz): int8 parameter gathers; int4 gradient all-to-alls (several nodes)
    qwz: bool = False
    qgz: bool = False
    offload_optimizer: str = "none"
    offload_param: str = "none"
    micro_batch: int = 0
    grad_accum: int = 0
    seq_len: int = 0
    global_batch: int = 0
    activation_checkpointing: str = "none"
    precision: str = ""
    method: str = ""
    deepspeed_version: str = ""
    # attn_implementation ("sdpa", "flash_attention_2", "flash_attention_3", "eager"), the kernel it runs
    # on this GPU ("attention_backend": "cudnn", "flash2", "flash3", "eager") and the loss (--kernels)
    kernels: Dict[str, Any] = field(default_factory=dict)
    # the PyTorch release assumed ("2.11"; --torch-version): it decides SDPA's kernel
    torch_version: str = ""
    # the host's single-thread speed relative to the reference host of the host figures (--host-speed)
    host_speed: float = 1.0
    # OpenMP threads per rank the CPU optimizer step was priced at (--cpu-threads); None: the per-node
    # assumption (planner/cpu_optimizer.h)
    cpu_threads: Optional[int] = None
    fits: bool = False
    zero: ZeroKnobs = field(default_factory=ZeroKnobs)
    memory: Memory = field(default_factory=Memory)
    time: StepTime = field(default_factory=StepTime)
    communication: Communication = field(default_factory=Communication)
    throughput: Throughput = field(default_factory=Throughput)
    # the checkpoint save: disk bytes and the host RAM it adds on node 0 (planner/save_phase.h)
    save: Dict[str, Any] = field(default_factory=dict)
    # --checkpoint-offload cpu only: the path ("offload_engine" / "blocking_copies"), checkpoints on the GPU
    # and on the host, copies per step and their time (planner/checkpoint_offload.h); empty otherwise
    checkpoint_offload: Dict[str, Any] = field(default_factory=dict)
    deepspeed_config: Dict[str, Any] = field(default_factory=dict)

    @property
    def peak_bytes(self) -> int:
        return self.memory.gpu.peak

    def __str__(self) -> str:
        gpu = self.memory.gpu
        return (
            f"ZeRO-{self.zero_stage}, micro-batch {self.micro_batch} x grad-accum {self.grad_accum}, "
            f"checkpointing {self.activation_checkpointing}, offload optimizer {self.offload_optimizer} / "
            f"params {self.offload_param}: peak {_gb(gpu.peak)} of {_gb(gpu.usable)} usable, "
            f"step {self.time.step_s:.2f} s, {self.throughput.tokens_per_s:.0f} tokens/s"
            f"{'' if self.fits else ' (does not fit)'}"
        )


@dataclass
class Model(Record):
    name: str = ""
    parameters: int = 0  # the whole model's: a vision-language model's tower and projector included
    trainable_parameters: int = 0
    # Vision-language models only (None otherwise; planner/vision.h): the language tower's and the vision
    # tower's + projector's parameters, the tower's model type, whether it is frozen (--freeze vision or
    # LoRA), and the images each sample carries through it (0: text only).
    language_parameters: Optional[int] = None
    vision_parameters: Optional[int] = None
    vision_tower: Optional[str] = None
    vision_frozen: Optional[bool] = None
    images_per_sample: Optional[int] = None


@dataclass
class Cluster(Record):
    nodes: int = 1
    gpus_per_node: int = 1
    gpu: str = ""
    gpu_memory_bytes: int = 0
    intra_node_link: str = ""


@dataclass
class PlanResult(Record):
    """``zeroplan --model M --gpus G --json``: the best plan of each stage and the recommendation."""

    zeroplan_version: str = ""
    model: Model = field(default_factory=Model)
    cluster: Cluster = field(default_factory=Cluster)
    recommendation: Optional[Plan] = None
    reasons: List[str] = field(default_factory=list)
    plans: List[Plan] = field(default_factory=list)
    candidates_evaluated: int = 0
    reason: Optional[str] = None  # present only when nothing fits
    warnings: List[str] = field(default_factory=list)
    emitted: Optional[Dict[str, Any]] = None  # present only with emit=PATH

    @property
    def recommended(self) -> Optional[Plan]:
        """The recommended plan, or None when nothing fits (then ``reason`` says why)."""
        return self.recommendation

    @property
    def fits(self) -> bool:
        return self.recommendation is not None


@dataclass
class Issue(Record):
    severity: str = ""
    key: str = ""
    message: str = ""


@dataclass
class KnobEffect(Record):
    change: str = ""
    fits: bool = False
    peak_bytes: int = 0
    step_s: float = 0.0
    tokens_per_s: float = 0.0


@dataclass
class CheckResult(Record):
    """``zeroplan check CONFIG --model M --gpus G --json``."""

    zeroplan_version: str = ""
    verdict: str = ""  # "fits" | "does_not_fit" | "refused"
    deepspeed_version: str = ""
    runner: str = ""
    runner_assumed: bool = False
    config_path: str = ""
    config: Dict[str, Any] = field(default_factory=dict)
    resolved: Any = None
    model: Model = field(default_factory=Model)
    cluster: Cluster = field(default_factory=Cluster)
    issues: List[Issue] = field(default_factory=list)
    errors: int = 0
    warnings: int = 0
    deepspeed_would_reject: bool = False
    fits: Optional[bool] = None
    predicted: Optional[Plan] = None
    recommended: Optional[Plan] = None
    recommended_changes: List[Any] = field(default_factory=list)
    knob_effects: List[KnobEffect] = field(default_factory=list)
    exit_code: int = 0

    @property
    def ok(self) -> bool:
        """DeepSpeed accepts the config and it fits in GPU memory (the CLI's exit code 0)."""
        return self.exit_code == 0

    @property
    def first_issue(self) -> Optional[Issue]:
        """The most severe issue (errors before warnings before notes), or None."""
        order = {"error": 0, "warning": 1}
        return min(self.issues, key=lambda i: order.get(i.severity, 2), default=None)


@dataclass
class Cause(Record):
    id: str = ""
    title: str = ""
    evidence: Any = None
    predicted_gain_ms: Optional[float] = None
    gain_basis: Optional[str] = None
    fix: Any = None
    fix_text: str = ""


@dataclass
class DiagnoseResult(Record):
    """``zeroplan diagnose LOG... --json``: the run's causes of slowness or OOM, ranked."""

    zeroplan_version: str = ""
    files: List[str] = field(default_factory=list)
    lines: int = 0
    recognized_lines: int = 0
    deepspeed_version: Any = None
    world_size: Any = None
    stage: Any = None
    config_source: Any = None
    config: Any = None
    # Without a config: what the comms logger's calls show (stage, tiny buckets, stage 3's prefetch and
    # persistence compared with DeepSpeed's calls under each setting); null when a config was found.
    inferred_from_comms: Any = None
    measured: Dict[str, Any] = field(default_factory=dict)
    predicted: Optional[Dict[str, Any]] = None
    predicted_after_fix_ms: Optional[float] = None
    fixed_config: Any = None
    causes: List[Cause] = field(default_factory=list)
