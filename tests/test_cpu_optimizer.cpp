// DeepSpeed 0.19.8's host optimizer step (offload_optimizer cpu, DeepSpeedCPUAdam) on a 16-vCPU Xeon
// beside an H100 at 1, 4 and 16 OpenMP threads per rank (docs/validation.md, "2026-11-27"), against the
// planner (planner/cpu_optimizer.h, planner/data/time_model.json "cpu_optimizer").
//
// The raw JSON files are read as they came back (docs/validation/2026-11-27-h100/). Which rows set the
// table and which check it:
// - the stage-2 and stage-3 4 x 2048 runs at 1/4/16 threads set it (step phase minus the profiled 40.3 ms
//   H2D, per parameter): checked to 1% here so a typo in the JSON table cannot hide;
// - the stage-2 run with 4 micro-steps of 1 x 512 at 16 threads (not used) checks it: 10%;
// - the planner's whole step against the measured step at 1, 4 and 16 threads (compute, the fp32
//   gradient copies DeepSpeed makes in the backward, 4 B per parameter as profiled, and the H2D): 5-7%
//   (measured -1.7%, -4.9%, -5.0%). With 4 micro-steps of 1 x 512 the planner is 21% fast: open.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/cpu_optimizer.h"
#include "planner/time_model.h"

