// Property sweep of the planner's output invariants (planner/invariants.h, issue 16 item 6): the zoo
// x every built-in GPU profile x methods (full, LoRA, QLoRA) x sequence lengths x every ZeRO stage,
// offload and checkpointing choice x the DeepSpeed knobs at their extremes (bucket sizes 0 and 1e12,
// persistence threshold 0, prefetch 0, max live parameters 0, sub_group_size 1e14). Every plan
// evaluate_plan returns, and every plan a search considers, must pass the physical checks; a
// violation is collected (model, GPU, config, quantity) and the test fails listing them.
//
// The full product is ~10^6 plans; the sweep takes a deterministic stride through it (every model,
// every GPU and every knob value is still visited): ~24,000 fixed plans and ~100 full searches, about
// 17 s on this 2-core machine under a load of 15 (ZP_NO_SEARCH=1 skips the searches).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "common/errors.h"
#include "hwprofiles/cluster.h"
#include "hwprofiles/gpu_profile.h"
#include "models/model_spec.h"
#include "planner/invariants.h"
#include "planner/model_stats.h"
#include "planner/reasons.h"
#include "planner/search.h"

namespace zeroplan::planner {
namespace {

struct Knobs {
  const char* label;
  void (*apply)(ZeroConfig&);
};

// The knob extremes of issue 16 item 6, one at a time and all together.
const std::vector<Knobs>& knob_extremes() {
  static const std::vector<Knobs> k = {
      {"defaults", [](ZeroConfig&) {}},
      {"reduce_bucket_size=0", [](ZeroConfig& z) { z.reduce_bucket_size = 0; }},
      {"reduce_bucket_size=1e12", [](ZeroConfig& z) { z.reduce_bucket_size = 1'000'000'000'000; }},
      {"allgather_bucket_size=0", [](ZeroConfig& z) { z.allgather_bucket_size = 0; }},
      {"allgather_bucket_size=1e12", [](ZeroConfig& z) { z.allgather_bucket_size = 1'000'000'000'000; }},
      {"prefetch_bucket_size=0", [](ZeroConfig& z) { z.prefetch_bucket_size = 0; }},
      {"prefetch_bucket_size=1e12", [](ZeroConfig& z) { z.prefetch_bucket_size = 1'000'000'000'000; }},
      {"param_persistence_threshold=0", [](ZeroConfig& z) { z.param_persistence_threshold = 0; }},
      {"param_persistence_threshold=1e12",
       [](ZeroConfig& z) { z.param_persistence_threshold = 1'000'000'000'000; }},
      {"max_live_parameters=0", [](ZeroConfig& z) { z.max_live_parameters = 0; }},
      {"max_reuse_distance=0", [](ZeroConfig& z) { z.max_reuse_distance = 0; }},
      {"sub_group_size=1e14", [](ZeroConfig& z) { z.sub_group_size = 100'000'000'000'000; }},
      {"sub_group_size=1", [](ZeroConfig& z) { z.sub_group_size = 1; }},
      {"overlap_comm flipped", [](ZeroConfig& z) { z.overlap_comm = !z.overlap_comm; }},
      {"all extremes (0)",
       [](ZeroConfig& z) {
         z.reduce_bucket_size = 0;
         z.allgather_bucket_size = 0;
         z.prefetch_bucket_size = 0;
         z.param_persistence_threshold = 0;
         z.max_live_parameters = 0;
         z.sub_group_size = 100'000'000'000'000;
       }},
      {"all extremes (1e12)",
       [](ZeroConfig& z) {
         z.reduce_bucket_size = 1'000'000'000'000;
         z.allgather_bucket_size = 1'000'000'000'000;
         z.prefetch_bucket_size = 1'000'000'000'000;
         z.param_persistence_threshold = 1'000'000'000'000;
         z.sub_group_size = 100'000'000'000'000;
       }},
  };
  return k;
}

struct Sweep {
  std::vector<std::string> violations;
  std::map<std::string, int> by_quantity;
  int64_t plans = 0, searches = 0, skipped = 0;

