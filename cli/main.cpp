// zeroplan: plan DeepSpeed ZeRO runs in milliseconds, and check the plan on hardware.
//
// Exit codes: 0 success; 1 the answer is "no" (nothing fits, a checked config does not fit, a
// validation missed its tolerance); 2 a user error (one line on stderr, nothing on stdout);
// 3 an internal error (a bug: please report it with the command line).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <new>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/atomic_file.h"
#include "common/errors.h"

namespace {

// One line, whatever the message holds: newlines become spaces, control bytes become '?', and an
// echoed user value longer than 80 characters (a 100 kB --model string, say) is shortened.
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

int fail(int code, const std::string& msg) {
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

int main(int argc, char** argv) {
  using namespace zeroplan;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  CLI::App app{
      "zeroplan: per-GPU memory, step time and the best DeepSpeed ZeRO configuration for a model on a "
      "cluster.\n"
      "Default action: plan, e.g. `zeroplan --model 13b --gpus 4xA40`.",
      "zeroplan"};
  app.set_version_flag("--version", "zeroplan " ZEROPLAN_VERSION);
  app.require_subcommand(0, 1);
  cli::PlanFlags flags;
  cli::add_plan_flags(app, flags);
  cli::CommandResult result = -1;
  cli::register_lists(app, result);
  cli::register_subcommands(app, flags, result);

  try {
    app.parse(argc, argv);
    if (result < 0) result = cli::run_plan(flags);
    std::fflush(stdout);
    return result;
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
  } catch (const UserError& e) {
    return fail(2, e.what());
  } catch (const std::bad_alloc&) {
    return fail(3, "out of host memory");
  } catch (const std::exception& e) {
    return fail(3,
                std::string("internal error: ") + e.what() + " (please report this with the command line)");
  }
}
