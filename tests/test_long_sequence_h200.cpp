// DeepSpeed 0.19.8 at long sequence on one H200 (docs/validation.md, "H200, 2026-11-28"), against the
// planner's step time and peak memory.
//
// The measurements are DeepSpeed's: scripts/deepspeed_step_bench.py ran a model from a config.json under
// deepspeed.initialize (bf16, ZeRO stage s, torch AdamW, HF gradient checkpointing where `ckpt`, Liger-Kernel
// 0.8.5 applied as the HF Trainer's use_liger_kernel does where `liger`), one process per configuration,
// median of 3 steps after 1 warm-up, a device synchronisation after forward, backward and step; the raw
// JSON files are read here as they came back (docs/validation/2026-11-28-h200/). Three models:
// TinyLlama-1.1B (vocabulary 32,000), Qwen2.5-0.5B's shapes as a Llama (vocabulary 151,936, tied) and
// Llama-2-7B; one sequence of 8k to 64k tokens (calls 1-2) or micro-batches of 2,048-token sequences (call
// 3). The planner is given what the bench ran: DeepSpeed's defaults for everything the config leaves out
// (ZeroConfig::deepspeed_defaults, as `zeroplan check` of the bench's config reads it).
//
// What the rows set and what they check:
// - Memory: torch.cuda.max_memory_allocated against the planner's peak less its CUDA-context line (which
//   the allocator does not count). The checkpointed rows set one rule of the memory model (the loss's
//   tensors and a recomputed layer are never alive together, planner/memory_model.cpp
//   settle_backward_moments); before it TinyLlama's rows at 32k and 64k tokens and at 16 x 2048 were
//   +8.8%, +11.9% and +8.8%. 5%.
// - Time: the whole step (forward, backward, optimizer). No figure of the time model was fitted to these
//   rows. Liger's fused kernels are priced from Liger's source (planner/op_model.cpp); before that the
//   three Liger rows were +22% to +25%, now +13%. Without Liger 12%, with 15%.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"
#include "planner/time_model.h"
#include "test_util.h"

