#!/usr/bin/env bash
# Whole-process timing of zeroplan (issue 16, item 2): wall time and peak RSS of each command of the
# README's usage block, as a user's shell sees them (process start, dynamic loading, static
# initialisation, planning, printing), median of N runs (default 9, at least 7).
#
#   bash scripts/time_whole_process.sh [build-dir]        # default build/
#   ZP_RUNS=15 bash scripts/time_whole_process.sh build
#
# Goals (issue 16): `zeroplan --model 70b --gpus 4x8xH100 --json` <= 20 ms and <= 30 MiB; every other
# planning command <= 50 ms; --max-seq <= 100 ms (issue 27). Exit 1 when a goal is missed. Wall time: `date +%s%N` around the run
# (includes /usr/bin/time's own fork+exec, ~1 ms); peak RSS: /usr/bin/time -f %M (the child's
# ru_maxrss, KiB); CPU time (when `perf stat` works here): task-clock of the process, which a loaded
# machine does not inflate the way it inflates wall time. validate/calibrate run training or GPU measurements and are listed for their
# start-up only (see the README).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ZP="$PWD/$BUILD/zeroplan"
RUNS=${ZP_RUNS:-9}
((RUNS >= 7)) || { echo "ZP_RUNS must be >= 7"; exit 2; }
[ -x "$ZP" ] || { echo "no $ZP; build it first (bash scripts/setup.sh)"; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package 'time')"; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$ZP" --model 13b --gpus 4xA40 --emit ds_config.json >/dev/null  # the config the check command reads

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

fail=0
# label|goal ms|goal MiB (0 = none)|command
run() {
  local goal_ms=$1 goal_mib=$2; shift 2
  local walls=() rss=() cpus=()
  for ((i = 0; i < RUNS; i++)); do
    local t0 t1
    t0=$(date +%s%N)
    /usr/bin/time -o rss.txt -f %M "$@" >/dev/null 2>&1 || true
    t1=$(date +%s%N)
    walls+=("$(((t1 - t0) / 1000))")
    rss+=("$(tail -n 1 rss.txt)")
    if ((have_perf)); then
      perf stat -x, -o perf.txt -e task-clock "$@" >/dev/null 2>&1 || true
      cpus+=("$(awk -F, '/task-clock/ {print $1}' perf.txt)")
    fi
  done
  local w r
  w=$(printf '%s\n' "${walls[@]}" | median)
  r=$(printf '%s\n' "${rss[@]}" | median)
  local cpu="-"
  if ((have_perf)); then cpu=$(printf '%s\n' "${cpus[@]}" | median | awk '{printf "%.1f", $1}'); fi
  local ms mib verdict="" 
  ms=$(awk -v u="$w" 'BEGIN {printf "%.1f", u / 1000}')
  mib=$(awk -v k="$r" 'BEGIN {printf "%.1f", k / 1024}')
  if [ "$goal_ms" != 0 ]; then
    if awk -v a="$ms" -v g="$goal_ms" 'BEGIN {exit !(a > g)}'; then verdict=" MISSED ${goal_ms} ms"; fail=1; fi
  fi
  if [ "$goal_mib" != 0 ]; then
    if awk -v a="$mib" -v g="$goal_mib" 'BEGIN {exit !(a > g)}'; then verdict+=" MISSED ${goal_mib} MiB"; fail=1; fi
  fi
  local shown="${*#"$ZP"}"
  printf '%8s ms %7s ms %7s MiB  zeroplan%s%s\n' "$ms" "$cpu" "$mib" "${shown#"$ZP"}" "$verdict"
}

have_perf=0
if perf stat -x, -o perf.txt -e task-clock true >/dev/null 2>&1; then have_perf=1; fi
echo "median of $RUNS runs each, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%F) ($($ZP --version))"
echo "      wall       CPU  peak RSS  command"
run 20 30 "$ZP" --model 70b --gpus 4x8xH100 --json
run 50 0 "$ZP" --model 13b --gpus 4xA40
run 50 0 "$ZP" --model 13b --gpus 4xA40 --stage 2 --micro-batch 1 --explain
run 50 0 "$ZP" --model 70b --gpus 4x8xH100 --global-batch 512 --json
run 50 0 "$ZP" --model llama-3.1-8b --gpus 2xA100-80GB --method lora --lora-rank 16
run 50 0 "$ZP" --params 7.5e9 --gpus 64xA100-80GB --stage 3
run 50 0 "$ZP" --model 7b --gpus 8xRTX3090 --compare deepspeed
run 50 0 "$ZP" --model 13b --gpus 4xA40 --emit ds_config.json --force
run 50 0 "$ZP" check ds_config.json --model 13b --gpus 4xA40 --micro-batch 2
# Issue 27: the longest sequence, Ulysses SP included, <= 100 ms.
run 100 0 "$ZP" --model llama-3.1-8b --gpus 8xH100 --max-seq
run 50 0 "$ZP" --model llama-3.1-8b --gpus 8xH100 --seq-len 131072 --sp 8
run 50 0 "$ZP" models
run 50 0 "$ZP" gpus
# The executor's commands: training on thread ranks (not a planning answer; no goal).
if [ -x "$(dirname "$ZP")/zeroplan-exec" ]; then
  run 0 0 "$ZP" validate --backend cpu --model tiny-llama-micro --gpus 4xCPU --stage 3 --seq-len 64 --micro-batch 2
fi
exit $fail
