// A vision-language fine-tune end to end (issue 29 item 3): the vision tower and projector are model
// states beside the language tower's, trained or frozen (--freeze vision), in the plan, its JSON, the
// emitted training snippet and `check`. DeepSpeed's own numbers for a frozen and a trained tower are the
// conformance fixtures tests/deepspeed/fixtures/0.19.8/qwen2_5_vl_*; here the whole-model arithmetic on a
// published config, by hand:
//   Qwen2.5-VL-7B-Instruct (tests/data/models/vlm/qwen2_5_vl_7b_instruct.json), transformers 5.24 on the meta
//   device (scripts/count_vision_params.py, tests/test_vision_tower.cpp): 8,292,166,656 parameters =
//   7,615,616,512 language + 631,975,680 tower + 44,574,464 merger (676,550,144 vision).
//   ZeRO-2 on 8 GPUs, bf16 (ZeRO paper, Rajbhandari et al. 2020, Table 1: 2 Psi parameters on every rank,
//   12 Psi_trained / N of fp32 master weights and Adam moments):
//     parameters        2 x 8,292,166,656                 = 16,584,333,312 B, frozen tower or not
//     optimizer states  12 x 8,292,166,656 / 8            = 12,438,249,984 B trained
//                       12 x 7,615,616,512 / 8            = 11,423,424,768 B with --freeze vision
//   (both divide by 2 x 8 exactly, so DeepSpeed's flat-buffer padding adds nothing).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_runner.h"

namespace {

using zeroplan::testing::expect_cli_user_error;
using zeroplan::testing::run_cli;
using zeroplan::testing::slurp;
namespace fs = std::filesystem;

const std::string kQwen25Vl7b =
    std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/vlm/qwen2_5_vl_7b_instruct.json";

nlohmann::json plan(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--model",         kQwen25Vl7b, "--gpus",        "8xA100-80GB",
                                   "--stage",         "2",         "--micro-batch", "1",
                                   "--checkpointing", "full",      "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliVision, UserErrors) {
  expect_cli_user_error({"--model", "7b", "--gpus", "8xA100", "--freeze", "vision"}, "has no vision tower");
  expect_cli_user_error({"--model", kQwen25Vl7b, "--gpus", "8xA100", "--freeze", "tower"}, "--freeze");
  // Images: only through a frozen tower, of a size the tower takes, their tokens inside the sequence.
  expect_cli_user_error(
      {"--model", kQwen25Vl7b, "--gpus", "8xA100", "--images-per-sample", "1", "--image-size", "448"},
      "--freeze vision");
  expect_cli_user_error(
      {"--model", kQwen25Vl7b, "--gpus", "8xA100", "--freeze", "vision", "--images-per-sample", "1"},
      "--image-size");
  expect_cli_user_error({"--model", "7b", "--gpus", "8xA100", "--images-per-sample", "1"}, "no vision tower");
  expect_cli_user_error({"--model", kQwen25Vl7b, "--gpus", "8xA100", "--image-size", "448"},
                        "--images-per-sample");
  // Gemma-3-4B's SigLIP takes 896 x 896; 9 images of 256 tokens are 2,304 > 2,048.
  expect_cli_user_error({"--model", "gemma-3-4b", "--gpus", "8xA100", "--freeze", "vision",
                         "--images-per-sample", "1", "--image-size", "448"},
                        "896x896");
  expect_cli_user_error(
      {"--model", "gemma-3-4b", "--gpus", "8xA100", "--freeze", "vision", "--images-per-sample", "9"},
      "2304 tokens");
}

// Four 448 x 448 images per sample through Qwen2.5-VL-7B's frozen tower: 4 x 1,024 patches a sample. The
// tower's forward GEMMs by hand (per GPU at micro-batch 1): 2 x 4,096 rows x (patch embed 1,176 x 1,280 + 32
// blocks x [qkv 1,280 x 3,840 + proj 1,280 x 1,280 + gate/up 2 x 1,280 x 3,420 + down 3,420 x 1,280]) + 2 x
// 1,024 merged rows x (5,120 x 5,120 + 5,120 x 3,584) = 5.29e12 FLOP per sample. Memory is the text-only
// plan's plus one bool per token (the placeholder mask; conformance fixtures qwen2_5_vl_img_*): the same
// micro-batch fits.
TEST(CliVision, ImagesAddTheFrozenTowersForward) {
  const std::vector<std::string> common = {"--freeze", "vision", "--seq-len", "4096"};
  const nlohmann::json text = plan(common);
  std::vector<std::string> with = common;
  with.insert(with.end(), {"--images-per-sample", "4", "--image-size", "448"});
  const nlohmann::json img = plan(with);
  EXPECT_EQ(img["model"]["images_per_sample"], 4);
  EXPECT_EQ(img["model"]["image_tokens_per_sample"], 4 * 256);  // 448 / 14 = 32; 32 x 32 / (2 x 2) each
  EXPECT_EQ(text["model"]["images_per_sample"], 0);
  EXPECT_LE(img["recommendation"]["memory"]["gpu"]["peak"].get<int64_t>() -
                text["recommendation"]["memory"]["gpu"]["peak"].get<int64_t>(),
            4096);
  // The operator table's tower rows (--explain-time), their FLOPs summed.
  std::vector<std::string> args = {"--model",         kQwen25Vl7b, "--gpus",        "8xA100-80GB",
                                   "--stage",         "2",         "--micro-batch", "1",
                                   "--checkpointing", "full",      "--explain-time"};
  args.insert(args.end(), with.begin(), with.end());
  const auto r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double flops = 0;
  int rows = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("vision tower forward GEMM (frozen)") == std::string::npos) continue;
    const auto unit = line.find("FLOP");
    ASSERT_NE(unit, std::string::npos) << line;
    const auto start = line.rfind(' ', unit - 3) + 1;
    const double scale = line[unit - 1] == 'T' ? 1e12 : line[unit - 1] == 'G' ? 1e9 : 1e6;
    flops += std::stod(line.substr(start, unit - 2 - start)) * scale;
    ++rows;
  }
  EXPECT_EQ(rows, 7) << r.out;
  const double tower =
      2.0 * 4096 *
          (1176.0 * 1280 + 32 * (1280.0 * 3840 + 1280.0 * 1280 + 2 * 1280.0 * 3420 + 3420.0 * 1280)) +
      2.0 * 1024 * (5120.0 * 5120 + 5120.0 * 3584);
  EXPECT_NEAR(flops, tower, 0.005 * tower);  // the table prints 4 significant figures
}

