#!/usr/bin/env bash
# Builds, HERE, the binaries scripts/gpu_check.sh runs on the device machine, and leaves them
# stripped in .gpucarry/ (git-ignored), so that a short lease (15 device minutes in all, machine
# start included) is spent running rather than compiling.
#
# Why this works: this machine has nvcc 13.0, the toolkit the device image carries (KINDS.md), and
# the binaries need nothing from Debian there: fmt header-only, no MPI (one process per GPU
# emulates the other ranks), GoogleTest linked statically, and only Debian's libbenchmark copied
# into .gpucarry/lib. The CUDA libraries (cudart, cuBLAS/cuBLASLt 13, NCCL 2) are the device's own;
# gpu_check.sh puts the toolkit's lib64 and PyTorch's nvidia-* wheels on LD_LIBRARY_PATH.
# sm_90 machine code only (CMAKE_CUDA_ARCHITECTURES=90: SASS for sm_90 plus its PTX).
#
# Usage: scripts/prepare_gpu_prebuilt.sh [build-dir]   (default /work/bgpu or build-prebuilt)
# then: run(command="ZP_BUILD=.gpucarry ZP_BUDGET_S=480 bash scripts/gpu_check.sh env test calibrate validate baseline bench",
#           carry=[".gpucarry"], timeout_s=560)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-prebuilt}
CARRY=.gpucarry
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZEROPLAN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DZEROPLAN_MPI=OFF -DZEROPLAN_FMT_HEADER_ONLY=ON -DZEROPLAN_BENCH=ON >/dev/null
cmake --build "$B" --target zeroplan zeroplan-exec test_cuda_host test_cuda_kernels test_cuda_backend \
  bench_cuda_gemm bench_cuda_copies bench_cuda_attention
rm -rf "$CARRY"
mkdir -p "$CARRY/tests" "$CARRY/bench" "$CARRY/lib"
strip -o "$CARRY/zeroplan" "$B/zeroplan"
strip -o "$CARRY/zeroplan-exec" "$B/zeroplan-exec"
for t in test_cuda_host test_cuda_kernels test_cuda_backend; do strip -o "$CARRY/tests/$t" "$B/tests/$t"; done
for t in bench_cuda_gemm bench_cuda_copies bench_cuda_attention; do strip -o "$CARRY/bench/$t" "$B/bench/$t"; done
lib=$(ldd "$CARRY/bench/bench_cuda_gemm" | awk '/libbenchmark/ {print $3}')
[ -n "$lib" ] && cp -L "$lib" "$CARRY/lib/"
# Anything else Debian-only would not load there: list what the binaries still need.
for f in "$CARRY/zeroplan" "$CARRY/zeroplan-exec" "$CARRY"/tests/* "$CARRY"/bench/*; do
  ldd "$f" | awk '{print $1}' | grep -vE '^(linux-vdso|/lib64/ld-linux)' |
    grep -vE '^lib(c|m|dl|rt|pthread|gcc_s|stdc\+\+)\.so|^lib(cudart|cublas|cublasLt)\.so\.13|^libnccl\.so\.2|^libbenchmark' || true
done | sort -u | sed 's/^/needs (check it is on the device): /'
du -sh "$CARRY"
