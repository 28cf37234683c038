// Numerics of the executor's ZeRO engine on the cpu backend (thread ranks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "executor/engine.h"
#include "executor/test_models.h"

namespace zeroplan::exec {
namespace {

struct Variant {
  int ranks, stage, grad_accum;
  bool ckpt, offload;
};

RunConfig base_config(bool mixed) {
  RunConfig c;
  c.model = tiny_llama_micro_spec();
  c.mixed_precision = mixed;
  c.micro_batch = 2;
  c.seq_len = 16;
  c.steps = 3;
  c.lr = 1e-3f;
  return c;
}

RunResult run(const RunConfig& c, int ranks) {
  auto rt = make_cpu_runtime(ranks);
  return run_training(c, *rt);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

TEST(ExecutorNumerics, ProbeDiffs) {
  for (bool mixed : {false, true}) {
    RunConfig ref = base_config(mixed);
    ref.grad_accum = 4;
    const RunResult r0 = run(ref, 1);
    for (Variant v :
         {Variant{1, 0, 4, false, false}, Variant{2, 0, 2, false, false}, Variant{4, 1, 1, false, false},
          Variant{4, 2, 1, false, false}, Variant{4, 3, 1, false, false}, Variant{2, 3, 2, true, true},
          Variant{2, 2, 2, true, true}, Variant{2, 1, 2, false, true}}) {
      RunConfig c = base_config(mixed);
      c.zero.stage = v.stage;
      c.grad_accum = v.grad_accum;
      c.checkpointing = v.ckpt;
      c.zero.offload_optimizer = v.offload;
      c.zero.reduce_bucket_size = 20000;
      c.zero.param_persistence_threshold = 100;
      c.zero.max_reuse_distance = 0;
      const RunResult r = run(c, v.ranks);
      printf(
          "mixed %d N %d stage %d ga %d ckpt %d off %d: maxdiff %.3g loss %.5f->%.5f (ref %.5f->%.5f) peak "
          "%lld comm %lld\n",
          mixed, v.ranks, v.stage, v.grad_accum, v.ckpt, v.offload,
          max_abs_diff(r.final_params, r0.final_params), r.loss_per_step.front(), r.loss_per_step.back(),
          r0.loss_per_step.front(), r0.loss_per_step.back(), (long long)r.ranks[0].device.peak,
          (long long)r.ranks[0].comm_bytes);
    }
  }
}

}  // namespace
}  // namespace zeroplan::exec
