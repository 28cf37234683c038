// DeepSpeed 0.19.8's own step on one H100 (docs/validation.md, "H100"), against the time model.
//
// The measurements are DeepSpeed's, not zeroplan's: scripts/deepspeed_step_bench.py ran
// TinyLlama-1.1B under deepspeed.initialize (bf16, ZeRO stage s, torch AdamW) on the device tool's
// nvidia-h100-x1, one process per configuration, median of 5 steps, a device synchronisation after
// forward, backward and step; the raw JSON files are read here as they came back
// (docs/validation/2026-11-26-h100/call2/). With one GPU there is no communication, so the forward
// and backward of a step are compute plus host time (kernel launches, ZeRO-3's hooks).
//
// Two rows set the time model's two host figures (planner/data/time_model.json "host",
// "stage3_hooks"): stage 0 and stage 3 at 1 x 512 tokens. They are checked tightly (5%), as a
// check of the derivation. The other rows were not used: they are the evidence that the pass model
// max(GPU, launches + hooks) carries the figures to other shapes (15%). The optimizer phase is left
// out: DeepSpeed ran torch AdamW (torch_adam), zeroplan prices DeepSpeed's default fused Adam.
// Rows the model does not cover yet (stage 2 at 1 x 512, whose +45 ms did not reproduce on the second
// lease, where stage 2 added ~10 ms; persistence threshold 0; optimizer offload's step) are not asserted
// here; docs/validation.md lists them. The optimizer step is checked in test_time_deepspeed_step.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/time_model.h"
#include "test_util.h"

namespace zeroplan::planner {
namespace {

struct Row {
  const char* file;  // docs/validation/2026-11-26-h100/call2/<file>
  int stage;
  int64_t micro, seq, accum;
  Checkpointing ckpt;
  double tolerance;  // |predicted / measured - 1|
};

// Measured forward + backward of one optimizer step (all micro-steps), seconds.
double measured_forward_backward(const char* file) {
  const std::string path =
      std::string(ZEROPLAN_SOURCE_DIR) + "/docs/validation/2026-11-26-h100/call2/" + file;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  const nlohmann::json j = nlohmann::json::parse(in);
  const nlohmann::json& r = j.at("runs").at(0);
  // The bench's per-phase medians are sums over the step's micro-steps.
  return r.at("forward_s_median").get<double>() + r.at("backward_s_median").get<double>();
}

double predicted_forward_backward(const Row& row) {
  Workload w;
  w.model = models::load_model(std::string(ZEROPLAN_SOURCE_DIR) + "/scripts/gpu_models/tinyllama-1.1b.json");
  w.cluster = hw::parse_cluster("1xH100");
  w.train.seq_len = row.seq;
  ZeroConfig z = ZeroConfig::deepspeed_defaults(row.stage);
  z.micro_batch = row.micro;
  z.grad_accum = row.accum;
  z.checkpointing = row.ckpt;
  const StepTime t = estimate_time(w, compute_model_stats(w), z);
  EXPECT_EQ(t.exposed_communication_s, 0.0);  // one GPU
  EXPECT_EQ(t.offload_s, 0.0);
  // Everything of the step but the optimizer: forward, backward, recompute of every micro-step and
  // the hooks' exposed host time.
  return t.step_s - t.optimizer_s;
}

class DeepSpeedOnH100 : public ::testing::TestWithParam<Row> {};

std::string row_name(const ::testing::TestParamInfo<Row>& info) {
  return zeroplan::testing::test_name_of(info.param.file);
}

TEST_P(DeepSpeedOnH100, ForwardAndBackwardMatchTheMeasuredStep) {
  const Row& row = GetParam();
  const double measured = measured_forward_backward(row.file);
  const double predicted = predicted_forward_backward(row);
  EXPECT_NEAR(predicted / measured - 1.0, 0.0, row.tolerance)
      << row.file << ": predicted " << predicted * 1e3 << " ms, measured " << measured * 1e3 << " ms";
}

// Set the figures (5%): forward 21.3 + backward 37.3 ms at stage 0; 129.9 + 148.3 ms at stage 3.
INSTANTIATE_TEST_SUITE_P(
    SetTheHostFigures, DeepSpeedOnH100,
    ::testing::Values(Row{"deepspeed_s0_1_512.json", 0, 1, 512, 1, Checkpointing::None, 0.05},
                      Row{"deepspeed_s3_1_512.json", 3, 1, 512, 1, Checkpointing::None, 0.05}),
    row_name);

// Not used to set them (15%): the GPU-bound shapes, checkpointing, gradient accumulation.
INSTANTIATE_TEST_SUITE_P(
    Held, DeepSpeedOnH100,
    ::testing::Values(Row{"deepspeed_s0_4_2048.json", 0, 4, 2048, 1, Checkpointing::None, 0.15},
                      Row{"deepspeed_s3_4_2048.json", 3, 4, 2048, 1, Checkpointing::None, 0.15},
                      Row{"deepspeed_s2_4_2048_ckpt.json", 2, 4, 2048, 1, Checkpointing::Full, 0.15},
                      Row{"deepspeed_s0_1_512_ga4.json", 0, 1, 512, 4, Checkpointing::None, 0.15},
                      Row{"deepspeed_s3_1_512_ga4.json", 3, 1, 512, 4, Checkpointing::None, 0.15}),
    row_name);

}  // namespace
}  // namespace zeroplan::planner
