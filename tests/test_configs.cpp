// configs/: the DeepSpeed key table and validator, the ds_config emitter, reading a config back
// (HF "auto", DeepSpeed batch arithmetic, code defaults, traps) and writing files atomically.
// Expected values come from DeepSpeed's source (cited per test; the key tables are generated from the
// installed DeepSpeed releases by scripts/ds_keys_dump.py), pydantic's coercions as recorded against
// DeepSpeed 0.19.8 and 0.14.5 on 2026-11-24 (configs/ds_keys.h), the HF Trainer's fill rules
// (transformers/integrations/deepspeed.py) and hand arithmetic shown in comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.h"
#include "configs/check.h"
#include "configs/ds_keys.h"
#include "configs/emit.h"
#include "hwprofiles/cluster.h"
#include "models/model_spec.h"

namespace zeroplan::configs {
namespace {

using nlohmann::json;
using planner::Offload;
using planner::Precision;
using ::testing::HasSubstr;

planner::Workload workload(const std::string& model, const std::string& gpus) {
  planner::Workload w;
  w.model = models::load_model(model);
  w.cluster = hw::parse_cluster(gpus);
  return w;
}

planner::Plan plan(int stage, Offload opt = Offload::None, Offload param = Offload::None,
                   Precision prec = Precision::BF16) {
  planner::Plan p;
  p.zero = planner::ZeroConfig::deepspeed_defaults(stage);
  p.zero.offload_optimizer = opt;
  p.zero.offload_param = param;
  p.zero.micro_batch = 2;
  p.zero.grad_accum = 8;
  p.zero.checkpointing = planner::Checkpointing::Full;
  p.precision = prec;
  p.seq_len = 2048;
  p.global_batch = 2 * 8 * 4;
  return p;
}

CheckOptions ds_options(const std::string& version) {
  CheckOptions o;
  o.deepspeed_version = version;
  o.runner = Runner::DeepSpeed;
  return o;
}

const Issue* find_issue(const std::vector<Issue>& issues, const std::string& path) {
  for (const auto& i : issues)
    if (i.path == path) return &i;
  return nullptr;
}

std::string dump_issues(const std::vector<Issue>& issues) {
  std::string s;
  for (const auto& i : issues) s += format_issue(i) + "\n";
  return s;
}

// ---------------------------------------------------------------- key table

TEST(DeepSpeedKeys, TableNamesItsVersionAndCodeDefaults) {
  // The newest table is the default; every version people run has one.
  EXPECT_EQ(deepspeed_keys_version(), "0.19.8");
  EXPECT_EQ(deepspeed_versions(),
            (std::vector<std::string>{"0.14.5", "0.15.4", "0.16.9", "0.17.6", "0.18.9", "0.19.8"}));
  EXPECT_EQ(resolve_deepspeed_version("0.16"), "0.16.9");
  EXPECT_EQ(resolve_deepspeed_version("0.16.2"), "0.16.9");
  EXPECT_THROW(resolve_deepspeed_version("0.9"), UserError);
  // runtime/zero/offload_config.py: pin_memory default False up to 0.17, True from 0.18.
  EXPECT_FALSE(key_default("zero_optimization.offload_optimizer.pin_memory", "0.16.9")->get<bool>());
  EXPECT_TRUE(key_default("zero_optimization.offload_optimizer.pin_memory", "0.19.8")->get<bool>());
  // reduce_bucket_size: Field(ge=0) in 0.14, Field(gt=0) in 0.19 (runtime/zero/config.py).
  EXPECT_EQ((*key_schema("zero_optimization.reduce_bucket_size", "0.14.5"))["ge"], 0);
  EXPECT_EQ((*key_schema("zero_optimization.reduce_bucket_size", "0.19.8"))["gt"], 0);
  // leaf_module is a 0.19 key (the config-file way to mark MoE blocks as ZeRO-3 leaves).
  EXPECT_NE(key_schema("zero_optimization.leaf_module", "0.19.8"), nullptr);
  EXPECT_EQ(key_schema("zero_optimization.leaf_module", "0.16.9"), nullptr);
  // runtime/zero/config.py v0.16.9: Field(pp_int(5e7), alias="stage3_prefetch_bucket_size") -- the
  // docs' 5e8 is not what the code does.
  EXPECT_EQ(key_default("zero_optimization.stage3_prefetch_bucket_size")->get<int64_t>(), 50'000'000);
  EXPECT_EQ(key_default("zero_optimization.reduce_bucket_size")->get<int64_t>(), 500'000'000);
  EXPECT_EQ(key_default("zero_optimization.offload_param.buffer_size")->get<int64_t>(), 100'000'000);
  // precision_config.py DeepSpeedFP16Config.initial_scale_power = 16 (0.19.8).
  EXPECT_EQ(key_default("fp16.initial_scale_power")->get<int>(), 16);
  // The pydantic field name is accepted beside the alias (populate_by_name=True).
  EXPECT_EQ(key_schema("zero_optimization.prefetch_bucket_size"),
            key_schema("zero_optimization.stage3_prefetch_bucket_size"));
  EXPECT_EQ(key_schema("zero_optimization.no_such_key"), nullptr);
}

TEST(DeepSpeedKeys, TableAgreesWithPlannerZeroConfigDefaults) {
  // Two transcriptions of runtime/zero/config.py must agree.
  const auto z = planner::ZeroConfig::deepspeed_defaults(2);
  EXPECT_EQ(key_default("zero_optimization.reduce_bucket_size")->get<int64_t>(), z.reduce_bucket_size);
  EXPECT_EQ(key_default("zero_optimization.allgather_bucket_size")->get<int64_t>(), z.allgather_bucket_size);
  EXPECT_EQ(key_default("zero_optimization.stage3_prefetch_bucket_size")->get<int64_t>(),
            z.prefetch_bucket_size);
  EXPECT_EQ(key_default("zero_optimization.stage3_param_persistence_threshold")->get<int64_t>(),
            z.param_persistence_threshold);
  EXPECT_EQ(key_default("zero_optimization.stage3_max_live_parameters")->get<int64_t>(),
            z.max_live_parameters);
  EXPECT_EQ(key_default("zero_optimization.stage3_max_reuse_distance")->get<int64_t>(), z.max_reuse_distance);
  EXPECT_EQ(key_default("zero_optimization.sub_group_size")->get<int64_t>(), z.sub_group_size);
  EXPECT_EQ(key_default("zero_optimization.contiguous_gradients")->get<bool>(), z.contiguous_gradients);
  EXPECT_EQ(key_default("zero_optimization.reduce_scatter")->get<bool>(), z.reduce_scatter);
}

TEST(DeepSpeedKeys, TableIsSelfConsistent) {
  // Every node has a type or is an alias of an existing sibling; enumerations match their type;
  // defaults have the node's type.
  const auto paths = valid_key_paths();
  EXPECT_GT(paths.size(), 100u);
  for (const auto& p : paths) {
    const json* s = key_schema(p);
    ASSERT_NE(s, nullptr) << p;
    ASSERT_TRUE(s->contains("type")) << p;
    const std::string t =
        (*s)["type"].is_array() ? (*s)["type"][0].get<std::string>() : (*s)["type"].get<std::string>();
    const auto check = [&](const json& v) {
      bool ok = true;
      if (v.is_null()) return;  // a None default
      if (t == "int") ok = v.is_number_integer();
      if (t == "number") ok = v.is_number();
      if (t == "bool") ok = v.is_boolean();
      if (t == "string") ok = v.is_string();
      EXPECT_TRUE(ok) << p << " " << v;
    };
    if (s->contains("default")) check((*s)["default"]);
    if (s->contains("one_of")) {
      for (const auto& v : (*s)["one_of"]) check(v);
    }
    // An object that rejects unknown keys must list its keys.
    if (t == "object" && s->value("unknown_keys", "opaque") == "rejected") {
      EXPECT_TRUE(s->contains("keys")) << p;
    }
  }
}

TEST(DeepSpeedKeys, MisspelledZeroKeyIsAnErrorWithTheNearestKey) {
  const json c = {{"train_micro_batch_size_per_gpu", 1},
                  {"zero_optimization", {{"stage", 2}, {"reduce_bucket_sze", 5e8}}}};
  const auto issues = validate_keys(c);
  const Issue* i = find_issue(issues, "zero_optimization.reduce_bucket_sze");
  ASSERT_NE(i, nullptr) << dump_issues(issues);
  // pydantic extra='forbid' (runtime/config_utils.py DeepSpeedConfigModel): DeepSpeed refuses it.
  EXPECT_EQ(i->severity, Severity::Error);
  EXPECT_THAT(i->suggestion, HasSubstr("zero_optimization.reduce_bucket_size"));
}

TEST(DeepSpeedKeys, MisspelledTopLevelKeyIsSilentlyIgnoredByDeepSpeed) {
  const json c = {{"train_micro_batch_size_per_gpu", 1}, {"gradient_acumulation_steps", 4}};
  const auto issues = validate_keys(c);
  const Issue* i = find_issue(issues, "gradient_acumulation_steps");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(i->severity, Severity::Warning);  // get_scalar_param never looks at it: no error, no effect
  EXPECT_THAT(i->message, HasSubstr("never reads it"));
  EXPECT_THAT(i->suggestion, HasSubstr("gradient_accumulation_steps"));
}

TEST(DeepSpeedKeys, KeyInTheWrongSectionSaysWhereItBelongs) {
  const json c = {{"stage3_max_live_parameters", 1e9}};
  const auto issues = validate_keys(c);
  const Issue* i = find_issue(issues, "stage3_max_live_parameters");
  ASSERT_NE(i, nullptr);
  EXPECT_THAT(i->suggestion, HasSubstr("zero_optimization"));
}

TEST(DeepSpeedKeys, WrongTypesAndRanges) {
  // As DeepSpeed 0.19.8's pydantic models coerce (recorded with DeepSpeedZeroConfig, see ds_keys.h):
  // "true", "yes", "1_000" are accepted, 2500.5 and "5e8" are not, stage 4 is not an enum member,
  // ratio 1.5 fails le=1.
  const json c = {{"bf16", {{"enabled", "true"}}},
                  {"zero_optimization",
                   {{"stage", 4},
                    {"reduce_bucket_size", 2.5e3 + 0.5},
                    {"allgather_bucket_size", 5e8},  // an integral float: accepted
                    {"overlap_comm", "yes"},         // a bool string: accepted
                    {"sub_group_size", "1_000"},     // a Python int string: accepted
                    {"stage3_prefetch_bucket_size", "5e8"},
                    {"offload_optimizer", {{"device", "cpuu"}, {"ratio", 1.5}}}}}};
  const auto issues = validate_keys(c);
  EXPECT_EQ(find_issue(issues, "bf16.enabled"), nullptr) << dump_issues(issues);
  ASSERT_NE(find_issue(issues, "zero_optimization.stage"), nullptr);
  ASSERT_NE(find_issue(issues, "zero_optimization.reduce_bucket_size"), nullptr);
  EXPECT_EQ(find_issue(issues, "zero_optimization.allgather_bucket_size"), nullptr);
  EXPECT_EQ(find_issue(issues, "zero_optimization.overlap_comm"), nullptr);
  EXPECT_EQ(find_issue(issues, "zero_optimization.sub_group_size"), nullptr);
  ASSERT_NE(find_issue(issues, "zero_optimization.stage3_prefetch_bucket_size"), nullptr);
  ASSERT_NE(find_issue(issues, "zero_optimization.offload_optimizer.device"), nullptr);
  EXPECT_THAT(find_issue(issues, "zero_optimization.offload_optimizer.device")->suggestion,
              HasSubstr("\"cpu\""));
  ASSERT_NE(find_issue(issues, "zero_optimization.offload_optimizer.ratio"), nullptr);
  for (const auto& i : issues) EXPECT_EQ(i.severity, Severity::Error) << format_issue(i);
  // reduce_bucket_size 0: refused by 0.19.8 (gt=0), accepted by 0.14.5 (ge=0).
  const json z = {{"zero_optimization", {{"stage", 2}, {"reduce_bucket_size", 0}}}};
  ASSERT_NE(find_issue(validate_keys(z), "zero_optimization.reduce_bucket_size"), nullptr);
  EXPECT_THAT(find_issue(validate_keys(z), "zero_optimization.reduce_bucket_size")->message,
              HasSubstr("greater than 0"));
  EXPECT_EQ(
      find_issue(validate_keys(z, {"0.14.5", Runner::DeepSpeed}), "zero_optimization.reduce_bucket_size"),
      nullptr);
  // pydantic v1 (0.14.5) truncates 2500.5 and refuses "3" for the stage enum; v2 does the opposite.
  const json v = {{"zero_optimization", {{"stage", "3"}, {"reduce_bucket_size", 2.5e3 + 0.5}}}};
  const auto v1 = validate_keys(v, {"0.14.5", Runner::DeepSpeed});
  EXPECT_NE(find_issue(v1, "zero_optimization.stage"), nullptr);
  EXPECT_EQ(find_issue(v1, "zero_optimization.reduce_bucket_size"), nullptr);
  const auto v2 = validate_keys(v);
  EXPECT_EQ(find_issue(v2, "zero_optimization.stage"), nullptr);
  EXPECT_NE(find_issue(v2, "zero_optimization.reduce_bucket_size"), nullptr);
}

TEST(DeepSpeedKeys, CoercionsFollowPydantic) {
  EXPECT_EQ(pydantic_int(json("500"), false), 500);
  EXPECT_EQ(pydantic_int(json(" 500 "), false), 500);
  EXPECT_EQ(pydantic_int(json("1_000"), false), 1000);
  EXPECT_EQ(pydantic_int(json("5.0"), false), 5);
  EXPECT_EQ(pydantic_int(json("5.0"), true), std::nullopt);
  EXPECT_EQ(pydantic_int(json("5e8"), false), std::nullopt);
  EXPECT_EQ(pydantic_int(json(5e8), false), 500'000'000);
  EXPECT_EQ(pydantic_int(json(550.5), false), std::nullopt);
  EXPECT_EQ(pydantic_int(json(550.5), true), 550);
  EXPECT_EQ(pydantic_bool(json("yes")), true);
  EXPECT_EQ(pydantic_bool(json(1)), true);
  EXPECT_EQ(pydantic_bool(json(2)), std::nullopt);
  EXPECT_EQ(pydantic_number(json("1e-3")), 1e-3);
}

TEST(DeepSpeedKeys, AutoWhereNothingFillsIt) {
  const json c = {{"train_batch_size", "auto"},
                  {"steps_per_print", "auto"},
                  {"zero_optimization",
                   {{"stage", 3}, {"stage3_max_live_parameters", "auto"}, {"reduce_bucket_size", "auto"}}}};
  // The HF Trainer fills the batch keys and the three hidden-size keys
  // (transformers integrations/deepspeed.py); accelerate then raises for any "auto" left
  // ("not found in kwargs", recorded by tests/deepspeed_configs/judge.py for adv_auto_in_pydantic_only).
  const auto hf = validate_keys(c, {"", Runner::HF});
  EXPECT_EQ(find_issue(hf, "train_batch_size"), nullptr);
  EXPECT_EQ(find_issue(hf, "zero_optimization.reduce_bucket_size"), nullptr);
  ASSERT_NE(find_issue(hf, "steps_per_print"), nullptr);
  EXPECT_EQ(find_issue(hf, "steps_per_print")->severity, Severity::Error);
  ASSERT_NE(find_issue(hf, "zero_optimization.stage3_max_live_parameters"), nullptr);
  EXPECT_EQ(find_issue(hf, "zero_optimization.stage3_max_live_parameters")->severity, Severity::Error);
  // deepspeed.initialize alone: plain keys keep the string "auto" (error); DeepSpeedConfigModel drops
  // "auto" values (runtime/config_utils.py), so the default applies (warning).
  const auto ds = validate_keys(c, {"", Runner::DeepSpeed});
  ASSERT_NE(find_issue(ds, "train_batch_size"), nullptr);
  EXPECT_EQ(find_issue(ds, "train_batch_size")->severity, Severity::Error);
  ASSERT_NE(find_issue(ds, "zero_optimization.stage3_max_live_parameters"), nullptr);
  EXPECT_EQ(find_issue(ds, "zero_optimization.stage3_max_live_parameters")->severity, Severity::Warning);
}

TEST(DeepSpeedKeys, AutoThatIsTheKeysOwnValue) {
  // DeepSpeed 0.19.8 reads "auto" as a setting here: data_types.keep_in_fp32_modules (runtime/constants.py
  // KEEP_IN_FP32_MODULES_DEFAULT = "auto") and ZenFlowConfig's select_strategy / select_interval /
  // update_interval (runtime/zenflow/zenflow_config.py, default "auto"). Recorded: the zenflow_auto case of
  // tests/deepspeed/fixtures-zenflow ran with them.
  const json c = {{"train_micro_batch_size_per_gpu", 1},
                  {"data_types", {{"keep_in_fp32_modules", "auto"}}},
                  {"zero_optimization",
                   {{"stage", 2},
                    {"offload_optimizer", {{"device", "cpu"}}},
                    {"zenflow", {{"select_strategy", "auto"}, {"update_interval", "auto"}}}}}};
  const auto ds = validate_keys(c, {"", Runner::DeepSpeed});
  EXPECT_TRUE(ds.empty()) << dump_issues(ds);
  // accelerate's deepspeed_config_process still raises for an "auto" it does not fill.
  const auto hf = validate_keys(c, {"", Runner::HF});
  ASSERT_NE(find_issue(hf, "data_types.keep_in_fp32_modules"), nullptr);
  EXPECT_EQ(find_issue(hf, "data_types.keep_in_fp32_modules")->severity, Severity::Error);
  ASSERT_NE(find_issue(hf, "zero_optimization.zenflow.update_interval"), nullptr);
}

TEST(DeepSpeedKeys, DeprecatedOpaqueAndAliasKeys) {
  const json c = {
      {"train_micro_batch_size_per_gpu", 1},
      {"tensorboard", {{"enabled", true}, {"whatever", 1}}},
      {"zero_optimization", {{"stage", 3}, {"cpu_offload", true}, {"prefetch_bucket_size", 1000}}}};
  const auto issues = validate_keys(c);
  // tensorboard is a pydantic TensorBoardConfig (extra='forbid') in 0.19.8: an unknown key is refused.
  ASSERT_EQ(issues.size(), 2u) << dump_issues(issues);
  ASSERT_NE(find_issue(issues, "tensorboard.whatever"), nullptr);
  EXPECT_EQ(find_issue(issues, "tensorboard.whatever")->severity, Severity::Error);
  ASSERT_NE(find_issue(issues, "zero_optimization.cpu_offload"), nullptr);
  EXPECT_EQ(find_issue(issues, "zero_optimization.cpu_offload")->severity, Severity::Warning);
  // The deprecated key and its replacement together: _process_deprecated_field asserts.
  const json both = {{"zero_optimization",
                      {{"stage", 2}, {"cpu_offload", false}, {"offload_optimizer", {{"device", "cpu"}}}}}};
  ASSERT_NE(find_issue(validate_keys(both), "zero_optimization.cpu_offload"), nullptr);
  EXPECT_EQ(find_issue(validate_keys(both), "zero_optimization.cpu_offload")->severity, Severity::Error);
}

// ---------------------------------------------------------------- emit

struct EmitCase {
  int stage;
  Offload opt, param;
  Precision prec;
};

std::vector<EmitCase> all_cases() {
  std::vector<EmitCase> cases;
  for (Precision prec : {Precision::BF16, Precision::FP16, Precision::FP32})
    for (int stage = 0; stage <= 3; ++stage)
      for (Offload opt : {Offload::None, Offload::CPU, Offload::NVMe})
        for (Offload param : {Offload::None, Offload::CPU, Offload::NVMe}) {
          if (stage == 0 && opt != Offload::None) continue;
          if (stage != 3 && param != Offload::None) continue;
          cases.push_back({stage, opt, param, prec});
        }
  return cases;
}

TEST(Emit, EveryStageOffloadPrecisionAndStylePassesTheKeyCheck) {
  const auto w = workload("13b", "4xA40");
  int n = 0;
  for (const auto& c : all_cases())
    for (bool hf_auto : {false, true})
      for (bool with_opt : {false, true}) {
        const json cfg =
            deepspeed_config(w, plan(c.stage, c.opt, c.param, c.prec), ConfigOptions{hf_auto, with_opt});
        const auto issues = validate_keys(cfg, {"", hf_auto ? Runner::HF : Runner::DeepSpeed});
        EXPECT_TRUE(issues.empty()) << cfg.dump(2) << "\n" << dump_issues(issues);
        ++n;
      }
  // 3 precisions x (1 + 3 + 3 + 9) stage/offload combinations x 2 styles x 2 optimizer options.
  EXPECT_EQ(n, 3 * 16 * 4);
}

TEST(Emit, BatchArithmeticAndPrecisionSections) {
  const auto w = workload("13b", "4xA40");
  const json c = deepspeed_config(w, plan(2, Offload::CPU, Offload::None, Precision::FP16), false);
  // 2 x 8 x 4 GPUs = 64 (runtime/config.py _batch_assertion).
  EXPECT_EQ(c["train_batch_size"], 64);
  EXPECT_EQ(c["train_micro_batch_size_per_gpu"], 2);
  EXPECT_EQ(c["gradient_accumulation_steps"], 8);
  EXPECT_TRUE(c["train_batch_size"].is_number_integer());
  // runtime/constants.py FP16_*_DEFAULT: loss_scale 0 (dynamic), 16, 1000, 2, 1.
  EXPECT_EQ(c["fp16"], json({{"enabled", true},
                             {"loss_scale", 0},
                             {"initial_scale_power", 16},
                             {"loss_scale_window", 1000},
                             {"hysteresis", 2},
                             {"min_loss_scale", 1}}));
  EXPECT_FALSE(c.contains("bf16"));
  EXPECT_EQ(c["zero_optimization"]["offload_optimizer"], json({{"device", "cpu"}, {"pin_memory", true}}));
  EXPECT_FALSE(c.contains("optimizer"));
  EXPECT_FALSE(c.contains("scheduler"));
}

TEST(Emit, HfAutoUsesAutoOnlyWhereTheTrainerFillsTheSameValue) {
  const auto w =
      workload("13b", "4xA40");  // hidden 5120: h^2 = 26,214,400; 0.9 h^2 = 23,592,960; 10 h = 51,200
  auto p = plan(3);
  p.zero.reduce_bucket_size = 26'214'400;
  p.zero.prefetch_bucket_size = 23'592'960;
  p.zero.param_persistence_threshold = 200'000;  // tuned: "auto" would turn it into 51,200
  const json c = deepspeed_config(w, p, true);
  EXPECT_EQ(c["train_batch_size"], "auto");
  EXPECT_EQ(c["train_micro_batch_size_per_gpu"], "auto");
  EXPECT_EQ(c["gradient_accumulation_steps"], "auto");
  EXPECT_EQ(c["gradient_clipping"], "auto");
  EXPECT_EQ(c["bf16"]["enabled"], "auto");
  EXPECT_EQ(c["zero_optimization"]["reduce_bucket_size"], "auto");
  EXPECT_EQ(c["zero_optimization"]["stage3_prefetch_bucket_size"], "auto");
  EXPECT_EQ(c["zero_optimization"]["stage3_param_persistence_threshold"], 200'000);
}

TEST(Emit, NvmeSectionsCarryThePlaceholderAndABufferLargeEnough) {
  // Llama-2-7B: the largest tensors are embed_tokens / lm_head, 32000 x 4096 = 131,072,000 elements.
  auto w = workload("7b", "1xA40");
  const json c = deepspeed_config(w, plan(3, Offload::NVMe, Offload::NVMe), false);
  const json& op = c["zero_optimization"]["offload_param"];
  EXPECT_EQ(op["nvme_path"], kNvmePathPlaceholder);
  // One GPU: partition = 131,072,000 > the 1e8 default -> next multiple of 1e7 above: 140,000,000.
  EXPECT_EQ(op["buffer_size"], 140'000'000);
  EXPECT_EQ(c["zero_optimization"]["offload_optimizer"]["nvme_path"], kNvmePathPlaceholder);
  EXPECT_FALSE(emit_warnings(w, plan(3, Offload::NVMe, Offload::NVMe)).empty());
  // Four GPUs: partition 32,768,000 < 1e8, DeepSpeed's default stays.
  w = workload("7b", "4xA40");
  EXPECT_EQ(deepspeed_config(w, plan(3, Offload::None, Offload::NVMe),
                             false)["zero_optimization"]["offload_param"]["buffer_size"],
            100'000'000);
}

TEST(Emit, LaunchCommandsAndSnippets) {
  const auto w1 = workload("13b", "4xA40");
  EXPECT_EQ(launch_command(w1, "ds_config.json"),
            "deepspeed --num_gpus 4 train.py --deepspeed ds_config.json");
  const auto w2 = workload("13b", "2x8xH100");
  EXPECT_EQ(
      launch_command(w2, "out/ds.json"),
      "deepspeed --hostfile out/ds.hostfile --num_nodes 2 --num_gpus 8 train.py --deepspeed out/ds.json");
  EXPECT_EQ(hostfile(w2).find("node1 slots=8\nnode2 slots=8\n") != std::string::npos, true);
  const std::string ta = training_args_snippet(w1, plan(3), "ds_config.json");
  EXPECT_THAT(ta, HasSubstr("per_device_train_batch_size=2,"));
  EXPECT_THAT(ta, HasSubstr("gradient_accumulation_steps=8,"));
  EXPECT_THAT(ta, HasSubstr("bf16=True,"));
  EXPECT_THAT(ta, HasSubstr("gradient_checkpointing=True,"));
  EXPECT_THAT(ta, HasSubstr("deepspeed=\"ds_config.json\","));
  const std::string acc = accelerate_config(w2, plan(3), "ds.json");
  EXPECT_THAT(acc, HasSubstr("distributed_type: DEEPSPEED\n"));
  EXPECT_THAT(acc, HasSubstr("num_machines: 2\n"));
  EXPECT_THAT(acc, HasSubstr("num_processes: 16\n"));
  EXPECT_THAT(acc, HasSubstr("deepspeed_config_file: \"ds.json\"\n"));
  EXPECT_THAT(acc, HasSubstr("zero3_init_flag: true\n"));
}

TEST(Emit, QloraWithZero3WarnsAboutItsRequirements) {
  auto w = workload("13b", "4xA40");
  w.train.method = planner::Method::QLoRA;
  // PEFT v0.10.0 release notes: QLoRA + ZeRO-3 needs bitsandbytes>=0.43.0 and bnb_4bit_quant_storage.
  const auto warnings = emit_warnings(w, plan(3));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("bnb_4bit_quant_storage=torch.bfloat16"));
  EXPECT_THAT(emit_warnings(w, plan(3, Offload::None, Offload::None, Precision::FP16))[0],
              HasSubstr("torch.float16"));
  EXPECT_THAT(training_args_snippet(w, plan(3), "ds.json"), HasSubstr("bitsandbytes>=0.43.0"));
  EXPECT_TRUE(emit_warnings(w, plan(2)).empty());
}

class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "zp_cfg_XXXXXX").string();
    path_ = ::mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& f) const { return (std::filesystem::path(path_) / f).string(); }

 private:
  std::string path_;
};

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(EmitFiles, WritesAllFilesAndRefusesToOverwrite) {
  TempDir d;
  const auto w = workload("13b", "4xA40");
  EmitOptions o{d / "ds_config.json", false, false, false};
  const std::string summary = emit_files(w, plan(2), o);
  EXPECT_THAT(summary, HasSubstr("deepspeed --num_gpus 4"));
  for (const char* f :
       {"ds_config.json", "ds_config.launch.sh", "ds_config.training_args.py", "ds_config.accelerate.yaml"})
    EXPECT_TRUE(std::filesystem::exists(d / f)) << f;
  EXPECT_FALSE(std::filesystem::exists(d / "ds_config.hostfile"));  // one node
  EXPECT_EQ(json::parse(slurp(d / "ds_config.json")), deepspeed_config(w, plan(2), false));

  // Second time without --force: refused, nothing changed.
  const std::string before = slurp(d / "ds_config.json");
  EXPECT_THROW(emit_files(w, plan(3), o), UserError);
  EXPECT_EQ(slurp(d / "ds_config.json"), before);
  o.force = true;
  emit_files(w, plan(3), o);
  EXPECT_EQ(json::parse(slurp(d / "ds_config.json"))["zero_optimization"]["stage"], 3);
}

