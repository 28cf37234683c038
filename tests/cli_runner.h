#pragma once
// Runs the real `zeroplan` binary (ZEROPLAN_BINARY) with arguments and captures stdout, stderr and
// the exit code, for tests of the command-line contract. Arguments are passed through a shell with
// single-quote escaping, so any byte sequence (non-ASCII, very long) reaches argv unchanged.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace zeroplan::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  int stderr_lines() const {
    int n = 0;
    for (char c : err) n += c == '\n';
    return n;
  }
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  return q + "'";
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `cwd` (optional) is the working directory of the run.
inline CliResult run_cli(const std::vector<std::string>& args, const std::string& cwd = "") {
  char dir_tmpl[] = "/tmp/zeroplan-cli-XXXXXX";
  const std::string dir = mkdtemp(dir_tmpl);
  std::string cmd;
  if (!cwd.empty()) cmd += "cd " + shell_quote(cwd) + " && ";
  cmd += shell_quote(ZEROPLAN_BINARY);
  for (const auto& a : args) cmd += " " + shell_quote(a);
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

// The CLI contract for a user's mistake: exit 2, nothing on stdout, one line on stderr that says `says`.
inline void expect_cli_user_error(const std::vector<std::string>& args, const std::string& says) {
  const CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(r.stderr_lines(), 1) << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
}

// A per-process scratch directory (mkdtemp), removed with everything in it when it goes out of scope.
class ScratchDir {
 public:
  ScratchDir() {
    char t[] = "/tmp/zp-test-XXXXXX";
    path = mkdtemp(t);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  // Writes `content` to `name` inside the directory; returns its path.
  std::string file(const std::string& name, const std::string& content) const {
    const std::string p = path + "/" + name;
    std::ofstream(p) << content;
    return p;
  }
  std::string path;
};

}  // namespace zeroplan::testing
