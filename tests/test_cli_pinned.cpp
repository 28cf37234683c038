// Pinned host memory and the memlock limit (issue 28 item 3). DeepSpeed pins the offloaded optimizer's
// host buffers by default (offload_optimizer.pin_memory), and its own docs say page-locked memory counts
// against `ulimit -l` (0.19.8 utils/pin_memory_tracker.py, runtime/zero/offload_config.py). The plan says
// how much per process, and the check says it beside the host memory line.
//
// Hand count, Llama-2-7B (6,738,415,616 parameters) at ZeRO-2 with optimizer offload on 8 ranks: each
// rank's partition is 842,301,952 elements, and stage_1_and_2.py pins, per rank:
//   fp32 master partition (single_partition_of_fp32_groups)     4 B x 842,301,952 = 3,369,207,808
//   Adam exp_avg + exp_avg_sq (DeepSpeedCPUAdam)               8 B x 842,301,952 = 6,738,415,616
//   fp32 gradient partition (initialize_optimizer_states)       4 B x 842,301,952 = 3,369,207,808
//   16-bit upload buffer (param_buffer_of_bit16_for_cpu_offload) 2 B x 842,301,952 = 1,684,603,904
//   gradient staging (temp_grad_buffer_for_cpu_offload): the largest parameter, the 32000 x 4096
//   embedding, 16-bit                                                                  262,144,000
// = 15,423,579,136 B per process, "15.4 GB".
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/cli_runner.h"

namespace {

using zeroplan::testing::run_cli;
namespace fs = std::filesystem;

TEST(CliPinned, OffloadPlansNameTheMemlockLimitWithTheBytesPerProcess) {
  const auto r = run_cli({"--model", "7b", "--gpus", "8xA100", "--stage", "2", "--offload-optimizer", "cpu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(15.4 GB per process)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("`ulimit -l` must be unlimited or above 15.4 GB"), std::string::npos) << r.out;
  // Without offload nothing is pinned, and nothing is said.
  const auto n = run_cli({"--model", "7b", "--gpus", "8xA100", "--stage", "2"});
  ASSERT_EQ(n.exit_code, 0) << n.err;
  EXPECT_EQ(n.out.find("ulimit -l"), std::string::npos) << n.out;
}

TEST(CliPinned, CheckSaysItBesideTheHostMemory) {
  const fs::path p = fs::temp_directory_path() / "zeroplan-pinned-check.json";
  auto write = [&](bool pin) {
    std::ofstream(p) << R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
 "bf16": {"enabled": true}, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": )"
                     << (pin ? "true" : "false") << "}}}";
  };
  write(true);
  const auto r = run_cli({"check", p.string(), "--model", "7b", "--gpus", "8xA100"});
  EXPECT_NE(r.out.find("`ulimit -l` must be unlimited or above 15.4 GB per process"), std::string::npos)
      << r.out;
  // pin_memory false: pageable, no memlock line.
  write(false);
  const auto f = run_cli({"check", p.string(), "--model", "7b", "--gpus", "8xA100"});
  EXPECT_EQ(f.out.find("ulimit -l"), std::string::npos) << f.out;
  fs::remove(p);
}

}  // namespace