namespace zeroplan::planner {
namespace {

struct Row {
  const char* file;   // docs/validation/2026-11-28-h200/<file>
  const char* model;  // <model>.json under the source tree
  int stage;
  int64_t micro, seq;
  bool ckpt, liger;
  double time_tolerance;  // |predicted / measured - 1|; 0: host-bound, time not asserted (see below)
};

nlohmann::json measured(const Row& row) {
  const std::string path = std::string(ZEROPLAN_SOURCE_DIR) + "/docs/validation/2026-11-28-h200/" + row.file;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in).at("runs").at(0);
}

struct Predicted {
  double step_s = 0;
  double allocated = 0;  // the peak less the CUDA context line
};

Predicted predict(const Row& row) {
  Workload w;
  w.model = models::load_model(std::string(ZEROPLAN_SOURCE_DIR) + "/" + row.model + ".json");
  w.cluster = hw::parse_cluster("1xH200");
  w.train.seq_len = row.seq;
  w.train.liger = row.liger;
  ZeroConfig z = ZeroConfig::deepspeed_defaults(row.stage);
  z.micro_batch = row.micro;
  z.grad_accum = 1;
  z.checkpointing = row.ckpt ? Checkpointing::Full : Checkpointing::None;
  const ModelStats stats = compute_model_stats(w);
  const MemoryBreakdown m = estimate_memory(w, stats, z);
  const StepTime t = estimate_time(w, stats, z);
  EXPECT_EQ(t.exposed_communication_s, 0.0);  // one GPU
  return {t.step_s, static_cast<double>(m.peak - m.category(Category::Overhead))};
}

class LongSequenceOnH200 : public ::testing::TestWithParam<Row> {};

std::string row_name(const ::testing::TestParamInfo<Row>& info) {
  return zeroplan::testing::test_name_of(info.param.file);
}

TEST_P(LongSequenceOnH200, PeakMemoryMatchesTheAllocator) {
  const Row& row = GetParam();
  const double got = measured(row).at("max_memory_allocated").get<double>();
  const double want = predict(row).allocated;
  EXPECT_NEAR(want / got - 1.0, 0.0, 0.05)
      << row.file << ": predicted " << want / 1e9 << " GB, max_memory_allocated " << got / 1e9 << " GB";
}

TEST_P(LongSequenceOnH200, StepTimeMatchesTheMeasuredStep) {
  const Row& row = GetParam();
  if (row.time_tolerance == 0)
    GTEST_SKIP() << "host-bound row: its time is not asserted (see the file's comment)";
  const double got = measured(row).at("step_s_median").get<double>();
  const double want = predict(row).step_s;
  EXPECT_NEAR(want / got - 1.0, 0.0, row.time_tolerance)
      << row.file << ": predicted " << want * 1e3 << " ms, measured " << got * 1e3 << " ms";
}

constexpr const char* kTiny = "scripts/gpu_models/tinyllama-1.1b";
constexpr const char* kQwen = "scripts/gpu_models/llama-0.5b-v152k";
constexpr const char* k7b = "models/zoo/llama-2-7b";

INSTANTIATE_TEST_SUITE_P(
    TinyLlama, LongSequenceOnH200,
    ::testing::Values(Row{"call1/deepspeed_s2_1_8192_ckpt.json", kTiny, 2, 1, 8192, true, false, 0.12},
                      Row{"call1/deepspeed_s2_1_16384_ckpt.json", kTiny, 2, 1, 16384, true, false, 0.12},
                      Row{"call1/deepspeed_s2_1_32768_ckpt_prof.json", kTiny, 2, 1, 32768, true, false, 0.12},
                      Row{"call1/deepspeed_s2_1_65536_ckpt.json", kTiny, 2, 1, 65536, true, false, 0.12},
                      Row{"call2/deepspeed_s2_1_16384.json", kTiny, 2, 1, 16384, false, false, 0.12},
                      Row{"call2/deepspeed_s3_1_32768_ckpt.json", kTiny, 3, 1, 32768, true, false, 0.12},
                      Row{"call2/deepspeed_s2_1_32768_ckpt_liger.json", kTiny, 2, 1, 32768, true, true,
                          0.15}),
    row_name);

INSTANTIATE_TEST_SUITE_P(LargeVocabulary, LongSequenceOnH200,
                         ::testing::Values(Row{"call1/deepspeed_llama-0.5b-v152k_s2_1_16384_ckpt.json", kQwen,
                                               2, 1, 16384, true, false, 0.12},
                                           Row{"call1/deepspeed_llama-0.5b-v152k_s2_1_32768_ckpt.json", kQwen,
                                               2, 1, 32768, true, false, 0.12},
                                           Row{"call2/deepspeed_llama-0.5b-v152k_s2_1_16384.json", kQwen, 2,
                                               1, 16384, false, false, 0.12},
                                           Row{"call2/deepspeed_llama-0.5b-v152k_s2_1_32768_ckpt_liger.json",
                                               kQwen, 2, 1, 32768, true, true, 0.15},
                                           Row{"call2/deepspeed_llama-0.5b-v152k_s2_1_65536_ckpt_liger.json",
                                               kQwen, 2, 1, 65536, true, true, 0.15}),
                         row_name);

// Call 3: micro-batches of 2,048-token sequences, the shapes the planner's search recommends, stages 2 and
// 3 (DeepSpeed's default buckets: reduce_bucket_size 5e8, so stage 3's always-allocated IPG buffer is 1 GB).
// Host-bound rows (time_tolerance 0): ZeRO-3's per-module hooks set the forward there, not the GPU --
// TinyLlama's stage-3 forward took 213 ms at 8 x 2048 and 218 ms at 16 x 2048 (twice the tokens), and the
// 0.5B model's 237 ms against 129 ms at stage 2 with the same shapes. This machine's host ran those passes
// 1.3-1.6x slower than the reference host of time_model.json (docs/validation.md), which --host-speed
// prices; the time model is not refitted to one machine.
INSTANTIATE_TEST_SUITE_P(
    Batches, LongSequenceOnH200,
    ::testing::Values(
        Row{"call3/deepspeed_s2_16_2048_ckpt.json", kTiny, 2, 16, 2048, true, false, 0.12},
        Row{"call3/deepspeed_s3_16_2048_ckpt.json", kTiny, 3, 16, 2048, true, false, 0.12},
        Row{"call3/deepspeed_s3_8_2048_ckpt.json", kTiny, 3, 8, 2048, true, false, 0},
        Row{"call3/deepspeed_s3_4_2048.json", kTiny, 3, 4, 2048, false, false, 0},
        Row{"call3/deepspeed_llama-0.5b-v152k_s2_16_2048_ckpt.json", kQwen, 2, 16, 2048, true, false, 0.12},
        Row{"call3/deepspeed_llama-0.5b-v152k_s3_16_2048_ckpt.json", kQwen, 3, 16, 2048, true, false, 0},
        Row{"call3/deepspeed_llama-2-7b_s3_4_2048_ckpt.json", k7b, 3, 4, 2048, true, false, 0.12},
        Row{"call3/deepspeed_llama-2-7b_s3_8_2048_ckpt.json", k7b, 3, 8, 2048, true, false, 0.12}),
    row_name);

}  // namespace
}  // namespace zeroplan::planner
