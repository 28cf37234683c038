#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>

#include "common/errors.h"

namespace zeroplan {
namespace {
// The temporary file of the write in progress (one at a time: the CLI writes sequentially), kept in
// static storage so a signal handler can unlink it without allocating.
char g_pending[4096] = {0};
volatile std::sig_atomic_t g_has_pending = 0;

void set_pending(const std::string& p) {
  if (p.size() >= sizeof(g_pending)) return;
  std::memcpy(g_pending, p.c_str(), p.size() + 1);
  g_has_pending = 1;
}
void clear_pending() {
  g_has_pending = 0;
}
}  // namespace

void remove_pending_temporary_file() noexcept {
  if (g_has_pending) ::unlink(g_pending);
}

void write_file_atomically(const std::string& path, std::string_view content, bool force) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw UserError("output path is empty; give a file name such as ds_config.json");
  const fs::path target(path);
  if (fs::is_directory(target, ec))
    throw_user_error("output path '{}' is a directory; give a file name", path);
  if (fs::exists(target, ec) && !force)
    throw_user_error("'{}' already exists; pass --force to overwrite it", path);
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec))
    throw_user_error("cannot write '{}': folder '{}' does not exist", path, dir.string());
  std::string tmpl = (dir / ("." + target.filename().string() + ".zeroplan-XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw_user_error("cannot write '{}': {}", path, std::strerror(errno));
  set_pending(tmpl);
  struct Clear {
    ~Clear() { clear_pending(); }
  } clear_on_exit;
  size_t off = 0;
  while (off < content.size()) {
    const ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      ::unlink(tmpl.c_str());
      throw_user_error("cannot write '{}': {}", path, std::strerror(e));
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmpl.c_str());
    throw_user_error("cannot write '{}': {}", path, std::strerror(e));
  }
  ::chmod(tmpl.c_str(), 0644);
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmpl.c_str());
    throw_user_error("cannot write '{}': {}", path, std::strerror(e));
  }
}

}  // namespace zeroplan
