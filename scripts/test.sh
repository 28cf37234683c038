#!/usr/bin/env bash
# Sets up, builds and runs every test of zeroplan (the README's test command; .ci/run calls it):
#   1. the normal build (with the CUDA backend compiled when nvcc exists) and its ctest suite;
#      GPU tests skip themselves without a device;
#   2. each libFuzzer target for a bounded time on its seed corpus (clang from Debian);
#   3. the same suite under AddressSanitizer + UndefinedBehaviorSanitizer (steps 2-3: one clang build).
# ZEROPLAN_QUICK=1 runs step 1 only. ZEROPLAN_FUZZ_SECONDS sets step 2's time per target.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

# chromium: the --html report's browser test (ctest python_wheel, scripts/test_wheel.sh); not needed
# to build or use zeroplan, so scripts/setup.sh leaves it out.
if ! dpkg -s chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
ZEROPLAN_TARGETS=all bash scripts/setup.sh
echo "== tests (build/)"
ctest --test-dir build --output-on-failure -j"$jobs"
# Issue 25's shape goal (no function over 100 lines): reported, not enforced yet.
python3 scripts/longest_functions.py 10

if [ "${ZEROPLAN_QUICK:-0}" = 1 ]; then exit 0; fi

need=()
for p in clang libclang-rt-14-dev; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if ((${#need[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Steps 2 and 3 share one clang build (build-san/): every library and test compiled once with
# -fsanitize=address,undefined (+ fuzzer-no-link coverage, so the fuzz targets link against the same
# objects), at -O1 -gline-tables-only, the sanitizers' recommended setting (file:line in every report).
# Two separate builds (gcc ASan at -O2 -g and a clang fuzz build) took 2000 s of CI's 3945 s.
echo "== sanitizer build (build-san/: clang, ASan+UBSan, libFuzzer targets)"
if [ ! -f build-san/build.ninja ]; then
  CXX=clang++ CC=clang cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
        -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
        -DZEROPLAN_FUZZ=ON -DZEROPLAN_SANITIZE=ON -DZEROPLAN_CUDA=OFF -DZEROPLAN_BENCH=OFF >/dev/null
fi
cmake --build build-san -j"$jobs"

echo "== fuzzing (build-san/tests/fuzz)"
# Each target is single-threaded: they run $jobs at a time, each on a copy of its seed corpus.
secs=${ZEROPLAN_FUZZ_SECONDS:-30}
fuzz_one() {
  local t=$1 work rc=0
  work=$(mktemp -d)
  cp tests/fuzz/corpus/$t/* "$work"/ 2>/dev/null || true
  ./build-san/tests/fuzz/fuzz_$t -max_total_time="$secs" -max_len=8192 -rss_limit_mb=2048 -print_final_stats=1 "$work" \
    >"$work.log" 2>&1 || rc=$?
  # libFuzzer exits non-zero on a crash, leak, timeout or UB report.
  echo "-- fuzz_$t for ${secs}s: exit $rc"
  grep -E 'stat::number_of_executed_units|ERROR|SUMMARY|Done' "$work.log" || true
  if [ "$rc" -ne 0 ]; then tail -n 60 "$work.log"; fi
  rm -rf "$work" "$work.log"
  return "$rc"
}
pids=() names=() failed=()
for t in hf_config ds_config gpu_profile cluster_spec ds_log; do
  fuzz_one "$t" >"build-san/fuzz_$t.out" 2>&1 &
  pids+=($!) names+=("$t")
  if ((${#pids[@]} >= jobs)); then
    wait "${pids[0]}" || failed+=("${names[0]}")
    cat "build-san/fuzz_${names[0]}.out"
    pids=("${pids[@]:1}") names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("${names[$i]}")
  cat "build-san/fuzz_${names[$i]}.out"
done
if ((${#failed[@]})); then echo "fuzzing found a failure in: ${failed[*]}"; exit 1; fi
echo "fuzz: all 5 targets ran clean"

echo "== tests under ASan+UBSan (build-san/)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-san --output-on-failure -j"$jobs" -E 'test_cuda_|python_wheel'