TEST(EmitFiles, ChecksEveryTargetBeforeWritingAny) {
  TempDir d;
  const auto w = workload("13b", "4xA40");
  { std::ofstream(d / "ds_config.accelerate.yaml") << "mine\n"; }
  EXPECT_THROW(emit_files(w, plan(2), EmitOptions{d / "ds_config.json", false, false, false}), UserError);
  EXPECT_FALSE(std::filesystem::exists(d / "ds_config.json"));
  EXPECT_FALSE(std::filesystem::exists(d / "ds_config.launch.sh"));
  EXPECT_EQ(slurp(d / "ds_config.accelerate.yaml"), "mine\n");
  // A directory in the way is refused before anything is written, even with force.
  std::filesystem::create_directory(d / "x.launch.sh");
  EXPECT_THROW(emit_files(w, plan(2), EmitOptions{d / "x.json", false, true, false}), UserError);
  EXPECT_FALSE(std::filesystem::exists(d / "x.json"));
  // A folder that does not exist.
  EXPECT_THROW(emit_files(w, plan(2), EmitOptions{d / "nope/ds.json", false, false, false}), UserError);
  // No temporary files left behind.
  for (const auto& e : std::filesystem::directory_iterator(d / ""))
    EXPECT_EQ(e.path().filename().string().find(".zeroplan-"), std::string::npos) << e.path();
}

