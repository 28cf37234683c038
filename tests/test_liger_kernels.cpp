// --kernels liger (issue 24 item 3): the HF Trainer's use_liger_kernel=True applies Liger-Kernel's fused
// linear cross-entropy, which never materialises the logits. Expected sizes are hand counts from
// liger_kernel/ops/fused_linear_cross_entropy.py (fused_linear_cross_entropy_forward) for
// Llama-3.1-8B (config.json: hidden 4096, vocab 128,256, untied head), bf16, one sequence of 32,768:
//  - BT = 32,768 tokens; inc_factor = ceil(V / H) = ceil(128,256 / 4,096) = 32;
//    chunk = next_power_of_2(ceil(32,768 / 32)) = 1,024 rows;
//  - logits chunk: 1,024 x 128,256 x 2 B = 262,668,288 B (transient, forward);
//  - grad_input: BT x H x 2 B = 32,768 x 4,096 x 2 = 268,435,456 B (saved);
//  - grad_weight: V x H in the weight dtype, 128,256 x 4,096 x 2 = 1,050,673,152 B (saved; full
//    fine-tuning only: under LoRA the head is frozen).
// transformers' own loss instead keeps the fp32 log-probabilities, 32,768 x 128,256 x 4 =
// 16,810,770,432 B.
#include <gtest/gtest.h>

#include <string>

#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"
#include "planner/op_model.h"

