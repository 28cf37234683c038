// The bad-input catalogue (issues 2 and 8): every user mistake gives exactly one line on stderr
// starting "zeroplan: error:", exit code 2, nothing on stdout, and no file written.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace fs = std::filesystem;
using zeroplan::testing::run_cli;

namespace {

struct BadInput {
  std::string label;
  std::vector<std::string> args;
  std::string must_mention;  // a word the message must contain (the flag, the value, or a suggestion)
};

// Files the catalogue points at, made fresh in a temporary folder.
struct Fixture {
  fs::path dir;
  Fixture() {
    char tmpl[] = "/tmp/zeroplan-bad-XXXXXX";
    dir = mkdtemp(tmpl);
    write("empty.json", "");
    write("whitespace.json", "  \n\t ");
    write("invalid.json", "{\"hidden_size\": 4096,");
    write("array.json", "[1, 2, 3]");
    write("wrong_types.json",
          R"({"model_type":"llama","hidden_size":"big","num_hidden_layers":32,"num_attention_heads":32,)"
          R"("intermediate_size":11008,"vocab_size":32000})");
    write(
        "missing_field.json",
        R"({"model_type":"llama","hidden_size":4096,"num_attention_heads":32,"intermediate_size":11008,"vocab_size":32000})");
    write("unknown_arch_missing.json", R"({"model_type":"frobnicator","hidden_size":4096})");
    write("negative.json",
          R"({"model_type":"llama","hidden_size":-4096,"num_hidden_layers":32,"num_attention_heads":32,)"
          R"("intermediate_size":11008,"vocab_size":32000})");
    write("huge.json",
          R"({"model_type":"llama","hidden_size":1e300,"num_hidden_layers":32,"num_attention_heads":32,)"
          R"("intermediate_size":11008,"vocab_size":32000})");
    write("existing.json", "{}");
    fs::create_directory(dir / "subdir");
    ::mkfifo((dir / "fifo.json").c_str(), 0600);  // a reader without a writer would wait forever
    std::ofstream(dir / "big.json").close();
    fs::resize_file(dir / "big.json", (64u << 20) + 1);  // sparse: one byte over the limit
  }
  ~Fixture() { fs::remove_all(dir); }
  void write(const std::string& name, const std::string& content) { std::ofstream(dir / name) << content; }
  std::string p(const std::string& name) const { return (dir / name).string(); }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

std::vector<BadInput> catalogue() {
  const auto& f = fixture();
  const std::vector<std::string> ok = {"--model", "7b", "--gpus", "4xA40"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = ok;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  return {
      {"no_model", {"--gpus", "4xA40"}, "--model"},
      {"no_gpus", {"--model", "7b"}, "--gpus"},
      {"unknown_model", {"--model", "llama-2-13", "--gpus", "4xA40"}, "llama-2-13b"},
      {"unknown_gpu_typo", {"--model", "7b", "--gpus", "4xA4O"}, "A40"},
      {"cluster_zero", {"--model", "7b", "--gpus", "0xA40"}, "0xA40"},
      {"cluster_trailing_x", {"--model", "7b", "--gpus", "4xA40x"}, "4xA40x"},
      {"cluster_leading_x", {"--model", "7b", "--gpus", "x8xH100"}, "x8xH100"},
      {"cluster_trailing_comma", {"--model", "7b", "--gpus", "4xA40,"}, "4xA40,"},
      {"cluster_empty", {"--model", "7b", "--gpus", ""}, "gpus"},
      {"cluster_non_ascii", {"--model", "7b", "--gpus", "4x\xE2\x82\xAC"}, "GPU"},
      {"model_nonexistent_path",
       {"--model", "/nonexistent/config.json", "--gpus", "4xA40"},
       "does not exist"},
      {"model_directory", {"--model", f.p("subdir"), "--gpus", "4xA40"}, "subdir"},
      {"model_empty_file", {"--model", f.p("empty.json"), "--gpus", "4xA40"}, "empty"},
      {"model_whitespace_file", {"--model", f.p("whitespace.json"), "--gpus", "4xA40"}, "empty"},
      {"model_invalid_json", {"--model", f.p("invalid.json"), "--gpus", "4xA40"}, "JSON"},
      {"model_json_array", {"--model", f.p("array.json"), "--gpus", "4xA40"}, "object"},
      {"model_wrong_types", {"--model", f.p("wrong_types.json"), "--gpus", "4xA40"}, "hidden_size"},
      {"model_missing_field", {"--model", f.p("missing_field.json"), "--gpus", "4xA40"}, "num_hidden_layers"},
      {"model_unknown_arch_missing",
       {"--model", f.p("unknown_arch_missing.json"), "--gpus", "4xA40"},
       "num_"},
      {"model_negative_size", {"--model", f.p("negative.json"), "--gpus", "4xA40"}, "hidden_size"},
      {"model_huge_size", {"--model", f.p("huge.json"), "--gpus", "4xA40"}, "hidden_size"},
      {"model_very_long_name", {"--model", std::string(100000, 'a'), "--gpus", "4xA40"}, "model"},
      {"params_negative", {"--params", "-1", "--gpus", "4xA40"}, "--params"},
      {"params_zero", {"--params", "0", "--gpus", "4xA40"}, "--params"},
      {"params_fraction", {"--params", "1.5", "--gpus", "4xA40"}, "--params"},
      {"params_nan", {"--params", "nan", "--gpus", "4xA40"}, "--params"},
      {"params_inf", {"--params", "inf", "--gpus", "4xA40"}, "--params"},
      {"params_absurd", {"--params", "1e30", "--gpus", "4xA40"}, "--params"},
      {"params_text", {"--params", "seven billion", "--gpus", "4xA40"}, "--params"},
      {"model_and_params", {"--model", "7b", "--params", "7e9", "--gpus", "4xA40"}, "--params"},
      {"seq_len_absurd", with({"--seq-len", "1000000000"}), "--seq-len"},
      {"seq_len_zero", with({"--seq-len", "0"}), "--seq-len"},
      {"micro_batch_zero", with({"--micro-batch", "0"}), "--micro-batch"},
      {"micro_batch_negative", with({"--micro-batch", "-3"}), "--micro-batch"},
      {"grad_accum_fraction", with({"--grad-accum", "2.5"}), "--grad-accum"},
      {"global_batch_not_multiple", with({"--global-batch", "7"}), "--global-batch"},
      {"global_batch_inconsistent", with({"--global-batch", "16", "--micro-batch", "2", "--grad-accum", "4"}),
       "--global-batch"},
      {"stage_out_of_range", with({"--stage", "5"}), "--stage"},
      {"precision_unknown", with({"--precision", "fp8"}), "--precision"},
      {"kernels_unknown", with({"--kernels", "sdpa,triton"}), "--kernels"},
      {"tp_does_not_divide", with({"--tp", "3"}), "--tp"},
      // Ulysses SP: DeepSpeed refuses eager attention (ulysses_sp.py register_with_transformers) and 0.16.9
      // predates UlyssesSPAttentionHF (0.17.0).
      {"sp_eager_attention", with({"--sp", "2", "--attention", "eager"}), "--sp"},
      {"sp_before_0_17", with({"--sp", "2", "--deepspeed-version", "0.16.9"}), "--sp"},
      {"sp_with_ep", with({"--sp", "2", "--ep", "2"}), "--sp"},
      {"tp_not_a_number", with({"--tp", "two"}), "--tp"},
      {"method_typo", with({"--method", "lorra"}), "lora"},
      {"offload_unknown", with({"--offload-optimizer", "gpu"}), "--offload-optimizer"},
      {"offload_param_needs_stage3", with({"--stage", "2", "--offload-param", "cpu"}), "stage 3"},
      {"checkpointing_unknown", with({"--checkpointing", "some"}), "--checkpointing"},
      {"lora_rank_zero", with({"--method", "lora", "--lora-rank", "0"}), "--lora-rank"},
      {"lora_targets_without_lora", with({"--lora-targets", "q_proj"}), "--method"},
      {"lora_target_unknown", with({"--method", "lora", "--lora-targets", "q_proj,frob_proj"}), "frob_proj"},
      {"lora_targets_trailing_comma", with({"--method", "lora", "--lora-targets", "q_proj,"}),
       "--lora-targets"},
      {"network_unknown", {"--model", "7b", "--gpus", "2x8xH100", "--network", "ib-hdr-2000"}, "ib-hdr-200"},
      {"host_mem_bad", with({"--host-mem", "lots"}), "--host-mem"},
      {"memory_margin_bad", with({"--memory-margin", "1.5"}), "--memory-margin"},
      {"unknown_flag", with({"--frobnicate"}), "frobnicate"},
      {"compare_unknown", with({"--compare", "llm-analysis"}), "deepspeed"},
      {"emit_unwritable_dir", with({"--emit", "/nonexistent-dir/ds_config.json"}), "nonexistent-dir"},
      {"emit_existing_without_force", with({"--emit", f.p("existing.json")}), "--force"},
      {"emit_directory", with({"--emit", f.p("subdir")}), "directory"},
      // Bounded inputs (issue 16): only regular files, at most 64 MiB of JSON, checked before reading.
      {"model_dev_zero", {"--model", "/dev/zero", "--gpus", "4xA40"}, "64 MiB"},
      {"model_fifo", {"--model", f.p("fifo.json"), "--gpus", "4xA40"}, "pipe"},
      {"model_over_64_MiB", {"--model", f.p("big.json"), "--gpus", "4xA40"}, "64 MiB"},
      {"gpu_profile_dev_zero", {"--model", "7b", "--gpus", "4x/dev/zero"}, "regular"},
      {"check_dev_zero", {"check", "/dev/zero", "--model", "7b", "--gpus", "4xA40"}, "regular"},
      // Admission before allocation: 405B on 64 cpu thread ranks needs ~3 TB of host memory.
      {"validate_over_host_memory",
       {"validate", "--backend", "cpu", "--model", "405b", "--gpus", "64xCPU", "--stage", "3",
        "--micro-batch", "1", "--seq-len", "64"},
       "MemAvailable"},
  };
}

class BadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputTest, OneClearLineExitTwoNothingOnStdout) {
  const BadInput& c = GetParam();
  const auto files_before = std::distance(fs::directory_iterator(fixture().dir), fs::directory_iterator{});
  const auto r = run_cli(c.args);
  EXPECT_EQ(r.exit_code, 2) << c.label << " stderr: " << r.err;
  EXPECT_EQ(r.out, "") << c.label;
  EXPECT_EQ(r.stderr_lines(), 1) << c.label << " stderr: " << r.err;
  EXPECT_EQ(r.err.rfind("zeroplan: error: ", 0), 0u) << c.label << " stderr: " << r.err;
  EXPECT_NE(r.err.find(c.must_mention), std::string::npos)
      << c.label << ": message should mention '" << c.must_mention << "': " << r.err;
  EXPECT_LT(r.err.size(), 600u) << c.label << ": one line, not an echo of a huge input";
  const auto files_after = std::distance(fs::directory_iterator(fixture().dir), fs::directory_iterator{});
  EXPECT_EQ(files_before, files_after) << c.label << ": no file may be written";
  EXPECT_EQ(
      fixture().p("existing.json").size() > 0 ? zeroplan::testing::slurp(fixture().p("existing.json")) : "",
      "{}")
      << c.label << ": an existing file must not be replaced";
}

// Issue 16's two inputs that used to hang or exhaust the machine end: /dev/zero was read forever; the
// 7B validate below grew to 24 GB before the OOM killer ended it (refused here in ~0.3 s, most of it
// loading zeroplan-exec's CUDA libraries). The bounds say "ended", not "fast" (speed is a benchmark's
// job): a hang or a read of /dev/zero never ends, while a loaded CI machine under ASan took 3.2 s for
// the first command once (2026-11-26, clean-clone CI), over the 1 s this test used to demand.
constexpr double kEndsWithinSeconds = 30.0;
TEST(BadInputTiming, UnboundedInputsEndAtOnce) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto r = run_cli({"--model", "/dev/zero", "--gpus", "4xA40"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_LT(std::chrono::duration<double>(clock::now() - t0).count(), kEndsWithinSeconds);
  t0 = clock::now();
  r = run_cli({"validate", "--backend", "cpu", "--model", "405b", "--gpus", "64xCPU", "--stage", "3",
               "--micro-batch", "1", "--seq-len", "64"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("refused before allocating"), std::string::npos) << r.err;
  EXPECT_LT(std::chrono::duration<double>(clock::now() - t0).count(), kEndsWithinSeconds);
}

INSTANTIATE_TEST_SUITE_P(Catalogue, BadInputTest, ::testing::ValuesIn(catalogue()),
                         [](const auto& tp) { return tp.param.label; });

}  // namespace
