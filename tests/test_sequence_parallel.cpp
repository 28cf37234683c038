// Ulysses sequence parallelism (planner/sequence_parallel.h, issue 27): the planner's arithmetic against
// hand counts of what DeepSpeed 0.19.8's UlyssesSPAttentionHF does (ulysses_sp.py), on a Llama-3.1-8B
// shape (config.json of meta-llama/Llama-3.1-8B: hidden 4096, 32 layers, 32 heads, 8 KV heads, head_dim
// 128, intermediate 14336, vocab 128256). The CLI is tested by test_cli_sp, the recorded runs of real
// DeepSpeed (tests/deepspeed/fixtures-sp) by test_conformance.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hwprofiles/cluster.h"
#include "planner/ds_runtime_collectives.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"
#include "planner/op_model.h"
#include "planner/search.h"
#include "planner/sequence_parallel.h"
#include "planner/time_model.h"
#include "tests/model_specs.h"

namespace zeroplan::planner {
namespace {

Workload workload(int64_t seq, int sp, const std::string& gpus = "8xH100") {
  Workload w;
  w.model = testing::llama31_8b_spec();
  w.cluster = hw::parse_cluster(gpus);
  w.train.seq_len = seq;
  w.train.sequence_parallel = sp;
  return w;
}

ZeroConfig config(int stage, Checkpointing ckpt = Checkpointing::None) {
  ZeroConfig z = ZeroConfig::deepspeed_defaults(stage);
  z.micro_batch = 1;
  z.grad_accum = 1;
  z.checkpointing = ckpt;
  return z;
}

// A rank of sp 4 at 32768 tokens saves what a rank without SP saves at 8192 tokens, plus o_proj's input
// copy per layer (1 x 8192 tokens x 4096 x 2 B = 67,108,864 B; recorded at tiny scale as +32,768 B per
// layer, docs/conformance-sp.md). 8 KV heads over sp 4: no replication.
TEST(SequenceParallel, RankSavesItsShareOfTheSequence) {
  const ZeroConfig z = config(2);
  const Workload sp4 = workload(32768, 4), sp1 = workload(8192, 1);
  const MemoryBreakdown a = estimate_memory(sp4, compute_model_stats(sp4), z);
  const MemoryBreakdown b = estimate_memory(sp1, compute_model_stats(sp1), z);
  EXPECT_EQ(a.saved_activation_bytes() - b.saved_activation_bytes(), int64_t{32} * 8192 * 4096 * 2);
  // ZeRO partitions over all 8 GPUs either way: the same model states.
  EXPECT_EQ(a.after_step_bytes(Category::Parameters), b.after_step_bytes(Category::Parameters));
  EXPECT_EQ(a.after_step_bytes(Category::OptimizerStates), b.after_step_bytes(Category::OptimizerStates));
}

// The calls of one step: per layer a position_ids all_gather and 4 all_to_all_single in the forward
// (q, k, v, output), 4 in the backward; q and the output 1 x 8192 x 4096 x 2 B, k and v 1 x 8192 x 8 x
// 128 x 2 B. Full checkpointing re-runs the forward's 5 calls in the backward.
TEST(SequenceParallel, AllToAllsPerLayerAndTheirSizes) {
  const Workload w = workload(32768, 4);
  const std::vector<CollectiveCall> none = sequence_parallel_calls(w, config(2));
  ASSERT_EQ(none.size(), 32u * 9u);
  int64_t a2a = 0, gathers = 0, q = 0, kv = 0;
  for (const CollectiveCall& c : none) {
    EXPECT_EQ(c.group_size, 4);
    if (c.kind == CollectiveKind::AllGather) {
      ++gathers;
      EXPECT_EQ(c.bytes, 8192 * 8);  // int64 position_ids of the rank's tokens
      continue;
    }
    ++a2a;
    if (c.bytes == int64_t{8192} * 4096 * 2) ++q;
    if (c.bytes == int64_t{8192} * 8 * 128 * 2) ++kv;
  }
  EXPECT_EQ(a2a, 32 * 8);
  EXPECT_EQ(gathers, 32);
  EXPECT_EQ(q, 32 * 4);
  EXPECT_EQ(kv, 32 * 4);
  EXPECT_EQ(sequence_parallel_calls(w, config(2, Checkpointing::Full)).size(), 32u * 14u);
  const SequenceParallelCosts c = sequence_parallel_costs(w, compute_model_stats(w), config(2));
  EXPECT_EQ(c.a2a_calls_per_step, 32 * 8);
  EXPECT_EQ(c.gather_calls_per_step, 32);
  EXPECT_EQ(c.q_bytes, int64_t{8192} * 4096 * 2);
  EXPECT_EQ(c.kv_bytes, int64_t{8192} * 1024 * 2);
  EXPECT_EQ(c.kv_replication_bytes_per_layer, 0);
}

// sp 16 over 8 KV heads: kv_replication_factor 2, each rank sends k and v with 16 heads (the repeated
// tensor) and keeps one whole head over the sequence: 2 x (1 x 65536 x 128 - 4096 tokens x 8 x 128) x 2 B
// more per layer than its share.
TEST(SequenceParallel, KvHeadsFewerThanSpAreReplicated) {
  const Workload w = workload(65536, 16, "2x8xH100");
  const SequenceParallelCosts c = sequence_parallel_costs(w, compute_model_stats(w), config(3));
  EXPECT_EQ(c.kv_bytes, int64_t{4096} * 16 * 128 * 2);
  EXPECT_EQ(c.kv_replication_bytes_per_layer, 2 * (int64_t{65536} * 128 - int64_t{4096} * 8 * 128) * 2);
}

// The attention kernel runs the whole sequence for heads/sp heads: 1/sp of the sequence's causal FLOPs
// 4 x b x s^2 x q / 2 (forward, FlashAttention's convention), not the (s/sp)^2 of a shorter sequence.
TEST(SequenceParallel, AttentionRunsTheWholeSequenceOnItsHeads) {
  const Workload w = workload(32768, 4);
  const ModelStats s = compute_model_stats(w);
  const OpTable t = operator_table(w, s.compute, 1, Checkpointing::None, 0);
  double flops = 0;
  for (int i = 0; i < t.size; ++i) {
    const OpCost& op = t.ops[static_cast<size_t>(i)];
    if (op.pass == OpPass::Forward && std::string(op.name).rfind("attention core", 0) == 0) flops += op.flops;
  }
  EXPECT_DOUBLE_EQ(flops, 32.0 * 4.0 * 32768.0 * 32768.0 * 4096.0 / 2.0 / 4.0);
}

// DeepSpeed reduces gradients in fp32 under SP (stage_1_and_2.py allreduce_bucket forces it): the
// stage-2 reduction moves twice the bytes of the same run without SP; stage 3's IPG bucket is fp32.
TEST(SequenceParallel, GradientReductionsRunInFp32) {
  const Workload sp4 = workload(32768, 4), sp1 = workload(32768, 1);
  const auto reduced = [](const Workload& w, const ZeroConfig& z) {
    int64_t bytes = 0;
    for (const CollectiveCall& c : deepspeed_collectives(w, compute_model_stats(w), z))
      if (c.phase == kBackward && c.kind == CollectiveKind::AllReduce) bytes += c.bytes;
    return bytes;
  };
  EXPECT_EQ(reduced(sp4, config(2)), 2 * reduced(sp1, config(2)));
  ZeroConfig bf16 = config(3);
  EXPECT_EQ(gradient_reduce_bytes(sp4, bf16, 2), 4);
  bf16.seq_parallel_comm_fp32 = false;  // seq_parallel_communication_data_type "bf16"
  EXPECT_EQ(gradient_reduce_bytes(sp4, bf16, 2), 2);
  ZeroConfig s2 = config(2);
  s2.seq_parallel_comm_fp32 = false;
  EXPECT_EQ(gradient_reduce_bytes(sp4, s2, 2), 4);  // stages 1-2 ignore it
}

// The batch: sequences per step = micro x accum x GPUs / sp (runtime/config.py), and tokens/s counts the
// whole sequences.
TEST(SequenceParallel, GlobalBatchCountsDataParallelRanks) {
  const Workload w = workload(32768, 4);
  const Plan p = evaluate_plan(w, compute_model_stats(w), config(2), 0.05);
  EXPECT_EQ(p.global_batch, 2);
  EXPECT_EQ(p.sequence_parallel, 4);
  EXPECT_DOUBLE_EQ(p.tokens_per_s, 2.0 * 32768.0 / p.time.step_s);
}

TEST(SequenceParallel, Refusals) {
  Workload w = workload(32768, 4);
  EXPECT_EQ(sequence_parallel_refusal(w), "");
  w.train.deepspeed_version = DeepSpeedVersion::V0_16_9;
  EXPECT_NE(sequence_parallel_refusal(w).find("0.17.0"), std::string::npos);
  w = workload(32768, 4);
  w.train.attention = Attention::Eager;
  EXPECT_NE(sequence_parallel_refusal(w).find("eager"), std::string::npos);
}

}  // namespace
}  // namespace zeroplan::planner