  void record(const std::string& where, const std::string& gpu, const std::string& quantity,
              const std::string& detail) {
    // The first example of each kind (quantity x GPU profile).
    if (by_quantity[quantity + " on " + gpu]++ == 0)
      violations.push_back(where + ": " + quantity + ": " + detail);
  }
  // An InternalError from evaluate_plan's own enforcement: "... fails the physical check on Q: ...".
  void record(const std::string& where, const std::string& gpu, const InternalError& e) {
    const std::string m = e.what();
    const std::string tag = "physical check on ";
    const auto at = m.find(tag);
    if (at == std::string::npos) return record(where, gpu, "internal error", m);
    const auto colon = m.find(':', at);
    record(where, gpu, m.substr(at + tag.size(), colon - at - tag.size()), m.substr(colon + 2));
  }
};

std::string method_name(Method m) {
  return m == Method::Full ? "full" : m == Method::LoRA ? "lora" : "qlora";
}

// Under the sanitizers (CI's second build) the sweep takes every 4th configuration: the same code paths
// for AddressSanitizer and UBSan to watch, in a quarter of the time (the whole sweep took 458 s of the
// sanitized suite's 746 s); the normal build checks every configuration's invariants.
#ifdef ZEROPLAN_SANITIZED
constexpr int kSweepStride = 4;
#else
constexpr int kSweepStride = 1;
#endif

TEST(Invariants, ZooTimesGpusTimesMethodsTimesKnobExtremes) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<models::ModelSpec> models;
  for (const auto& e : models::zoo()) models.push_back(models::load_model(e.name));
  const auto& gpus = hw::builtin_gpus();
  ASSERT_GT(models.size(), 5u);
  ASSERT_GT(gpus.size(), 3u);
  const Method methods[] = {Method::Full, Method::LoRA, Method::QLoRA};
  const int64_t seq_lens[] = {128, 2048, 32768};
  const Offload offloads[] = {Offload::None, Offload::CPU, Offload::NVMe};
  const Checkpointing ckpts[] = {Checkpointing::None, Checkpointing::Selective, Checkpointing::Full};
  const std::string clusters[] = {"1x", "8x", "4x8x"};

