// estimate_memory per candidate plan: the search evaluates hundreds of thousands of candidates per
// second, so one evaluation must be plain arithmetic (no allocation). Stats are computed once.
#include <benchmark/benchmark.h>

#include "models/model_spec.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"

namespace {

using namespace zeroplan;
using namespace zeroplan::planner;

Workload llama_workload() {
  Workload w;
  models::ModelSpec& m = w.model;  // Llama-2-13B shape (meta-llama/Llama-2-13b-hf config.json)
  m.name = "llama-2-13b-bench";
  m.model_type = "llama";
  m.hidden_size = 5120;
  m.num_layers = 40;
  m.num_heads = 40;
  m.num_kv_heads = 40;
  m.head_dim = 128;
  m.intermediate_size = 13824;
  m.vocab_size = 32000;
  w.cluster.nodes = 1;
  w.cluster.gpus_per_node = 4;
  w.cluster.gpu.memory_bytes = 48'000'000'000;
  w.cluster.gpu.cuda_context_bytes = 600'000'000;
  return w;
}

void BM_EstimateMemory(benchmark::State& state) {
  const Workload w = llama_workload();
  const ModelStats s{compute_memory_stats(w), {}};
  int64_t i = 0;
  for (auto _ : state) {
    ZeroConfig z = ZeroConfig::deepspeed_defaults(static_cast<int>(i & 3));
    z.micro_batch = 1 + (i >> 2) % 8;
    z.checkpointing = static_cast<Checkpointing>((i >> 5) % 3);
    if (z.stage >= 1 && (i & 64)) z.offload_optimizer = Offload::CPU;
    const MemoryBreakdown m = estimate_memory(w, s, z);
    benchmark::DoNotOptimize(m.peak);
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EstimateMemory);

void BM_ComputeMemoryStats(benchmark::State& state) {
  const Workload w = llama_workload();
  for (auto _ : state) {
    MemoryStats s = compute_memory_stats(w);
    benchmark::DoNotOptimize(s.total_params);
  }
}
BENCHMARK(BM_ComputeMemoryStats);

}  // namespace
