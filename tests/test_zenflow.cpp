// ZenFlow (planner/zenflow.h; issue 28 item 3) against real DeepSpeed 0.19.8 recorded on CPU ranks
// (tests/deepspeed/fixtures-zenflow, run_matrix.py --set zenflow; docs/conformance-zenflow.md): the rules
// DeepSpeed refuses with, the selective AdamW's state bytes, and what `check` says.
//
// Hand count of the selective states, the harness's llama-gqa (hidden 256, intermediate 512, 2 layers,
// q 256x256, k/v 128x256, o 256x256, gate/up 512x256, down 256x512, untied embedding and lm_head 2048x256,
// 5 norms of 256), topk_ratio 0.1: rows x max(1, int(cols x 0.1)): embedding and lm_head 2 x 2048 x 25 =
// 102,400; per layer q 6,400, k 3,200, v 3,200, o 6,400, gate 12,800, up 12,800, down 256 x 51 = 13,056,
// so 57,856, x 2 = 115,712; norms 1,280 whole: 219,392 elements x (bf16 exp_avg + exp_avg_sq) 4 B =
// 877,568, plus 21 fp32 step counters x 4 B = 84: 877,652. At topk 0.05: 49,152 + 2 x 27,904 + 1,280 =
// 106,240 elements: 424,960 + 84 = 425,044.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/json_file.h"
#include "configs/check.h"
#include "hwprofiles/cluster.h"
#include "models/hf_config.h"
#include "models/model_spec.h"
#include "planner/zenflow.h"