TEST(EmitFiles, MultiNodeWritesAHostfile) {
  TempDir d;
  const auto w = workload("13b", "2x8xH100");
  emit_files(w, plan(3), EmitOptions{d / "ds.json", false, false, false});
  EXPECT_EQ(slurp(d / "ds.hostfile").find("node2 slots=8") != std::string::npos, true);
  EXPECT_THAT(slurp(d / "ds.launch.sh"), HasSubstr("--hostfile"));
}

// ---------------------------------------------------------------- read back (check)

// Compares the knobs DeepSpeed reads at the plan's stage (stage 0: none of the ZeRO knobs; stage 1/2:
// not the stage-3 ones; stage 3: not allgather_bucket_size / reduce_scatter, which stage3.py ignores).
bool same_zero(const planner::ZeroConfig& a, const planner::ZeroConfig& b) {
  bool same = a.stage == b.stage && a.offload_optimizer == b.offload_optimizer &&
              a.offload_param == b.offload_param && a.micro_batch == b.micro_batch &&
              a.grad_accum == b.grad_accum && a.checkpointing == b.checkpointing;
  if (a.stage >= 1)
    same = same && a.reduce_bucket_size == b.reduce_bucket_size && a.overlap_comm == b.overlap_comm &&
           a.contiguous_gradients == b.contiguous_gradients;
  if (a.stage == 1 || a.stage == 2)
    same = same && a.allgather_bucket_size == b.allgather_bucket_size && a.reduce_scatter == b.reduce_scatter;
  if (a.stage == 3)
    same = same && a.prefetch_bucket_size == b.prefetch_bucket_size &&
           a.param_persistence_threshold == b.param_persistence_threshold &&
           a.max_live_parameters == b.max_live_parameters && a.max_reuse_distance == b.max_reuse_distance &&
           a.sub_group_size == b.sub_group_size;
  if (a.offload_optimizer != Offload::None || a.offload_param != Offload::None)
    same = same && a.pin_memory == b.pin_memory;
  return same;
}

