#!/usr/bin/env bash
# Prepares .deps/ (git-ignored) for scripts/gpu_check.sh. The GPU machine has no internet and none
# of our Debian build dependencies, so we bring them: `apt-get download` the Debian 12 packages here
# and unpack them with `dpkg -x` (no installation, no root needed there). Header-only: nlohmann-json,
# CLI11, Eigen; fmt as its library + headers (also usable header-only with FMT_HEADER_ONLY);
# GoogleTest as sources (Debian's `googletest` package ships /usr/src/googletest), built there;
# Google Benchmark as Debian's prebuilt library (libbenchmark-dev + libbenchmark1debian): if it
# fails to load there, gpu_check.sh configures without benchmarks.
# Usage (here, once, before calling the device tool with carry [".deps"]):  scripts/prepare_gpu_deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS=.deps
PKGS="libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev libeigen3-dev googletest libbenchmark-dev libbenchmark1debian"
rm -rf "$DEPS"
mkdir -p "$DEPS/debs" "$DEPS/root"
(cd "$DEPS/debs" && apt-get download $PKGS)
for f in "$DEPS"/debs/*.deb; do dpkg -x "$f" "$DEPS/root"; done
ls "$DEPS/debs" > "$DEPS/PACKAGES"
rm -rf "$DEPS/debs" "$DEPS/root/usr/share/doc" "$DEPS/root/usr/share/man" "$DEPS/root/usr/share/lintian"
grep -qx '/.deps/' .gitignore || echo "warning: .deps/ is not in .gitignore; it must not be committed" >&2
echo "prepared $(du -sh "$DEPS" | cut -f1) in $DEPS:"
cat "$DEPS/PACKAGES"
