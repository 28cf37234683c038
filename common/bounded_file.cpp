#include "common/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/errors.h"

namespace zeroplan {
namespace {

// Closes the descriptor on every path out, exceptions included.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a pipe";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string describe_byte_limit(std::uintmax_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

std::string read_bounded_file(const std::string& path, std::uintmax_t limit_bytes, std::string_view what) {
  // O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever before fstat could
  // tell us it is a pipe. It changes nothing for regular files.
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)};
  if (f.fd < 0) {
    const int e = errno;
    if (e == ENOENT) throw_user_error("{} '{}' does not exist", what, path);
    throw_user_error("cannot read {} '{}': {}", what, path, std::strerror(e));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw_user_error("cannot read {} '{}': {}", what, path, std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw_user_error("{} '{}' is {}; zeroplan reads only regular files (of at most {})", what, path,
                     kind_of(st.st_mode), describe_byte_limit(limit_bytes));
  if (static_cast<std::uintmax_t>(st.st_size) > limit_bytes)
    throw_user_error("{} '{}' is {} bytes, above zeroplan's limit of {} for this kind of file", what, path,
                     static_cast<std::uintmax_t>(st.st_size), describe_byte_limit(limit_bytes));
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_user_error("cannot read {} '{}': {}", what, path, std::strerror(errno));
    }
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > limit_bytes)  // grew while being read, or a size-0 procfs file
      throw_user_error("{} '{}' holds more than zeroplan's limit of {} for this kind of file", what, path,
                       describe_byte_limit(limit_bytes));
  }
  return out;
}

}  // namespace zeroplan