// Every knob away from DeepSpeed's default, so a knob the emitter forgets cannot read back equal.
void tune_all_knobs(planner::ZeroConfig& z) {
  z.reduce_bucket_size = 123'000'000;
  z.allgather_bucket_size = 234'000'000;
  z.overlap_comm = !z.overlap_comm;
  z.contiguous_gradients = false;
  z.reduce_scatter = false;
  z.prefetch_bucket_size = 34'500'000;
  z.param_persistence_threshold = 456'789;
  z.max_live_parameters = 567'000'000;
  z.max_reuse_distance = 678'000'000;
  z.sub_group_size = 789'000'000;
}

TEST(ReadConfig, EveryEmittedConfigReadsBackToThePlan) {
  auto w = workload("13b", "4xA40");
  // The HF Trainer fills "auto" from TrainingArguments; the flags stand for them.
  w.train.micro_batch = 2;
  w.train.grad_accum = 8;
  w.train.checkpointing = planner::Checkpointing::Full;
  const double h = 5120;
  for (const auto& c : all_cases())
    for (bool hf_auto : {false, true}) {
      auto p = plan(c.stage, c.opt, c.param, c.prec);
      tune_all_knobs(p.zero);
      if (c.opt != Offload::None || c.param != Offload::None) p.zero.pin_memory = false;
      if (c.stage == 3 && hf_auto) {  // exercise the Trainer's fill rule too
        p.zero.reduce_bucket_size = static_cast<int64_t>(h * h);
        p.zero.prefetch_bucket_size = static_cast<int64_t>(0.9 * h * h);
      }
      w.train.precision = c.prec;
      json cfg = deepspeed_config(w, p, hf_auto);
      for (const char* nvme : {"offload_optimizer", "offload_param"})  // the user fills the placeholder
        if (cfg["zero_optimization"].contains(nvme) && cfg["zero_optimization"][nvme]["device"] == "nvme")
          cfg["zero_optimization"][nvme]["nvme_path"] = "/local_nvme";
      const ReadConfig r = read_deepspeed_config(cfg, w);
      EXPECT_TRUE(same_zero(r.zero, p.zero)) << cfg.dump(2);
      EXPECT_EQ(r.precision, c.prec);
      EXPECT_EQ(r.train_batch_size, 64);
      for (const auto& i : r.issues) {
        // The only warning: the deliberately unpinned offload (pageable copies).
        if (i.path.ends_with("pin_memory")) continue;
        EXPECT_EQ(i.severity, Severity::Info) << cfg.dump(2) << format_issue(i);
      }
    }
}

