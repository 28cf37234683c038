// Communicator::split over MPI (executor/mpi_comm.cpp, MPI_Comm_split): four processes under mpirun
// form two groups of two, color = rank % 2 ({0, 2} and {1, 3}), and each group's all-reduce sums only
// its members: (1 + 3) and (2 + 4) of the values rank + 1, while the world's sums all four (10). The
// test launches itself: MpiSplit.FourProcessesTwoGroups runs this binary under mpirun with
// ZP_SPLIT_CHILD=1 and --gtest_filter=MpiSplit.Child, whose four processes print one line each.
// Built only with MPI (ZEROPLAN_HAVE_MPI); the thread-rank twin is tests/test_communicator_split.cpp.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "executor/backend.h"
#include "executor/communicator.h"
#include "executor/mpi_comm.h"

namespace zeroplan::exec {
namespace {

TEST(MpiSplit, Child) {
  if (std::getenv("ZP_SPLIT_CHILD") == nullptr) GTEST_SKIP() << "run by MpiSplit.FourProcessesTwoGroups";
  MpiSession session;
  ASSERT_TRUE(session.active());
  const int r = session.rank();
  {
    auto rt = make_mpi_cpu_runtime();
    Communicator& world = rt->communicator(r);
    std::unique_ptr<Communicator> g = world.split(r % 2, r);
    ASSERT_NE(g, nullptr);
    float x = static_cast<float>(r + 1);
    g->all_reduce(&x, 1, DType::F32);
    float y = static_cast<float>(r + 1);
    world.all_reduce(&y, 1, DType::F32);
    std::cout << "split rank " << r << " group_rank " << g->rank() << " group_size " << g->world_size()
              << " group_sum " << x << " world_sum " << y << " group_bytes "
              << g->counters().total_bytes_sent() << std::endl;
  }
}

TEST(MpiSplit, FourProcessesTwoGroups) {
  if (std::string(ZEROPLAN_MPIEXEC).empty()) GTEST_SKIP() << "no mpirun/mpiexec was found at configure time";
  char self[4096] = {};
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(len, 0);
  char dir_tmpl[] = "/tmp/zeroplan-mpi-split-XXXXXX";
  const std::string dir = mkdtemp(dir_tmpl);
  // The mpirun settings of tests/test_mpi_ranks.cpp (containers and CI: root, oversubscribed cores,
  // no binding, shared-memory transport without single-copy), bounded by `timeout`.
  const std::string cmd =
      "timeout -k 5 120 '" + std::string(ZEROPLAN_MPIEXEC) +
      "' --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl "
      "self,vader --mca btl_vader_single_copy_mechanism none -x ZP_SPLIT_CHILD=1 -np 4 '" +
      std::string(self) + "' --gtest_filter=MpiSplit.Child </dev/null >" + dir + "/out 2>" + dir + "/err";
  const int status = std::system(cmd.c_str());
  std::ifstream f(dir + "/out");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string out = ss.str();
  std::remove((dir + "/out").c_str());
  std::remove((dir + "/err").c_str());
  rmdir(dir.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  std::set<std::string> lines;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("split rank ", 0) == 0) lines.insert(l);
  // Group {0, 2}: ranks 0 and 1 of it, sum 1 + 3; group {1, 3}: sum 2 + 4. World: 1 + 2 + 3 + 4.
  // Group bytes: one 4-byte all-reduce over 2 ranks, 2 (n-1)/n x 4 = 4.
  const std::set<std::string> want = {
      "split rank 0 group_rank 0 group_size 2 group_sum 4 world_sum 10 group_bytes 4",
      "split rank 1 group_rank 0 group_size 2 group_sum 6 world_sum 10 group_bytes 4",
      "split rank 2 group_rank 1 group_size 2 group_sum 4 world_sum 10 group_bytes 4",
      "split rank 3 group_rank 1 group_size 2 group_sum 6 world_sum 10 group_bytes 4",
  };
  EXPECT_EQ(lines, want) << out;
}

}  // namespace
}  // namespace zeroplan::exec
