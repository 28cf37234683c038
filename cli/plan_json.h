#pragma once
// The PLAN object of the JSON contract (issue 2), shared by `zeroplan --json`, `check --json` and
// `validate --json`, so one script reads all of them. Field names and meanings are a contract.
#include <nlohmann/json.hpp>

#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::cli {

nlohmann::json plan_to_json(const planner::Workload& w, const planner::Plan& p);
nlohmann::json model_to_json(const planner::Workload& w);
nlohmann::json cluster_to_json(const planner::Workload& w);

}  // namespace zeroplan::cli
