// --kernels fa3 (issue 24 item 3): attn_implementation="flash_attention_3" prices the attention core on
// FlashAttention-3's measured rates instead of FlashAttention-2's (what PyTorch SDPA runs). Expected
// values are the FlashAttention-3 paper's bar labels (Shah et al. 2024, arXiv:2407.08608, Figures 5-6:
// H100 SXM5, BF16, head dim 128, 16k tokens per batch), in TFLOP/s, over the H100's 989.5 TFLOP/s dense
// BF16 peak:
//   causal forward at 4k:     FA2 319, FA3 579;
//   non-causal backward at 4k: FA2 310, FA3 542; causal backward = that x the forward's causal ratio
//   (time_model.json bwd_note): FA2 310 x 319/368, FA3 542 x 579/638.
// The memory is unchanged (both save the output and the logsumexp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "cli_runner.h"
#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"
#include "planner/op_model.h"

namespace zeroplan::planner {
namespace {

constexpr double kH100Peak = 989.5;  // TFLOP/s, the paper's normalisation (time_model.json peak_tflops)

TEST(FlashAttention3, UsesThePapersFa3BarsOnHopper) {
  const hw::GpuProfile g = hw::parse_cluster("8xH100").gpu;
  ASSERT_TRUE(flash_attention_3_available(g));
  EXPECT_NEAR(attention_efficiency(g, 4096, true, false, AttentionBackend::Flash2), 319.0 / kH100Peak, 1e-12);
  EXPECT_NEAR(attention_efficiency(g, 4096, true, false, AttentionBackend::Flash3), 579.0 / kH100Peak, 1e-12);
  EXPECT_NEAR(attention_efficiency(g, 4096, true, true, AttentionBackend::Flash2),
              310.0 * 319.0 / 368.0 / kH100Peak, 1e-12);
  EXPECT_NEAR(attention_efficiency(g, 4096, true, true, AttentionBackend::Flash3),
              542.0 * 579.0 / 638.0 / kH100Peak, 1e-12);
  // H800 is a Hopper part (sm_90) too.
  EXPECT_TRUE(flash_attention_3_available(hw::parse_cluster("8xH800").gpu));
}

TEST(FlashAttention3, NotAvailableBeforeOrAfterHopper) {
  EXPECT_FALSE(flash_attention_3_available(hw::parse_cluster("8xA100-80GB").gpu));
  EXPECT_FALSE(flash_attention_3_available(hw::parse_cluster("8xB200").gpu));
}

Workload workload(bool fa3) {
  Workload w;
  w.model = models::load_model("llama-3.1-8b");
  w.cluster = hw::parse_cluster("8xH100");
  w.train.seq_len = 4096;
  w.train.flash_attention_3 = fa3;
  // SDPA's flash backend as the baseline: torch before 2.11 (from 2.11 SDPA runs cuDNN on Hopper,
  // tests/test_sdpa_backend.cpp).
  w.train.torch_version = 210;
  return w;
}

const OpCost* find_op(const OpTable& t, const std::string& name) {
  for (int i = 0; i < t.size; ++i)
    if (name == t.ops[static_cast<size_t>(i)].name) return &t.ops[static_cast<size_t>(i)];
  return nullptr;
}

// The attention core's time scales by the rate ratio (FLOPs equal, compute-bound); nothing else moves.
TEST(FlashAttention3, OnlyTheAttentionCoreGetsFaster) {
  const Workload a = workload(false), b = workload(true);
  const ModelStats sa = compute_model_stats(a), sb = compute_model_stats(b);
  const OpTable ta = operator_table(a, sa.compute, 1, Checkpointing::None, 0);
  const OpTable tb = operator_table(b, sb.compute, 1, Checkpointing::None, 0);
  const OpCost* f2 = find_op(ta, "attention core (SDPA flash)");
  const OpCost* f3 = find_op(tb, "attention core (FlashAttention-3)");
  ASSERT_NE(f2, nullptr);
  ASSERT_NE(f3, nullptr);
  EXPECT_EQ(f2->flops, f3->flops);
  EXPECT_NEAR(f3->time_s / f2->time_s, 319.0 / 579.0, 1e-9);
  const OpCost* b2 = find_op(ta, "attention core backward (SDPA flash)");
  const OpCost* b3 = find_op(tb, "attention core backward (FlashAttention-3)");
  ASSERT_NE(b2, nullptr);
  ASSERT_NE(b3, nullptr);
  EXPECT_NEAR(b3->time_s / b2->time_s, (310.0 * 319.0 / 368.0) / (542.0 * 579.0 / 638.0), 1e-9);
  // Every other operator is the same.
  double other_a = 0, other_b = 0;
  for (int i = 0; i < ta.size; ++i)
    if (&ta.ops[static_cast<size_t>(i)] != f2 && &ta.ops[static_cast<size_t>(i)] != b2)
      other_a += ta.ops[static_cast<size_t>(i)].time_s;
  for (int i = 0; i < tb.size; ++i)
    if (&tb.ops[static_cast<size_t>(i)] != f3 && &tb.ops[static_cast<size_t>(i)] != b3)
      other_b += tb.ops[static_cast<size_t>(i)].time_s;
  EXPECT_DOUBLE_EQ(other_a, other_b);
  // Same saved tensors.
  ZeroConfig z = ZeroConfig::deepspeed_defaults(3);
  z.micro_batch = 1;
  EXPECT_EQ(estimate_memory(a, sa, z).peak, estimate_memory(b, sb, z).peak);
}

TEST(FlashAttention3, CliSaysWhatItAssumedAndRefusesNonHopper) {
  using zeroplan::testing::run_cli;
  const auto ok =
      run_cli({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--kernels", "fa3", "--stage", "3"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("attention FlashAttention-3 (flash_attention_3)"), std::string::npos) << ok.out;
  const auto js = run_cli({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--kernels", "fa3", "--json"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  EXPECT_NE(js.out.find("\"attention\": \"flash_attention_3\""), std::string::npos);
  const auto bad = run_cli({"--model", "llama-3.1-8b", "--gpus", "8xA100-80GB", "--kernels", "fa3"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(bad.out.empty());
  EXPECT_NE(bad.err.find("FlashAttention-3 runs on Hopper GPUs only"), std::string::npos) << bad.err;
  // --emit: the TrainingArguments snippet says how to load the model with FlashAttention-3.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zp_fa3_emit";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto em = run_cli({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--kernels", "fa3", "--emit",
                           (dir / "ds_config.json").string()});
  ASSERT_EQ(em.exit_code, 0) << em.err;
  std::ifstream in(dir / "ds_config.training_args.py");
  const std::string snippet((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(snippet.find("attn_implementation=\"flash_attention_3\""), std::string::npos) << snippet;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace zeroplan::planner