TEST(CliVision, TowerIsModelStatesTrainedOrFrozen) {
  const nlohmann::json trained = plan({});
  EXPECT_EQ(trained["model"]["parameters"], 8'292'166'656);
  EXPECT_EQ(trained["model"]["language_parameters"], 7'615'616'512);
  EXPECT_EQ(trained["model"]["vision_parameters"], 631'975'680 + 44'574'464);
  EXPECT_EQ(trained["model"]["trainable_parameters"], 8'292'166'656);
  EXPECT_FALSE(trained["model"]["vision_frozen"].get<bool>());
  const auto& tm = trained["recommendation"]["memory"]["gpu"];
  EXPECT_EQ(tm["parameters"], 16'584'333'312);
  EXPECT_EQ(tm["optimizer_states"], 12'438'249'984);

  const nlohmann::json frozen = plan({"--freeze", "vision"});
  EXPECT_EQ(frozen["model"]["parameters"], 8'292'166'656);
  EXPECT_EQ(frozen["model"]["trainable_parameters"], 7'615'616'512);
  EXPECT_TRUE(frozen["model"]["vision_frozen"].get<bool>());
  const auto& fm = frozen["recommendation"]["memory"]["gpu"];
  EXPECT_EQ(fm["parameters"], 16'584'333'312);
  EXPECT_EQ(fm["optimizer_states"], 11'423'424'768);
}

TEST(CliVision, EmitSaysHowToFreezeAndCheckReadsItBack) {
  const fs::path dir = fs::temp_directory_path() / ("zp-vision-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cfg = (dir / "ds.json").string();
  const std::vector<std::string> common = {"--model",   kQwen25Vl7b, "--gpus",   "8xA100-80GB",
                                           "--seq-len", "4096",      "--freeze", "vision"};
  std::vector<std::string> emit = common;
  emit.insert(emit.end(), {"--emit", cfg, "--json"});
  const auto e = run_cli(emit);
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const nlohmann::json planned = nlohmann::json::parse(e.out)["recommendation"];
  // The training snippet freezes the wrapper's own modules (Qwen2.5-VL: tower and merger under model.visual).
  const std::string args = slurp((dir / "ds.training_args.py").string());
  EXPECT_NE(args.find("--freeze vision"), std::string::npos) << args;
  EXPECT_NE(args.find("if name.startswith((\"model.visual.\",)):"), std::string::npos) << args;
  EXPECT_NE(args.find("p.requires_grad_(False)"), std::string::npos) << args;
  // `check` on the emitted config with the same model and freeze predicts the same peak.
  std::vector<std::string> check = {"check", cfg};
  check.insert(check.end(), common.begin(), common.end());
  check.insert(check.end(),
               {"--checkpointing", planned["activation_checkpointing"].get<std::string>(), "--json"});
  const auto c = run_cli(check);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const nlohmann::json checked = nlohmann::json::parse(c.out);
  EXPECT_EQ(checked["predicted"]["memory"]["gpu"]["peak"], planned["memory"]["gpu"]["peak"]) << c.out;
  fs::remove_all(dir);
}

// PEFT puts adapters wherever target_modules match, vision tower included (all-linear: every nn.Linear but
// lm_head, peft 0.21.2 _maybe_include_all_linear_layers); the plan's are on the language tower only, and
// says what it leaves out. Qwen2.5-VL-7B's tower at r 16, by hand: 32 blocks x r x [(1280 + 3840) qkv +
// (1280 + 1280) proj + 2 x (1280 + 3420) gate/up + (3420 + 1280) down] = 32 x 348,480 = 11,151,360, plus the
// merger's mlp.0 16 x (5120 + 5120) and mlp.2 16 x (5120 + 3584): 11,454,464 ("11.5M").
TEST(CliVision, LoraSaysWhatPeftWouldAddToTheTower) {
  const auto all = run_cli({"--model", kQwen25Vl7b, "--gpus", "2xA100-80GB", "--method", "lora", "--json"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const std::string warnings = nlohmann::json::parse(all.out)["warnings"].dump();
  EXPECT_NE(warnings.find("vision tower's linears (11.5M adapter parameters)"), std::string::npos)
      << warnings;
  // q_proj / v_proj are the language tower's names only (the tower's attention is one qkv Linear).
  const auto qv = run_cli({"--model", kQwen25Vl7b, "--gpus", "2xA100-80GB", "--method", "lora",
                           "--lora-targets", "q_proj,v_proj", "--json"});
  ASSERT_EQ(qv.exit_code, 0) << qv.err;
  EXPECT_EQ(nlohmann::json::parse(qv.out)["warnings"].dump().find("vision tower's linears"),
            std::string::npos);
}

// A checkpoint folder of a vision-language model: refused by name (its tower blocks would read as decoder
// layers), pointing at its config.json.
TEST(CliVision, CheckpointFolderIsRefusedWithTheWayOut) {
  const fs::path dir = fs::temp_directory_path() / ("zp-vl-ckpt-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(kQwen25Vl7b, dir / "config.json", fs::copy_options::overwrite_existing);
  {
    // A safetensors file: an 8-byte little-endian header length, then the JSON header (no tensors).
    const std::string header = "{\"__metadata__\":{}}";
    std::ofstream f(dir / "model.safetensors", std::ios::binary);
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
    f << header;
  }
  expect_cli_user_error({"--model", dir.string(), "--gpus", "8xA100"}, "vision-language checkpoint");
  fs::remove_all(dir);
}

// Under LoRA the tower is frozen with the rest of the base model: the snippet neither says it trains nor
// adds a freeze loop (the plan's JSON says vision_frozen).
TEST(CliVision, LoraSnippetDoesNotSayTheTowerTrains) {
  const fs::path dir = fs::temp_directory_path() / ("zp-vision-lora-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cfg = (dir / "ds.json").string();
  const auto e =
      run_cli({"--model", kQwen25Vl7b, "--gpus", "2xA100-80GB", "--method", "lora", "--emit", cfg, "--json"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_TRUE(nlohmann::json::parse(e.out)["model"]["vision_frozen"].get<bool>());
  const std::string args = slurp((dir / "ds.training_args.py").string());
  EXPECT_EQ(args.find("train with the language model"), std::string::npos) << args;
  EXPECT_EQ(args.find("requires_grad_(False)"), std::string::npos) << args;
  fs::remove_all(dir);
}

}  // namespace
