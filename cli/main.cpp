// zeroplan: plan DeepSpeed ZeRO runs in milliseconds, and check the plan on hardware.
//
// Exit codes: 0 success; 1 the answer is "no" (nothing fits, a checked config does not fit, a
// validation missed its tolerance); 2 a user error (one line on stderr, nothing on stdout);
// 3 an internal error (a bug: please report it with the command line).
// `validate` and `calibrate` run in a second program, zeroplan-exec (cli/exec_forward.h): this one
// links no CUDA, cuBLAS, NCCL or MPI. The program itself is cli/app.cpp, shared with the Python module.
#include "cli/app.h"

int main(int argc, char** argv) {
  return zeroplan::cli::run_zeroplan(argc, argv);
}
