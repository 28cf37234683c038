#!/usr/bin/env bash
# Sets up a fresh Debian machine for zeroplan and builds the planner, ./build/zeroplan (idempotent:
# re-running only rebuilds what changed). Dependencies are Debian packages; CUDA/NCCL are used from
# /usr/local/cuda when nvcc is there (the CUDA backend is then compiled, even without a GPU); MPI
# from Debian's OpenMPI.
set -euo pipefail
cd "$(dirname "$0")/.."

# libopenmpi-dev + openmpi-bin: multi-process runs under mpirun (optional at build time; CMake
# uses MPI when it finds it, and tests/test_mpi_ranks.cpp runs mpirun).
PKGS=(cmake ninja-build g++ libeigen3-dev libfmt-dev nlohmann-json3-dev libcli11-dev
      libgtest-dev libgmock-dev libbenchmark-dev libopenmpi-dev openmpi-bin
      python3-venv python3-dev)  # python3-*: the wheel's test (scripts/test_wheel.sh)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

BUILD=${ZEROPLAN_BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
fi
# Only the planner by default (the quick start's first plan needs nothing else: no executor, CUDA
# kernels, tests or benchmarks); `scripts/test.sh` builds everything (ZEROPLAN_TARGETS=all).
cmake --build "$BUILD" -j"$(nproc)" --target ${ZEROPLAN_TARGETS:-zeroplan}
