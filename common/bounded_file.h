#pragma once
// Reading a file zeroplan was pointed at, with a bound: it must be a regular file (not a device such
// as /dev/zero, a pipe or a socket, which could be read forever or block) no larger than a limit,
// checked on the opened descriptor before a byte is read, and the read itself stops one byte past the
// limit (a file that grows while it is read, or a /proc file that reports size 0, is still bounded).
#include <cstdint>
#include <string>
#include <string_view>

namespace zeroplan {

// 64 MiB: far above any real config.json, ds_config.json or GPU profile (the largest HF config.json
// we know of is a few hundred kB); the bound of every JSON file zeroplan reads.
inline constexpr std::uintmax_t kMaxJsonFileBytes = std::uintmax_t{64} << 20;

// The whole file. Throws UserError naming `what`, the path and the limit when the path cannot be
// opened, is not a regular file, or holds more than `limit_bytes`.
std::string read_bounded_file(const std::string& path, std::uintmax_t limit_bytes, std::string_view what);

// "64 MiB", "1 KiB", "100 bytes": the limit as messages state it.
std::string describe_byte_limit(std::uintmax_t bytes);

}  // namespace zeroplan
