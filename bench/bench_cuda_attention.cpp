// Our flash-style causal attention (executor/cuda/kernels_attention.cu) by shape: forward and
// backward TFLOP/s, counting the products over the causal half of the scores (forward 2 products,
// backward 5, so 2 * 2 * B*H*D*S^2/2 and 2.5x that). This is the kernel most likely to hold the
// executor below PyTorch's SDPA (FlashAttention-2/cuDNN) on long sequences; run it beside
// bench_cuda_gemm to see by how much.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <random>
#include <vector>

#include "bench/bench_cuda_common.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/host_adam.h"
#include "executor/cuda/kernels.h"

namespace zeroplan::bench {
namespace {

using exec::cuda::AttentionBwdScratch;
using exec::cuda::AttentionShape;

void fill(exec::cuda::CudaBackend& be, void* p, int64_t n, uint32_t seed) {
  std::vector<uint16_t> h(static_cast<size_t>(n));
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& x : h) x = exec::cuda::float_to_bf16_bits(d(rng));
  be.upload(p, h.data(), n * 2);
}

// range: batch, seq, heads, kv_heads, head_dim, backward (0/1), tile rows (0 = the device's choice,
// 64 or 32 forced: the 32-row tiles are what A100/A40 launch for head_dim 128, attention_tiles.h)
void BM_CudaAttention(benchmark::State& state) {
  auto* be = gpu0(state);
  if (be == nullptr) return;
  AttentionShape a{state.range(0), state.range(1), state.range(2), state.range(3), state.range(4)};
  const bool bwd = state.range(5) != 0;
  const auto tiles = static_cast<exec::cuda::AttentionTiles>(state.range(6));
  const int64_t qn = a.batch * a.seq * a.heads * a.head_dim, kn = a.batch * a.seq * a.kv_heads * a.head_dim;
  using exec::MemTier;
  auto* q = be->allocate(qn * 2, MemTier::Device);
  auto* k = be->allocate(kn * 2, MemTier::Device);
  auto* v = be->allocate(kn * 2, MemTier::Device);
  auto* o = be->allocate(qn * 2, MemTier::Device);
  auto* d_o = be->allocate(qn * 2, MemTier::Device);
  auto* dq = be->allocate(qn * 2, MemTier::Device);
  auto* dk = be->allocate(kn * 2, MemTier::Device);
  auto* dv = be->allocate(kn * 2, MemTier::Device);
  auto* lse = be->allocate(a.batch * a.heads * a.seq * 4, MemTier::Device);
  auto* scratch = be->allocate(AttentionBwdScratch::bytes(a), MemTier::Device);
  fill(*be, q, qn, 1);
  fill(*be, k, kn, 2);
  fill(*be, v, kn, 3);
  fill(*be, d_o, qn, 4);
  AttentionBwdScratch sc;
  sc.dq_accum = static_cast<float*>(scratch);
  sc.delta = static_cast<float*>(scratch) + qn;
  cudaStream_t s = be->stream(exec::Stream::Compute);
  using exec::cuda::bf16;
  auto run_fwd = [&] {
    exec::cuda::attention_fwd(s, a, static_cast<bf16*>(q), static_cast<bf16*>(k), static_cast<bf16*>(v),
                              static_cast<bf16*>(o), static_cast<float*>(lse), tiles);
  };
  auto run_bwd = [&] {
    exec::cuda::attention_bwd(s, a, static_cast<bf16*>(q), static_cast<bf16*>(k), static_cast<bf16*>(v),
                              static_cast<bf16*>(o), static_cast<bf16*>(d_o), static_cast<float*>(lse),
                              static_cast<bf16*>(dq), static_cast<bf16*>(dk), static_cast<bf16*>(dv), sc,
                              tiles);
  };
  run_fwd();
  if (bwd) run_bwd();
  cudaEvent_t e0, e1;
  ZP_CUDA_CHECK(cudaEventCreate(&e0));
  ZP_CUDA_CHECK(cudaEventCreate(&e1));
  const int reps = 10;
  for (auto _ : state) {
    ZP_CUDA_CHECK(cudaEventRecord(e0, s));
    for (int i = 0; i < reps; ++i) bwd ? run_bwd() : run_fwd();
    ZP_CUDA_CHECK(cudaEventRecord(e1, s));
    ZP_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    ZP_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    state.SetIterationTime(ms / 1e3 / reps);
  }
  const double flops = (bwd ? 5.0 : 2.0) * static_cast<double>(a.batch * a.heads * a.head_dim) *
                       static_cast<double>(a.seq) * static_cast<double>(a.seq);
  state.counters["TFLOP/s"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(bwd ? "backward" : "forward");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  for (void* p : {q, k, v, o, d_o, dq, dk, dv, lse, scratch}) be->release(p, MemTier::Device);
}

BENCHMARK(BM_CudaAttention)
    ->ArgNames({"B", "S", "H", "KV", "D", "bwd", "tiles"})
    // Llama-2-7B (MHA), Llama-3-8B (GQA 4): the device's choice and the 32-row fallback
    ->ArgsProduct({{1}, {2048, 4096}, {32}, {32, 8}, {128}, {0, 1}, {0, 32}})
    ->Args({4, 2048, 32, 4, 64, 0, 0})  // TinyLlama-1.1B
    ->Args({4, 2048, 32, 4, 64, 1, 0})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace zeroplan::bench