TEST(ReadConfig, HfAutoResolution) {
  auto w = workload("13b", "4xA40");
  w.train.micro_batch = 4;
  w.train.grad_accum = 2;
  const json c = {{"train_batch_size", "auto"},
                  {"train_micro_batch_size_per_gpu", "auto"},
                  {"gradient_accumulation_steps", "auto"},
                  {"bf16", {{"enabled", "auto"}}},
                  {"zero_optimization",
                   {{"stage", 3},
                    {"reduce_bucket_size", "auto"},
                    {"stage3_prefetch_bucket_size", "auto"},
                    {"stage3_param_persistence_threshold", "auto"}}}};
  const ReadConfig r = read_deepspeed_config(c, w);
  EXPECT_EQ(r.train_batch_size, 4 * 2 * 4);
  EXPECT_EQ(r.zero.micro_batch, 4);
  EXPECT_EQ(r.zero.grad_accum, 2);
  EXPECT_EQ(r.precision, Precision::BF16);  // --precision default bf16 -> TrainingArguments(bf16=True)
  // hidden 5120: h^2 = 26,214,400; 0.9 h^2 = 23,592,960 (integral); 10 h = 51,200.
  EXPECT_EQ(r.zero.reduce_bucket_size, 26'214'400);
  EXPECT_EQ(r.zero.prefetch_bucket_size, 23'592'960);
  EXPECT_EQ(r.zero.param_persistence_threshold, 51'200);
  EXPECT_TRUE(r.zero.overlap_comm);  // stage 3 default (overlap_comm_valid)
  EXPECT_EQ(r.resolved["train_batch_size"], 32);
  EXPECT_EQ(r.resolved["zero_optimization"]["stage3_param_persistence_threshold"], 51'200);
  EXPECT_FALSE(has_errors(r.issues)) << dump_issues(r.issues);
}

TEST(ReadConfig, FractionalPrefetchFillIsFlagged) {
  // Llama-2-7B: hidden 4096, 0.9 x 4096^2 = 15,099,494.4 -> DeepSpeed #6525 with unrounded fills.
  auto w = workload("7b", "4xA40");
  const json c = {{"train_micro_batch_size_per_gpu", 1},
                  {"zero_optimization", {{"stage", 3}, {"stage3_prefetch_bucket_size", "auto"}}}};
  const ReadConfig r = read_deepspeed_config(c, w);
  EXPECT_EQ(r.zero.prefetch_bucket_size, 15'099'494);
  const Issue* i = find_issue(r.issues, "zero_optimization.stage3_prefetch_bucket_size");
  ASSERT_NE(i, nullptr);
  EXPECT_THAT(i->message, HasSubstr("6525"));
  // Below stage 3 the Trainer does not fill it and DeepSpeed drops "auto": the code default 5e7.
  const json c2 = {{"train_micro_batch_size_per_gpu", 1},
                   {"zero_optimization", {{"stage", 2}, {"stage3_prefetch_bucket_size", "auto"}}}};
  EXPECT_EQ(read_deepspeed_config(c2, w).zero.prefetch_bucket_size, 50'000'000);
}

TEST(ReadConfig, AutoWithoutFlagsUsesTrainingArgumentsDefaults) {
  const auto w = workload("13b", "4xA40");
  const json c = {{"train_batch_size", "auto"},
                  {"train_micro_batch_size_per_gpu", "auto"},
                  {"gradient_accumulation_steps", "auto"}};
  const ReadConfig r = read_deepspeed_config(c, w);
  EXPECT_EQ(r.zero.micro_batch, 8);  // TrainingArguments.per_device_train_batch_size default
  EXPECT_EQ(r.zero.grad_accum, 1);
  EXPECT_EQ(r.train_batch_size, 32);
  EXPECT_NE(find_issue(r.issues, "train_micro_batch_size_per_gpu"), nullptr);
}

TEST(ReadConfig, FlagThatDisagreesWithTheFileIsAWarningAndTheFileWins) {
  auto w = workload("13b", "4xA40");
  w.train.micro_batch = 4;
  const ReadConfig r =
      read_deepspeed_config({{"train_micro_batch_size_per_gpu", 2}, {"gradient_accumulation_steps", 1}}, w);
  EXPECT_EQ(r.zero.micro_batch, 2);  // DeepSpeed alone reads the file
  const Issue* i = find_issue(r.issues, "train_micro_batch_size_per_gpu");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(i->severity, Severity::Warning);  // the HF Trainer would refuse the mismatch
  EXPECT_THAT(i->message, HasSubstr("--micro-batch"));
}

TEST(ReadConfig, BatchArithmeticLikeDeepSpeed) {
  const auto w = workload("13b", "4xA40");
  {  // 100 != 2 x 8 x 4 = 64
    const ReadConfig r = read_deepspeed_config({{"train_batch_size", 100},
                                                {"train_micro_batch_size_per_gpu", 2},
                                                {"gradient_accumulation_steps", 8}},
                                               w);
    const Issue* i = find_issue(r.issues, "train_batch_size");
    ASSERT_NE(i, nullptr);
    EXPECT_EQ(i->severity, Severity::Error);
    EXPECT_THAT(i->message, HasSubstr("64"));
  }
  {  // train_batch_size alone: accumulation 1, micro = 64 / 4 = 16 (_set_batch_related_parameters)
    const ReadConfig r = read_deepspeed_config({{"train_batch_size", 64}}, w);
    EXPECT_EQ(r.zero.micro_batch, 16);
    EXPECT_EQ(r.zero.grad_accum, 1);
    EXPECT_FALSE(has_errors(r.issues));
  }
  {  // train_batch_size and micro: accumulation = 64 / 2 / 4 = 8
    const ReadConfig r =
        read_deepspeed_config({{"train_batch_size", 64}, {"train_micro_batch_size_per_gpu", 2}}, w);
    EXPECT_EQ(r.zero.grad_accum, 8);
  }
  {  // 6 / 4 GPUs -> micro 1 by integer division, then 6 != 1 x 1 x 4
    const ReadConfig r = read_deepspeed_config({{"train_batch_size", 6}}, w);
    EXPECT_TRUE(has_errors(r.issues));
  }
  {  // neither train_batch_size nor micro
    const ReadConfig r = read_deepspeed_config({{"gradient_accumulation_steps", 4}}, w);
    EXPECT_TRUE(has_errors(r.issues));
  }
}

TEST(ReadConfig, CodeDefaultsWhereKeysAreAbsent) {
  const auto w = workload("13b", "4xA40");
  const ReadConfig r = read_deepspeed_config(
      {{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", {{"stage", 3}}}}, w);
  EXPECT_EQ(r.zero.prefetch_bucket_size, 50'000'000);  // code default, not the docs' 5e8
  EXPECT_EQ(r.zero.param_persistence_threshold, 100'000);
  EXPECT_EQ(r.zero.reduce_bucket_size, 500'000'000);
  EXPECT_TRUE(r.zero.overlap_comm);
  EXPECT_EQ(r.precision, Precision::FP32);  // neither fp16 nor bf16 enabled
  const ReadConfig r2 = read_deepspeed_config(
      {{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", {{"stage", 2}}}}, w);
  EXPECT_FALSE(r2.zero.overlap_comm);  // None -> False below stage 3
  const ReadConfig r0 = read_deepspeed_config({{"train_micro_batch_size_per_gpu", 1}}, w);
  EXPECT_EQ(r0.zero.stage, 0);
}

TEST(ReadConfig, Traps) {
  const auto w = workload("13b", "4xA40");
  const json base = {{"train_micro_batch_size_per_gpu", 1}, {"bf16", {{"enabled", true}}}};
  const auto with = [&](json extra) {
    json c = base;
    c.update(extra);
    return read_deepspeed_config(c, w);
  };
  {
    const auto r = with({{"fp16", {{"enabled", true}}}});
    ASSERT_NE(find_issue(r.issues, "fp16.enabled"), nullptr);
    EXPECT_EQ(find_issue(r.issues, "fp16.enabled")->severity, Severity::Error);
  }
  {  // offload_param below stage 3: ignored by DeepSpeed
    const auto r = with({{"zero_optimization", {{"stage", 2}, {"offload_param", {{"device", "cpu"}}}}}});
    EXPECT_NE(find_issue(r.issues, "zero_optimization.offload_param"), nullptr);
    EXPECT_EQ(r.zero.offload_param, Offload::None);
  }
  {  // NVMe without a path, and with zeroplan's placeholder
    const auto r =
        with({{"zero_optimization",
               {{"stage", 3}, {"offload_optimizer", {{"device", "nvme"}, {"pin_memory", true}}}}}});
    ASSERT_NE(find_issue(r.issues, "zero_optimization.offload_optimizer.nvme_path"), nullptr);
    EXPECT_EQ(find_issue(r.issues, "zero_optimization.offload_optimizer.nvme_path")->severity,
              Severity::Error);
    const auto r2 =
        with({{"zero_optimization",
               {{"stage", 3},
                {"offload_param",
                 {{"device", "nvme"}, {"nvme_path", kNvmePathPlaceholder}, {"pin_memory", true}}}}}});
    EXPECT_NE(find_issue(r2.issues, "zero_optimization.offload_param.nvme_path"), nullptr);
  }
  {  // offload without pinned memory: DeepSpeed 0.16.9's default pin_memory is False, 0.19.8's True
    const json c = {{"train_micro_batch_size_per_gpu", 2},
                    {"zero_optimization", {{"stage", 2}, {"offload_optimizer", {{"device", "cpu"}}}}}};
    const auto r = read_deepspeed_config(c, w, ds_options("0.16.9"));
    EXPECT_FALSE(r.zero.pin_memory);
    EXPECT_NE(find_issue(r.issues, "zero_optimization.offload_optimizer.pin_memory"), nullptr);
    const auto r2 = read_deepspeed_config(c, w, ds_options("0.19.8"));
    EXPECT_TRUE(r2.zero.pin_memory);
    EXPECT_EQ(find_issue(r2.issues, "zero_optimization.offload_optimizer.pin_memory"), nullptr);
  }
  {  // overlap_comm with the 5e8 defaults: 4.5 x 2 B x 1e9 = 9 GB, 17% of an A40's 51.5 GB
    const auto r = with({{"zero_optimization", {{"stage", 2}, {"overlap_comm", true}}}});
    EXPECT_NE(find_issue(r.issues, "zero_optimization.overlap_comm"), nullptr);
    // 2e8 buckets: 3.6 GB, 7% -> quiet
    const auto r2 = with({{"zero_optimization",
                           {{"stage", 2},
                            {"overlap_comm", true},
                            {"reduce_bucket_size", 2e8},
                            {"allgather_bucket_size", 2e8}}}});
    EXPECT_EQ(find_issue(r2.issues, "zero_optimization.overlap_comm"), nullptr);
  }
  {  // persistence threshold 0: Llama-2-13B's 40 x 2 layer norms + the final norm (5120 elements each)
     // are all gathered one by one: 81 tensors.
    const auto r = with({{"zero_optimization", {{"stage", 3}, {"stage3_param_persistence_threshold", 0}}}});
    const Issue* i = find_issue(r.issues, "zero_optimization.stage3_param_persistence_threshold");
    ASSERT_NE(i, nullptr);
    EXPECT_THAT(i->message, HasSubstr(" 81 small tensors"));
    // The default 1e5 keeps them whole: quiet.
    const auto r2 = with({{"zero_optimization", {{"stage", 3}}}});
    EXPECT_EQ(find_issue(r2.issues, "zero_optimization.stage3_param_persistence_threshold"), nullptr);
  }
  {  // optimizer offload with stage 0, partial offload below stage 3
    const auto r = with({{"zero_optimization", {{"stage", 0}, {"offload_optimizer", {{"device", "cpu"}}}}}});
    EXPECT_EQ(r.zero.offload_optimizer, Offload::None);
    const auto r2 = with(
        {{"zero_optimization", {{"stage", 2}, {"offload_optimizer", {{"device", "cpu"}, {"ratio", 0.5}}}}}});
    EXPECT_TRUE(has_errors(r2.issues));
  }
  {  // deprecated cpu_offload: true means optimizer offload to CPU
    const auto r = with({{"zero_optimization", {{"stage", 2}, {"cpu_offload", true}}}});
    EXPECT_EQ(r.zero.offload_optimizer, Offload::CPU);
  }
}

TEST(ReadConfig, AbsurdNumbersAreUserErrorsAndWeirdShapesNeverCrash) {
  const auto w = workload("13b", "4xA40");
  EXPECT_THROW(read_deepspeed_config({{"train_micro_batch_size_per_gpu", 1000000}}, w), UserError);
  EXPECT_THROW(read_deepspeed_config({{"train_batch_size", 4e12}}, w), UserError);
  EXPECT_THROW(read_deepspeed_config({{"train_micro_batch_size_per_gpu", 1},
                                      {"zero_optimization", {{"stage", 3}, {"reduce_bucket_size", 4e18}}}},
                                     w),
               UserError);
  // Wrong shapes are reported and replaced by defaults; reading never throws for them.
  for (const char* text :
       {R"({"zero_optimization": "3"})", R"({"zero_optimization": {"stage": "3"}, "train_batch_size": "8"})",
        R"({"zero_optimization": {"stage": 3, "offload_optimizer": 5}, "train_micro_batch_size_per_gpu": 1})",
        R"({"train_micro_batch_size_per_gpu": 1e30})", R"({"train_micro_batch_size_per_gpu": -3})",
        R"({"fp16": true, "bf16": "yes", "optimizer": [], "zero_optimization": true})",
        R"({"train_batch_size": 0})", R"([1, 2])"}) {
    const json c = json::parse(text);
    ReadConfig r;
    EXPECT_NO_THROW(r = read_deepspeed_config(c, w)) << text;
    EXPECT_TRUE(has_errors(r.issues) || !r.usable) << text << "\n" << dump_issues(r.issues);
    EXPECT_GE(r.zero.micro_batch, 1) << text;
    EXPECT_GE(r.zero.grad_accum, 1) << text;
  }
}

TEST(ReadConfig, NvmeParamBufferTooSmallForTheLargestTensor) {
  // Llama-2-7B on one GPU: 131,072,000-element embedding > the 1e8 default buffer.
  const auto w = workload("7b", "1xA40");
  const json c = {{"train_micro_batch_size_per_gpu", 1},
                  {"zero_optimization",
                   {{"stage", 3},
                    {"offload_param", {{"device", "nvme"}, {"nvme_path", "/nvme"}, {"pin_memory", true}}}}}};
  const auto r = read_deepspeed_config(c, w);
  const Issue* i = find_issue(r.issues, "zero_optimization.offload_param.buffer_size");
  ASSERT_NE(i, nullptr);
  EXPECT_THAT(i->message, HasSubstr("131072000"));
}

TEST(Diff, ADroppedSectionIsOneLine) {
  const auto w = workload("13b", "4xA40");
  const auto user = plan(3, Offload::CPU, Offload::CPU);
  const auto rec = plan(3, Offload::CPU, Offload::None);
  const json user_cfg = deepspeed_config(w, user, false);
  const auto changes = diff_plans(w, user_cfg, user, rec);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, "zero_optimization.offload_param");
  EXPECT_EQ(changes[0].from, json({{"device", "cpu"}, {"pin_memory", true}}));
  EXPECT_TRUE(changes[0].to.is_null());
}

TEST(Diff, ReportsKeyByKeyChanges) {
  const auto w = workload("13b", "4xA40");
  auto user = plan(3);
  auto rec = plan(2);
  rec.zero.micro_batch = 4;
  rec.zero.grad_accum = 4;
  rec.zero.checkpointing = planner::Checkpointing::None;
  user.zero.prefetch_bucket_size = 100'000'000;
  const json user_cfg = {{"train_micro_batch_size_per_gpu", 2},
                         {"bf16", {{"enabled", true}}},
                         {"zero_optimization", {{"stage", 3}, {"stage3_prefetch_bucket_size", 1e8}}}};
  const auto changes = diff_plans(w, user_cfg, user, rec);
  const auto has = [&](const std::string& k, const json& from, const json& to) {
    for (const auto& c : changes)
      if (c.key == k) return c.from == from && c.to == to;
    return false;
  };
  EXPECT_TRUE(has("zero_optimization.stage", 3, 2));
  EXPECT_TRUE(has("train_micro_batch_size_per_gpu", 2, 4));
  EXPECT_TRUE(has("gradient_accumulation_steps", 8, 4));
  // Set by the user and meaningless at stage 2: shown as removed.
  EXPECT_TRUE(has("zero_optimization.stage3_prefetch_bucket_size", 1e8, nullptr));
  // Not set by the user (a DeepSpeed default) and irrelevant after the change: not listed.
  for (const auto& c : changes) EXPECT_NE(c.key, "zero_optimization.stage3_max_live_parameters");
  // Not set by the user, changed by the recommendation: shown with the default it replaces.
  for (const auto& c : changes)
    if (c.key == "zero_optimization.allgather_bucket_size") ADD_FAILURE() << "equal default listed";
  for (const auto& c : changes)
    if (c.key == "zero_optimization.overlap_comm") {
      EXPECT_TRUE(c.from_default);  // None -> True at stage 3, False at stage 2 (overlap_comm_valid)
      EXPECT_EQ(c.from, true);
      EXPECT_EQ(c.to, false);
    }
  bool ckpt = false;
  for (const auto& c : changes) ckpt |= c.key.find("gradient_checkpointing") != std::string::npos;
  EXPECT_TRUE(ckpt);
  for (const auto& c : diff_plans(w, user_cfg, user, user)) ADD_FAILURE() << format_change(c);
}

}  // namespace
}  // namespace zeroplan::configs

namespace zeroplan::configs {
namespace {

// activation_checkpointing.{partition_activations, cpu_checkpointing} configure deepspeed.checkpointing,
// which DeepSpeed's engine never sets up from ds_config and transformers' gradient checkpointing never
// calls (torch.utils.checkpoint): check says so as a note, and the plan keeps the checkpoints on the GPU.
TEST(CheckConfig, DeepSpeedActivationCheckpointingKeysAreANoteNotAPlan) {
  planner::Workload w;
  w.model = models::load_model("7b");
  w.cluster = hw::parse_cluster("8xA100-80GB");
  w.train.seq_len = 2048;
  const json plain = {{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", {{"stage", 3}}}};
  EXPECT_EQ(find_issue(read_deepspeed_config(plain, w).issues, "activation_checkpointing.cpu_checkpointing"),
            nullptr);
  json c = plain;
  c["activation_checkpointing"] = {{"partition_activations", true}, {"cpu_checkpointing", true}};
  const ReadConfig r = read_deepspeed_config(c, w);
  const Issue* i = find_issue(r.issues, "activation_checkpointing.cpu_checkpointing");
  ASSERT_NE(i, nullptr) << dump_issues(r.issues);
  EXPECT_EQ(i->severity, Severity::Info);
  EXPECT_THAT(i->message, HasSubstr("torch.utils.checkpoint"));
  EXPECT_FALSE(has_errors(r.issues)) << dump_issues(r.issues);
  // Only partition_activations: named on its own.
  c["activation_checkpointing"] = {{"partition_activations", true}};
  EXPECT_NE(find_issue(read_deepspeed_config(c, w).issues, "activation_checkpointing.partition_activations"),
            nullptr);
}

}  // namespace
}  // namespace zeroplan::configs