namespace zeroplan::planner {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kDir = fs::path(ZEROPLAN_SOURCE_DIR) / "tests/deepspeed/fixtures-zenflow/0.19.8";

json fixture(const std::string& name) {
  // Written by Python's json: a NaN loss is recorded as NaN (llama-gqa_s2_n2_bf16_zenflow_auto).
  return read_json_file((kDir / (name + ".json")).string(), "test data", PythonJsonTokens::Accept);
}

const json& failures() {
  static const json f = read_json_file((kDir.parent_path() / "failures-0.19.8.json").string(), "test data");
  return f;
}

std::string failure(const std::string& name) {
  return failures().at(name).at("error_tail").get<std::string>();
}

models::ModelSpec model_of(const json& fx, const char* name) {
  return models::model_from_hf_json(name, fx["model"]["hf_config"]);
}

// The selective AdamW's own bytes: what the harness reached through it, less the bf16 parameters its
// param_groups reference (the recorded optimizer.bit16_groups).
int64_t selective_state(const json& fx) {
  return fx["buffers"]["optimizer.selective_optimizer"].get<int64_t>() -
         fx["buffers"]["optimizer.bit16_groups"].get<int64_t>();
}

TEST(ZenFlow, SelectiveStatesAsRecorded) {
  const json fx = fixture("llama-gqa_s2_n2_bf16_zenflow");
  const json aut = fixture("llama-gqa_s2_n2_bf16_zenflow_auto");
  ASSERT_EQ(selective_state(fx), 877'652);  // the hand count above
  ASSERT_EQ(selective_state(aut), 425'044);
  const models::ModelSpec m = model_of(fx, "llama-gqa");
  EXPECT_EQ(zenflow_selective_state_bytes(m.runtime_inventory(), 0.1, 2), selective_state(fx));
  EXPECT_EQ(zenflow_selective_state_bytes(m.runtime_inventory(), 0.05, 2), selective_state(aut));
  // Stage 1 and overlap_step hold the same states.
  EXPECT_EQ(selective_state(fixture("llama-gqa_s1_n2_bf16_zenflow")), 877'652);
  EXPECT_EQ(selective_state(fixture("llama-gqa_s2_n2_bf16_zenflow_overlap")), 877'652);
  // offload true: only the 21 step counters stay on the device; exp_avg/exp_avg_sq live on the host.
  EXPECT_EQ(selective_state(fixture("llama-gqa_s2_n2_bf16_zenflow_offload")), 84);
}

TEST(ZenFlow, EngineTakesUpdateIntervalAsAccumulation) {
  // gradient_accumulation_steps 4 with update_interval 2: the measured step (4 micro-steps) ran the CPU
  // optimizer twice (runtime/zenflow/engine.py configure_zenflow).
  const json fx = fixture("llama-gqa_s2_n2_bf16_zenflow_ga4");
  ASSERT_EQ(fx["ds_config"]["gradient_accumulation_steps"], 4);
  int steps = 0;
  for (const auto& c : fx["collectives"])
    if (c["caller"] == "all_gather_into_tensor_dp_groups") ++steps;
  EXPECT_EQ(steps, 2);
}

ZenFlowSettings fixed() {
  ZenFlowSettings z;
  z.select_strategy = "step";
  z.select_interval = 2;
  z.update_interval = 2;
  return z;
}

TEST(ZenFlow, RefusesWhatDeepSpeedRefused) {
  const ZenFlowHost ok{2, true, false};
  EXPECT_EQ(zenflow_refusal(fixed(), ok), "");
  // Each rule quotes DeepSpeed's message as the recorded failure ends with it.
  const auto quotes = [](const std::string& refusal, const std::string& fixture_name) {
    const std::string msg = refusal.substr(refusal.find(": ") + 2);
    return !refusal.empty() && failure(fixture_name).find(msg) != std::string::npos;
  };
  EXPECT_TRUE(quotes(zenflow_refusal(fixed(), {2, false, false}), "llama-gqa_s2_n2_bf16_zenflow_nooffload"));
  ZenFlowSettings s = fixed();
  s.select_interval = 1;
  EXPECT_TRUE(quotes(zenflow_refusal(s, ok), "llama-gqa_s2_n2_bf16_zenflow_select1"));
  s = ZenFlowSettings{};
  s.select_interval = 2;  // "auto" strategy with a number
  EXPECT_TRUE(quotes(zenflow_refusal(s, ok), "llama-gqa_s2_n2_bf16_zenflow_autoint"));
  s = ZenFlowSettings{};
  s.select_strategy = "step";  // select_interval left "auto"
  EXPECT_TRUE(quotes(zenflow_refusal(s, ok), "llama-gqa_s2_n2_bf16_zenflow_stepauto"));
  // offload true needs overlap_comm at stage 1/2 (the recorded offload case sets it and ran).
  s = fixed();
  s.offload = true;
  EXPECT_NE(zenflow_refusal(s, ok), "");
  EXPECT_EQ(zenflow_refusal(s, {2, true, true}), "");
  // Fused 3-D experts: the recorded Mixtral run failed in its first backward.
  EXPECT_NE(failure("mixtral_s2_n2_bf16_zenflow").find("exceeds dimension size"), std::string::npos);
  const json mixtral_cfg = {
      {"model_type", "mixtral"},        {"hidden_size", 256},          {"intermediate_size", 256},
      {"num_hidden_layers", 2},         {"num_attention_heads", 4},    {"num_key_value_heads", 2},
      {"num_local_experts", 4},         {"num_experts_per_tok", 2},    {"vocab_size", 2048},
      {"max_position_embeddings", 256}, {"tie_word_embeddings", false}};
  EXPECT_NE(zenflow_model_refusal(models::model_from_hf_json("mixtral", mixtral_cfg).runtime_inventory()),
            "");
  EXPECT_EQ(zenflow_model_refusal(
                model_of(fixture("llama-gqa_s2_n2_bf16_zenflow"), "llama-gqa").runtime_inventory()),
            "");
}

configs::ReadConfig check(const json& ds, const models::ModelSpec& m) {
  Workload w;
  w.model = m;
  w.cluster = hw::parse_cluster("2xA100");
  configs::CheckOptions o;
  o.runner = configs::Runner::DeepSpeed;
  return configs::read_deepspeed_config(ds, w, o);
}

bool has(const configs::ReadConfig& r, configs::Severity s, const std::string& text) {
  for (const auto& i : r.issues)
    if (i.severity == s && i.message.find(text) != std::string::npos) return true;
  return false;
}

int errors(const configs::ReadConfig& r) {
  int n = 0;
  for (const auto& i : r.issues) n += i.severity == configs::Severity::Error;
  return n;
}

TEST(ZenFlow, CheckAgreesWithWhatDeepSpeedDid) {
  const json fx = fixture("llama-gqa_s2_n2_bf16_zenflow");
  const models::ModelSpec m = model_of(fx, "llama-gqa");
  // Ran: no error; the prediction says ZenFlow is not modelled, with the recorded state bytes.
  for (const char* n : {"llama-gqa_s2_n2_bf16_zenflow", "llama-gqa_s1_n2_bf16_zenflow",
                        "llama-gqa_s2_n2_bf16_zenflow_overlap", "llama-gqa_s2_n2_bf16_zenflow_auto",
                        "llama-gqa_s2_n2_bf16_zenflow_offload", "llama-gqa_s2_n2_bf16_zenflow_ga4"}) {
    const auto r = check(fixture(n)["ds_config"], m);
    EXPECT_EQ(errors(r), 0) << n;
    EXPECT_TRUE(has(r, configs::Severity::Warning, "not modelled")) << n;
  }
  EXPECT_TRUE(has(check(fixture("llama-gqa_s2_n2_bf16_zenflow_ga4")["ds_config"], m),
                  configs::Severity::Warning,
                  "replaces gradient_accumulation_steps (4) with its update_interval (2)"));
  // ZenFlowConfig's "auto" values are its own settings, not placeholders for a runner to fill; but
  // update_interval "auto" trained to a NaN loss.
  const json aut = fixture("llama-gqa_s2_n2_bf16_zenflow_auto");
  ASSERT_TRUE(
      aut["losses"]["measured"][0].is_null());  // NaN in the file (common/json_file.h reads it as null)
  ASSERT_TRUE(fixture("llama-gqa_s2_n2_bf16_zenflow")["losses"]["measured"][0].is_number());
  const auto ra = check(aut["ds_config"], m);
  EXPECT_FALSE(has(ra, configs::Severity::Warning, "not filled in"));
  EXPECT_TRUE(has(ra, configs::Severity::Warning, "the loss is NaN"));
  EXPECT_FALSE(has(check(fx["ds_config"], m), configs::Severity::Warning, "the loss is NaN"));
  // Refused: the recorded runs' configs (each a change of the ran one, as cases.py builds them).
  const auto refused = [&](json zf, bool offload, const std::string& name) {
    json ds = fx["ds_config"];
    ds["zero_optimization"]["zenflow"] = zf;
    if (!offload) ds["zero_optimization"].erase("offload_optimizer");
    const auto r = check(ds, m);
    EXPECT_GE(errors(r), 1) << name;
    EXPECT_TRUE(has(r, configs::Severity::Error, "DeepSpeed 0.19.8 refuses it")) << name;
    EXPECT_FALSE(failure(name).empty()) << name;
  };
  const json zf = fx["ds_config"]["zero_optimization"]["zenflow"];
  refused(zf, false, "llama-gqa_s2_n2_bf16_zenflow_nooffload");
  json s1 = zf;
  s1["select_interval"] = 1;
  refused(s1, true, "llama-gqa_s2_n2_bf16_zenflow_select1");
  refused({{"select_strategy", "auto"}, {"select_interval", 2}}, true,
          "llama-gqa_s2_n2_bf16_zenflow_autoint");
  refused({{"select_strategy", "step"}, {"select_interval", "auto"}}, true,
          "llama-gqa_s2_n2_bf16_zenflow_stepauto");
}

}  // namespace
}  // namespace zeroplan::planner
