// The weight GEMMs the planner's operator table puts in a micro-step (planner/op_model.cpp) against
// the ones DeepSpeed's step really launched: tests/deepspeed/fixtures-gemm-flops/0.19.8/gemm_flops.json,
// recorded by tests/deepspeed/gemm_flops.py (DeepSpeed 0.19.8, torch 2.15, transformers 5.24, peft
// 0.21 on CPU: every aten.mm / aten.addmm of one micro-step, 2*m*n*k FLOPs each, the forward and the
// backward with its checkpoint recompute). The expected values are DeepSpeed's own; nothing here is
// computed by the code under test.
//
// What the fixture pins: under ZeRO-2 a non-reentrant checkpoint (transformers 5's default) stops the
// recompute before the MLP output GEMM (Llama down_proj, OPT fc2, GPT-2 mlp.c_proj); a reentrant one
// and ZeRO-3's zero3_linear_wrap recompute the whole layer; memory_efficient_linear false (read from
// the ds_config) gives the skip back; Gemma-2's post-feed-forward norm and a LoRA-wrapped down_proj
// keep the GEMM; frozen LoRA bases and a frozen head get no weight-gradient GEMM; ZeRO-3 adds linear
// biases in kernels of their own.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/json_file.h"
#include "configs/check.h"
#include "models/hf_config.h"
#include "planner/model_stats.h"
#include "planner/op_model.h"
#include "planner/time_model.h"

namespace zeroplan::planner {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixture =
    fs::path(ZEROPLAN_SOURCE_DIR) / "tests/deepspeed/fixtures-gemm-flops/0.19.8/gemm_flops.json";

// Weight GEMMs only: the attention core (SDPA: one fused op; eager: 4-D bmm) is not an mm in the
// recording, nor a "GEMM"-named operator in the table except "attention ..." rows.
double gemm_flops(const OpTable& t, std::initializer_list<OpPass> passes) {
  double f = 0;
  for (int i = 0; i < t.size; ++i) {
    const OpCost& c = t.ops[static_cast<size_t>(i)];
    const std::string name = c.name;
    if (name.find("GEMM") == std::string::npos || name.find("attention") != std::string::npos) continue;
    for (OpPass p : passes)
      if (c.pass == p) f += c.flops;
  }
  return f;
}

class GemmFlops : public ::testing::TestWithParam<std::string> {};

json case_named(const std::string& name) {
  const json doc = read_json_file(kFixture.string(), "test data");
  for (const json& c : doc["cases"])
    if (c["name"] == name) return c;
  ADD_FAILURE() << "no case " << name << " in " << kFixture;
  return {};
}

TEST_P(GemmFlops, OperatorTableLaunchesWhatDeepSpeedLaunched) {
  const json c = case_named(GetParam());
  ASSERT_FALSE(c.is_null());
  Workload w;
  w.model = models::model_from_hf_json("fixture hf_config", c["hf_config"]);
  w.cluster.nodes = 1;
  w.cluster.gpus_per_node = 1;
  w.cluster.gpu.name = "cpu";
  w.cluster.gpu.memory_bytes = int64_t{1} << 50;
  w.train.runtime = Runtime::Cpu;
  w.train.seq_len = c["seq_len"].get<int64_t>();
  w.train.micro_batch = c["micro_batch"].get<int64_t>();
  w.train.checkpointing = c["gradient_checkpointing"].get<bool>() ? Checkpointing::Full : Checkpointing::None;
  w.train.checkpoint_reentrant = c["use_reentrant"].get<bool>();
  w.train.attention = c["attn_implementation"] == "eager" ? Attention::Eager : Attention::Flash;
  if (!c["lora"].is_null()) {
    w.train.method = Method::LoRA;
    w.train.lora_rank = c["lora"]["r"].get<int64_t>();
    w.train.lora_targets = c["lora"]["target_modules"].get<std::vector<std::string>>();
  }
  const configs::ReadConfig r = configs::read_deepspeed_config(c["ds_config"], w);
  w = configs::workload_for_config(w, r);
  ZeroConfig z = r.zero;
  z.micro_batch = *w.train.micro_batch;
  z.checkpointing = *w.train.checkpointing;
  const ModelStats s = compute_model_stats(w);
  const OpTable t = step_operator_table(w, s.compute, z);
  const json& m = c["measured"];
  EXPECT_DOUBLE_EQ(gemm_flops(t, {OpPass::Forward}), m["forward_gemm_flops"].get<double>()) << GetParam();
  EXPECT_DOUBLE_EQ(gemm_flops(t, {OpPass::Backward, OpPass::Recompute}),
                   m["backward_gemm_flops"].get<double>())
      << GetParam();
  // ZeRO-3's zero3_linear_wrap adds each bias of a [b, s, in] input in an `output += bias` of its own:
  // DeepSpeed's aten.add_ launches in the forward (qwen2's q/k/v biases: 3 per layer at stage 3, none at
  // stage 2, where torch's linear folds them into addmm).
  double bias_adds = 0;
  for (int i = 0; i < t.size; ++i) {
    const OpCost& op = t.ops[static_cast<size_t>(i)];
    if (op.pass == OpPass::Forward && std::string(op.name).find("bias add") != std::string::npos)
      bias_adds += op.kernels;
  }
  EXPECT_DOUBLE_EQ(bias_adds, m["forward_add_inplace_launches"].get<double>()) << GetParam();
}

std::vector<std::string> case_names() {
  std::vector<std::string> out;
  const json doc = read_json_file(kFixture.string(), "test data");  // kept: the loop reads into it
  for (const json& c : doc["cases"]) out.push_back(c["name"]);
  return out;
}

INSTANTIATE_TEST_SUITE_P(DeepSpeed0198, GemmFlops, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace zeroplan::planner
