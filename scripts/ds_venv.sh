#!/usr/bin/env bash
# Creates .venv-ds/ with the pinned real-DeepSpeed stack of tests/deepspeed/requirements.txt (from
# PyPI). Only the re-recording scripts need it: CI compares the recorded fixtures without Python.
#   bash scripts/ds_venv.sh            # default pins
#   DS_VERSION=0.16.9 VENV=.venv-ds-0.16 bash scripts/ds_venv.sh   # another DeepSpeed release
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-ds}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then "$PY" -m venv "$VENV"; fi
"$VENV/bin/pip" install -q --upgrade pip wheel setuptools
"$VENV/bin/pip" install -q -r tests/deepspeed/requirements.txt
if [ -n "${DS_VERSION:-}" ]; then
  # DeepSpeed's sdist builds no ops at install time (DS_BUILD_OPS=0); CPU Adam is JIT-built on use.
  "$VENV/bin/pip" install -q "deepspeed==$DS_VERSION"
fi
"$VENV/bin/python" -c 'import torch, deepspeed, transformers; print("torch", torch.__version__, "deepspeed", deepspeed.__version__, "transformers", transformers.__version__)'
