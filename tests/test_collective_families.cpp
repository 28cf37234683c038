// planner/collective_families.h: the families the time model and `check --json` read are the
// per-call list summed by family. The families are built from two micro-steps and extended; here they
// are checked against the full per-call list of the same step (deepspeed_collectives with the real
// grad_accum, summed call by call), for every stage, bucket sizes that split parameters, and MoE
// with and without leaf modules.
#include <gtest/gtest.h>

#include <cmath>

#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/collective_families.h"
#include "planner/comm_model.h"
#include "planner/ds_runtime_collectives.h"
#include "planner/model_stats.h"

namespace zeroplan::planner {
namespace {

struct Sum {
  int64_t calls = 0, bus = 0, input = 0;
  double time = 0;
};

// Every call of the full list, by the kind/phase split the families use.
std::array<Sum, kNumCallFamilies> direct(const Workload& w, const ModelStats& s, const ZeroConfig& z,
                                         const CommTopology& t) {
  std::array<Sum, kNumCallFamilies> out{};
  for (const CollectiveCall& c : deepspeed_collectives(w, s, z)) {
    if (c.kind == CollectiveKind::AllToAll) continue;
    CallFamilyId id = kStepScalars;
    if (c.phase == kForward)
      id = kStage3ForwardGathers;
    else if (c.phase == kBackward)
      id = c.kind == CollectiveKind::AllGather       ? kStage3BackwardGathers
           : c.kind == CollectiveKind::ReduceScatter ? kStage3ReduceScatter
                                                     : kGradientReduction;
    else if (c.kind == CollectiveKind::AllGather)
      id = std::string(c.caller) == "all_gather_into_tensor_dp_groups" ? kStepEndGather : kPersistentGathers;
    const int64_t size = c.kind == CollectiveKind::AllGather ? c.bytes * c.group_size : c.bytes;
    const CollectiveKind k = c.to_one_rank ? CollectiveKind::Broadcast : c.kind;
    Sum& x = out[static_cast<size_t>(id)];
    ++x.calls;
    x.bus += bus_bytes_per_rank(k, t.ranks, size);
    x.input += c.bytes;
    x.time += collective_time_s(t, k, size);
  }
  return out;
}

class FamiliesMatchTheList : public ::testing::TestWithParam<std::tuple<const char*, int, int64_t>> {};

TEST_P(FamiliesMatchTheList, ForEveryAccumulation) {
  const auto [model, stage, bucket] = GetParam();
  Workload w;
  w.model = models::load_model(model);
  w.cluster = hw::parse_cluster("2x8xA100");
  const ModelStats s = compute_model_stats(w);
  const CommTopology t = topology_of(w.cluster);
  for (int64_t accum : {1, 2, 3, 7}) {
    ZeroConfig z = ZeroConfig::deepspeed_defaults(stage);
    z.reduce_bucket_size = bucket;
    z.grad_accum = accum;
    const CallFamilies f = deepspeed_call_families(w, s, z, t);
    const auto d = direct(w, s, z, t);
    for (int i = 0; i < kNumCallFamilies; ++i) {
      const CallFamily& a = f.f[static_cast<size_t>(i)];
      const Sum& b = d[static_cast<size_t>(i)];
      EXPECT_EQ(a.calls, b.calls) << model << " stage " << stage << " accum " << accum << " family " << i;
      EXPECT_EQ(a.bus_bytes_per_rank, b.bus)
          << model << " stage " << stage << " accum " << accum << " family " << i;
      EXPECT_EQ(a.input_bytes, b.input)
          << model << " stage " << stage << " accum " << accum << " family " << i;
      EXPECT_NEAR(a.time_s, b.time, 1e-9 + 1e-9 * b.time)
          << model << " stage " << stage << " accum " << accum;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, FamiliesMatchTheList,
                         ::testing::Combine(::testing::Values("7b", "mixtral-8x7b"),
                                            ::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(int64_t{50'000'000}, int64_t{500'000'000})));

// DeepSpeed reduces a parameter larger than the bucket alone (stage_1_and_2.py
// extra_large_param_to_reduce) and never splits one across buckets: Llama-2-7B's 291 trainable tensors
// in 50M-element buckets are not ceil(6.74e9 / 5e7) = 135 reductions but the greedy flushes of the
// backward order (flush when the bucket is not empty and bucket + next > 5e7). Hand count, backward
// order lm_head (131.1M), final norm (4096), then per layer down, up, gate (45.1M each),
// post_attention_layernorm, o, v, k, q (16.8M each), input_layernorm, and last the embedding (131.1M):
//  - lm_head is alone: the final norm's arrival flushes it (1);
//  - the final norm rides with layer 31's down; in every layer up flushes down(+), gate flushes up,
//    the post norm joins gate, o flushes gate + norm, v joins o, k flushes o + v, q and the input norm
//    join k, and the next layer's down (or the embedding) flushes k + q + norm: 5 per layer, 160;
//  - the embedding is flushed alone by the epilogue (1).
// 1 + 160 + 1 = 162 per micro-step at stage 2.
TEST(CollectiveFamilies, Stage2BucketsHoldWholeParameters) {
  Workload w;
  w.model = models::load_model("7b");
  w.cluster = hw::parse_cluster("8xA100");
  const ModelStats s = compute_model_stats(w);
  ZeroConfig z = ZeroConfig::deepspeed_defaults(2);
  z.reduce_bucket_size = 50'000'000;
  z.grad_accum = 1;
  const CallFamilies f = deepspeed_call_families(w, s, z, topology_of(w.cluster));
  EXPECT_EQ(f[kGradientReduction].calls, 162);
  EXPECT_EQ(f[kStepEndGather].calls, 1);
  EXPECT_EQ(f[kStepScalars].calls, 2);  // has_overflow (1 B) + get_grad_norm_direct (4 B)
}

// ZeRO++ hpZ at 8 of 16 ranks: partition_parameters.py _all_gather_params gathers a parameter that
// holds a secondary partition in the hpZ group (8 ranks) and the rest in the ZeRO group (16); the
// backward's re-gathers read the secondary partitions (Init._partition, `secondary_tensor`). Each call
// carries its group as a tag, and the families count and price by the tag, not by the size.
TEST(CollectiveFamilies, HpzGathersAreTaggedWithTheirGroup) {
  Workload w;
  w.model = models::load_model("7b");
  w.cluster = hw::parse_cluster("2x8xA100");
  const ModelStats s = compute_model_stats(w);
  ZeroConfig z = ZeroConfig::deepspeed_defaults(3);
  z.hpz_partition_size = 8;
  z.grad_accum = 1;
  int64_t secondary = 0, primary = 0, backward_secondary = 0;
  for (const CollectiveCall& c : deepspeed_collectives(w, s, z)) {
    if (c.kind != CollectiveKind::AllGather || c.phase == kStep) continue;
    if (c.group == CallGroup::kHpzSecondary) {
      ++secondary;
      backward_secondary += c.phase == kBackward;
      EXPECT_EQ(c.group_size, 8);
    } else {
      ++primary;
      EXPECT_EQ(c.group, CallGroup::kZero);
      EXPECT_EQ(c.group_size, 16);
    }
  }
  EXPECT_GT(backward_secondary, 0);
  EXPECT_GT(primary, 0);
  const CallFamilies f = deepspeed_call_families(w, s, z, topology_of(w.cluster));
  EXPECT_EQ(f[kStage3ForwardGathers].secondary_calls + f[kStage3BackwardGathers].secondary_calls, secondary);
  EXPECT_EQ(f[kStage3BackwardGathers].secondary_calls, backward_secondary);
}

}  // namespace
}  // namespace zeroplan::planner
