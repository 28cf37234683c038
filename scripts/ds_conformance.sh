#!/usr/bin/env bash
# Re-records the DeepSpeed conformance fixtures live (real DeepSpeed on CPU) into a temporary
# directory and prints the diff against the committed ones (tests/deepspeed/fixtures/<version>/).
#   bash scripts/ds_conformance.sh                          # every case (~30 min on 2 cores)
#   bash scripts/ds_conformance.sh --only 'llama-gqa_s*_n2_bf16_default'   # a subset (fnmatch)
#   VENV=.venv-ds-0.16 bash scripts/ds_conformance.sh       # another venv (see scripts/ds_venv.sh)
#   DS_VERSION=0.16.9 bash scripts/ds_conformance.sh --only 'llama-gqa_s?_n2_*'   # another DeepSpeed
#     release over the same venv (compared with tests/deepspeed/fixtures-other-versions/0.16.9)
# Exit status: 0 when the re-recording equals the committed fixtures (peak_bytes within 0.5%, see
# tests/deepspeed/compare_fixtures.py), 1 when it differs, 2 when the harness's self-test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-ds}
# The venv is created (or completed) by scripts/ds_venv.sh unless it already has the pinned stack.
if ! "$VENV/bin/python" - <<'PY' 2>/dev/null; then
import importlib.metadata as m, re, sys
pins = dict(re.match(r"([A-Za-z0-9_.-]+)==(\S+)", l).groups() for l in open("tests/deepspeed/requirements.txt")
            if re.match(r"[A-Za-z0-9_.-]+==", l))
pins.pop("deepspeed", None)  # DS_VERSION may select another release in its own venv
sys.exit(0 if all(m.version(k) == v for k, v in pins.items()) else 1)
PY
  VENV="$VENV" bash scripts/ds_venv.sh
fi
export DS_ACCELERATOR=cpu OMP_NUM_THREADS=1
if [ -n "${DS_VERSION:-}" ]; then
  # Another DeepSpeed release over the same pinned stack: installed (no deps) into build-ds-<ver>/site,
  # which PYTHONPATH puts ahead of the venv's; its JIT-built CPU ops get their own extensions dir.
  T="build-ds-$DS_VERSION"
  if [ ! -d "$T/site/deepspeed" ]; then
    DS_BUILD_OPS=0 "$VENV/bin/pip" install -q --no-deps --no-build-isolation --target "$T/site" "deepspeed==$DS_VERSION"
  fi
  export PYTHONPATH="$PWD/$T/site${PYTHONPATH:+:$PYTHONPATH}" TORCH_EXTENSIONS_DIR="$PWD/$T/torch_ext"
fi
VER=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("deepspeed"))')
REF=tests/deepspeed/fixtures/$VER
[ -d "$REF" ] || REF=tests/deepspeed/fixtures-other-versions/$VER
"$VENV/bin/python" tests/deepspeed/harness.py --self-test || exit 2
TMP=$(mktemp -d /tmp/zp_ds_conformance.XXXXXX)
echo "re-recording DeepSpeed $VER fixtures into $TMP/fixtures/$VER" >&2
"$VENV/bin/python" tests/deepspeed/run_matrix.py --out-dir "$TMP/fixtures/$VER" "$@"
echo "failures (if any): $TMP/fixtures/failures-$VER.json; wall times: $TMP/fixtures/timings-$VER.json" >&2
# Compare only the cases re-recorded now (a subset run leaves the others alone): the raw diff, then
# the verdict (peak_bytes may move by gloo's thread timing, up to 0.5%; every other field must be equal).
for f in "$TMP/fixtures/$VER"/*.json; do
  [ -e "$f" ] || continue
  committed="$REF/$(basename "$f")"
  [ -e "$committed" ] && diff -u "$committed" "$f"
done
"$VENV/bin/python" tests/deepspeed/compare_fixtures.py "$REF" "$TMP/fixtures/$VER"
