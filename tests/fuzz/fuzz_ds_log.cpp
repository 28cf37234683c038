// libFuzzer target: the DeepSpeed log reader behind `zeroplan diagnose` (line scanner, configuration
// dump and JSON block, comms table, OOM/NCCL/HF/flops lines) and the diagnosis of whatever it read,
// with and without a workload (the planner on a recovered config). Only UserError may escape.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/errors.h"
#include "diagnose/diagnosis.h"
#include "diagnose/log_parser.h"
#include "hwprofiles/cluster.h"
#include "models/model_spec.h"

namespace {

const zeroplan::planner::Workload& workload() {
  static const zeroplan::planner::Workload w = [] {
    zeroplan::planner::Workload x;
    x.model = zeroplan::models::load_model("tiny-llama-micro");
    x.cluster = zeroplan::hw::parse_cluster("2xA40");
    x.train.seq_len = 64;
    return x;
  }();
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  zeroplan::diagnose::RunLog log;
  zeroplan::diagnose::parse_log_text(text, "fuzz.log", log);
  try {
    zeroplan::diagnose::DiagnoseInputs in;
    (void)zeroplan::diagnose::format_text(log, zeroplan::diagnose::diagnose(log, in));
    in.workload = workload();
    const auto d = zeroplan::diagnose::diagnose(log, in);
    // As cli/cmd_diagnose.cpp prints it (bytes that are not UTF-8 replaced).
    (void)zeroplan::diagnose::to_json(log, d).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const zeroplan::UserError&) {
  }
  return 0;
}
