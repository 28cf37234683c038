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

}  // namespace
}  // namespace zeroplan::planner
