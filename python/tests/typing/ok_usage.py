"""Must type-check clean (mypy --strict-optional) against the installed wheel: scripts/test_wheel.sh."""
from typing import List

import zeroplan
from zeroplan.integrations import check_training_run  # noqa: F401  (importable without transformers)


def peak_of(model: str, gpus: str) -> int:
    r: zeroplan.PlanResult = zeroplan.plan(model=model, gpus=gpus, micro_batch=2)
    return r.recommended.memory.gpu.peak if r.recommended is not None else 0


def collective_names(r: zeroplan.PlanResult) -> List[str]:
    return [c.name for p in r.plans for c in p.communication.collectives]


def verdict(c: zeroplan.CheckResult) -> str:
    first = c.first_issue
    return c.verdict + ("" if first is None else ": " + first.message)


code, out, err = zeroplan._core.run(["--version"])
n: int = code + len(out) + len(err)