namespace zeroplan::planner {
namespace {

const Buffer* find(const MemoryBreakdown& m, const std::string& name) {
  for (int i = 0; i < m.num_gpu; ++i)
    if (name == m.gpu[static_cast<size_t>(i)].name) return &m.gpu[static_cast<size_t>(i)];
  return nullptr;
}

MemoryBreakdown plan(bool liger, Method method) {
  Workload w;
  w.model = models::load_model("llama-3.1-8b");
  w.cluster = hw::parse_cluster("8xH100");
  w.train.seq_len = 32768;
  w.train.liger = liger;
  w.train.method = method;
  ZeroConfig z = ZeroConfig::deepspeed_defaults(3);
  z.micro_batch = 1;
  z.checkpointing = Checkpointing::Full;
  return estimate_memory(w, compute_model_stats(w), z);
}

TEST(LigerKernels, FusedLinearCrossEntropyReplacesTheLogits) {
  const MemoryBreakdown hf = plan(false, Method::Full), lg = plan(true, Method::Full);
  const Buffer* logprobs = find(hf, "fp32 log-probabilities (loss)");
  ASSERT_NE(logprobs, nullptr);
  EXPECT_EQ(logprobs->bytes, int64_t{32768} * 128256 * 4);
  EXPECT_EQ(find(lg, "fp32 log-probabilities (loss)"), nullptr);
  EXPECT_EQ(find(lg, "logits + fp32 upcast"), nullptr);
  EXPECT_EQ(find(lg, "loss gradients (fp32)"), nullptr);
  const Buffer* chunk = find(lg, "Liger FLCE logits chunk (transient)");
  const Buffer* gin = find(lg, "Liger FLCE input gradient (saved)");
  const Buffer* gw = find(lg, "Liger FLCE lm_head weight gradient (saved)");
  ASSERT_TRUE(chunk && gin && gw);
  EXPECT_EQ(chunk->bytes, 262'668'288);
  EXPECT_EQ(gin->bytes, 268'435'456);
  EXPECT_EQ(gw->bytes, 1'050'673'152);
  EXPECT_EQ(chunk->phases, kForward);
  // The head's saved input (e*h*s = 268,435,456 B) is not saved by the fused loss.
  const Buffer* eh_hf = find(hf, "embedding + final norm / head inputs");
  const Buffer* eh_lg = find(lg, "embedding + final norm / head inputs");
  ASSERT_TRUE(eh_hf && eh_lg);
  EXPECT_EQ(eh_hf->bytes - eh_lg->bytes, 268'435'456);
  EXPECT_LT(lg.peak, hf.peak);
}

TEST(LigerKernels, LoraComputesNoHeadWeightGradient) {
  const MemoryBreakdown lg = plan(true, Method::LoRA);
  EXPECT_NE(find(lg, "Liger FLCE input gradient (saved)"), nullptr);
  EXPECT_EQ(find(lg, "Liger FLCE lm_head weight gradient (saved)"), nullptr);
}

// Liger's kernels in the operator table, by hand from liger_kernel/ops (0.8.5) for Llama-3.1-8B
// (hidden h 4,096, 32 heads of 128 = q 4,096, 8 KV heads = kv 1,024, intermediate f 14,336, 32 layers with
// 2 RMSNorms each, vocabulary V 128,256, untied head), bf16 (a = 2 B), one sequence of m = 32,768 tokens:
//  - LigerRMSNorm forward (rms_norm_forward): read x, write y, a 4-byte rstd per row:
//    (2*2*4,096 + 4) * 32,768 * 64 norms = 16,388 * 2,097,152 = 34,368,126,976 B in 64 launches;
//    backward (rms_norm_backward, in place): read dy and x, write dx, read rstd (3 * 2 * 4,096 + 4 = 24,580 B
//    per token), plus the [sm_count = 132, h] fp32 partial dW written and summed (2 * 4 * 132 * 4,096 =
//    4,325,376 B per norm): 24,580 * 2,097,152 + 4,325,376 * 64 = 51,547,996,160 + 276,824,064 =
//    51,824,820,224 B in 192 launches;
//  - liger_rotary_pos_emb: q and k rotated in place, read + write 2 * 2 * (4,096 + 1,024) = 20,480 B per
//    token per layer: 20,480 * 32,768 * 32 = 21,474,836,480 B in 32 launches, the same backward;
//  - LigerSiLUMulFunction forward: read gate and up, write the product: 3 * 2 * 14,336 = 86,016 B per token
//    per layer = 86,016 * 1,048,576 = 90,194,313,216 B; backward: read d(out), gate, up, write d(gate),
//    d(up): 5 * 2 * 14,336 * 1,048,576 = 150,323,855,360 B; 32 launches each way;
//  - the fused loss: chunk = next_power_of_2(ceil(32,768 / ceil(128,256 / 4,096))) = 1,024 rows, 32 chunks;
//    the cross-entropy kernel reads each logit twice and writes its gradient once: 3 * 2 * 128,256 * 32,768
//    = 25,216,155,648 B in 32 launches; the head's three GEMMs (logits, dgrad, wgrad, 2 * m * V * h FLOPs
//    each = 34,428,457,844,736 FLOPs) all run in the forward, and the backward has none.
TEST(LigerKernels, OperatorTableRunsLigersKernels) {
  Workload w;
  w.model = models::load_model("llama-3.1-8b");
  w.cluster = hw::parse_cluster("1xH100");
  w.train.seq_len = 32768;
  w.train.liger = true;
  const ModelStats s = compute_model_stats(w);
  const OpTable t = operator_table(w, s.compute, 1, Checkpointing::None, 0);
  const auto op = [&](const std::string& name, OpPass pass) -> const OpCost* {
    for (int i = 0; i < t.size; ++i)
      if (name == t.ops[static_cast<size_t>(i)].name && t.ops[static_cast<size_t>(i)].pass == pass)
        return &t.ops[static_cast<size_t>(i)];
    return nullptr;
  };
  const OpCost* norm = op("RMSNorm (Liger)", OpPass::Forward);
  const OpCost* norm_b = op("RMSNorm backward (Liger)", OpPass::Backward);
  const OpCost* rope = op("rotary embedding q,k (Liger)", OpPass::Forward);
  const OpCost* rope_b = op("rotary embedding backward (Liger)", OpPass::Backward);
  const OpCost* act = op("MLP act_fn(gate) * up (Liger)", OpPass::Forward);
  const OpCost* act_b = op("MLP act_fn(gate) * up backward (Liger)", OpPass::Backward);
  const OpCost* ce = op("Liger cross-entropy in place over the logits chunks", OpPass::Forward);
  const OpCost* logits = op("LM head GEMM (Liger, per chunk)", OpPass::Forward);
  const OpCost* head_b = op("LM head dgrad + wgrad (Liger, in the forward)", OpPass::Forward);
  ASSERT_TRUE(norm && norm_b && rope && rope_b && act && act_b && ce && logits && head_b);
  EXPECT_DOUBLE_EQ(norm->bytes, 34'368'126'976.0);
  EXPECT_EQ(norm->kernels, 64);
  EXPECT_DOUBLE_EQ(norm_b->bytes, 51'824'820'224.0);
  EXPECT_EQ(norm_b->kernels, 192);
  EXPECT_DOUBLE_EQ(rope->bytes, 21'474'836'480.0);
  EXPECT_DOUBLE_EQ(rope_b->bytes, 21'474'836'480.0);
  EXPECT_EQ(rope->kernels, 32);
  EXPECT_DOUBLE_EQ(act->bytes, 90'194'313'216.0);
  EXPECT_DOUBLE_EQ(act_b->bytes, 150'323'855'360.0);
  EXPECT_DOUBLE_EQ(ce->bytes, 25'216'155'648.0);
  EXPECT_EQ(ce->kernels, 32);
  EXPECT_EQ(logits->kernels, 32);
  EXPECT_EQ(logits->m, 1024);
  EXPECT_DOUBLE_EQ(logits->flops, 34'428'457'844'736.0);
  EXPECT_DOUBLE_EQ(head_b->flops, 2 * 34'428'457'844'736.0);
  // transformers' own chains and the head's backward are gone.
  for (const char* eager : {"RMSNorm (eager, fp32)", "rotary embedding q,k", "MLP act_fn(gate) * up",
                            "loss: logits.float() + cross_entropy", "LM head GEMM"})
    EXPECT_EQ(op(eager, OpPass::Forward), nullptr) << eager;
  EXPECT_EQ(op("LM head GEMM backward", OpPass::Backward), nullptr);
  EXPECT_EQ(op("loss backward", OpPass::Backward), nullptr);
}

}  // namespace
}  // namespace zeroplan::planner
