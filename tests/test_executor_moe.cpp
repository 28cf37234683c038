// The native executor with a MoE block (executor/engine.cpp moe_forward/moe_backward), Mixtral's
// (tiny-mixtral) and Qwen3-MoE's (tiny-qwen3-moe: per-head q/k norms, experts registered first,
// norm_topk_prob), and the dense Qwen3 (tiny-qwen3) for the q/k norms alone: layout against
// transformers, ZeRO stages 0-3 on 1 and 2 thread ranks against the one-rank stage-0 run, the
// backward against finite differences, the forward loss against transformers, and the memory and
// communication the engine measures against the planner's prediction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "executor/cpu_backend.h"
#include "executor/engine.h"
#include "executor/stream_checker.h"
#include "executor/test_models.h"
#include "executor_accounting_util.h"
#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"
#include "planner/time_model.h"

namespace zeroplan::exec {
namespace {

constexpr float kLr = 1e-3f;
// tiny-mixtral parameters, hand count: embed 256x64 = 16384; per layer q 64x64 + k 32x64 + v 32x64 +
// o 64x64 = 12288, router 4x64 = 256, experts gate_up 4x192x64 = 49152 and down 4x64x96 = 24576,
// 2 norms x 64 = 128 -> 86400; 2 layers 172800; final norm 64; lm_head 16384. Total 205632, the count
// transformers 5.24 gives for tests/data/models/tiny-mixtral/config.json (MixtralForCausalLM on the
// meta device, sum of numel over parameters()).
constexpr int64_t kPsi = 205632;

RunConfig base_config(bool mixed, const models::ModelSpec& model = tiny_mixtral_spec()) {
  RunConfig c;
  c.model = model;
  c.mixed_precision = mixed;
  c.micro_batch = 2;
  c.seq_len = 16;
  c.steps = 3;
  c.lr = kLr;
  // Small buckets and thresholds so that several reduce buckets run, the 49152-element fused experts
  // exceed the bucket, and stage 3 partitions, releases and prefetches.
  c.zero.reduce_bucket_size = 30000;
  c.zero.param_persistence_threshold = 100;
  c.zero.prefetch_bucket_size = 20000;
  c.zero.max_live_parameters = 100000;
  c.zero.max_reuse_distance = 5000;
  c.zero.sub_group_size = 60000;
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

TEST(ExecutorMoe, LayoutIsTransformers) {
  const RunResult r = run(
      [] {
        RunConfig c = base_config(false);
        c.steps = 1;
        c.lr = 0;
        return c;
      }(),
      1);
  EXPECT_EQ(r.num_parameters, kPsi);
  // The models module's own inventory (checkpoint tensor names, an independent account) agrees on
  // the total.
  EXPECT_EQ(tiny_mixtral_spec().num_parameters(), kPsi);
  // named_parameters() order of MixtralForCausalLM (transformers 5.24): router before experts.
  ASSERT_GE(r.param_names.size(), 8u);
  EXPECT_EQ(r.param_names[5], "model.layers.0.mlp.gate.weight");
  EXPECT_EQ(r.param_names[6], "model.layers.0.mlp.experts.gate_up_proj");
  EXPECT_EQ(r.param_names[7], "model.layers.0.mlp.experts.down_proj");
  // The config file validate reads gives the same spec.
  const models::ModelSpec f =
      models::load_model(std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/tiny-mixtral");
  EXPECT_EQ(f.num_parameters(), kPsi);
  EXPECT_EQ(f.num_experts, 4);
  EXPECT_EQ(f.experts_per_token, 2);
  EXPECT_EQ(f.moe_intermediate_size, 96);
  // Qwen3-MoE: 64 more (q_norm and k_norm, 16 each, per layer): 205,696, transformers' count for
  // tests/data/models/tiny-qwen3-moe/config.json (Qwen3MoeForCausalLM, torch_reference.json
  // "parameters"); q/k norms after o_proj, experts before the router (named_parameters()).
  RunConfig q = base_config(false, tiny_qwen3_moe_spec());
  q.steps = 1;
  q.lr = 0;
  const RunResult rq = run(q, 1);
  EXPECT_EQ(rq.num_parameters, kPsi + 64);
  ASSERT_GE(rq.param_names.size(), 10u);
  EXPECT_EQ(rq.param_names[5], "model.layers.0.self_attn.q_norm.weight");
  EXPECT_EQ(rq.param_names[6], "model.layers.0.self_attn.k_norm.weight");
  EXPECT_EQ(rq.param_names[7], "model.layers.0.mlp.experts.gate_up_proj");
  EXPECT_EQ(rq.param_names[8], "model.layers.0.mlp.experts.down_proj");
  EXPECT_EQ(rq.param_names[9], "model.layers.0.mlp.gate.weight");
  const models::ModelSpec fq =
      models::load_model(std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/tiny-qwen3-moe");
  EXPECT_EQ(fq.num_parameters(), kPsi + 64);
  EXPECT_TRUE(fq.norm_topk_prob);
  EXPECT_EQ(fq.qk_norm, models::QkNorm::PerHead);
}

// The forward loss against transformers' MixtralForCausalLM (fp32, CPU) from the same initial weights
// and tokens: scripts/moe_torch_reference.py re-implements the engine's weight and token generators
// and records the loss (tests/data/models/tiny-mixtral/torch_reference.json, with the command and
// the torch/transformers versions). Once at the engine's init (near-uniform prediction, ~ln 256) and
// once with every weight but the norms x5, where routing, attention and experts all move the loss.
// fp32 in both, the orders of summation differ: 1e-5 absolute.
TEST(ExecutorMoe, ForwardLossMatchesTransformers) {
  for (const models::ModelSpec& spec : {tiny_mixtral_spec(), tiny_qwen3_moe_spec(), tiny_qwen3_spec()}) {
    SCOPED_TRACE(spec.name);
    std::ifstream f(std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/" + spec.name +
                    "/torch_reference.json");
    ASSERT_TRUE(f.good());
    const nlohmann::json ref = nlohmann::json::parse(f);
    ASSERT_EQ(ref.at("parameters").get<int64_t>(), spec.num_parameters());
    RunConfig c = base_config(false, spec);
    c.steps = 1;
    c.lr = 0;
    const RunResult r = run(c, 1);
    EXPECT_NEAR(r.loss_per_step[0], ref.at("loss").get<double>(), 1e-5);
    std::vector<float> params = r.final_params;
    for (size_t t = 0; t < r.param_names.size(); ++t)
      if (r.param_names[t].find("norm") == std::string::npos) {
        const int64_t hi =
            t + 1 < r.param_offsets.size() ? r.param_offsets[t + 1] : static_cast<int64_t>(params.size());
        for (int64_t i = r.param_offsets[t]; i < hi; ++i) params[static_cast<size_t>(i)] *= 5;
      }
    c.initial_params = &params;
    const RunResult r5 = run(c, 1);
    EXPECT_NEAR(r5.loss_per_step[0], ref.at("loss_weights_x5").get<double>(), 1e-5);
    std::printf("%s loss: engine %.7f transformers %.7f; weights x5: engine %.7f transformers %.7f\n",
                spec.name.c_str(), r.loss_per_step[0], ref.at("loss").get<double>(), r5.loss_per_step[0],
                ref.at("loss_weights_x5").get<double>());
  }
}

// The MoE block under the stream-order checker (executor/stream_checker.h, as tests/test_stream_order.cpp
// runs the dense model): stage 2 with overlap_comm (reductions on the Comm stream) and stage 3 with
// prefetch (gathers on Comm), leaf and not, with and without checkpointing: no unordered access.
TEST(ExecutorMoe, StreamOrderClean) {
  struct K {
    int stage;
    bool overlap, ckpt, leaf;
  };
  for (const K& k : {K{2, true, false, true}, K{3, true, false, true}, K{3, true, true, false}}) {
    RunConfig c = base_config(true);
    c.zero.stage = k.stage;
    c.zero.overlap_comm = k.overlap;
    c.checkpointing = k.ckpt;
    c.zero.moe_leaf = k.leaf;
    auto rt = make_stream_checking_runtime(make_cpu_runtime(2));
    const RunResult r = run_training(c, *rt);
    ASSERT_EQ(r.loss_per_step.size(), 3u);
    EXPECT_EQ(rt->violation_count(), 0)
        << "stage " << k.stage << ": "
        << (rt->all_violations().empty() ? "" : rt->all_violations()[0].describe());
    EXPECT_GT(rt->ops_on(Agent::Comm), 0) << "stage " << k.stage;  // not vacuous: Comm was used
  }
}

// What the MoE block does not cover is refused with a UserError, not run wrongly.
TEST(ExecutorMoe, RejectsOtherMoeBlocks) {
  auto refused = [](const std::function<void(RunConfig&)>& edit) {
    RunConfig c = base_config(true);
    c.steps = 1;
    edit(c);
    EXPECT_THROW(run(c, 1), UserError);
  };
  refused([](RunConfig& c) { c.model.num_shared_experts = 1, c.model.shared_expert_intermediate_size = 96; });
  refused([](RunConfig& c) { c.model.router_bias = true; });
  refused([](RunConfig& c) { c.model.experts_per_token = 5; });                // top-5 of 4 experts
  refused([](RunConfig& c) { c.model.qk_norm = models::QkNorm::FullWidth; });  // OLMoE's full-width q/k norms
  refused([](RunConfig& c) { c.model.moe_layers = {true, false}; });           // a dense layer among MoE ones
  refused([](RunConfig& c) { c.lora.rank = 4; });
}

// The routing kernel's backward on its own, both renormalisation modes (Mixtral renormalises the
// top-k weights; Qwen-MoE with norm_topk_prob false does not): for L = sum_j c_j w_j(logits) with
// fixed coefficients c, moe_route_backward(dweights = c) against central differences of L in the
// logits (fp64 differences of fp32 weights, h = 1e-3; the top-k set is checked to stay the same).
TEST(ExecutorMoe, RouteBackwardMatchesFiniteDifferences) {
  CpuBackend be;
  const int64_t N = 3, E = 6, K = 2;
  std::vector<float> logits(N * E), c(N * K);
  for (int64_t i = 0; i < N * E; ++i)
    logits[static_cast<size_t>(i)] = std::sin(1.7f * static_cast<float>(i) + 0.3f);
  for (int64_t i = 0; i < N * K; ++i) c[static_cast<size_t>(i)] = std::cos(0.9f * static_cast<float>(i));
  for (bool renorm : {true, false}) {
    std::vector<float> probs(N * E), w(N * K), dl(N * E);
    std::vector<int32_t> idx(N * K), idx2(N * K);
    be.moe_route_forward(probs.data(), idx.data(), w.data(), logits.data(), N, E, K, renorm, DType::F32);
    be.moe_route_backward(dl.data(), c.data(), probs.data(), idx.data(), N, E, K, renorm, DType::F32);
    auto loss = [&](const std::vector<float>& l) {
      std::vector<float> p(N * E), ww(N * K);
      be.moe_route_forward(p.data(), idx2.data(), ww.data(), l.data(), N, E, K, renorm, DType::F32);
      EXPECT_EQ(idx2, idx);
      double s = 0;
      for (int64_t i = 0; i < N * K; ++i)
        s += static_cast<double>(c[static_cast<size_t>(i)]) * ww[static_cast<size_t>(i)];
      return s;
    };
    for (int64_t i = 0; i < N * E; ++i) {
      std::vector<float> l = logits;
      const float h = 1e-3f;
      l[static_cast<size_t>(i)] += h;
      const double up = loss(l);
      l[static_cast<size_t>(i)] -= 2 * h;
      const double down = loss(l);
      EXPECT_NEAR((up - down) / (2.0 * h), dl[static_cast<size_t>(i)], 2e-4)
          << "renorm " << renorm << " logit " << i;
    }
  }
}

struct Variant {
  int ranks, stage;
  int64_t grad_accum;
  bool ckpt = false, offload = false, overlap = false;
};
std::string describe(const Variant& v) {
  return "N=" + std::to_string(v.ranks) + " stage " + std::to_string(v.stage) + " ga " +
         std::to_string(v.grad_accum) + (v.ckpt ? " ckpt" : "") + (v.offload ? " offload" : "") +
         (v.overlap ? " overlap" : "");
}

// fp32: every stage on 1 and 2 ranks (same global batch: ranks x grad_accum = 2) ends at the one-rank
// stage-0 parameters within 1e-5 (1% of one step's lr; see test_executor_numerics.cpp). Routing is
// decided by the same logits, so ZeRO must not change which experts a token visits.
TEST(ExecutorMoe, Fp32AllStagesMatchSingleRankStage0) {
  for (const models::ModelSpec& spec : {tiny_mixtral_spec(), tiny_qwen3_moe_spec()}) {
    SCOPED_TRACE(spec.name);
    RunConfig ref = base_config(false, spec);
    ref.grad_accum = 2;
    const RunResult r0 = run(ref, 1);
    ASSERT_EQ(r0.final_params.size(), static_cast<size_t>(spec.num_parameters()));
    std::vector<Variant> vs;
    for (int n : {1, 2})
      for (int stage : {0, 1, 2, 3}) vs.push_back({n, stage, 2 / n});
    vs.push_back({2, 2, 1, true, true, true});
    vs.push_back({2, 3, 1, true, false, true});
    for (const Variant& v : vs) {
      RunConfig c = base_config(false, spec);
      c.zero.stage = v.stage;
      c.grad_accum = v.grad_accum;
      c.checkpointing = v.ckpt;
      c.zero.offload_optimizer = v.offload;
      c.zero.overlap_comm = v.overlap;
      const RunResult r = run(c, v.ranks);
      EXPECT_LT(max_abs_diff(r.final_params, r0.final_params), 1e-5) << describe(v);
      EXPECT_NEAR(r.loss_per_step.back(), r0.loss_per_step.back(), 1e-5) << describe(v);
    }
  }
}

// bf16: stages 1-3 on 2 ranks reduce the same bf16 values in the same order: bit-identical to each
// other; against the bf16 stage-0 reference (fp32 gradient accumulation) within 2 lr x steps per
// element, as test_executor_numerics.cpp bounds it.
TEST(ExecutorMoe, Bf16StagesAgree) {
  RunConfig ref = base_config(true);
  ref.grad_accum = 2;
  const RunResult r0 = run(ref, 1);
  std::vector<float> first;
  for (int stage : {0, 1, 2, 3}) {
    RunConfig c = base_config(true);
    c.zero.stage = stage;
    const RunResult r = run(c, 2);
    EXPECT_LE(max_abs_diff(r.final_params, r0.final_params), 2.0 * kLr * 3) << "stage " << stage;
    if (stage >= 1) {
      if (first.empty())
        first = r.final_params;
      else
        EXPECT_EQ(max_abs_diff(r.final_params, first), 0.0) << "stage " << stage;
    }
  }
}

TEST(ExecutorMoe, LossDecreasesOnFixedBatch) {
  for (int stage : {0, 3}) {
    RunConfig c = base_config(true);
    c.zero.stage = stage;
    c.fixed_batch = true;
    c.steps = 8;
    c.lr = 3e-3f;
    const RunResult r = run(c, 2);
    // ln(256) = 5.545 for a near-uniform predictor (std-0.02 weights); the affine token recurrence is
    // learnable, so the loss falls every step and by a clear margin.
    EXPECT_NEAR(r.loss_per_step.front(), std::log(256.0), 0.05);
    for (size_t i = 1; i < r.loss_per_step.size(); ++i) EXPECT_LT(r.loss_per_step[i], r.loss_per_step[i - 1]);
    EXPECT_LT(r.loss_per_step.back(), r.loss_per_step.front() - 0.5) << "stage " << stage;
  }
}

// The backward (router through softmax, top-k and renormalisation; experts from their own rows)
// against central finite differences, fp32, one rank: the largest-gradient element of each tensor.
// The loss is piecewise smooth: a perturbation can flip a token's top-2 choice (router logits here
// are ~0.1 apart, and a router weight moves them by h x O(1)), and the difference quotient across the
// jump says nothing about the gradient (which is the derivative of the piece the point is on). So
// of each tensor's 10 largest gradients the first whose central differences at h = 1e-2 and 5e-3
// agree within 1% is checked (no jump within +-h: for a smooth loss the two quotients differ by
// 3h^2/24 times the third derivative, far below 1%), against the gradient within 3% + 5e-5 like the
// dense test (tests/finite_differences.h); a tensor none of whose candidates is smooth fails.
TEST(ExecutorMoe, GradientsMatchFiniteDifferences) {
  for (const models::ModelSpec& spec : {tiny_mixtral_spec(), tiny_qwen3_moe_spec(), tiny_qwen3_spec()}) {
    SCOPED_TRACE(spec.name);
    RunConfig c = base_config(false, spec);
    c.fixed_batch = true;
    c.steps = 1;
    c.capture_first_grads = true;
    RunConfig zero_lr = c;
    zero_lr.lr = 0;
    zero_lr.capture_first_grads = false;
    const RunResult p0 = run(zero_lr, 1);
    std::vector<float> params = p0.final_params;
    // With the std-0.02 init the router logits of a token lie ~0.1 apart and almost every router weight
    // moves some token's top-2 within +-1e-2; scaled by 25 (std 0.5) the margins are ~25x larger, so
    // most perturbations keep every token's routing (the candidates below still check it).
    for (size_t t = 0; t < p0.param_names.size(); ++t)
      if (p0.param_names[t].find("mlp.gate.weight") != std::string::npos)
        for (int64_t i = p0.param_offsets[t]; i < p0.param_offsets[t + 1]; ++i)
          params[static_cast<size_t>(i)] *= 25;
    c.initial_params = &params;
    const RunResult g = run(c, 1);
    RunConfig eval = zero_lr;
    eval.initial_params = &params;
    auto loss_at = [&] { return run(eval, 1).loss_per_step[0]; };
    EXPECT_NEAR(loss_at(), g.loss_per_step[0], 1e-6);
    ASSERT_EQ(g.first_grads.size(), params.size());
    for (size_t t = 0; t < g.param_names.size(); ++t) {
      const int64_t lo = g.param_offsets[t];
      const int64_t hi =
          t + 1 < g.param_offsets.size() ? g.param_offsets[t + 1] : static_cast<int64_t>(params.size());
      // Candidates: the 10 largest gradients of the tensor, largest first.
      std::vector<int64_t> order;
      for (int64_t i = lo; i < hi; ++i) order.push_back(i);
      const size_t nc = std::min<size_t>(10, order.size());
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(nc), order.end(),
                        [&](int64_t x, int64_t y) {
                          return std::fabs(g.first_grads[static_cast<size_t>(x)]) >
                                 std::fabs(g.first_grads[static_cast<size_t>(y)]);
                        });
      bool checked = false;
      for (size_t ci = 0; ci < nc && !checked; ++ci) {
        const int64_t best = order[ci];
        const float orig = params[static_cast<size_t>(best)];
        auto quotient = [&](float h) {
          params[static_cast<size_t>(best)] = orig + h;
          const double up = loss_at();
          params[static_cast<size_t>(best)] = orig - h;
          const double down = loss_at();
          params[static_cast<size_t>(best)] = orig;
          return (up - down) / (2.0 * h);
        };
        const double fd = quotient(1e-2f), half = quotient(5e-3f);
        if (std::fabs(fd - half) > 0.01 * std::fabs(half) + 1e-5) {
          std::printf("%s element %ld: routing changes within +-1e-2 (%g vs %g), next candidate\n",
                      g.param_names[t].c_str(), static_cast<long>(best - lo), fd, half);
          continue;
        }
        const double an = g.first_grads[static_cast<size_t>(best)];
        EXPECT_NEAR(half, an, 0.03 * std::fabs(an) + 5e-5) << g.param_names[t] << " element " << best - lo;
        checked = true;
      }
      EXPECT_TRUE(checked) << g.param_names[t] << ": every candidate's routing changes within +-1e-2";
    }
    // Every expert's weights of layer 0 got a gradient from its own tokens only: an expert no token
    // chose would have an all-zero slice; with 32 tokens x 2 choices over 4 experts each expert has
    // rows here (asserted), and its slice is non-zero.
    for (size_t t = 0; t < g.param_names.size(); ++t) {
      if (g.param_names[t] != "model.layers.0.mlp.experts.down_proj") continue;
      const int64_t per_expert = 64 * 96;
      for (int e = 0; e < 4; ++e) {
        double s = 0;
        for (int64_t i = 0; i < per_expert; ++i)
          s += std::fabs(g.first_grads[static_cast<size_t>(g.param_offsets[t] + e * per_expert + i)]);
        EXPECT_GT(s, 0.0) << "expert " << e;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Accounting against the planner (planner/memory_model.h, time_model.h) for the same workload, as
// tests/test_executor_accounting.cpp does for the dense model. The engine never calls the planner.
namespace acct {

using planner::Category;
using testing::collective_bytes;
using testing::planner_buffer;
using testing::planner_category_max;

struct Case {
  int ranks, stage;
  bool mixed;
  int64_t grad_accum = 1;
  bool ckpt = false, offload = false, overlap = false;
  bool leaf = true;      // stage 3: the MoE block one leaf module
  bool keep_all = true;  // stage 3: DeepSpeed's coordinator defaults; false: no prefetch, reuse 0
};

struct Both {
  planner::MemoryBreakdown pred;
  planner::StepTime time;
  RunResult meas;
};

// DeepSpeed's defaults for the stage-3 coordinator (prefetch 5e7, max live 1e9, reuse 1e9) with a
// persistence threshold of 100 (the norms persist, every matrix is partitioned); a reduce bucket of
// 60000 elements (the 49152-element fused experts fit one bucket; several buckets per backward).
Both run_both(const Case& k, const models::ModelSpec& spec) {
  const planner::Workload w = testing::engine_workload(spec, k.ranks, k.mixed);
  planner::ZeroConfig z = planner::ZeroConfig::deepspeed_defaults(k.stage);
  z.micro_batch = 2;
  z.grad_accum = k.grad_accum;
  z.checkpointing = k.ckpt ? planner::Checkpointing::Full : planner::Checkpointing::None;
  z.offload_optimizer = k.offload ? planner::Offload::CPU : planner::Offload::None;
  z.overlap_comm = k.overlap;
  z.reduce_bucket_size = 60000;
  z.param_persistence_threshold = 100;
  z.sub_group_size = 100000;
  z.moe_leaf = k.leaf ? planner::MoeLeaf::On : planner::MoeLeaf::Off;
  if (!k.keep_all) {
    z.prefetch_bucket_size = 0;
    z.max_reuse_distance = 0;
  }
  const planner::ModelStats s = planner::compute_model_stats(w);
  Both b;
  b.pred = planner::estimate_memory(w, s, z);
  b.time = planner::estimate_time(w, s, z);
  RunConfig c = testing::engine_run_config(w, z, 2);
  c.zero.moe_leaf = k.leaf;
  auto rt = make_cpu_runtime(k.ranks);
  b.meas = run_training(c, *rt);
  return b;
}

std::string describe(const Case& k) {
  return "N=" + std::to_string(k.ranks) + " stage " + std::to_string(k.stage) +
         (k.mixed ? " bf16" : " fp32") + " ga " + std::to_string(k.grad_accum) + (k.ckpt ? " ckpt" : "") +
         (k.offload ? " offload" : "") + (k.overlap ? " overlap" : "") +
         (k.stage == 3 ? (k.leaf ? " leaf" : " no-leaf") : "") +
         (k.stage == 3 && !k.keep_all ? " no-reuse" : "");
}
// Stage 3 with one rank too: DeepSpeed's gathered parameters are then views of their partitions,
// the engine still gathers into its own buffers, and the planner's engine model says so
// (planner/engine_runtime.h single_rank_gathers_are_views).
std::vector<Case> cases() {
  std::vector<Case> v;
  for (int stage : {0, 1, 2, 3}) v.push_back({1, stage, true});
  for (int stage : {0, 1, 2, 3}) v.push_back({2, stage, true});
  v.push_back({2, 0, false});
  v.push_back({2, 2, false});
  v.push_back({2, 3, false});
  v.push_back({2, 2, true, 2, true, false, true});
  v.push_back({2, 3, true, 2, true, true});
  for (bool leaf : {true, false})
    for (bool keep_all : {true, false}) v.push_back({2, 3, true, 1, false, false, false, leaf, keep_all});
  return v;
}

TEST(ExecutorMoeAccounting, MemoryAndCommunicationAgreeWithPlanner) {
  for (const models::ModelSpec& spec : {tiny_mixtral_spec(), tiny_qwen3_moe_spec(), tiny_qwen3_spec()})
    for (const Case& k : cases()) {
      const Both b = run_both(k, spec);
      const RankMeasurement& m = b.meas.ranks[0];
      SCOPED_TRACE(spec.name + " " + describe(k));
      const auto peak_of = [&](Category c) { return m.device.category_peak[static_cast<int>(c)]; };
      EXPECT_EQ(peak_of(Category::Parameters), planner_category_max(b.pred, Category::Parameters));
      EXPECT_EQ(peak_of(Category::OptimizerStates), planner_category_max(b.pred, Category::OptimizerStates));
      EXPECT_EQ(peak_of(Category::Gradients), planner_category_max(b.pred, Category::Gradients));
      // Activations: the planner's walk of the engine's buffers (planner/engine_runtime.cpp with the
      // MoE block of planner/engine_moe.cpp), each side's maximum over the step.
      EXPECT_EQ(peak_of(Category::Activations), testing::planner_engine_activation_max(b.pred));
      std::printf("%s %s: activations measured %ld predicted %ld; params %ld/%ld grads %ld/%ld opt %ld/%ld\n",
                  spec.name.c_str(), describe(k).c_str(), static_cast<long>(peak_of(Category::Activations)),
                  static_cast<long>(testing::planner_engine_activation_max(b.pred)),
                  static_cast<long>(peak_of(Category::Parameters)),
                  static_cast<long>(planner_category_max(b.pred, Category::Parameters)),
                  static_cast<long>(peak_of(Category::Gradients)),
                  static_cast<long>(planner_category_max(b.pred, Category::Gradients)),
                  static_cast<long>(peak_of(Category::OptimizerStates)),
                  static_cast<long>(planner_category_max(b.pred, Category::OptimizerStates)));
      if (k.stage == 3) {
        EXPECT_EQ(m.comm_by_phase[0].bytes_sent[static_cast<int>(CollKind::AllGather)],
                  collective_bytes(b.time, "stage-3 forward parameter all-gathers"));
        EXPECT_EQ(m.comm_by_phase[1].bytes_sent[static_cast<int>(CollKind::AllGather)],
                  collective_bytes(b.time, "stage-3 backward parameter all-gathers"));
        EXPECT_EQ(m.comm_by_phase[2].bytes_sent[static_cast<int>(CollKind::AllGather)],
                  collective_bytes(b.time, "stage-3 persistent-parameter all-gather"));
        EXPECT_EQ(m.comm_by_phase[1].bytes_sent[static_cast<int>(CollKind::ReduceScatter)],
                  collective_bytes(b.time, "stage-3 gradient reduce-scatter"));
        EXPECT_EQ(m.gathered_params_peak_bytes, planner_buffer(b.pred, "gathered parameters (forward)"));
      } else {
        EXPECT_EQ(m.comm_bytes, b.time.comm_bytes_per_rank);
      }
    }
}

}  // namespace acct

}  // namespace
}  // namespace zeroplan::exec
