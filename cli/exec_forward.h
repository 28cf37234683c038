#pragma once
// `zeroplan validate` and `zeroplan calibrate` run in a separate program, `zeroplan-exec`, so that the
// planner itself never loads CUDA, cuBLAS, NCCL or MPI (issue 16): planning starts in milliseconds and
// builds and runs on machines without them. zeroplan registers the two subcommands (they appear in
// --help) and, as soon as CLI11 meets either name on the command line, replaces itself with
// zeroplan-exec run with the same arguments (execv: same process id, same environment, so mpirun's and
// srun's rank variables reach the executor unchanged).
#include <optional>
#include <string>

namespace zeroplan::cli {

// The command line to hand over; main() records it before parsing.
void set_command_line(int argc, char** argv);

// Where zeroplan-exec is: $ZEROPLAN_EXEC if set, else next to zeroplan's own real path
// (/proc/self/exe, symlinks resolved), else ../lib/zeroplan/ beside it (the installed layout), else
// the first zeroplan-exec on PATH. nullopt when none is found.
std::optional<std::string> find_executor_program();

}  // namespace zeroplan::cli