namespace zeroplan::planner {
namespace {

const std::string kDir = std::string(ZEROPLAN_SOURCE_DIR) + "/docs/validation/2026-11-27-h100/";
// The 40.3 ms H2D of the updated bf16 parameters in the 16-thread stage-2 step (torch.profiler, the
// "Memcpy HtoD (Pinned -> Device)" row of deepspeed_s2_4_2048_off_prof.json).
double profiled_h2d_s() {
  std::ifstream in(kDir + "deepspeed_s2_4_2048_off_prof.json");
  const auto j = nlohmann::json::parse(in);
  const auto& top = j.at("runs").at(0).at("profile").at("step").at("top");
  return top.at("Memcpy HtoD (Pinned -> Device)").at(1).get<double>() * 1e-3;
}

nlohmann::json run_of(const std::string& file) {
  std::ifstream in(kDir + file);
  EXPECT_TRUE(in.good()) << kDir + file;
  return nlohmann::json::parse(in).at("runs").at(0);
}

TEST(CpuOptimizer, TableIsTheMeasuredSteps) {
  const double h2d = profiled_h2d_s();
  EXPECT_NEAR(h2d, 0.0403, 0.0005);
  struct P {
    const char* file;
    int stage, threads;
  };
  for (const P p :
       {P{"deepspeed_s2_4_2048_off_omp1.json", 2, 1}, P{"deepspeed_s2_4_2048_off_omp4.json", 2, 4},
        P{"deepspeed_s2_4_2048_off_prof.json", 2, 16}, P{"deepspeed_s3_4_2048_off_omp4.json", 3, 4},
        P{"deepspeed_s3_4_2048_off.json", 3, 16}}) {
    const auto r = run_of(p.file);
    const auto params = r.at("parameters").get<int64_t>();
    const double measured = r.at("optimizer_s_median").get<double>() - h2d;
    EXPECT_NEAR(cpu_optimizer_step_s(params, p.stage, p.threads) / measured, 1.0, 0.01) << p.file;
  }
}

TEST(CpuOptimizer, PredictsTheRunItWasNotSetFrom) {
  // Stage 2, 4 micro-steps of 1 x 512, OMP_NUM_THREADS unset (libgomp: all 16 vCPUs): one host step per
  // optimizer step whatever the accumulation.
  const auto r = run_of("deepspeed_s2_1_512_off_ga4.json");
  ASSERT_EQ(r.at("grad_accum").get<int>(), 4);
  const double measured = r.at("optimizer_s_median").get<double>();  // 0.3872 s
  const double predicted = cpu_optimizer_step_s(r.at("parameters").get<int64_t>(), 2, 16) + profiled_h2d_s();
  EXPECT_NEAR(predicted / measured, 1.0, 0.10) << predicted << " vs " << measured;
}

TEST(CpuOptimizer, InterpolatesBetweenAndHoldsBeyondTheMeasuredCounts) {
  for (int stage : {2, 3}) {
    const double t1 = cpu_optimizer_ns_per_param(stage, 1), t4 = cpu_optimizer_ns_per_param(stage, 4),
                 t16 = cpu_optimizer_ns_per_param(stage, 16);
    const double t2 = cpu_optimizer_ns_per_param(stage, 2), t8 = cpu_optimizer_ns_per_param(stage, 8);
    EXPECT_GT(t1, t2);
    EXPECT_GT(t2, t4);
    EXPECT_GT(t4, t8);
    EXPECT_GT(t8, t16);
    // log-log midpoint: 2 threads is the geometric mean of 1 and 4.
    EXPECT_NEAR(t2, std::sqrt(t1 * t4), 1e-9);
    EXPECT_DOUBLE_EQ(cpu_optimizer_ns_per_param(stage, 64), t16);
  }
  // Stage 3's host step is the slower one at every measured count.
  EXPECT_GT(cpu_optimizer_ns_per_param(3, 4), cpu_optimizer_ns_per_param(2, 4));
}

double planner_step_s(int threads, int stage = 2) {
  Workload w;
  w.model = models::load_model(std::string(ZEROPLAN_SOURCE_DIR) + "/scripts/gpu_models/tinyllama-1.1b.json");
  w.cluster = hw::parse_cluster("1xH100");
  w.train.seq_len = 2048;
  w.train.cpu_threads = threads;
  ZeroConfig z = ZeroConfig::deepspeed_defaults(stage);
  z.micro_batch = 4;
  z.grad_accum = 1;
  z.checkpointing = Checkpointing::None;
  z.offload_optimizer = Offload::CPU;
  return estimate_time(w, compute_model_stats(w), z).step_s;
}

TEST(CpuOptimizer, WholeStepAtOneFourAndSixteenThreads) {
  // The bench ran DeepSpeed's stage-2 default overlap_comm false, as deepspeed_defaults(2) does: the
  // gradient copies are on the backward's critical path.
  struct P {
    const char* file;
    int threads;
    double tolerance;
  };
  for (const P p :
       {P{"deepspeed_s2_4_2048_off_omp1.json", 1, 0.05}, P{"deepspeed_s2_4_2048_off_omp4.json", 4, 0.07},
        P{"deepspeed_s2_4_2048_off_prof.json", 16, 0.07}}) {
    const double measured = run_of(p.file).at("step_s_median").get<double>();  // 2.589, 1.159, 0.700 s
    EXPECT_NEAR(planner_step_s(p.threads) / measured, 1.0, p.tolerance) << p.file;
  }
}

// Stage 3 (deepspeed_defaults(3): overlap_comm on, reduce_bucket_size 5e8, three buckets for 1.1B): the
// host gradient buffer's D2H + H2D every micro-step and the fp32 copy at the boundary, 8 B per parameter,
// of which what follows the first bucket hides behind the backward (time_model.cpp optimizer_offload_s).
// Measured 1.271 s (16 threads) and 2.129 s (4): the planner gives 1.130 and 1.921 (-11%, -10%); with
// 2 B per micro-step hidden behind the backward, as before, 1.078 and 1.869 (-15%, -12%). Part of the
// rest is in the forward, 56 ms longer with offload than without at 16 threads, not explained.
TEST(CpuOptimizer, WholeStageThreeStepAtFourAndSixteenThreads) {
  struct P {
    const char* file;
    int threads;
  };
  for (const P p : {P{"deepspeed_s3_4_2048_off.json", 16}, P{"deepspeed_s3_4_2048_off_omp4.json", 4}}) {
    const double measured = run_of(p.file).at("step_s_median").get<double>();
    EXPECT_NEAR(planner_step_s(p.threads, 3) / measured, 1.0, 0.12) << p.file;
  }
}

TEST(CpuOptimizer, CliFlag) {
  using zeroplan::testing::run_cli;
  const std::vector<std::string> base = {
      "--model",       "7b", "--gpus", "1xH100", "--stage", "2", "--offload-optimizer", "cpu",
      "--micro-batch", "1",  "--json"};
  auto offload_s = [&](const std::string& threads) {
    auto args = base;
    if (!threads.empty()) args.insert(args.end(), {"--cpu-threads", threads});
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const auto& rec = j.at("recommendation");
    EXPECT_EQ(rec.at("cpu_threads"), threads.empty() ? nlohmann::json() : nlohmann::json(std::stoi(threads)));
    return rec.at("time").at("offload_s").get<double>();
  };
  const double one = offload_s("1"), sixteen = offload_s("16");
  EXPECT_GT(one, 3 * sixteen);  // 2.04 against 0.33 ns per parameter, plus the same PCIe copies
  EXPECT_GT(offload_s(""), 0.0);
  for (const char* bad : {"-1", "2000", "four"}) {
    auto args = base;
    args.insert(args.end(), {"--cpu-threads", bad});
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_TRUE(r.out.empty());
    EXPECT_EQ(r.stderr_lines(), 1) << r.err;
  }
}

}  // namespace
}  // namespace zeroplan::planner
