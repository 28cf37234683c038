// ParallelLayout (layout/parallel_layout.h, issue 25): DeepSpeed 0.19.8's group construction and the
// layout rules, each with a hand-derived expectation.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/errors.h"
#include "layout/parallel_layout.h"

namespace zeroplan::layout {
namespace {

using Ranks = std::vector<int>;

// 2 nodes x 8 GPUs, tp 2 x sp 2 -> dp 4. rank = t + 2 * (q + 2 * d) (TP innermost, then SP, then DP:
// groups.py builds TP from a (data_parallel, tensor_parallel) mesh, so TP ranks are contiguous; the
// Ulysses (data_parallel, sequence_parallel) mesh makes SP blocks contiguous above that).
TEST(ParallelLayout, GroupsFollowDeepSpeedsRankOrder) {
  const ParallelLayout l(2, 8, {2, 2, 1}, {});
  EXPECT_EQ(l.world(), 16);
  EXPECT_EQ(l.dp(), 4);
  EXPECT_EQ(l.zero(), 8);  // ZeRO over SP x DP (engine.py: the sequence-data-parallel group)
  // Rank 5 = t 1, q 0, d 1.
  EXPECT_EQ(l.group(GroupKind::TensorParallel, 5).ranks, (Ranks{4, 5}));
  EXPECT_EQ(l.group(GroupKind::SequenceParallel, 5).ranks, (Ranks{5, 7}));
  EXPECT_EQ(l.group(GroupKind::DataParallel, 5).ranks, (Ranks{1, 5, 9, 13}));
  EXPECT_EQ(l.group(GroupKind::Zero, 5).ranks, (Ranks{1, 3, 5, 7, 9, 11, 13, 15}));
  EXPECT_TRUE(l.group(GroupKind::TensorParallel, 5).intra_node);
  EXPECT_FALSE(l.group(GroupKind::DataParallel, 5).intra_node);  // ranks 1..13 span both nodes
  EXPECT_EQ(l.node_of(9), 1);
  EXPECT_EQ(l.local_rank_of(9), 1);
}

// AutoEP on 8 GPUs, ep 4 (groups.py _create_expert_and_data_parallel, E+D): EP groups are contiguous
// blocks of the data-parallel group, {0..3} and {4..7}; the expert-data-parallel group takes the same
// slot of each block: rank 5 -> {1, 5}.
TEST(ParallelLayout, ExpertGroupsAreBlocksAndSlotsOfTheZeroGroup) {
  const ParallelLayout l(1, 8, {1, 1, 4}, {});
  EXPECT_EQ(l.expert_dp(), 2);
  EXPECT_EQ(l.group(GroupKind::ExpertParallel, 5).ranks, (Ranks{4, 5, 6, 7}));
  EXPECT_EQ(l.group(GroupKind::ExpertDataParallel, 5).ranks, (Ranks{1, 5}));
}

// ZeRO++ hpZ 8 on 2 nodes of 8 (groups.py _create_zero_param_parallel_group: range(i * 8, (i + 1) * 8)):
// rank 11 -> {8..15}, one node; the ZeRO group stays all 16. hpZ 16 spans both nodes.
TEST(ParallelLayout, HpzGroupsAreBlocksOfConsecutiveRanks) {
  const ParallelLayout l(2, 8, {1, 1, 1, 8}, {});
  EXPECT_EQ(l.group(GroupKind::ZeroSecondary, 11).ranks, (Ranks{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_TRUE(l.group(GroupKind::ZeroSecondary, 11).intra_node);
  EXPECT_EQ(l.zero(), 16);
  const ParallelLayout wide(2, 8, {1, 1, 1, 16}, {});
  EXPECT_FALSE(wide.group(GroupKind::ZeroSecondary, 3).intra_node);
  // The recorded refusal (tests/deepspeed/fixtures-hpz/failures-0.19.8.json: "4 is not divisible by 3").
  const auto why = validate(1, 4, {1, 1, 1, 3}, {}, true);
  ASSERT_FALSE(why.empty());
  EXPECT_NE(why.front().find("--hpz 3 does not divide the 4 GPUs"), std::string::npos) << why.front();
  EXPECT_FALSE(validate(1, 8, {1, 1, 2, 2}, {}, true).empty());  // AutoEP: DeepSpeed refuses
}

// hpZ beside Ulysses SP and AutoTP, as DeepSpeed 0.19.8 ran them on CPU ranks (tests/deepspeed/fixtures-hpz,
// llama-gqa_s3_n4_bf16_hpz2_{sp2,tp2} and hpz1_tp2; their losses are checked against each other in
// test_hpz.cpp's HpzBesideModelParallelGroups). SP 2 x DP 2: the hpZ blocks {0,1}, {2,3} lie inside the ZeRO
// group (all 4), so it is planned. TP 2 x DP 2: the blocks are the TP groups, refused.
TEST(ParallelLayout, HpzBesideSequenceButNotTensorParallel) {
  EXPECT_TRUE(validate(1, 4, {1, 2, 1, 2}, {}, true).empty());
  const ParallelLayout l(1, 4, {1, 2, 1, 2}, {});
  EXPECT_EQ(l.group(GroupKind::ZeroSecondary, 1).ranks, (Ranks{0, 1}));
  EXPECT_EQ(l.zero(), 4);
  const auto why = validate(1, 4, {2, 1, 1, 2}, {}, true);
  ASSERT_FALSE(why.empty());
  EXPECT_NE(why.front().find("wrong weights"), std::string::npos) << why.front();
}

TEST(ParallelLayout, EveryRankIsDataParallelByDefault) {
  const ParallelLayout l(4, 8, {}, {});
  EXPECT_EQ(l.dp(), 32);
  EXPECT_EQ(l.zero(), 32);
  EXPECT_EQ(l.group(GroupKind::Zero, 17).size(), 32);
}

std::string first(int nodes, int gpn, LayoutSizes s, LayoutFacts f, bool modelled = true) {
  const auto why = validate(nodes, gpn, s, f, modelled);
  return why.empty() ? std::string() : why.front();
}

TEST(ParallelLayout, RulesNameTheFlagAndTheValidValues) {
  LayoutFacts llama;  // Llama-2-7B: 32 heads, 32 KV heads, dense, 2048 tokens
  llama.attention_heads = 32;
  llama.kv_heads = 32;
  llama.routed_experts = 0;
  llama.seq_len = 2048;
  EXPECT_EQ(first(4, 8, {3, 1, 1}, llama),
            "--tp 3 x --sp 1 = 3 does not divide the 32 GPUs; tp x sp must be one of: 1, 2, 4, 8, 16, 32");
  // 24 GPUs: 3 divides the world, not the 32 heads.
  EXPECT_EQ(first(3, 8, {3, 1, 1}, llama),
            "--tp 3 does not divide the model's 32 attention heads; valid --tp: 1, 2, 4, 8, 16, 32");
  EXPECT_EQ(first(2, 8, {16, 1, 1}, llama).rfind("--tp 16 is wider than a node's 8 GPUs", 0), 0u);
  // 2048 tokens over sp 5 (10 GPUs) and 40 heads: the sequence rule.
  LayoutFacts forty = llama;
  forty.attention_heads = forty.kv_heads = 40;
  EXPECT_EQ(first(1, 10, {1, 5, 1}, forty),
            "--sp 5 does not divide the sequence length 2048; Ulysses gives each rank seq/sp tokens");
  LayoutFacts mixtral = llama;
  mixtral.kv_heads = 8;
  mixtral.routed_experts = 8;
  EXPECT_EQ(first(3, 8, {1, 1, 3}, mixtral),
            "--ep 3 does not divide the model's 8 routed experts per layer; valid --ep: 1, 2, 4, 8");
  EXPECT_EQ(first(1, 8, {1, 1, 2}, llama), "--ep 2: the model has no routed experts");
  // Valid, but not modelled yet.
  EXPECT_EQ(first(1, 8, {2, 1, 1}, llama, false),
            "--tp 2: tensor parallelism (DeepSpeed AutoTP) is not modelled yet; use --tp 1");
  // Ulysses SP is modelled (planner/sequence_parallel.h): its rules stand, nothing more.
  EXPECT_TRUE(validate(1, 8, {1, 2, 1}, llama, false).empty());
  // KV heads: UlyssesSPAttentionHF needs kv % sp == 0 or sp % kv == 0. 24 heads and 8 KV heads over
  // sp 3 (3 GPUs) break it; 32 heads and 8 KV heads over sp 16 pass (each KV head replicated twice).
  LayoutFacts gqa = llama;
  gqa.attention_heads = 24;
  gqa.kv_heads = 8;
  gqa.seq_len = 3072;
  EXPECT_EQ(
      first(1, 3, {1, 3, 1}, gqa),
      "--sp 3 neither divides nor is a multiple of the model's 8 KV heads (UlyssesSPAttentionHF requires one "
      "or the other)");
  gqa.attention_heads = 32;
  gqa.seq_len = 4096;
  EXPECT_TRUE(validate(1, 16, {1, 16, 1}, gqa, false).empty());  // 16 % 8 == 0: replicated twice
  EXPECT_TRUE(validate(1, 8, {2, 2, 1}, llama, true).empty());
  EXPECT_THROW(ParallelLayout(3, 8, {3, 1, 1}, llama), UserError);
}

}  // namespace
}  // namespace zeroplan::layout
