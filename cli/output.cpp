#include "cli/output.h"

#include <cstdio>

namespace zeroplan::cli {
namespace {

struct Capture {
  std::string* out = nullptr;
  std::string* error = nullptr;
};
// Per thread, so two Python threads planning at once never mix their answers.
thread_local Capture g_capture;

}  // namespace

void write_answer(std::string_view text) {
  if (g_capture.out) {
    g_capture.out->append(text);
    return;
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
}

CaptureAnswer::CaptureAnswer(std::string& out, std::string& error) {
  g_capture = {&out, &error};
}
CaptureAnswer::~CaptureAnswer() {
  g_capture = {};
}

std::string* captured_error() {
  return g_capture.error;
}

}  // namespace zeroplan::cli
