// The search evaluates millions of candidates: evaluate_plan (memory + time + throughput) must not
// touch the heap. This binary replaces the global operator new to count allocations in a window.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/search.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace zeroplan::planner {
namespace {

TEST(TimeModelAllocation, EvaluatePlanDoesNotAllocate) {
  for (const char* gpus : {"4xA40", "4x8xH100"}) {
    Workload w;
    w.model = models::load_model("70b");
    w.cluster = hw::parse_cluster(gpus);
    const ModelStats s = compute_model_stats(w);
    double sink = 0;
    // The first evaluation of each (stage, bucket, ...) builds DeepSpeed's per-call collective list
    // once and caches its families on this thread (planner/collective_families.h); every evaluation
    // after that must not allocate. Warm the cache with one sweep, then count a second.
    long before = 0;
    for (int pass = 0; pass < 2; ++pass) {
      before = g_allocations.load();
      for (int stage = 0; stage <= 3; ++stage)
        for (int64_t micro : {1, 2, 7})
          for (Checkpointing c : {Checkpointing::None, Checkpointing::Selective, Checkpointing::Full})
            for (Offload o : {Offload::None, Offload::CPU}) {
              ZeroConfig z = ZeroConfig::deepspeed_defaults(stage);
              z.micro_batch = micro;
              z.checkpointing = c;
              if (stage > 0) z.offload_optimizer = o;
              if (stage == 3) z.offload_param = o;
              sink += evaluate_plan(w, s, z, 0.05).tokens_per_s;
            }
    }
    EXPECT_EQ(g_allocations.load() - before, 0) << gpus;
    EXPECT_GT(sink, 0);
  }
}

}  // namespace
}  // namespace zeroplan::planner
