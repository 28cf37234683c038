#!/usr/bin/env bash
# The whole GPU check of issue 7, for the one-H200 device machine (docs/validation.md has the method
# and where the results go). No internet there and none of our Debian libraries: run
# scripts/prepare_gpu_deps.sh HERE first, then call the device tool with carry [".deps"], e.g.
#   run(command="bash scripts/gpu_check.sh", carry=[".deps"], timeout_s=600)
# One call may not fit every phase in the tool's 10-minute limit, so phases can be named, in order:
#   env       machine, driver, toolkit, Python packages (what is there, for the record)
#   deps      unpack-free: build GoogleTest from the carried sources into .deps/gtest
#   build     configure (CMake + Ninja, sm_90) and build zeroplan, the CUDA tests and benches
#   test      the CUDA test suites (kernels vs fp64 references, backend, engine on the GPU)
#   calibrate zeroplan calibrate --quick -> results/<gpu>_profile.json
#   validate  the validation plans of issue 7 (validate --backend cuda, one-GPU rank emulation),
#             then the planner's predictions again with the calibrated profile
#   baseline  the PyTorch comparison (scripts/pytorch_baseline.py)
#   bench     bench_cuda_gemm, bench_cuda_copies and bench_cuda_attention
#   deepspeed DeepSpeed 0.19.8's own step time and memory on this GPU (scripts/deepspeed_step_bench.py;
#             the image has no DeepSpeed: carry .whl with its wheels, docs/validation.md says how)
#   attention PyTorch SDPA's flash and cuDNN attention kernels against zeroplan's attention curves
#             (scripts/attention_bench.py)
#   sdpa      which kernel SDPA runs when no backend is forced, as transformers calls it
#             (scripts/sdpa_backend_probe.py)
#   all       every phase above (default)
# ZP_GPU names the datasheet profile the plans are predicted with (default H200; H100 on the
# nvidia-h100-x1 kind); the calibrated profile is written as <gpu>_profile.json.
# ZP_BASELINES="1b-bf16 7b-lora16-model ..." runs a subset of the PyTorch baselines (names below).
# Suggested split over three calls within one warm lease (the build and results/ persist while the
# machine stays warm; each phase re-runs what it needs otherwise):
#   1) env deps build test calibrate
#   2) ZP_PLANS="1b-stage0 7b-stage2-emu8 7b-stage2-emu8-ckpt" bash scripts/gpu_check.sh validate
#   3) ZP_PLANS="13b-stage3-emu4 7b-offload-emu4 7b-lora" bash scripts/gpu_check.sh validate
#   4) baseline bench
# (ZP_PLAN_TIMEOUT, default 240 s, bounds each validate run.)
# Prebuilt (the short lease of 2026-11: 15 device minutes in all): build here with
# scripts/prepare_gpu_prebuilt.sh, which leaves stripped sm_90 binaries in .gpucarry/, then call
#   run(command="ZP_BUILD=.gpucarry ZP_BUDGET_S=480 bash scripts/gpu_check.sh env test calibrate validate baseline bench",
#       carry=[".gpucarry"], timeout_s=560)
# ZP_BUILD points every phase at that folder (no deps/build phase needed); ZP_BUDGET_S is a hard
# budget in seconds for the whole call: each step runs under `timeout` with what is left, a step
# that would start with under 20 s left is skipped and named, and the results are always copied.
# Rehearsal without a GPU (here): hide the system's Debian packages so only .deps is found, e.g.
#   OUT=/tmp/gpusim ZP_CMAKE_EXTRA=-DCMAKE_IGNORE_PREFIX_PATH=/usr bash scripts/gpu_check.sh deps build
# Everything lands in build-gpu/results/; at the end of each call the log, summary.md, the profile
# and a tarball of results/ are copied to $OUT (the tool returns at most 8 files).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEPS=$ROOT/.deps
BUILD=$(cd "$ROOT" && realpath -m "${ZP_BUILD:-build-gpu}")
RES=$BUILD/results
OUT=${OUT:-$ROOT/out}
mkdir -p "$RES" "$OUT"
LOG=$RES/gpu_check.log
exec > >(tee -a "$LOG") 2>&1
exec 3>&1
export PYTHONUNBUFFERED=1
JOBS=$(nproc)
PHASES=("$@")
[ ${#PHASES[@]} -eq 0 ] && PHASES=(all)
ZP=$BUILD/zeroplan
FAILED=()
GPU=${ZP_GPU:-H200}
PROFILE=$RES/$(echo "$GPU" | tr 'A-Z' 'a-z')_profile.json

T0=$(date +%s)
BUDGET=${ZP_BUDGET_S:-100000}
# left [cap]: seconds left in the budget (at most cap); 0 when under 20 s are left.
left() { local l=$((BUDGET - ($(date +%s) - T0))); [ -n "${1:-}" ] && [ "$1" -lt "$l" ] && l=$1; [ "$l" -lt 20 ] && l=0; echo "$l"; }
# run_for cap name cmd...: the command under timeout, or skipped when the budget is spent.
run_for() {
  local cap=$1 name=$2; shift 2
  local l; l=$(left "$cap")
  if [ "$l" -eq 0 ]; then note_fail "$name (skipped: the time budget is spent)"; return 1; fi
  timeout "$l" "$@" || { local rc=$?; note_fail "$name (exit $rc$([ $rc -eq 124 ] && echo ', timed out'))"; return $rc; }
}
say() { printf '\n==== %s [%s]\n' "$*" "$(date -u +%H:%M:%S)"; }
# (fd 3 is the log, so a failure is noted there also from inside a redirected step)
note_fail() { FAILED+=("$1"); echo "!!!! FAILED: $1" >&3; }
want() { local p; for p in "${PHASES[@]}"; do [ "$p" = "$1" ] || [ "$p" = all ] && return 0; done; return 1; }

# Prebuilt binaries (ZP_BUILD=.gpucarry) need the CUDA libraries of the machine they run on: the
# toolkit's lib64, else the nvidia-* wheels PyTorch brings (cublas, cuda_runtime, nccl), plus the
# carried lib/ (Debian's libbenchmark).
if [ -n "${ZP_BUILD:-}" ]; then
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  extra=$(python3 -c "import nvidia, os; print(':'.join(os.path.join(p, d, 'lib') for p in nvidia.__path__ for d in ('cublas', 'cuda_runtime', 'nccl', 'cu13') if os.path.isdir(os.path.join(p, d, 'lib'))))" 2>/dev/null)
  export LD_LIBRARY_PATH=$BUILD/lib:/usr/local/cuda/lib64${extra:+:$extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

phase_env() {
  say env
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  for b in "$ZP" "$BUILD/zeroplan-exec" "$BUILD"/tests/test_cuda_* "$BUILD"/bench/bench_cuda_*; do
    [ -x "$b" ] && ldd "$b" | grep -q "not found" && { echo "unresolved libraries in $b:"; ldd "$b" | grep "not found"; }
  done
  uname -a; nproc; free -g | head -2
  nvidia-smi || note_fail "nvidia-smi"
  command -v nvcc || export PATH=/usr/local/cuda/bin:$PATH
  nvcc --version | tail -2; cmake --version | head -1; ninja --version; g++ --version | head -1
  ls /usr/local/cuda/lib64 2>/dev/null | grep -E 'cublasLt|nccl|cudnn' | head
  ls /usr/local/cuda/include 2>/dev/null | grep -E '^(nccl|cublasLt)\.h' || echo "no nccl.h/cublasLt.h under /usr/local/cuda/include"
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))"
}

phase_deps() {
  say deps
  [ -d "$DEPS/root/usr" ] || { echo "no .deps/root: run scripts/prepare_gpu_deps.sh here and carry .deps"; note_fail deps; return 1; }
  if [ ! -f "$DEPS/gtest/lib/cmake/GTest/GTestConfig.cmake" ] && [ ! -f "$DEPS/gtest/lib64/cmake/GTest/GTestConfig.cmake" ]; then
    cmake -S "$DEPS/root/usr/src/googletest" -B "$BUILD/gtest-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX="$DEPS/gtest" -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_POLICY_VERSION_MINIMUM=3.5 >/dev/null &&
      cmake --build "$BUILD/gtest-build" -j "$JOBS" >/dev/null && cmake --install "$BUILD/gtest-build" >/dev/null ||
      { note_fail "googletest build"; return 1; }
  fi
  echo "googletest installed in $DEPS/gtest"
}

phase_build() {
  say build
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  export LD_LIBRARY_PATH=$DEPS/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # Benchmarks only if Debian's prebuilt libbenchmark loads on this image.
  local bench=ON
  python3 -c "import ctypes; ctypes.CDLL('$DEPS/root/usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian')" 2>/dev/null || bench=OFF
  echo "benchmarks: $bench"
  # NCCL: the toolkit's, else the nvidia-nccl wheel that PyTorch brings (include/ + lib/libnccl.so.2).
  local nccl_root=""
  if [ ! -f /usr/local/cuda/include/nccl.h ]; then
    nccl_root=$(python3 -c "import nvidia, os; print(next((os.path.join(p, 'nccl') for p in nvidia.__path__ if os.path.isfile(os.path.join(p, 'nccl', 'include', 'nccl.h'))), ''))" 2>/dev/null)
    echo "NCCL from the wheel: ${nccl_root:-not found (single-GPU runs need none)}"
    [ -n "$nccl_root" ] && export LD_LIBRARY_PATH=$nccl_root/lib:$LD_LIBRARY_PATH
  fi
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZEROPLAN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DZEROPLAN_BENCH=$bench -DCMAKE_PREFIX_PATH="$DEPS/root/usr;$DEPS/gtest" -DZEROPLAN_NCCL_ROOT="$nccl_root" \
    ${ZP_CMAKE_EXTRA:-} \
    -DCMAKE_BUILD_RPATH="$DEPS/root/usr/lib/x86_64-linux-gnu" -DCMAKE_POLICY_VERSION_MINIMUM=3.5 ||
    { note_fail configure; return 1; }
  # (CMAKE_POLICY_VERSION_MINIMUM: CMake 4 refuses package config files written for CMake < 3.5, such
  # as Debian 12's; older CMake ignores the variable.)
  local targets=(zeroplan zeroplan-exec test_cuda_host test_cuda_kernels test_cuda_backend)  # validate/calibrate run in zeroplan-exec
  [ $bench = ON ] && targets+=(bench_cuda_gemm bench_cuda_copies bench_cuda_attention bench_cuda_collectives)
  time cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" || { note_fail build; return 1; }
}

phase_test() {
  say test
  local t
  for t in test_cuda_host test_cuda_kernels test_cuda_backend; do
    run_for "${ZP_TEST_TIMEOUT:-300}" "$t" "$BUILD/tests/$t" --gtest_output=xml:"$RES/$t.xml"
  done
}

phase_calibrate() {
  say calibrate
  run_for 180 calibrate "$ZP" calibrate --quick --force --out "$PROFILE" >"$RES/calibrate.txt" 2>&1
  cat "$RES/calibrate.txt"
}

# name | plan flags (shared by validate and plan) | validate-only flags
PLANS=(
  "1b-stage0|--model scripts/gpu_models/tinyllama-1.1b.json --gpus 1xGPU --stage 0 --micro-batch 4 --seq-len 2048 --checkpointing none|"
  "7b-stage2-emu8|--model 7b --gpus 8xGPU --stage 2 --micro-batch 1 --seq-len 4096 --checkpointing none|--emulate-rank 0"
  "7b-stage2-emu8-ckpt|--model 7b --gpus 8xGPU --stage 2 --micro-batch 4 --seq-len 4096 --checkpointing full|--emulate-rank 0"
  "13b-stage3-emu4|--model 13b --gpus 4xGPU --stage 3 --micro-batch 1 --seq-len 4096 --checkpointing full|--emulate-rank 0"
  "7b-offload-emu4|--model 7b --gpus 4xGPU --stage 2 --offload-optimizer cpu --micro-batch 2 --seq-len 2048 --checkpointing full|--emulate-rank 0"
  "7b-lora|--model 7b --gpus 1xGPU --method lora --lora-rank 16 --stage 0 --micro-batch 4 --seq-len 2048 --checkpointing none|"
)

phase_validate() {
  say validate
  [ -x "$ZP" ] || { note_fail "validate: no zeroplan binary"; return 1; }
  [ -f "$PROFILE" ] || phase_calibrate
  if ! "$ZP" validate --help >/dev/null 2>&1; then note_fail "this zeroplan has no validate subcommand"; return 1; fi
  local entry name flags vflags
  for entry in "${PLANS[@]}"; do
    IFS='|' read -r name flags vflags <<<"$entry"
    # ZP_PLANS="name1 name2" runs a subset (to split the plans over several calls).
    if [ -n "${ZP_PLANS:-}" ] && [[ " $ZP_PLANS " != *" $name "* ]]; then continue; fi
    say "validate $name"
    local before=${flags//GPU/$GPU} after=${flags//GPU/$PROFILE}
    # Predicted with the datasheet profile and measured on the GPU (one run of the engine).
    run_for "${ZP_PLAN_TIMEOUT:-240}" "validate $name" "$ZP" validate --backend cuda $before $vflags --steps 3 --json \
      >"$RES/validate_$name.json" 2>"$RES/validate_$name.err" || tail -3 "$RES/validate_$name.err"
    # The same plan predicted with the calibrated profile (planner only).
    "$ZP" $after --json >"$RES/plan_calibrated_$name.json" 2>"$RES/plan_calibrated_$name.err" ||
      note_fail "plan (calibrated) $name"
  done
}

# base name cmd...: one PyTorch baseline, unless ZP_BASELINES names others.
base() {
  local name=$1; shift
  if [ -n "${ZP_BASELINES:-}" ] && [[ " $ZP_BASELINES " != *" $name "* ]]; then return 0; fi
  run_for "${ZP_BASELINE_TIMEOUT:-240}" "pytorch $name" "$@"
}

phase_baseline() {
  say baseline
  local py=scripts/pytorch_baseline.py
  # PEFT's default keeps the adapters in fp32; DeepSpeed casts them to bf16 with the model
  # (docs/validation.md, the LoRA row): the same run with the adapters in the model's dtype.
  base 7b-lora16-model python3 $py --config models/zoo/llama-2-7b.json --micro-batch 4 --seq-len 2048 --mode bf16 \
    --lora-rank 16 --lora-adapter-dtype model --out "$RES/pytorch_7b_lora16_model.json"
  base 1b-bf16 python3 $py --config scripts/gpu_models/tinyllama-1.1b.json --micro-batch 4 --seq-len 2048 --mode bf16 \
    --out "$RES/pytorch_1b_bf16.json"
  base 1b-amp python3 $py --config scripts/gpu_models/tinyllama-1.1b.json --micro-batch 4 --seq-len 2048 --mode amp \
    --out "$RES/pytorch_1b_amp.json"
  base 7b-bf16 python3 $py --config models/zoo/llama-2-7b.json --micro-batch 1 --seq-len 4096 --mode bf16 \
    --out "$RES/pytorch_7b_bf16.json"
  base 7b-bf16-ckpt python3 $py --config models/zoo/llama-2-7b.json --micro-batch 4 --seq-len 4096 --mode bf16 --checkpointing \
    --out "$RES/pytorch_7b_bf16_ckpt.json"
  # The 7b-lora plan's model in PyTorch + PEFT (the image has peft): its memory against zeroplan's.
  base 7b-lora16 python3 $py --config models/zoo/llama-2-7b.json --micro-batch 4 --seq-len 2048 --mode bf16 --lora-rank 16 \
    --out "$RES/pytorch_7b_lora16.json"
}

# DeepSpeed needs its wheels (the image has none): .whl/ carried, installed into /tmp/site.
ds_python() {
  if ! python3 -c "import deepspeed" 2>/dev/null; then
    ls .whl/*.whl >/dev/null 2>&1 || { echo "no DeepSpeed and no .whl/ carried"; return 1; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl ||
      return 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
}

phase_deepspeed() {
  say deepspeed
  ds_python || { note_fail "deepspeed: not installable"; return 1; }
  # stage:micro:seq[:opts] (scripts/deepspeed_step_bench.py): the 1b-stage0 plan's shapes at every
  # stage, with checkpointing, and small micro-steps (mb 1, seq 512) where fixed costs dominate.
  local runs=${ZP_DS_RUNS:-"s0:4:2048 s1:4:2048 s2:4:2048 s3:4:2048 s2:4:2048:ckpt s3:4:2048:ckpt s0:1:512 s2:1:512 s3:1:512 s3:1:512:pt0 s0:1:512:ga4 s3:1:512:ga4"}
  # One process per run: an engine's memory is not all returned in-process (seen on the H100, 2026-11-26).
  # Runs joined by commas ("a b,c d") share one process per comma-separated group instead: it saves the
  # ~10 s import per run when only times are wanted (later runs' memory peaks then include earlier ones').
  local groups=() g r name
  if [[ $runs == *,* ]]; then IFS=',' read -ra groups <<<"$runs"; else read -ra groups <<<"$runs"; fi
  for g in "${groups[@]}"; do
    r=$(echo $g)
    name=${r// /__}
    # ZP_DS_CONFIG: another model's config.json (default TinyLlama); its file name tags the outputs.
    # ZP_DS_STEPS="steps warmup" (default "5 2"): fewer for long sequences, where one step takes seconds.
    local cfg=${ZP_DS_CONFIG:-scripts/gpu_models/tinyllama-1.1b.json} tag="" steps
    read -ra steps <<<"${ZP_DS_STEPS:-5 2}"
    [ -n "${ZP_DS_CONFIG:-}" ] && tag=$(basename "$cfg" .json)_
    run_for "${ZP_DS_TIMEOUT:-200}" "deepspeed $tag$r" python3 scripts/deepspeed_step_bench.py \
      --config "$cfg" --runs "$r" --steps "${steps[0]}" --warmup "${steps[1]}" \
      --out "$RES/deepspeed_$tag${name//:/_}.json" \
      2>"$RES/deepspeed_$tag${name//:/_}.err" || grep -iE "error" "$RES/deepspeed_$tag${name//:/_}.err" | tail -2
  done
}

phase_sdpa() {
  say sdpa
  run_for "${ZP_SDPA_TIMEOUT:-90}" "sdpa backend probe" python3 scripts/sdpa_backend_probe.py --out "$RES/sdpa_probe.json"
}

phase_attention() {
  say attention
  run_for "${ZP_ATTN_TIMEOUT:-120}" "attention bench" python3 scripts/attention_bench.py --out "$RES/attention.json"
}

phase_bench() {
  say bench
  [ -x "$BUILD/bench/bench_cuda_gemm" ] || { echo "benchmarks were not built (libbenchmark did not load)"; return 0; }
  run_for 180 bench_gemm "$BUILD/bench/bench_cuda_gemm" --benchmark_out="$RES/bench_gemm.json" --benchmark_out_format=json
  run_for 180 bench_copies "$BUILD/bench/bench_cuda_copies" --benchmark_out="$RES/bench_copies.json" --benchmark_out_format=json
  run_for 180 bench_attention "$BUILD/bench/bench_cuda_attention" --benchmark_out="$RES/bench_attention.json" --benchmark_out_format=json
}

summarize() {
  python3 - "$RES" "$PROFILE" >"$RES/summary.md" <<'PY'
import json, os, sys, glob
res = sys.argv[1]
def load(p):
    try:
        with open(p) as f: return json.load(f)
    except Exception as e: return None
def get(d, *path):
    for k in path:
        if not isinstance(d, dict) or k not in d: return None
        d = d[k]
    return d
def gb(x): return "" if x is None else f"{x/1e9:.2f}"
def pct(a, b): return "" if a is None or b is None or b == 0 else f"{100*(a-b)/b:+.1f}%"
print("# GPU check results\n")
print("| plan | predicted peak GB (datasheet) | predicted peak GB (calibrated) | measured peak GB (engine) | measured device-level GB | error | predicted compute s (datasheet) | predicted compute s (calibrated) | measured step s | error (calibrated) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for p in sorted(glob.glob(os.path.join(res, "validate_*.json"))):
    name = os.path.basename(p)[len("validate_"):-5]
    v = load(p) or {}
    c = load(os.path.join(res, f"plan_calibrated_{name}.json")) or {}
    pred = get(v, "predicted") or {}
    pk = get(pred, "memory", "gpu", "peak")
    pkc = get(c, "recommendation", "memory", "gpu", "peak")
    mk = get(v, "measured", "memory", "gpu", "peak")
    dev = get(v, "measured", "device", "used_peak_bytes")  # cudaMemGetInfo (total - free) peak
    tc = get(pred, "time", "compute_s"); tcc = get(c, "recommendation", "time", "compute_s")
    mt = get(v, "measured", "time", "step_s")  # forward + backward + optimizer, engine-timed
    print(f"| {name} | {gb(pk)} | {gb(pkc)} | {gb(mk)} | {gb(dev)} | {pct(pkc, mk)} | {tc or ''} | {tcc or ''} | {mt or ''} | {pct(tcc, mt)} |")
print("\n## PyTorch baseline\n")
print("| run | step s (median) | tokens/s | max allocated GB | max reserved GB |")
print("|---|---|---|---|---|")
for p in sorted(glob.glob(os.path.join(res, "pytorch_*.json"))):
    d = load(p) or {}
    print(f"| {os.path.basename(p)[:-5]} | {d.get('step_s_median','')} | {d.get('tokens_per_s','')} | {gb(d.get('max_memory_allocated'))} | {gb(d.get('max_memory_reserved'))} |")
prof = load(sys.argv[2])
if prof:
    print("\n## Calibrated profile\n")
    for k in ["memory_bytes", "gemm_max_efficiency", "gemm_half_efficiency_gflop", "hbm_efficiency", "host_pinned_GBps", "host_pageable_GBps", "cuda_context_bytes"]:
        print(f"- {k}: {prof.get(k)}")
PY
}

for ph in env deps build test calibrate deepspeed attention sdpa validate baseline bench; do
  if want $ph; then "phase_$ph"; fi
done
say "summary"
summarize || echo "summary failed"
cat "$RES/summary.md"
echo "failed steps: ${#FAILED[@]}"; for f in "${FAILED[@]}"; do echo "  - $f"; done
cp "$LOG" "$RES/summary.md" "$OUT/" 2>/dev/null
[ -f "$PROFILE" ] && cp "$PROFILE" "$OUT/"
tar -czf "$OUT/results.tgz" -C "$BUILD" results 2>/dev/null
echo "gpu_check took $(( $(date +%s) - T0 )) s"
[ ${#FAILED[@]} -eq 0 ]
