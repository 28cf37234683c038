#include "cli/run_main.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <new>

#include "cli/output.h"
#include "common/atomic_file.h"
#include "common/errors.h"

#ifndef ZEROPLAN_GIT_DESCRIBE
#define ZEROPLAN_GIT_DESCRIBE "unknown"
#endif

namespace zeroplan::cli {
namespace {

int fail(int code, const std::string& msg) {
  // In-process callers (the Python module) get the same one line as an exception message.
  if (std::string* captured = captured_error()) {
    *captured = one_line(msg);
    return code;
  }
  std::fflush(stdout);
  std::cerr << "zeroplan: error: " << one_line(msg) << "\n";
  return code;
}

// Ctrl-C / SIGTERM: no partial output file (the temporary of a write in progress is removed), one
// line on stderr, exit 130/143 as shells expect. Only async-signal-safe calls.
extern "C" void on_signal(int sig) {
  zeroplan::remove_pending_temporary_file();
  const char msg[] = "\nzeroplan: interrupted\n";
  (void)!::write(2, msg, sizeof(msg) - 1);
  ::_exit(128 + sig);
}

}  // namespace

std::string version_line() {
  return std::string("zeroplan ") + ZEROPLAN_VERSION + " (commit " + ZEROPLAN_GIT_DESCRIBE + ")";
}

std::string one_line(const std::string& msg) {
  std::string out, word;
  auto flush = [&] {
    if (word.size() > 80) word = word.substr(0, 40) + "...(" + std::to_string(word.size()) + " chars)";
    out += word;
    word.clear();
  };
  for (char c : msg) {
    const auto u = static_cast<unsigned char>(c);
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
      flush();
      out += ' ';
    } else {
      word += (u < 0x20 || u == 0x7f) ? '?' : c;
    }
  }
  flush();
  return out;
}

int run_main(CLI::App& app, int argc, char** argv, const std::function<int()>& run) {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  return run_parsed(app, argc, argv, run);
}

int run_parsed(CLI::App& app, int argc, char** argv, const std::function<int()>& run) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::cout << app.version() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    return fail(2, std::string(e.what()) + " (run `zeroplan --help` for usage)");
  } catch (...) {
    // A subcommand's callback runs inside parse(): its exceptions take the contract's codes below.
    return run_guarded([]() -> int { throw; });
  }
  return run_guarded(run);
}

int run_guarded(const std::function<int()>& body) {
  try {
    const int result = body();
    std::fflush(stdout);
    return result;
  } catch (const UserError& e) {
    return fail(2, e.what());
  } catch (const std::bad_alloc&) {
    return fail(3, "out of host memory");
  } catch (const std::exception& e) {
    return fail(3,
                std::string("internal error: ") + e.what() + " (please report this with the command line)");
  } catch (...) {
    return fail(3, "internal error: an unknown exception (please report this with the command line)");
  }
}

}  // namespace zeroplan::cli
