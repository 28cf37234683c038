// Accounting agreement: the executor's measured memory and communication (its own account, from its
// own tensors) against the planner's prediction (planner/memory_model.h, time_model.h) for the same
// workload and ZeroConfig.
#include <gtest/gtest.h>

#include "executor/engine.h"
#include "executor/test_models.h"
#include "executor_accounting_util.h"
#include "hwprofiles/cluster.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"
#include "planner/time_model.h"

namespace zeroplan::exec {
namespace {

using planner::Category;
using testing::collective_bytes;
using testing::planner_buffer;
using testing::planner_category_max;

struct Case {
  int ranks, stage;
  bool mixed;
  int64_t grad_accum = 1;
  bool ckpt = false, offload = false, overlap = false;
  // Stage-3 coordinator knobs; the defaults exercise prefetch and releases on this small model.
  int64_t prefetch = 20000, max_live = 60000, reuse = 5000;
};

struct Both {
  planner::MemoryBreakdown pred;
  planner::StepTime time;
  RunResult meas;
};

Both run_both(const Case& k) {
  const planner::Workload w = testing::engine_workload(tiny_llama_micro_spec(), k.ranks, k.mixed);
  planner::ZeroConfig z = planner::ZeroConfig::deepspeed_defaults(k.stage);
  z.micro_batch = 2;
  z.grad_accum = k.grad_accum;
  z.checkpointing = k.ckpt ? planner::Checkpointing::Full : planner::Checkpointing::None;
  z.offload_optimizer = k.offload ? planner::Offload::CPU : planner::Offload::None;
  z.overlap_comm = k.overlap;
  z.reduce_bucket_size = 30000;
  z.param_persistence_threshold = 100;
  z.prefetch_bucket_size = k.prefetch;
  z.max_live_parameters = k.max_live;
  z.max_reuse_distance = k.reuse;
  z.sub_group_size = 40000;
  const planner::ModelStats s = planner::compute_model_stats(w);
  Both b;
  b.pred = planner::estimate_memory(w, s, z);
  b.time = planner::estimate_time(w, s, z);
  const RunConfig c = testing::engine_run_config(w, z, 2);
  auto rt = make_cpu_runtime(k.ranks);
  b.meas = run_training(c, *rt);
  return b;
}

int64_t planner_step_buffers(const planner::MemoryBreakdown& m) {
  int64_t s = 0;
  for (int i = 0; i < m.num_gpu; ++i)
    if (m.gpu[i].category == Category::Buffers && (m.gpu[i].phases & planner::kStep)) s += m.gpu[i].bytes;
  return s;
}
constexpr int kAG = static_cast<int>(CollKind::AllGather);
constexpr int64_t kPsi = 123712;           // tiny-llama-micro parameters (hand count in test_models.h)
constexpr int64_t kLargestTensor = 16384;  // embed_tokens / lm_head: 256 x 64

std::string describe(const Case& k) {
  return "N=" + std::to_string(k.ranks) + " stage " + std::to_string(k.stage) +
         (k.mixed ? " bf16" : " fp32") + " ga " + std::to_string(k.grad_accum) + (k.ckpt ? " ckpt" : "") +
         (k.offload ? " offload" : "") + (k.overlap ? " overlap" : "");
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (int n : {2, 4})
    for (int stage : {0, 1, 2, 3})
      for (bool mixed : {false, true}) v.push_back({n, stage, mixed});
  v.push_back({4, 2, true, 2, true, false, true});
  v.push_back({4, 1, true, 2, false, false, true});
  v.push_back({2, 1, true, 2, false, true});
  v.push_back({2, 2, true, 1, false, true});
  v.push_back({2, 3, true, 2, true, true});
  return v;
}

// Model states, buffers and activations: what each GPU holds at the predicted peak.
TEST(ExecutorAccounting, MemoryAgreesWithPlanner) {
  for (const Case& k : cases()) {
    const Both b = run_both(k);
    const RankMeasurement& m = b.meas.ranks[0];
    const auto at = [&](Category c) { return m.device.at_peak[static_cast<int>(c)]; };
    const auto peak_of = [&](Category c) { return m.device.category_peak[static_cast<int>(c)]; };
    const auto pred = [&](Category c) { return b.pred.category(c); };
    SCOPED_TRACE(describe(k));
    // Parameters and optimizer states: exact. (The flat buffers are padded to a multiple of 2N
    // elements, S12/bf16_optimizer nccl_start_alignment_factor; 123712 is already a multiple of 8,
    // so the padding is 0 here and the comparison is exact without adjustment.)
    EXPECT_EQ(at(Category::Parameters), pred(Category::Parameters));
    EXPECT_EQ(at(Category::OptimizerStates), pred(Category::OptimizerStates));
    // Gradients, each side's own maximum of the category (the planner's over its phases, the
    // executor's over the step): exact. The planner models the engine here
    // (Implementation::ZeroplanEngine, planner/engine_runtime.h), whose gradient buffers differ from
    // DeepSpeed 0.16.9's in three written-down ways; hand counts of each (kPsi = 123712 parameters,
    // kLargestTensor = 16384, N ranks, e = 2 in bf16 / 4 in fp32):
    //  - stage 0 bf16: fp32 buffer 4 kPsi + one 16-bit gradient at a time, the largest: 2 x 16384;
    //  - stage 1: full gradients e kPsi + grads_in_partition e kPsi / N from the boundary reduction;
    //  - optimizer offload: no device staging buffer.
    const int64_t grad_max = planner_category_max(b.pred, Category::Gradients);
    EXPECT_EQ(peak_of(Category::Gradients), grad_max);
    const int64_t e = k.mixed ? 2 : 4;
    if (k.stage == 0 && k.mixed) {
      EXPECT_EQ(grad_max, 4 * kPsi + 2 * kLargestTensor);
    }
    if (k.stage == 1 && !k.offload) {
      EXPECT_EQ(grad_max, e * kPsi + e * kPsi / k.ranks);
    }
    if (k.offload) {
      EXPECT_EQ(planner_buffer(b.pred, "gradient staging buffer (device)"), 0);
    }
    // Buffers: the gradient bucket(s), and what lives only during the step (the fp32 gradient copy
    // of the partition, or of one stage-3 sub-group; stage 3's bucket lives throughout).
    EXPECT_EQ(m.gradient_bucket_bytes * m.num_gradient_buckets,
              planner_buffer(b.pred, "gradient bucket (IPG)"));
    // Stage 3: _create_fp16_sub_groups closes a sub-group once it REACHES sub_group_size, so one can
    // exceed it by up to one parameter's partition (here ceil(16384/N) elements); the planner's
    // min(sub_group_size, partition) leaves that out.
    const int64_t step_buffers = m.device.phase_at_peak[2][static_cast<int>(Category::Buffers)];
    if (k.stage == 3 && !k.offload) {
      EXPECT_GE(step_buffers, planner_step_buffers(b.pred));
      EXPECT_LE(step_buffers, planner_step_buffers(b.pred) + 4 * ((kLargestTensor + k.ranks - 1) / k.ranks));
    } else {
      EXPECT_EQ(step_buffers, planner_step_buffers(b.pred));
    }
    // Activations: the engine's own buffers (executor/engine.cpp alloc_layer_acts, forward, backward)
    // as the planner's engine model walks them: exact, at each side's maximum over the step.
    // (By name: where the backward's end moment outweighs its start, stages 0/1, finalize() keeps
    // the end moment for the phase totals, but the buffer still carries its bytes.)
    EXPECT_EQ(peak_of(Category::Activations), testing::planner_engine_activation_max(b.pred));
  }
}

// Communication per rank per step against the time model's comm_bytes_per_rank.
TEST(ExecutorAccounting, CommunicationAgreesWithPlanner) {
  for (const Case& k : cases()) {
    const Both b = run_both(k);
    const RankMeasurement& m = b.meas.ranks[0];
    SCOPED_TRACE(describe(k));
    const int64_t N = k.ranks;
    if (k.stage == 0 && k.mixed) {
      // BF16_Optimizer: the engine all-reduces the fp32 gradient buffer (get_grads_for_reduction
      // returns fp32_groups_gradients_flat) and update_lp_params all-gathers the bf16 partitions.
      // Hand count: 2(N-1)/N x 4 Psi + (N-1)/N x 2 Psi; the planner must say the same.
      EXPECT_EQ(m.comm_bytes, 2 * (N - 1) * 4 * kPsi / N + (N - 1) * 2 * kPsi / N);
      EXPECT_EQ(m.comm_bytes, b.time.comm_bytes_per_rank);
      continue;
    }
    if (k.stage == 3) {
      // S3 _post_step re-gathers the persistent parameters (5 norms of 64 elements, padded to
      // N x ceil(64/N)); hand count below, and the planner must say the same. The gathers are
      // compared in Stage3GathersAgreeWithPlanner, in the configurations where both sides should
      // agree (the planner ignores DeepSpeed's prefetch-covered release rule).
      const int64_t e = k.mixed ? 2 : 4;
      const int64_t persist_regather = 5 * ((N - 1) * (N * ((64 + N - 1) / N) * e) / N);
      EXPECT_EQ(m.comm_by_phase[2].bytes_sent[kAG], persist_regather);
      EXPECT_EQ(collective_bytes(b.time, "stage-3 persistent-parameter all-gather"), persist_regather);
      EXPECT_EQ(collective_bytes(b.time, "stage-3 gradient reduce-scatter"),
                m.comm_by_phase[1].bytes_sent[static_cast<int>(CollKind::ReduceScatter)]);
      continue;
    }
    EXPECT_EQ(m.comm_bytes, b.time.comm_bytes_per_rank);
  }
}

// Stage-3 parameter all-gathers and gathered-parameter memory in the two regimes where the
// planner's reuse-distance rule and DeepSpeed's coordinator must agree exactly:
//  - DeepSpeed's defaults (prefetch 5e7, max live 1e9, reuse distance 1e9): on a model this small
//    every parameter is reused within the distance, so nothing is released between forward and
//    backward; the backward gathers nothing and all non-persistent parameters are live together;
//  - no prefetch and reuse distance 0: each parameter is gathered for its forward use and again for
//    its backward use, and at most one parameter (the largest, 16384 elements) is live.
// (With prefetch on and a small reuse distance, PPC also keeps parameters whose next use a prefetch
// already covered (__params_to_release, "reuse was skipped by prefetch"); the planner does not model
// that rule, so the executor gathers less in the backward there: reported, not asserted.)
TEST(ExecutorAccounting, Stage3GathersAgreeWithPlanner) {
  for (int n : {2, 4})
    for (bool keep_all : {true, false}) {
      Case k{n, 3, true};
      if (keep_all) {
        k.prefetch = 50'000'000;
        k.max_live = 1'000'000'000;
        k.reuse = 1'000'000'000;
      } else {
        k.prefetch = 0;
        k.reuse = 0;
      }
      const Both b = run_both(k);
      const RankMeasurement& m = b.meas.ranks[0];
      SCOPED_TRACE(describe(k) + (keep_all ? " keep-all" : " no-reuse"));
      const int64_t fwd = collective_bytes(b.time, "stage-3 forward parameter all-gathers");
      const int64_t bwd = collective_bytes(b.time, "stage-3 backward parameter all-gathers");
      EXPECT_EQ(m.comm_by_phase[0].bytes_sent[kAG], fwd);
      EXPECT_EQ(m.comm_by_phase[1].bytes_sent[kAG], bwd);
      if (keep_all) {
        EXPECT_EQ(bwd, 0);
      }
      const int64_t gathered_fwd = planner_buffer(b.pred, "gathered parameters (forward)");
      EXPECT_EQ(m.gathered_params_peak_bytes, gathered_fwd);
      if (!keep_all) {
        EXPECT_EQ(m.gathered_params_peak_bytes, 2 * kLargestTensor);
      }
    }
}

}  // namespace
}  // namespace zeroplan::exec
