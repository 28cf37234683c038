#pragma once
// Reading DeepSpeed training logs into a RunLog. Pure text functions: no regex (bounded time and
// stack on any input, including the fuzzer's), no exceptions on bad input, any byte sequence accepted.
#include <string>
#include <string_view>

#include "diagnose/run_log.h"

namespace zeroplan::diagnose {

// Appends what `text` (one log file, any mix of ranks and prefixes) shows to `log`.
void parse_log_text(std::string_view text, const std::string& source, RunLog& log);

// Reads a log file (regular, < 64 MiB: UserError otherwise) and parses it into `log`.
void parse_log_file(const std::string& path, RunLog& log);

// Throws UserError when nothing in `log` is a DeepSpeed/PyTorch/NCCL/HF Trainer line (not a log).
void require_recognized(const RunLog& log);

// Helpers exposed for the tests.
// "8.0 KB" / "483.25 KB" / "0B" (comms_logging.convert_size, 1024-based) -> bytes; -1 if not a size.
int64_t parse_convert_size(std::string_view s);
// "1.96 GiB", "978.00 MiB", "0 bytes", "12.19 MiB" -> bytes; -1 if not a size.
int64_t parse_mem_size(std::string_view s);

}  // namespace zeroplan::diagnose
