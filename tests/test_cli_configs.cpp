// `zeroplan check` and `--emit` through the real binary: exit codes (0 fits, 1 does not fit or
// DeepSpeed would refuse it, 2 unreadable input), one-line errors, the --json shape, and emit's
// refusal to overwrite.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using zeroplan::testing::run_cli;
using zeroplan::testing::slurp;

namespace {

using Dir = zeroplan::testing::ScratchDir;

TEST(CliCheck, MalformedMissingAndNonObjectFilesExit2WithOneLine) {
  Dir d;
  for (const auto& p :
       {d.path + "/missing.json", d.file("list.json", "[1, 2]"), d.file("empty.json", ""), d.path}) {
    const auto r = run_cli({"check", p, "--model", "13b", "--gpus", "4xA40"});
    EXPECT_EQ(r.exit_code, 2) << p;
    EXPECT_EQ(r.stderr_lines(), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(CliCheck, SyntaxErrorsNameLineColumnAndShowACaret) {
  Dir d;
  // Line 3, column 36: the parser stops at the second comma. Hand count: 2 spaces + the 33 characters
  // of `"zero_optimization": {"stage": 2,` put the second comma at column 36.
  const auto p =
      d.file("bad.json",
             "{\n  \"train_micro_batch_size_per_gpu\": 1,\n  \"zero_optimization\": {\"stage\": 2,,\n}\n");
  const auto r = run_cli({"check", p, "--model", "13b", "--gpus", "4xA40"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  // Two context lines (the offending line, a caret under column 36), then the one-line error.
  ASSERT_EQ(r.stderr_lines(), 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("  \"zero_optimization\": {\"stage\": 2,,\n"));
  EXPECT_THAT(r.err, HasSubstr("\n" + std::string(2 + 35, ' ') + "^\n"));
  EXPECT_THAT(r.err, HasSubstr("zeroplan: error: DeepSpeed config '" + p +
                               "' is not valid JSON at line 3, column 36"));
  // Cut short: the end of the file is named.
  const auto r2 = run_cli(
      {"check", d.file("short.json", "{\"train_batch_size\": "), "--model", "13b", "--gpus", "4xA40"});
  EXPECT_EQ(r2.exit_code, 2);
  EXPECT_THAT(r2.err, HasSubstr("unexpected end of file"));
}

TEST(CliCheck, TrailingCommasPassForDeepSpeedButNotForTheHfTrainer) {
  Dir d;
  // DeepSpeed reads a config path with hjson; the HF Trainer with json.load (judge records for
  // adv_trailing_comma: accepted via deepspeed, refused via hf).
  const auto p = d.file("tc.json", R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "zero_optimization": {"stage": 2,},})");
  const auto ds = run_cli({"check", p, "--model", "tiny-llama-micro", "--gpus", "1xA100-80GB", "--runner",
                           "deepspeed", "--json"});
  EXPECT_EQ(ds.exit_code, 0) << ds.err << ds.out;
  const auto hf = run_cli(
      {"check", p, "--model", "tiny-llama-micro", "--gpus", "1xA100-80GB", "--runner", "hf", "--json"});
  EXPECT_EQ(hf.exit_code, 1) << hf.err << hf.out;
  EXPECT_EQ(json::parse(hf.out)["verdict"], "refused");
}

TEST(CliCheck, RefusedConfigGetsNoPrediction) {
  Dir d;
  // reduce_bucket_size 0: DeepSpeed 0.19.8's DeepSpeedZeroConfig has Field(gt=0); 0.14.5 had ge=0.
  const auto p = d.file("z.json", R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 2, "reduce_bucket_size": 0}})");
  const auto r = run_cli({"check", p, "--model", "7b", "--gpus", "8xA100-80GB"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("greater than 0"));
  EXPECT_THAT(r.out, HasSubstr("DeepSpeed 0.19.8"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("tokens/s")));
  const auto j = json::parse(run_cli({"check", p, "--model", "7b", "--gpus", "8xA100-80GB", "--json"}).out);
  EXPECT_EQ(j["verdict"], "refused");
  EXPECT_TRUE(j["predicted"].is_null());
  EXPECT_EQ(j["deepspeed_version"], "0.19.8");
  const auto old = run_cli(
      {"check", p, "--model", "7b", "--gpus", "8xA100-80GB", "--deepspeed-version", "0.14", "--json"});
  EXPECT_EQ(json::parse(old.out)["deepspeed_version"], "0.14.5");
  EXPECT_NE(json::parse(old.out)["verdict"], "refused");
  const auto bad =
      run_cli({"check", p, "--model", "7b", "--gpus", "8xA100-80GB", "--deepspeed-version", "0.9"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("0.19.8"));
  const auto nomodel =
      run_cli({"check", d.file("ok.json", "{\"train_micro_batch_size_per_gpu\": 1}"), "--gpus", "4xA40"});
  EXPECT_EQ(nomodel.exit_code, 2);  // no model
  EXPECT_THAT(nomodel.err, HasSubstr("--model"));
}

TEST(CliCheck, OptimizerTypesAsEachReleaseBuildsThem) {
  // DeepSpeed 0.19.8 asserts "OneBitAdam is not a supported DeepSpeed Optimizer" (recorded:
  // tests/deepspeed_configs adv_onebit_adam); 0.18.9's DEEPSPEED_OPTIMIZERS still lists 'onebitadam'
  // (deepspeed/runtime/config.py at tag v0.18.9).
  Dir d;
  const auto cfg = [&](const char* name, const char* type, const char* extra) {
    return d.file(name, std::string(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
        "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}, "optimizer": {"type": ")") +
                            type + R"(", "params": {"lr": 0.001)" + extra + "}}}");
  };
  const auto onebit = cfg("onebit.json", "OneBitAdam", "");
  const auto r = run_cli({"check", onebit, "--model", "7b", "--gpus", "8xA100-80GB", "--json"});
  EXPECT_EQ(json::parse(r.out)["verdict"], "refused");
  EXPECT_THAT(r.out, HasSubstr("OneBitAdam is not a supported DeepSpeed Optimizer"));
  const auto old = run_cli(
      {"check", onebit, "--model", "7b", "--gpus", "8xA100-80GB", "--deepspeed-version", "0.18", "--json"});
  EXPECT_NE(json::parse(old.out)["verdict"], "refused") << old.out;
  // torch.optim class names pass DeepSpeed's getattr(torch.optim, name) check; the planner warns that
  // it prices Adam's states for them.
  const auto sgd = run_cli({"check", cfg("sgd.json", "SGD", ""), "--model", "7b", "--gpus", "8xA100-80GB"});
  EXPECT_THAT(sgd.out, HasSubstr("zeroplan prices Adam's optimizer states"));
  const auto adamw =
      run_cli({"check", cfg("adamw.json", "AdamW", ""), "--model", "7b", "--gpus", "8xA100-80GB"});
  EXPECT_THAT(adamw.out, ::testing::Not(HasSubstr("zeroplan prices Adam's")));
  // max_grad_norm among the optimizer params: engine.py _configure_basic_optimizer raises.
  const auto mgn = run_cli({"check", cfg("mgn.json", "AdamW", R"(, "max_grad_norm": 1.0)"), "--model", "7b",
                            "--gpus", "8xA100-80GB", "--json"});
  EXPECT_EQ(json::parse(mgn.out)["verdict"], "refused");
  EXPECT_THAT(mgn.out, HasSubstr("gradient_clipping"));
}

TEST(CliCheck, UnknownKeysAndWrongTypesAreReportedAndExit1) {
  Dir d;
  const auto p =
      d.file("ds.json", R"({"train_micro_batch_size_per_gpu": "2", "gradient_accumulation_steps": 4,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "overlap_com": true}})");
  const auto r = run_cli({"check", p, "--model", "13b", "--gpus", "4xA40", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json j = json::parse(r.out);
  for (auto k : {"config", "issues", "predicted", "recommended_changes", "fits"})
    EXPECT_TRUE(j.contains(k)) << k;
  bool typo = false, type = false;
  for (const auto& i : j["issues"]) {
    if (i["key"] == "zero_optimization.overlap_com") {
      typo = true;
      EXPECT_EQ(i["severity"], "error");
      EXPECT_THAT(i["suggestion"].get<std::string>(), HasSubstr("zero_optimization.overlap_comm"));
    }
    if (i["key"] == "train_micro_batch_size_per_gpu" && i["severity"] == "error") type = true;
  }
  EXPECT_TRUE(typo) << j["issues"].dump(2);
  EXPECT_TRUE(type) << j["issues"].dump(2);
  EXPECT_TRUE(j["deepspeed_would_reject"].get<bool>());
}

TEST(CliCheck, ConfigThatCannotFitExits1) {
  Dir d;
  // ZeRO-1 with 13B on 48 GB GPUs: 16-bit parameters and gradients alone are 4 x 13.0e9 = 52 GB.
  const auto p = d.file("z1.json", R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 1}})");
  const auto r = run_cli({"check", p, "--model", "13b", "--gpus", "4xA40", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json j = json::parse(r.out);
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_GT(j["predicted"]["memory"]["gpu"]["peak"].get<int64_t>(), 52'000'000'000);
  EXPECT_FALSE(j["recommended_changes"].empty());
  // The text form names the verdict.
  const auto t = run_cli({"check", p, "--model", "13b", "--gpus", "4xA40"});
  EXPECT_EQ(t.exit_code, 1);
  EXPECT_THAT(t.out, HasSubstr("does not fit"));
  EXPECT_THAT(t.out, HasSubstr("zero_optimization.stage: 1 ->"));
}

// check lists what each knob of the user's own config is worth (planner::knob_effects applied to the
// config as DeepSpeed runs it): overlap_comm flipped is always among them, and each entry is a plan
// the planner evaluated (a peak, a step time, a throughput consistent with the step).
TEST(CliCheck, ListsWhatEachKnobIsWorth) {
  Dir d;
  const auto p = d.file("ds.json", R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 2, "overlap_comm": false}})");
  const auto r =
      run_cli({"check", p, "--model", "7b", "--gpus", "4xA40", "--checkpointing", "full", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_TRUE(j["knob_effects"].is_array());
  bool overlap = false;
  double prev_tps = 1e300;
  bool prev_fits = true;
  for (const auto& k : j["knob_effects"]) {
    if (k["change"] == "overlap_comm on") {
      overlap = true;
      // Overlapping the bucket reduction with the backward cannot make the step slower.
      EXPECT_LE(k["step_s"].get<double>(), j["predicted"]["time"]["step_s"].get<double>());
    }
    EXPECT_GT(k["peak_bytes"].get<int64_t>(), 0);
    // tokens/s = global batch tokens / step: 1 x 4 x 4 GPUs x 2048 tokens (--seq-len default) / step_s.
    EXPECT_NEAR(k["tokens_per_s"].get<double>() * k["step_s"].get<double>(), 16.0 * 2048.0, 1.0)
        << k["change"];
    // Sorted: fitting plans first, then by throughput.
    if (prev_fits == k["fits"].get<bool>()) {
      EXPECT_LE(k["tokens_per_s"].get<double>(), prev_tps);
    }
    prev_fits = k["fits"].get<bool>();
    prev_tps = k["tokens_per_s"].get<double>();
  }
  EXPECT_TRUE(overlap);
  const auto t = run_cli({"check", p, "--model", "7b", "--gpus", "4xA40", "--checkpointing", "full"});
  EXPECT_THAT(t.out, HasSubstr("One change at a time"));
  EXPECT_THAT(t.out, HasSubstr("overlap_comm on"));
}

// Stage 3 lists memory_efficient_linear: with checkpointing, torch's own linear is faster (the
// non-reentrant recompute skips down_proj: DeepSpeed's count in tests/deepspeed/fixtures-gemm-flops)
// and holds more memory (released weights kept gathered: fixture maxlive100k_nomel).
TEST(CliCheck, Stage3ListsMemoryEfficientLinear) {
  Dir d;
  const auto p = d.file("ds.json", R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}})");
  const auto r =
      run_cli({"check", p, "--model", "7b", "--gpus", "8xA100-80GB", "--checkpointing", "full", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  bool listed = false;
  for (const auto& k : j["knob_effects"])
    if (k["change"] == "memory_efficient_linear false") {
      listed = true;
      EXPECT_LT(k["step_s"].get<double>(), j["predicted"]["time"]["step_s"].get<double>());
      EXPECT_GT(k["peak_bytes"].get<int64_t>(), j["predicted"]["memory"]["gpu"]["peak"].get<int64_t>());
    }
  EXPECT_TRUE(listed) << r.out;
}

TEST(CliCheck, HfAutoConfigIsResolvedFromTheFlags) {
  Dir d;
  const auto p = d.file("auto.json", R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
      "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "bf16": {"enabled": "auto"},
      "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
      "stage3_param_persistence_threshold": "auto", "offload_optimizer": {"device": "cpu", "pin_memory": true}}})");
  const auto r = run_cli({"check", p, "--model", "13b", "--gpus", "4xA40", "--micro-batch", "2",
                          "--grad-accum", "4", "--checkpointing", "full", "--json"});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["config"]["train_batch_size"], 2 * 4 * 4);
  EXPECT_EQ(j["config"]["zero_optimization"]["reduce_bucket_size"], 5120 * 5120);            // h^2
  EXPECT_EQ(j["config"]["zero_optimization"]["stage3_param_persistence_threshold"], 51200);  // 10 h
  EXPECT_EQ(j["predicted"]["micro_batch"], 2);
  EXPECT_EQ(j["predicted"]["grad_accum"], 4);
  EXPECT_EQ(j["predicted"]["zero_stage"], 3);
  EXPECT_EQ(j["predicted"]["offload_optimizer"], "cpu");
}

// --kernels liger: the plan assumed Liger's fused linear cross-entropy, so the TrainingArguments
// snippet must turn it on (use_liger_kernel=True), and the report names the assumption.
TEST(CliEmit, LigerKernelsAreWrittenIntoTheTrainingArguments) {
  Dir d;
  auto r = run_cli({"--model", "7b", "--gpus", "4xA40", "--stage", "3", "--checkpointing", "full",
                    "--kernels", "fa2,liger", "--emit", "ds.json"},
                   d.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(slurp(d.path + "/ds.training_args.py"), HasSubstr("use_liger_kernel=True"));
  EXPECT_THAT(r.out, HasSubstr("Liger fused linear cross-entropy"));
  r = run_cli(
      {"--model", "7b", "--gpus", "4xA40", "--stage", "3", "--checkpointing", "full", "--emit", "ds2.json"},
      d.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(slurp(d.path + "/ds2.training_args.py"), Not(HasSubstr("use_liger_kernel")));
}

TEST(CliEmit, WritesFilesAndRefusesToOverwriteWithoutForce) {
  Dir d;
  // Checkpointing is fixed because it is not part of ds_config.json (check is told the same below).
  const std::vector<std::string> args = {"--model",         "7b",   "--gpus", "4xA40",  "--stage", "2",
                                         "--checkpointing", "full", "--emit", "ds.json"};
  auto r = run_cli(args, d.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (auto f : {"ds.json", "ds.launch.sh", "ds.training_args.py", "ds.accelerate.yaml"})
    EXPECT_TRUE(std::filesystem::exists(d.path + "/" + f)) << f;
  const std::string before = slurp(d.path + "/ds.json");
  EXPECT_EQ(json::parse(before)["zero_optimization"]["stage"], 2);
  r = run_cli({"--model", "7b", "--gpus", "4xA40", "--stage", "3", "--emit", "ds.json"}, d.path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.stderr_lines(), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--force"));
  EXPECT_EQ(slurp(d.path + "/ds.json"), before);
  r = run_cli({"--model", "7b", "--gpus", "4xA40", "--stage", "3", "--checkpointing", "full", "--emit",
               "ds.json", "--force"},
              d.path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(slurp(d.path + "/ds.json"))["zero_optimization"]["stage"], 3);
  // The emitted config checks clean and fits.
  const auto c =
      run_cli({"check", d.path + "/ds.json", "--model", "7b", "--gpus", "4xA40", "--checkpointing", "full"});
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_THAT(c.out, HasSubstr("Verdict: fits"));
  // Without --checkpointing, check assumes none, says so, and shows what full checkpointing gives.
  const auto n = run_cli({"check", d.path + "/ds.json", "--model", "7b", "--gpus", "4xA40", "--json"});
  const json nj = json::parse(n.out);
  bool noted = false;
  for (const auto& i : nj["issues"])
    noted |= i["message"].get<std::string>().find("checkpointing") != std::string::npos;
  EXPECT_TRUE(noted);
  if (!nj["fits"].get<bool>()) {
    EXPECT_TRUE(nj.contains("predicted_with_full_checkpointing"));
  }
}

// zero_optimization.memory_efficient_linear (DeepSpeed default true): --memory-efficient-linear off
// plans stage 3 with torch's own linear, the emitted config says so, and `check` reads it back to the
// same prediction. OPT-1.3B has a bias on every linear: with DeepSpeed's zero3_linear_wrap each bias is
// a separate `output += bias` kernel (runtime/zero/linear.py), so the default plan's step is longer.
TEST(CliEmit, MemoryEfficientLinearOffIsWrittenAndReadBack) {
  Dir d;
  const std::vector<std::string> base = {"--model",
                                         "opt-1.3b",
                                         "--gpus",
                                         "8xA100-80GB",
                                         "--stage",
                                         "3",
                                         "--micro-batch",
                                         "4",
                                         "--checkpointing",
                                         "full",
                                         "--offload-optimizer",
                                         "none",
                                         "--offload-param",
                                         "none",
                                         "--json"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const auto off = run_cli(with({"--memory-efficient-linear", "off", "--emit", "ds.json"}), d.path);
  ASSERT_EQ(off.exit_code, 0) << off.err;
  const json cfg = json::parse(slurp(d.path + "/ds.json"));
  EXPECT_EQ(cfg["zero_optimization"]["memory_efficient_linear"], false);
  const double off_s = json::parse(off.out)["recommendation"]["time"]["step_s"].get<double>();
  const auto on = run_cli(with({}));
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_GT(json::parse(on.out)["recommendation"]["time"]["step_s"].get<double>(), off_s);

  const auto c = run_cli({"check", d.path + "/ds.json", "--model", "opt-1.3b", "--gpus", "8xA100-80GB",
                          "--micro-batch", "4", "--checkpointing", "full", "--json"});
  ASSERT_TRUE(c.exit_code == 0 || c.exit_code == 1) << c.err;
  EXPECT_DOUBLE_EQ(json::parse(c.out)["predicted"]["time"]["step_s"].get<double>(), off_s);

  for (const char* flag : {"--memory-efficient-linear", "--checkpoint-impl"}) {
    const auto bad = run_cli({"--model", "7b", "--gpus", "4xA40", flag, "maybe"});
    EXPECT_EQ(bad.exit_code, 2) << flag;
    EXPECT_EQ(bad.stderr_lines(), 1) << bad.err;
    EXPECT_THAT(bad.err, HasSubstr(flag));
  }
}

}  // namespace

namespace {

TEST(CliCheck, FixWritesTheCorrectedConfigAtomicallyAndExplainsEachChange) {
  Dir d;
  // Each change has one right answer (see configs/fix.h); the expected values are DeepSpeed 0.19.8's:
  // amp is a removed section, "5e8" is the number 500000000, reduce_bucket_size 0 breaks gt=0 (default
  // 5e8), the misspelled key is renamed, 16 != 2 x 4 x 1 GPU (-> 8).
  const auto p = d.file("bad.json", R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2,
      "gradient_accumulation_steps": 4, "amp": {"enabled": false},
      "zero_optimization": {"stage": 2, "reduce_bucket_size": 0, "overlap_com": true, "allgather_bucket_size": "5e8"}})");
  const std::string out = d.path + "/fixed.json";
  const auto r = run_cli({"check", p, "--model", "tiny-llama-micro", "--gpus", "1xA100-80GB", "--fix", out});
  EXPECT_EQ(r.exit_code, 1);  // the exit code is the input's verdict
  EXPECT_THAT(r.err, HasSubstr("overlap_com: renamed to zero_optimization.overlap_comm"));
  const json fixed = json::parse(slurp(out));
  EXPECT_FALSE(fixed.contains("amp"));
  EXPECT_EQ(fixed["train_batch_size"], 8);
  EXPECT_EQ(fixed["zero_optimization"]["reduce_bucket_size"], 500000000);
  EXPECT_EQ(fixed["zero_optimization"]["allgather_bucket_size"], 500000000);
  EXPECT_EQ(fixed["zero_optimization"]["overlap_comm"], true);
  // The fixed file passes.
  EXPECT_EQ(run_cli({"check", out, "--model", "tiny-llama-micro", "--gpus", "1xA100-80GB"}).exit_code, 0);
  // An existing target needs --force; nothing on stdout then.
  const auto again =
      run_cli({"check", p, "--model", "tiny-llama-micro", "--gpus", "1xA100-80GB", "--fix", out});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_TRUE(again.out.empty());
  EXPECT_EQ(
      run_cli({"check", p, "--model", "tiny-llama-micro", "--gpus", "1xA100-80GB", "--fix", out, "--force"})
          .exit_code,
      1);
}

}  // namespace
