// Multi-process runs: `mpirun -np N zeroplan validate --backend cpu` (one rank per process, MPI
// collectives, executor/mpi_comm.h) must measure exactly what the same plan measures with N thread
// ranks in one process (ThreadCommunicator). Both communicators sum in fp32 over ranks 0..N-1 and
// round once, so the losses are bit-identical (with gradient accumulation the global mean is taken
// per process first, so only to rounding); memory and bus bytes are counted per rank from the same
// engine code and must be equal. Built only with MPI (ZEROPLAN_HAVE_MPI).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace {

using nlohmann::json;
using zeroplan::testing::CliResult;
using zeroplan::testing::run_cli;
using zeroplan::testing::shell_quote;
using zeroplan::testing::slurp;

std::string program(int np, const std::vector<std::string>& args) {
  std::string p = "-np " + std::to_string(np) + " " + shell_quote(ZEROPLAN_BINARY);
  for (const auto& a : args) p += " " + shell_quote(a);
  return p;
}

// mpirun settings that work in containers and CI, for these tests only (users' environment is not
// touched): root allowed (CI runs as root), more processes than cores, no CPU binding (ctest runs
// tests in parallel), the ob1 point-to-point layer over shared memory + self only (one machine; no
// UCX/InfiniBand probing), and no single-copy (CMA/ptrace) mechanism, which container seccomp
// profiles often forbid. `timeout` ends a hung run.
// `programs`: mpirun's program part, one `-np N binary args` or several joined by " : " (MPMD).
CliResult run_mpirun(const std::string& programs) {
  char dir_tmpl[] = "/tmp/zeroplan-mpi-XXXXXX";
  const std::string dir = mkdtemp(dir_tmpl);
  std::string cmd = "timeout -k 5 120 " + shell_quote(ZEROPLAN_MPIEXEC) +
                    " --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader"
                    " --mca btl_vader_single_copy_mechanism none " +
                    programs;
  cmd += " </dev/null >" + dir + "/out 2>" + dir + "/err";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(dir + "/out");
  r.err = slurp(dir + "/err");
  std::remove((dir + "/out").c_str());
  std::remove((dir + "/err").c_str());
  rmdir(dir.c_str());
  return r;
}

CliResult run_mpi(int np, const std::vector<std::string>& args) {
  return run_mpirun(program(np, args));
}

class MpiRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(ZEROPLAN_MPIEXEC).empty())
      GTEST_SKIP() << "no mpirun/mpiexec was found at configure time";
  }
};

