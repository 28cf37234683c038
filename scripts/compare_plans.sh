#!/usr/bin/env bash
# Same numbers, before and after (issue 25): runs the full `--json` of a sweep of plans (zoo models x
# clusters x stages x methods x offload) and `check --json` on every config example with two zeroplan
# binaries and reports every plan whose output differs. A refactor must print "0 differ".
#   bash scripts/compare_plans.sh OLD_BINARY NEW_BINARY
# A commit that adds JSON keys names them, and the comparison drops their lines (pretty-printed JSON
# has one key per line):
#   NEW_KEYS='sequence_parallel_size|data_parallel_size' bash scripts/compare_plans.sh OLD NEW
set -uo pipefail
old=${1:?old zeroplan binary}
new=${2:?new zeroplan binary}
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
differ=0
run() {  # args...: one plan, both binaries, compared byte for byte (stdout, stderr and exit code)
  n=$((n + 1))
  "$old" "$@" >"$tmp/a.out" 2>"$tmp/a.err"
  echo $? >>"$tmp/a.out"
  "$new" "$@" >"$tmp/b.out" 2>"$tmp/b.err"
  echo $? >>"$tmp/b.out"
  # The version line names the build's commit; drop it from the comparison.
  sed -i '/"zeroplan_version"/d' "$tmp/a.out" "$tmp/b.out"
  # (and the trailing commas, which a key added after the last one of an object moves)
  if [ -n "${NEW_KEYS:-}" ]; then sed -i -E "/\"(${NEW_KEYS})\":/d; s/,\$//" "$tmp/a.out" "$tmp/b.out"; fi
  if ! cmp -s "$tmp/a.out" "$tmp/b.out" || ! cmp -s "$tmp/a.err" "$tmp/b.err"; then
    differ=$((differ + 1))
    echo "DIFFERS: zeroplan $*"
  fi
}
models=(7b 13b 70b llama-3.1-8b mistral-7b mixtral-8x7b qwen3-30b-a3b gemma-2-9b gpt2-xl opt-13b falcon-7b deepseek-v3)
clusters=(1xA40 4xA40 8xA100 2x8xH100 4x8xH100)
for m in "${models[@]}"; do
  for c in "${clusters[@]}"; do
    for s in 0 1 2 3; do
      run --model "$m" --gpus "$c" --stage "$s" --json
      run --model "$m" --gpus "$c" --stage "$s" --offload-optimizer cpu --json
    done
    run --model "$m" --gpus "$c" --method lora --json
    run --model "$m" --gpus "$c" --global-batch 256 --json
  done
done
# ZeRO++ at stage 3: hpZ inside a node, hpZ over every rank, qwZ and qgZ, on one and several nodes.
for m in 7b llama-3.1-8b mixtral-8x7b; do
  for c in 8xA100 2x8xH100 4x8xH100; do
    for h in 8 auto; do run --model "$m" --gpus "$c" --stage 3 --hpz "$h" --json; done
    run --model "$m" --gpus "$c" --stage 3 --qwz on --qgz on --json
    run --model "$m" --gpus "$c" --stage 3 --hpz 8 --qwz on --qgz on --json
  done
  run --model "$m" --gpus 2x8xH100 --stage 3 --hpz 16 --json
done
for cfg in "$root"/configs/examples/*.json; do
  run check "$cfg" --model 13b --gpus 4xA40 --json
done
echo "compare_plans: $n plans, $differ differ"
[ "$differ" -eq 0 ]
