"""zeroplan: plan DeepSpeed ZeRO runs before spending GPU hours (docs/python.md).

    >>> import zeroplan
    >>> r = zeroplan.plan(model="13b", gpus="4xA40")
    >>> print(r.recommended)          # the recommended plan, or None when nothing fits
    >>> r.to_dict()                   # == `zeroplan --model 13b --gpus 4xA40 --json`
"""

from ._api import (
    ZeroplanError,
    ZeroplanInternalError,
    check,
    diagnose,
    gpus,
    knob_args,
    models,
    plan,
    run_json,
)
from ._records import *  # noqa: F401,F403  (the typed answers)
from ._records import __all__ as _records_all
from . import _core

__version__ = "0.1.0"

from ._api import __all__ as _api_all

__all__ = list(_api_all) + ["version"] + list(_records_all)


def version() -> str:
    """``zeroplan --version``: the project version and the commit the extension was built from."""
    return _core.version()
