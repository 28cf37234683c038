// Which attention kernel HF's attn_implementation="sdpa" runs, and at what rate (issue 24 item 3).
//
// Outside facts the expectations come from:
// - PyTorch's check_prefer_cudnn_attention() (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp):
//   cuDNN first on sm90/sm100 when the cuDNN version is above 9.15.0, which the cuDNN bundled with
//   torch 2.11 (9.19.0) is and earlier wheels' are not (transformers PR #48163).
// - The probe on the device tool's H100 (docs/validation/2026-11-26-h100/session2/sdpa_probe.json,
//   scripts/sdpa_backend_probe.py): torch 2.11.0+cu130, nothing forced, every case ran cuDNN.
// - The forced-cuDNN rates measured on that H100 (docs/validation/2026-11-26-h100/call1/attention.json,
//   scripts/attention_bench.py), read here as they came back.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "hwprofiles/gpu_profile.h"
#include "planner/op_model.h"
#include "planner/torch_version.h"
#include "tests/cli_runner.h"

namespace zeroplan::planner {
namespace {

nlohmann::json read_json(const std::string& relative) {
  const std::string path = std::string(ZEROPLAN_SOURCE_DIR) + "/" + relative;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

TrainingSpec sdpa_on_torch(int version) {
  TrainingSpec t;
  t.attention = Attention::Flash;
  t.torch_version = version;
  return t;
}

TEST(TorchVersion, ParsesReleasesAndWheelNames) {
  EXPECT_EQ(parse_torch_version("2.11"), 211);
  EXPECT_EQ(parse_torch_version("2.11.0+cu130"), 211);  // torch.__version__ of the probe's wheel
  EXPECT_EQ(parse_torch_version("2.6.0"), 206);
  EXPECT_EQ(torch_version_string(210), "2.10");
  EXPECT_FALSE(parse_torch_version("2"));
  EXPECT_FALSE(parse_torch_version("2.x"));
  EXPECT_FALSE(parse_torch_version("2.11rc1"));
  EXPECT_FALSE(parse_torch_version("2.100"));
}

TEST(SdpaBackend, TheProbeSawCudnnInEveryCaseOnTorch211) {
  const nlohmann::json probe = read_json("docs/validation/2026-11-26-h100/session2/sdpa_probe.json");
  EXPECT_EQ(probe.at("torch").get<std::string>().rfind("2.11", 0), 0u);
  EXPECT_GT(probe.at("cudnn").get<int>(), 91500);  // above PyTorch's threshold
  ASSERT_FALSE(probe.at("cases").empty());
  for (const auto& c : probe.at("cases"))
    EXPECT_EQ(c.at("backends"), nlohmann::json::array({"cudnn"})) << c.dump();
  // ... which is what the planner resolves for the same GPU and release.
  EXPECT_EQ(attention_backend(hw::find_gpu("H100"), sdpa_on_torch(211)), AttentionBackend::Cudnn);
}

TEST(SdpaBackend, FollowsTheTorchReleaseTheGpuAndTheForcedKernels) {
  const hw::GpuProfile h100 = hw::find_gpu("H100");
  EXPECT_EQ(attention_backend(hw::find_gpu("H200"), sdpa_on_torch(212)), AttentionBackend::Cudnn);
  // Before 2.11 the bundled cuDNN is under the threshold: SDPA's flash backend.
  EXPECT_EQ(attention_backend(h100, sdpa_on_torch(210)), AttentionBackend::Flash2);
  EXPECT_EQ(attention_backend(h100, sdpa_on_torch(206)), AttentionBackend::Flash2);
  // Ampere is not sm90/sm100: flash whatever the release.
  EXPECT_EQ(attention_backend(hw::find_gpu("A100-80GB"), sdpa_on_torch(211)), AttentionBackend::Flash2);
  // Forced kernels win over SDPA's choice.
  TrainingSpec fa2 = sdpa_on_torch(211);
  fa2.flash_attention_2 = true;
  EXPECT_EQ(attention_backend(h100, fa2), AttentionBackend::Flash2);
  TrainingSpec fa3 = sdpa_on_torch(211);
  fa3.flash_attention_3 = true;
  EXPECT_EQ(attention_backend(h100, fa3), AttentionBackend::Flash3);
  TrainingSpec eager = sdpa_on_torch(211);
  eager.attention = Attention::Eager;
  EXPECT_EQ(attention_backend(h100, eager), AttentionBackend::Eager);
  // zeroplan's own executor runs its own kernel, priced on FlashAttention-2's curve.
  TrainingSpec engine = sdpa_on_torch(211);
  engine.implementation = Implementation::ZeroplanEngine;
  EXPECT_EQ(attention_backend(h100, engine), AttentionBackend::Flash2);
  // A model whose HF class has no SDPA path runs eager attention.
  EXPECT_EQ(attention_backend(h100, sdpa_on_torch(211), /*sdpa_supported=*/false), AttentionBackend::Eager);
}

TEST(SdpaBackend, CudnnRatesAreTheH100Measurement) {
  const hw::GpuProfile h100 = hw::find_gpu("H100");
  const double peak = 989.5;  // H100 SXM dense BF16 TFLOP/s (the curve's peak_tflops)
  const nlohmann::json m = read_json("docs/validation/2026-11-26-h100/call1/attention.json");
  int checked = 0;
  for (const auto& r : m.at("rows")) {
    if (r.at("backend") != "cudnn" || r.at("head_dim").get<int>() != 128) continue;
    const int64_t seq = r.at("seq").get<int64_t>();
    const bool causal = r.at("causal").get<bool>();
    // The data file rounds each rate to 1 TFLOP/s.
    EXPECT_NEAR(attention_efficiency(h100, seq, causal, false, AttentionBackend::Cudnn) * peak,
                r.at("fwd_tflops").get<double>(), 0.51)
        << "forward seq " << seq << " causal " << causal;
    EXPECT_NEAR(attention_efficiency(h100, seq, causal, true, AttentionBackend::Cudnn) * peak,
                r.at("bwd_tflops").get<double>(), 0.51)
        << "backward seq " << seq << " causal " << causal;
    ++checked;
  }
  EXPECT_EQ(checked, 16);  // 8 lengths (512 .. 64k) x causal / not
}

TEST(SdpaBackend, TheCliSaysWhichKernelAndTheTorchReleaseMovesTheStep) {
  auto plan = [](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        "--model",   "7b",   "--gpus",          "1xH100", "--stage",  "0",    "--micro-batch", "1",
        "--seq-len", "4096", "--checkpointing", "full",   "--method", "lora", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = zeroplan::testing::run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out).at("recommendation");
  };
  const nlohmann::json now = plan({});
  const nlohmann::json before = plan({"--torch-version", "2.10"});
  EXPECT_EQ(now.at("kernels").at("attention_backend"), "cudnn");
  EXPECT_EQ(now.at("torch_version"), "2.11");
  EXPECT_EQ(before.at("kernels").at("attention_backend"), "flash2");
  // cuDNN is 1.6-2x the flash rate from 2k on (the two measurements above), so the step is shorter.
  EXPECT_LT(now.at("time").at("step_s").get<double>(), before.at("time").at("step_s").get<double>());
  const auto text =
      zeroplan::testing::run_cli({"--model", "7b", "--gpus", "1xH100", "--torch-version", "2.10"});
  EXPECT_NE(text.out.find("PyTorch 2.10, attention sdpa -> FlashAttention-2"), std::string::npos) << text.out;
  zeroplan::testing::expect_cli_user_error({"--model", "7b", "--gpus", "1xH100", "--torch-version", "two"},
                                           "--torch-version");
}

}  // namespace
}  // namespace zeroplan::planner
