#!/usr/bin/env bash
# Regenerates configs/examples/ from configs/examples/cases.txt with the zeroplan binary.
# Usage: scripts/regen_config_examples.sh [path/to/zeroplan]   (default: build/zeroplan)
# Run it after any planner change that moves a recommendation; tests/test_cli_configs_examples.cpp
# fails until the committed examples match what the binary writes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build/zeroplan}"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
[ -x "$bin" ] || { echo "zeroplan binary not found at $bin; build it or pass its path" >&2; exit 2; }
cd "$root/configs/examples"
# Remove the generated files of every case first, so a renamed or dropped sibling does not linger.
while IFS=$'\t' read -r name flags; do
  case "$name" in ''|'#'*) continue ;; esac
  rm -f "$name".json "$name".launch.sh "$name".training_args.py "$name".accelerate.yaml "$name".hostfile
done < cases.txt
while IFS=$'\t' read -r name flags; do
  case "$name" in ''|'#'*) continue ;; esac
  # shellcheck disable=SC2086  # flags are a whitespace-separated list by design
  "$bin" $flags --emit "$name.json" > /dev/null
  echo "wrote configs/examples/$name.json (+ siblings)"
done < cases.txt
