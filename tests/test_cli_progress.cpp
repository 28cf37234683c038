// Progress of long work (issue 30, item 5; cli/progress.h): `validate` shows its steps, the ranks,
// the elapsed time and an ETA on a terminal, and prints nothing extra when its output is piped. The
// terminal is a pseudo-terminal from util-linux `script` (Debian's essential bsdutils package).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/progress.h"
#include "cli_runner.h"

namespace {

using zeroplan::testing::run_cli;

const std::vector<std::string> kValidate = {
    "validate", "--backend",     "cpu",     "--model", "tiny-llama-micro",
    "--gpus",   "2xCPU",         "--stage", "2",       "--seq-len",
    "64",       "--micro-batch", "2",       "--steps", "3"};

TEST(CliProgress, QuietWhenPiped) {
  const auto r = run_cli(kValidate);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("step 1/3"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos);
  EXPECT_EQ(r.out.find('\r'), std::string::npos);
}

TEST(CliProgress, ShownOnATerminal) {
  std::string cmd = zeroplan::testing::shell_quote(ZEROPLAN_BINARY);
  for (const auto& a : kValidate) cmd += " " + zeroplan::testing::shell_quote(a);
  // script -q: no start/end banner; -e: its exit status is the command's; -c: the command; the
  // transcript file is /dev/null, and what the terminal showed comes out on script's stdout.
  const std::string wrapped =
      "TERM=xterm script -qec " + zeroplan::testing::shell_quote(cmd) + " /dev/null </dev/null 2>&1";
  FILE* p = ::popen(wrapped.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string shown;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) shown.append(buf, n);
  const int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << shown;
  for (const char* want : {"zeroplan validate: step 0/3 (2 thread ranks), elapsed",
                           "zeroplan validate: step 1/3 (2 thread ranks), elapsed", ", ETA ",
                           "zeroplan validate: step 3/3 (2 thread ranks), elapsed"})
    EXPECT_NE(shown.find(want), std::string::npos) << want << "\n" << shown.substr(0, 600);
  // The line is erased before the answer, which then reads as when piped.
  const auto last = shown.find("step 3/3");
  const auto answer = shown.find("zeroplan validate: tiny-llama-micro");
  ASSERT_NE(answer, std::string::npos);
  EXPECT_LT(last, answer);
  EXPECT_NE(shown.find("\r\033[Kzeroplan validate: tiny-llama-micro"), std::string::npos);
}

// `calibrate` prints a result line per measurement between progress updates: clear() erases the line
// (carriage return + ECMA-48 erase-in-line) once, and only if something was drawn; the next update draws
// it again with the new count.
TEST(CliProgress, ClearErasesTheLineOnceSoResultLinesStartClean) {
  ::testing::internal::CaptureStderr();
  {
    zeroplan::cli::Progress p("calibrate", "measurement", 4, "GPU, 1 GPU", /*force=*/true);
    p.clear();  // nothing drawn yet: nothing to erase
    p.update(1);
    p.clear();
    p.clear();  // already erased
    p.update(2);
  }  // the destructor erases the last line
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string erase = "\r\033[K";
  EXPECT_EQ(err.rfind(erase, 0), 0u) << "starts with update(1)'s own erase";
  EXPECT_NE(err.find("zeroplan calibrate: measurement 1/4 (GPU, 1 GPU), elapsed"), std::string::npos) << err;
  EXPECT_NE(err.find("zeroplan calibrate: measurement 2/4 (GPU, 1 GPU), elapsed"), std::string::npos) << err;
  // update(1) + its clear + update(2) + the destructor's clear: four erases, none from the extra clears.
  size_t n = 0;
  for (size_t at = err.find(erase); at != std::string::npos; at = err.find(erase, at + 1)) ++n;
  EXPECT_EQ(n, 4u) << err;
  EXPECT_EQ(err.substr(err.size() - erase.size()), erase);
}

}  // namespace