  Sweep sw;
  int64_t combo = 0, combo_seen = 0;
  for (size_t mi = 0; mi < models.size(); ++mi) {
    for (size_t gi = 0; gi < gpus.size(); ++gi) {
      // One (method, seq len, cluster) per (model, GPU), rotating so that each value meets every model
      // and every GPU across the sweep.
      const size_t k = mi * gpus.size() + gi;
      const Method method = methods[k % 3];
      const int64_t seq = seq_lens[(k / 3) % 3];
      Workload w;
      w.model = models[mi];
      w.train.method = method;
      w.train.seq_len = seq;
      w.train.lora_rank = 16;
      const std::string where0 = fmt::format("{} on {}{} {} seq {}", w.model.name, clusters[(k / 9) % 3],
                                             gpus[gi].name, method_name(method), seq);
      try {
        w.cluster = hw::parse_cluster(clusters[(k / 9) % 3] + gpus[gi].name);
        if (w.cluster.nvme_GBps <= 0) w.cluster.nvme_GBps = 6;  // so nvme offload plans are built too
      } catch (const UserError&) {
        ++sw.skipped;
        continue;
      }
      ModelStats stats;
      try {
        stats = compute_model_stats(w);
      } catch (const UserError&) {
        ++sw.skipped;  // e.g. a method the model cannot take
        continue;
      }
      // Every candidate of a default search (search_plans evaluates each through evaluate_plan).
      if (k % (16 * kSweepStride) == 0 && !std::getenv("ZP_NO_SEARCH")) {
        try {
          SearchOptions o;
          (void)search_plans(w, stats, o);
          ++sw.searches;
        } catch (const InternalError& e) {
          sw.record(where0 + " (search)", gpus[gi].name, e);
        } catch (const UserError&) {
          ++sw.skipped;
        }
      }
      // Fixed configurations: every stage x offload x checkpointing, with knob extremes.
      for (int stage = 0; stage <= 3; ++stage)
        for (Offload oo : offloads)
          for (Checkpointing ck : ckpts) {
            if (stage == 0 && oo != Offload::None) continue;
            const auto& knobs = knob_extremes();
            // Half of the configurations of each (model, GPU), alternating, one knob setting each,
            // rotating through the list.
            if ((combo_seen++ + k) % (2 * kSweepStride) != 0) continue;
            for (int r = 0; r < 1; ++r) {
              const Knobs& kn = knobs[static_cast<size_t>(combo++ % static_cast<int64_t>(knobs.size()))];
              ZeroConfig z = ZeroConfig::deepspeed_defaults(stage);
              z.offload_optimizer = oo;
              if (stage == 3) z.offload_param = (combo % 3 == 0) ? oo : Offload::None;
              z.checkpointing = ck;
              z.micro_batch = 1 + (combo % 4 == 0 ? 15 : 0);
              z.grad_accum = 1 + (combo % 5 == 0 ? 7 : 0);
              kn.apply(z);
              const std::string where = fmt::format("{} [{}; {}]", where0, describe_config(z), kn.label);
              try {
                const Plan p = evaluate_plan(w, stats, z, 0.05);
                ++sw.plans;
                for (const auto& v : plan_violations(w, p))
                  sw.record(where, gpus[gi].name, v.quantity, v.detail);
              } catch (const InternalError& e) {
                sw.record(where, gpus[gi].name, e);
              } catch (const UserError&) {
                ++sw.skipped;
              }
            }
          }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string summary;
  for (const auto& [q, n] : sw.by_quantity) summary += fmt::format("\n  {} x {}", n, q);
  std::printf("violations by kind:%s\n", summary.c_str());
  std::string list;
  for (const auto& v : sw.violations) list += "\n  " + v;
  std::printf(
      "invariant sweep: %zu models x %zu GPUs, %lld fixed plans, %lld searches, %lld skipped, %.1f s\n",
      models.size(), gpus.size(), static_cast<long long>(sw.plans), static_cast<long long>(sw.searches),
      static_cast<long long>(sw.skipped), secs);
  EXPECT_TRUE(sw.violations.empty()) << "violations by kind:" << summary << "\nfirst ones:" << list;
  EXPECT_GT(sw.plans, 10000 / kSweepStride);
}

// The checks themselves can fail: planted unphysical plans are caught, each naming its quantity.
TEST(Invariants, PlantedViolationsAreCaught) {
  Workload w;
  w.model = models::load_model("7b");
  w.cluster = hw::parse_cluster("8xA100-80GB");
  const ModelStats s = compute_model_stats(w);
  ZeroConfig z = ZeroConfig::deepspeed_defaults(3);
  const Plan good = evaluate_plan(w, s, z, 0.05);
  ASSERT_TRUE(plan_violations(w, good).empty());

  auto first = [&](Plan p) {
    const auto v = plan_violations(w, p);
    return v.empty() ? std::string("none") : v.front().quantity;
  };
  Plan p = good;
  p.time.step_s = std::nan("");
  EXPECT_EQ(first(p), "step_s");
  p = good;
  p.time.step_s = 0;
  EXPECT_EQ(first(p), "step_s");
  p = good;
  p.tokens_per_s = 0;
  EXPECT_EQ(first(p), "tokens_per_s");
  p = good;  // MFU above the profile's best GEMM efficiency (A100 profile's gemm_max_efficiency)
  p.mfu = w.cluster.gpu.gemm_max_efficiency + 0.01;
  EXPECT_EQ(first(p), "mfu");
  p = good;  // 1.5x the throughput without a matching MFU: inconsistent
  p.tokens_per_s *= 1.5;
  p.tokens_per_s_per_gpu *= 1.5;
  EXPECT_EQ(first(p), "tokens_per_s");
  p = good;
  p.memory.gpu[0].bytes = -1;
  EXPECT_EQ(first(p), "memory.gpu");
  p = good;
  p.memory.peak -= 1;
  EXPECT_EQ(first(p), "memory.peak");
  p = good;
  p.memory.at_peak[0] += 1;
  EXPECT_EQ(first(p), "memory.categories");
  p = good;
  p.time.compute_s *= 2;  // step no longer the sum of its parts
  EXPECT_EQ(first(p), "step_s");
  p = good;
  p.time.comm_bytes_per_rank += 1;
  EXPECT_EQ(first(p), "comm_bytes_per_rank");
  p = good;  // exposed checkpoint copies beyond the offload they are part of
  p.time.checkpoint_copy_s = 1;
  p.time.checkpoint_offload_s = p.time.offload_s + 0.5;
  EXPECT_EQ(first(p), "checkpoint_offload_s");

  // enforce_plan_invariants: an InternalError naming the plan and the quantity, on one line.
  p = good;
  p.time.step_s = -1;
  try {
    enforce_plan_invariants(w, p);
    FAIL() << "no exception";
  } catch (const InternalError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("ZeRO-3"), std::string::npos) << m;
    EXPECT_NE(m.find("step_s"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace zeroplan::planner
