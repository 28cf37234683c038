// libFuzzer target: the ds_config.json reader behind `zeroplan check` (JSON parse, "auto"
// resolution, key/type validation, batch arithmetic, conversion to a ZeroConfig) and the plan
// evaluation of whatever it accepts. Only UserError may escape.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/errors.h"
#include "common/json_file.h"
#include "configs/check.h"
#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/model_stats.h"
#include "planner/search.h"

namespace {

const zeroplan::planner::Workload& workload() {
  static const zeroplan::planner::Workload w = [] {
    zeroplan::planner::Workload x;
    x.model = zeroplan::models::load_model("tiny-llama-micro");
    x.cluster = zeroplan::hw::parse_cluster("4xA40");
    return x;
  }();
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto j = zeroplan::parse_json_text(text, "fuzz", "DeepSpeed config");
    const auto r = zeroplan::configs::read_deepspeed_config(j, workload());
    if (r.usable) {
      const auto w = zeroplan::configs::workload_for_config(workload(), r);
      const auto stats = zeroplan::planner::compute_model_stats(w);
      (void)zeroplan::planner::evaluate_plan(w, stats, r.zero, 0.05);
    }
  } catch (const zeroplan::UserError&) {
  }
  return 0;
}