int count_of(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

// Small buckets keep each run well under a second (DeepSpeed's 5e8-element default bucket is
// zeroed once per rank otherwise) and give several bucketed collectives per step.
std::vector<std::string> validate_args(int ranks, std::vector<std::string> extra) {
  std::vector<std::string> a = {"validate",
                                "--backend",
                                "cpu",
                                "--model",
                                "tiny-llama-micro",
                                "--gpus",
                                std::to_string(ranks) + "xCPU",
                                "--steps",
                                "2",
                                "--seq-len",
                                "32",
                                "--reduce-bucket-size",
                                "30000",
                                "--prefetch-bucket-size",
                                "30000",
                                "--json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

void expect_processes_match_threads(int ranks, const std::vector<std::string>& extra) {
  const auto args = validate_args(ranks, extra);
  const CliResult threads = run_cli(args);
  ASSERT_EQ(threads.exit_code, 0) << threads.err;
  const CliResult procs = run_mpi(ranks, args);
  ASSERT_EQ(procs.exit_code, 0) << procs.err;
  SCOPED_TRACE(testing::PrintToString(extra) + " on " + std::to_string(ranks) + " ranks");
  const json t = json::parse(threads.out);
  json p;
  ASSERT_NO_THROW(p = json::parse(procs.out)) << "only rank 0 may print; got:\n" << procs.out << "\nstderr:\n" << procs.err;
  EXPECT_EQ(p["ranks"], ranks);
  EXPECT_EQ(p["processes"], ranks);
  EXPECT_FALSE(t.contains("processes"));
  const json& tm = t["measured"];
  const json& pm = p["measured"];
  const auto& tl = tm["loss_per_step"];
  const auto& pl = pm["loss_per_step"];
  ASSERT_EQ(tl.size(), 2u);
  ASSERT_EQ(pl.size(), tl.size());
  const bool accumulates = t["predicted"]["grad_accum"].get<int>() > 1;
  for (size_t i = 0; i < tl.size(); ++i) {
    if (accumulates)  // each process averages its micro-steps before the mean over processes
      EXPECT_NEAR(pl[i].get<double>(), tl[i].get<double>(), 1e-9) << "step " << i;
    else
      EXPECT_EQ(pl[i].get<double>(), tl[i].get<double>()) << "step " << i;
  }
  EXPECT_EQ(pm["communication"], tm["communication"]);
  EXPECT_EQ(pm["memory"], tm["memory"]);
  EXPECT_EQ(p["predicted"], t["predicted"]);
}

TEST_F(MpiRanks, TwoProcessesMeasureWhatTwoThreadRanksMeasureAtEveryStage) {
  for (const char* stage : {"0", "1", "2", "3"}) expect_processes_match_threads(2, {"--stage", stage});
}

TEST_F(MpiRanks, FourProcessesMeasureWhatFourThreadRanksMeasureAtEveryStage) {
  for (const char* stage : {"0", "1", "2", "3"}) expect_processes_match_threads(4, {"--stage", stage});
}

TEST_F(MpiRanks, OffloadAndGradientAccumulationMatchToo) {
  expect_processes_match_threads(2, {"--stage", "2", "--offload-optimizer", "cpu"});
  expect_processes_match_threads(2, {"--stage", "3", "--global-batch", "4"});  // grad-accum 2
}

TEST_F(MpiRanks, OnlyRankZeroPrintsTheReport) {
  const CliResult r =
      run_mpi(2, {"validate", "--backend", "cpu", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage",
                  "1", "--steps", "1", "--seq-len", "32", "--reduce-bucket-size", "30000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_of(r.out, "zeroplan validate:"), 1) << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(count_of(r.out, "loss per step:"), 1) << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("rank 0 of 2 processes"), std::string::npos) << r.out << "\nstderr:\n" << r.err;
}

TEST_F(MpiRanks, ProcessCountMustEqualThePlansRanks) {
  const CliResult r = run_mpi(3, validate_args(2, {"--stage", "2"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  // One line from rank 0 (mpirun adds its own note on the non-zero exit).
  EXPECT_EQ(count_of(r.err, "mpirun started 3 processes but the plan has 2 ranks"), 1) << r.err;
}

TEST_F(MpiRanks, SameErrorOnEveryRankIsPrintedOnce) {
  const CliResult r = run_mpi(2, validate_args(2, {"--stage", "2", "--precision", "fp16"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(count_of(r.err, "zeroplan: error:"), 1) << r.err;
}

TEST_F(MpiRanks, OutOfMemoryIsReportedOnceAndEveryProcessFails) {
  // DeepSpeed's default 5e8-element bf16 reduce bucket (1 GB) cannot fit a 100 MB device budget:
  // every rank runs out of memory at the same allocation, rank 0 reports it, all exit 1.
  const CliResult r =
      run_mpi(2, {"validate", "--backend", "cpu", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage",
                  "2", "--seq-len", "32", "--steps", "1", "--gpu-mem", "100MB", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  json j;
  ASSERT_NO_THROW(j = json::parse(r.out)) << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(j["measured"]["out_of_memory"]["requested_bytes"], 1'000'000'000) << r.out << "\nstderr:\n" << r.err;
}

TEST_F(MpiRanks, AFailingRankReleasesItsPeersAndReportsOnce) {
  // MPMD launch: rank 1 gets a 100 MB device budget and runs out of memory at the 1 GB default
  // bucket; rank 0 (2 GB) gets through and waits in the bucket's all-reduce for rank 1, until rank
  // 1's failure notice releases it. Without the notice rank 0 would wait forever (timeout: 124).
  const std::vector<std::string> args = {"validate", "--backend", "cpu",     "--model", "tiny-llama-micro",
                                         "--gpus",   "2xCPU",     "--stage", "2",       "--seq-len",
                                         "32",       "--steps",   "1"};
  auto with_mem = [&](const char* mem) {
    auto a = args;
    a.insert(a.end(), {"--gpu-mem", mem});
    return a;
  };
  const CliResult r = run_mpirun(program(1, with_mem("2GB")) + " : " + program(1, with_mem("100MB")));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // The report is rank 1's (the rank that failed on its own), once; rank 0 says nothing.
  EXPECT_EQ(count_of(r.out, "ran out of device memory"), 1) << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("of 100000000 bytes in use"), std::string::npos) << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(count_of(r.err, "another rank failed"), 0) << r.err;
}

}  // namespace
